"""FlashInfer's own autotuner, measured: its pick per shape and tuning setting against the best tactic.

Input: rows of the ``cutlass_autotune`` backend (:mod:`fp4moe_diag.backends.flashinfer.autotuned`: the tactic
FlashInfer's ``AutoTuner`` picks under a setting, forced and timed like every tactic) and the ``cutlass`` rows of
the same shapes, FlashInfer version and build (every tactic).  Regret = pick time / best time: 1.0 means the
tuner found the best tactic; the default (untuned, ``(-1, -1)``) is shown beside it.
"""

from __future__ import annotations

import pandas as pd

from .builds import SHAPE_KEYS, with_build_kind
from .per_shape import ok_rows

PICKS = "cutlass_autotune"
SEARCHED = "cutlass"


def _full_rows(df: pd.DataFrame, backend: str) -> pd.DataFrame:
    """The backend's ok rows timed in full (not only screened), with their build kind."""
    d = ok_rows(df[df["backend"] == backend])
    return with_build_kind(d[d["timing_pass"].fillna("full") != "screen"])


def tuner_regret(df: pd.DataFrame) -> pd.DataFrame:
    """One row per shape x FlashInfer version x build x tuning setting: the picked tactic and its time, the best
    ``cutlass`` tactic and time of the same shape, version and build, ``regret`` (pick / best), the default's time
    and ``default_x`` (default / best).  Shapes without ``cutlass`` rows keep the pick with NaN regret.  The
    setting is the pick's label (``fi-autotune[max=8192]``: vLLM's, ``[max=1]``: the seed's, ``[cache]``: an
    exported config)."""
    need = {"backend", "status", "tactic", "tactic_label", "time_median_us", "flashinfer_version"}
    if missing := need - set(df.columns):
        raise ValueError(f"df: missing column(s) {sorted(missing)}")
    picks = _full_rows(df, PICKS)
    if picks.empty:
        raise ValueError(f"df: no ok rows of backend {PICKS!r} (FlashInfer's autotuner picks)")
    keys = [k for k in SHAPE_KEYS if k in df.columns] + ["flashinfer_version", "build_kind"]
    search = _full_rows(df, SEARCHED)
    best = (search.sort_values("time_median_us").drop_duplicates(keys)
            [keys + ["tactic_label", "time_median_us", "run_id"]]
            .rename(columns={"tactic_label": "best_tactic", "time_median_us": "best_us", "run_id": "best_run"}))
    dflt = (search[search["is_default_tactic"].fillna(False).astype(bool)].sort_values("time_median_us")
            .drop_duplicates(keys)[keys + ["time_median_us"]].rename(columns={"time_median_us": "default_us"}))
    p = (picks.sort_values("time_median_us").drop_duplicates(keys + ["tactic_label"])
         [keys + ["tactic_label", "tactic", "time_median_us", "run_id"]]
         .rename(columns={"tactic_label": "setting", "tactic": "picked", "time_median_us": "pick_us",
                          "run_id": "pick_run"}))
    out = p.merge(best, on=keys, how="left").merge(dflt, on=keys, how="left")
    out["regret"] = out["pick_us"] / out["best_us"]
    out["default_x"] = out["default_us"] / out["best_us"]
    out["setting"] = out["setting"].str.replace("fi-autotune", "", regex=False).str.strip("[]")
    return out.sort_values(["model", "ep_size", "num_tokens", "setting"]).reset_index(drop=True)


def regret_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per setting: shapes with a regret, how many within 5 % of the best, the worst regret and its shape."""
    t = table.dropna(subset=["regret"])
    rows = []
    for setting, g in t.groupby("setting", sort=False):
        w = g.loc[g["regret"].idxmax()]
        rows.append({"setting": setting, "shapes": len(g), "within_5pct": int((g["regret"] <= 1.05).sum()),
                     "worst_regret": float(w["regret"]),
                     "worst_shape": f"{w['model']} EP{int(w['ep_size'])} T={int(w['num_tokens'])}"})
    return pd.DataFrame(rows)
