"""Correctness tables of the tidy results frame (notebook 03, the report): per tactic x shape, per tactic,
the worst tokens.  Pure pandas."""

from __future__ import annotations

import pandas as pd

from ..measure.correctness import COSINE_TOL, REL_L2_TOL


def correctness_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured tactic x shape: the error metrics and each tolerance check (PASS/FAIL)."""
    d = df[df["status"].isin(["ok", "incorrect", "failed", "aborted"])].copy()
    if d.empty:
        raise ValueError("df: correctness_table needs rows with status ok / incorrect / failed / aborted")
    has = d["rel_l2"].notna()
    d["rel_l2_ok"] = (d["rel_l2"] <= REL_L2_TOL) & has
    d["cosine_ok"] = (d["cosine"] >= COSINE_TOL) & d["cosine"].notna()
    d["finite_ok"] = (d["nan_count"].fillna(0) == 0) & (d["inf_count"].fillna(0) == 0) & has
    d["all_rows_written"] = (d["unwritten_rows"].fillna(0) == 0) & has
    verdict = d["correct"].fillna(False).astype(bool)
    d["verdict"] = verdict.map({True: "PASS", False: "FAIL"})
    d.loc[~has, "verdict"] = "no output (" + d.loc[~has, "status"].astype(str) + ")"
    cols = ["backend", "model", "ep_size", "num_tokens", "tactic_label", "is_default_tactic", "verdict", "rel_l2",
            "rel_l2_ok", "cosine", "cosine_ok", "max_abs_err", "frac_tokens_over_tol", "worst_token",
            "nan_count", "inf_count", "unwritten_rows", "finite_ok", "all_rows_written", "ref_abs_mean",
            "error_message"]
    return d[cols].sort_values(["backend", "model", "ep_size", "num_tokens", "tactic_label"]).reset_index(drop=True)


def correctness_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per backend x tactic: shapes checked, passed, worst rel_l2 (and where), min cosine."""
    d = df[df["rel_l2"].notna()]
    if d.empty:
        return pd.DataFrame(columns=["backend", "tactic_label", "shapes", "passed", "failed", "max_rel_l2",
                                     "worst_shape", "min_cosine", "max_frac_tokens_over_tol"])
    d = d.assign(_rel=d["rel_l2"].astype(float), _ok=d["correct"].fillna(False).astype(bool))
    g = d.groupby(["backend", "tactic_label"])
    out = g.agg(shapes=("_rel", "size"), passed=("_ok", "sum"), max_rel_l2=("_rel", "max"),
                min_cosine=("cosine", "min"), max_frac_tokens_over_tol=("frac_tokens_over_tol", "max"))
    worst = d.loc[g["_rel"].idxmax()].set_index(["backend", "tactic_label"])
    out["worst_shape"] = (worst["model"].astype(str) + " EP" + worst["ep_size"].astype(str) + " T="
                          + worst["num_tokens"].astype(str))
    out["passed"] = out["passed"].astype(int)
    out["failed"] = out["shapes"] - out["passed"]
    out = out.reset_index()[["backend", "tactic_label", "shapes", "passed", "failed", "max_rel_l2", "worst_shape",
                             "min_cosine", "max_frac_tokens_over_tol"]]
    for c in ("max_rel_l2", "min_cosine", "max_frac_tokens_over_tol"):
        out[c] = out[c].astype(float)
    return out.sort_values(["failed", "max_rel_l2"], ascending=False).reset_index(drop=True)


def worst_tokens(df: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` measurements with the largest share of tokens over the per-token tolerance (then rel_l2)."""
    d = df[df["rel_l2"].notna()].copy()
    cols = ["backend", "model", "ep_size", "num_tokens", "tactic_label", "frac_tokens_over_tol", "worst_token",
            "rel_l2", "max_abs_err", "correct"]
    return d.sort_values(["frac_tokens_over_tol", "rel_l2"], ascending=False)[cols].head(n).reset_index(drop=True)
