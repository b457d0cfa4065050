"""Notebook 03's logic: correctness tables, pass/fail styling, per-token errors."""

from __future__ import annotations

import math
from typing import Any, Optional

import pandas as pd


def correctness_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured tactic x shape: the error metrics and each tolerance check (PASS/FAIL)."""
    from .measure.correctness import COSINE_TOL, REL_L2_TOL

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
    rows = []
    for (b, t), g in d.groupby(["backend", "tactic_label"]):
        worst = g.loc[g["rel_l2"].astype(float).idxmax()]
        passed = int(g["correct"].fillna(False).astype(bool).sum())
        rows.append({"backend": b, "tactic_label": t, "shapes": len(g), "passed": passed, "failed": len(g) - passed,
                     "max_rel_l2": float(g["rel_l2"].max()),
                     "worst_shape": f"{worst['model']} EP{worst['ep_size']} T={worst['num_tokens']}",
                     "min_cosine": float(g["cosine"].min()),
                     "max_frac_tokens_over_tol": float(g["frac_tokens_over_tol"].max())})
    return pd.DataFrame(rows).sort_values(["failed", "max_rel_l2"], ascending=False).reset_index(drop=True)


def worst_tokens(df: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` measurements with the largest share of tokens over the per-token tolerance (then rel_l2)."""
    d = df[df["rel_l2"].notna()].copy()
    cols = ["backend", "model", "ep_size", "num_tokens", "tactic_label", "frac_tokens_over_tol", "worst_token",
            "rel_l2", "max_abs_err", "correct"]
    return d.sort_values(["frac_tokens_over_tol", "rel_l2"], ascending=False)[cols].head(n).reset_index(drop=True)


def style_pass_fail(df: pd.DataFrame) -> Any:
    """Styler: PASS green, FAIL / no output red; boolean check columns coloured the same way."""
    def colour(v: Any) -> str:
        if v is True or v == "PASS":
            return "background-color: #d9f2d9"
        if v is False or (isinstance(v, str) and (v == "FAIL" or v.startswith("no output"))):
            return "background-color: #f8d0d0; font-weight: bold"
        return ""

    check_cols = [c for c in df.columns if c == "verdict" or c.endswith("_ok") or c in ("finite_ok", "all_rows_written", "correct")]
    sty = df.style
    apply = getattr(sty, "map", None) or sty.applymap
    return apply(colour, subset=check_cols).format(precision=4, na_rep="")


def case_from_row(row: Any, shapes_file: Any = None) -> "Any":
    """Rebuild the :class:`MoECase` of a results row (shape-table row for routing details, sizes from the row)."""
    from .case import MoECase
    from .shapes import load_vllm_cases

    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    rec = {k: (None if (v is pd.NA or (isinstance(v, float) and math.isnan(v))) else v) for k, v in dict(row).items()}
    try:
        base = load_vllm_cases(shapes_file, models=[str(get("model"))], ep_sizes=[int(get("ep_size"))],
                               token_counts=[int(get("num_tokens"))])
    except (ValueError, FileNotFoundError):
        base = []
    if base:
        return base[0].replace(hidden_size=int(get("hidden_size")), intermediate_size=int(get("intermediate_size")),
                               seed=int(get("seed") or 0))
    return MoECase.from_record(rec)


def token_errors(case: Any, backend: str, device: str, tactic_label: Optional[str] = None) -> pd.DataFrame:
    """Per-token relative error of one tactic vs the float32 reference (fresh activations, like the tuner)."""
    import torch

    from .tune import correctness_inputs
    from .backends import get_backend
    from .measure.correctness import TOKEN_REL_TOL, per_token_errors, poison_
    from .inputs import build_inputs
    from .reference import reference_moe

    be = get_backend(backend)
    sup = be.supports(device)
    if not sup.ok:
        raise ValueError(f"backend: {backend} cannot run on {device}: {sup.reason}")
    inputs = build_inputs(case, device)
    check = correctness_inputs(inputs)
    ref = reference_moe(check, torch.float32)
    prepared = be.prepare(check)
    tactics = be.tactics(case, prepared=prepared)
    t = next((x for x in tactics if tactic_label is None and x.is_default or x.label == tactic_label), tactics[0])
    out = poison_(torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=device))
    y = be.run(prepared, t, out)
    err = per_token_errors(y, ref).numpy()
    return pd.DataFrame({"token": range(len(err)), "rel_err": err, "over_tol": err > TOKEN_REL_TOL,
                         "backend": backend, "tactic_label": t.label})
