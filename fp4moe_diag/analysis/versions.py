"""'Version B / version A' tables of a multi-version results frame (pure pandas, vectorised).

Input: the rows of :func:`fp4moe_diag.versions.compare_versions` (or any results frame with
``flashinfer_version``).  Three kinds of time per shape and backend: ``best`` (the ``is_best`` row),
``default`` (``is_default_tactic``: what FlashInfer runs untuned) and ``tuned`` (the combined
``g1:a+g2:b`` row: what FlashInfer's AutoTuner would pick, CUTLASS only; NaN elsewhere).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from ..release import release_tuple
from .builds import SHAPE_KEYS, refuse_unequal, unequal_pairs, with_build_kind

KINDS = ("best", "default", "tuned")
BUILDS = ("matched", "any")


def versions_in(df: pd.DataFrame) -> list[str]:
    """The ``flashinfer_version`` values with ``ok`` rows, oldest first."""
    ok = df[df["status"] == "ok"]["flashinfer_version"].dropna().astype(str)
    return sorted(set(ok) - {""}, key=lambda v: (release_tuple(v) or (-1,), v))  # unreadable first, then by name


def kind_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (shape, backend, version, kind) with its time and tactic label (``ok`` rows only)."""
    ok = with_build_kind(df[df["status"] == "ok"])
    label = ok["tactic_label"].astype("string").fillna("")
    masks = {
        "best": ok["is_best"].fillna(False).astype(bool),
        "default": ok["is_default_tactic"].fillna(False).astype(bool),
        "tuned": label.str.contains("+", regex=False),
    }
    keys = [k for k in SHAPE_KEYS if k in ok.columns]
    parts = [ok.loc[m, keys + ["backend", "flashinfer_version", "build_kind", "time_median_us", "tactic_label"]]
             .assign(kind=kind) for kind, m in masks.items()]
    out = pd.concat(parts, ignore_index=True)
    # one row per key and build: the fastest if a kind appears twice (e.g. two combined rows)
    out = out.sort_values("time_median_us").drop_duplicates(keys + ["backend", "flashinfer_version", "build_kind",
                                                                     "kind"])
    return out.reset_index(drop=True)


def version_ratio_table(df: pd.DataFrame, base: Optional[str] = None, other: Optional[str] = None,
                        kinds: Sequence[str] = KINDS, builds: str = "matched") -> pd.DataFrame:
    """Per shape x backend x build x kind: ``time_<base>_us``, ``time_<other>_us``, ``ratio`` (other / base; < 1
    means ``other`` is faster) and both tactic labels.  ``base``/``other`` default to the oldest and newest
    versions in ``df``.

    ``builds="matched"`` (default): each side's rows of the same kind of build only (full with full, fast with
    fast); a shape whose two sides share no build is refused: left out, and listed with both builds, their tactic
    counts and why in ``table.attrs["refused"]`` (a ratio of a fast build against a full one compares builds, not
    versions: :mod:`.builds`); a ValueError naming them when no shape is left.  ``builds="any"``: the best of each
    side whatever its build, with ``like_for_like`` False and ``why`` where the builds differ."""
    if builds not in BUILDS:
        raise ValueError(f"builds: expected one of {BUILDS}, got {builds!r}")
    if "flashinfer_version" not in df.columns:
        raise ValueError("df: no flashinfer_version column")
    vs = versions_in(df)
    base = base or (vs[0] if vs else None)
    other = other or (vs[-1] if vs else None)
    if base is None or other is None or base == other:
        raise ValueError(f"df: need two flashinfer versions with ok rows, found {vs}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"kinds: unknown {bad}; expected some of {KINDS}")
    refused = unequal_pairs(df, base, other)
    rows = kind_rows(df)
    rows = rows[rows["kind"].isin(kinds) & rows["flashinfer_version"].astype(str).isin([base, other])]
    if builds == "any":
        rows = rows.sort_values("time_median_us").drop_duplicates(
            [k for k in SHAPE_KEYS if k in rows.columns] + ["backend", "flashinfer_version", "kind"])
        rows = rows.assign(build_kind="any")
    keys = [k for k in SHAPE_KEYS if k in rows.columns] + ["backend", "build_kind", "kind"]
    wide = rows.pivot_table(index=keys, columns="flashinfer_version", values="time_median_us", aggfunc="min")
    tac = rows.pivot_table(index=keys, columns="flashinfer_version", values="tactic_label", aggfunc="first")
    wide = wide.reindex(columns=[base, other])
    tac = tac.reindex(columns=[base, other])
    out = pd.DataFrame({
        f"time_{base}_us": wide[base],
        f"time_{other}_us": wide[other],
        "ratio": wide[other] / wide[base],
        f"tactic_{base}": tac[base],
        f"tactic_{other}": tac[other],
    }).reset_index()
    if builds == "matched":  # a build measured under one version only is not a comparison
        out = out.dropna(subset=[f"time_{base}_us", f"time_{other}_us"], how="any").reset_index(drop=True)
        if out.empty:
            refuse_unequal(refused, base, other)
    else:
        k = [c for c in SHAPE_KEYS if c in out.columns and c in refused.columns] + ["backend"]
        out = out.merge(refused[k + ["why"]] if len(refused) else pd.DataFrame(columns=k + ["why"]), on=k,
                        how="left")
        out["like_for_like"] = out["why"].isna()
    out["kind"] = pd.Categorical(out["kind"], categories=list(KINDS), ordered=True)
    out = out.sort_values([k for k in keys if k != "kind"] + ["kind"]).reset_index(drop=True)
    out["kind"] = out["kind"].astype(str)
    out.attrs.update(base=base, other=other, refused=refused if builds == "matched" else refused.iloc[0:0])
    return out


def ratio_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per backend x kind: geometric mean, min and max of ``ratio`` over the shapes with both times."""
    t = table.dropna(subset=["ratio"])
    g = t.assign(log_ratio=np.log(t["ratio"])).groupby(["backend", "kind"], sort=False)
    return pd.DataFrame({"geomean_ratio": np.exp(g["log_ratio"].mean()), "min_ratio": g["ratio"].min(),
                         "max_ratio": g["ratio"].max(), "shapes": g["ratio"].size()}).reset_index()
