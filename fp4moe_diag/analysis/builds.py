"""Which tactic space a FlashInfer row was measured with, and whether two versions compare like for like.

A FlashInfer version's CUTLASS MoE offers the tactics its *build* compiled: the full build every tile of the
heuristic (0.5.2: 48 + 48 per case, 0.7.4: 100 + 100), the fast build (``use_fast_build=True``, ``-DFAST_BUILD``)
4 + 4.  Rows record the module they ran on (``flashinfer_build``: the prebuilt file's name, or ``stock``).  A
"0.7.4 / 0.5.2" ratio whose two sides ran different kinds of build compares builds, not versions: the
version tables refuse it unless asked to show it as what it is (``builds="any"``), and say per shape how many
distinct tactics each side ran (:func:`tactic_sets`).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

#: backends whose kernels come from FlashInfer (their version and build are part of what was measured)
FLASHINFER_BACKENDS = ("cutlass", "cutlass_autotune", "trtllm", "cutlass_w4a16", "cutlass_humming", "cutile_mxfp4",
                       "frost_low_latency")
#: backends whose kernels Triton builds at run time (ours and triton_kernels): the Triton release is part of what was
#: measured (docs/static-h200-s14.md: 3.6.0 and 3.7+ build our decode kernels with different registers)
TRITON_BACKENDS = ("triton", "triton_w4a8", "triton_kernels")
BUILD_KINDS = ("full", "fast", "stock", "unknown")
SHAPE_KEYS = ["model", "ep_size", "ep_rank", "num_tokens", "hidden_size", "intermediate_size", "num_experts", "top_k",
              "has_bias"]


def build_kind(name: object) -> str:
    """``full`` (a prebuilt module of every tactic), ``fast`` (the 4-tactic fast build), ``stock`` (FlashInfer's own
    JIT build) or ``unknown`` (not recorded)."""
    n = "" if name is None or (isinstance(name, float) and name != name) or name is pd.NA else str(name)
    if n in ("", "<NA>", "nan"):
        return "unknown"
    if n == "stock":
        return "stock"
    if n.endswith("_full"):
        return "full"
    if n.startswith("fused_moe_90_slim"):
        return "fast"
    return "unknown"


def with_build_kind(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``build_kind`` column (from ``flashinfer_build``; ``unknown`` where the column is missing)."""
    out = df.copy()
    col = out["flashinfer_build"] if "flashinfer_build" in out.columns else pd.Series(pd.NA, index=out.index)
    out["build_kind"] = col.map(build_kind).astype(str)
    return out


def _single_tactic(df: pd.DataFrame) -> pd.Series:
    """Rows of one tactic of the backend's own list (not a combined ``g1:a+g2:b`` row, not an autotuner pick)."""
    label = df["tactic_label"].astype("string").fillna("")
    return ~label.str.contains("+", regex=False) & ~label.str.startswith("fi-autotune") & df["tactic"].notna()


def tactic_sets(df: pd.DataFrame, backends: Sequence[str] = FLASHINFER_BACKENDS) -> pd.DataFrame:
    """Per shape x backend x FlashInfer version x build: ``n_tactics`` (distinct tactics of the backend's own list
    that ran: ok, incorrect or failed) and the build kind.  Frames without a ``tactic`` column count labels."""
    d = with_build_kind(df[df["backend"].isin(backends) & df["status"].isin(["ok", "incorrect", "failed"])])
    build = d["flashinfer_build"] if "flashinfer_build" in d.columns else pd.Series("", index=d.index)
    d = d.assign(tactic=d["tactic"] if "tactic" in d.columns else d["tactic_label"],
                 flashinfer_build=build.astype("string").fillna(""))
    d = d[_single_tactic(d)]
    keys = [k for k in SHAPE_KEYS if k in d.columns] + ["backend", "flashinfer_version", "flashinfer_build",
                                                         "build_kind"]
    if d.empty:
        return pd.DataFrame(columns=keys + ["n_tactics"])
    return d.groupby(keys, dropna=False)["tactic"].nunique().rename("n_tactics").reset_index()


def unequal_pairs(df: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """Shapes x backends measured under both versions whose two sides share no build kind (or one side's is
    unknown): one row each with both sides' builds and tactic counts and ``why``."""
    ts = tactic_sets(df)
    ts = ts[ts["flashinfer_version"].astype(str).isin([base, other])]
    keys = [k for k in SHAPE_KEYS if k in ts.columns] + ["backend"]
    rows = []
    for key, g in ts.groupby(keys, dropna=False):
        a, b = g[g["flashinfer_version"].astype(str) == base], g[g["flashinfer_version"].astype(str) == other]
        if a.empty or b.empty:
            continue
        ka, kb = set(a["build_kind"]), set(b["build_kind"])
        if (ka & kb) - {"unknown"}:
            continue
        if ka == kb == {"unknown"} and set(a["n_tactics"]) == set(b["n_tactics"]):
            continue  # builds not recorded: the same number of tactics on both sides is all that can be checked
        rows.append({**dict(zip(keys, key)),
                     f"build_{base}": ", ".join(f"{r.flashinfer_build or '?'} ({r.build_kind}, {r.n_tactics} tactics)"
                                                for r in a.itertuples()),
                     f"build_{other}": ", ".join(f"{r.flashinfer_build or '?'} ({r.build_kind}, {r.n_tactics} tactics)"
                                                 for r in b.itertuples()),
                     "why": "different builds: the tactic sets differ by build, so the ratio compares builds, "
                            "not versions" if "unknown" not in ka | kb else
                            "builds not recorded and the tactic counts differ"})
    return pd.DataFrame(rows)


def refuse_unequal(bad: pd.DataFrame, base: str, other: str) -> None:
    """A ValueError naming up to five of the shapes in ``bad`` (:func:`unequal_pairs`): their two versions were
    measured with different builds."""
    if bad.empty:
        return
    lines = [f"  {r['backend']} {r['model']} EP{r['ep_size']} T={r['num_tokens']}: {base}: {r['build_' + base]}; "
             f"{other}: {r['build_' + other]}" for r in bad.head(5).to_dict("records")]
    more = f"\n  ... and {len(bad) - 5} more" if len(bad) > 5 else ""
    raise ValueError(f"df: {len(bad)} shape(s) were measured with different FlashInfer builds under {base} and "
                     f"{other}; a ratio of them compares builds, not versions (pass builds='any' to show them as "
                     f"different builds):\n" + "\n".join(lines) + more)


def backend_label(df: pd.DataFrame) -> pd.Series:
    """Backend names for figures and tables: FlashInfer's told apart by version and build (``cutlass@0.7.4``,
    ``cutlass@0.7.4 (fast build)``; a build not recorded gets no suffix), the Triton-built ones by Triton release
    (``triton@3.7.1``, ``triton_kernels@3.6.0``) where the rows hold more than one release of them; other backends
    unchanged."""
    d = with_build_kind(df)
    fi = d["backend"].isin(FLASHINFER_BACKENDS) & d["flashinfer_version"].notna() & (d["flashinfer_version"] != "")
    suffix = d["build_kind"].map({"fast": " (fast build)"}).fillna("")
    out = d["backend"].astype(str).copy()
    out[fi] = d.loc[fi, "backend"].astype(str) + "@" + d.loc[fi, "flashinfer_version"].astype(str) + suffix[fi]
    if "triton_version" in d:
        tr = d["backend"].isin(TRITON_BACKENDS) & d["triton_version"].notna() & (d["triton_version"] != "")
        if d.loc[tr, "triton_version"].nunique() > 1:
            out[tr] = d.loc[tr, "backend"].astype(str) + "@" + d.loc[tr, "triton_version"].astype(str)
    return out


def _triton_release_groups(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The ok rows of Triton-built backends measured under more than one release, and the shape keys to group by."""
    if "triton_version" not in df or "tactic_label" not in df:
        return df.iloc[0:0], []
    keys = ["gpu_name", "backend", *[k for k in SHAPE_KEYS if k in df]]
    d = df[df["backend"].isin(TRITON_BACKENDS) & (df["status"] == "ok") & df["triton_version"].notna()]
    several = d.groupby("backend")["triton_version"].nunique()
    return d[d["backend"].isin(several[several > 1].index)], keys


def release_tactic_mismatches(df: pd.DataFrame) -> pd.DataFrame:
    """Per shape and Triton-built backend measured under several releases: the shapes where the releases were not
    given the same tactics (a headline's ``triton@3.6.0`` / ``triton@3.7.1`` columns there compare tactic sets as well
    as releases).  Columns: the shape keys, ``releases`` and ``tactics`` (``3.6.0: 12, 3.7.1: 8``), ``common``."""
    d, keys = _triton_release_groups(df)
    out = []
    for key, g in d.groupby(keys, dropna=False, sort=True):
        sets = {str(v): set(s["tactic_label"].astype(str)) for v, s in g.groupby("triton_version")}
        if len(sets) > 1 and len({frozenset(s) for s in sets.values()}) > 1:
            common = set.intersection(*sets.values())
            out.append({**dict(zip(keys, key)), "releases": ", ".join(sorted(sets)),
                        "tactics": ", ".join(f"{v}: {len(s)}" for v, s in sorted(sets.items())),
                        "common": len(common)})
    return pd.DataFrame(out, columns=[*keys, "releases", "tactics", "common"])


def common_release_tactics(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with, for each Triton-built backend measured under several releases, at each shape only the tactics
    that every release there ran (ok): the releases then compare like for like.  Other rows are kept as they are."""
    df = df.reset_index(drop=True)
    d, keys = _triton_release_groups(df)
    if d.empty:
        return df
    per = d.groupby([*keys, "tactic_label"], dropna=False)["triton_version"].nunique().rename("_n").reset_index()
    n = d.groupby(keys, dropna=False)["triton_version"].nunique().rename("_of").reset_index()
    per = per.merge(n, on=keys, how="left")
    keep = per[per["_n"] == per["_of"]][[*keys, "tactic_label"]].assign(_keep=True)
    m = df.merge(keep, on=[*keys, "tactic_label"], how="left")["_keep"].fillna(False).to_numpy(dtype=bool)
    return df[~df.index.isin(d.index) | m]
