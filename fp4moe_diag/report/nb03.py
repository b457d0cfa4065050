"""Notebook 03 (correctness): tables per tactic and shape, pass/fail styling, the worst measurement and its
per-token errors re-run here when its backend runs on this device."""

from __future__ import annotations

import math
from typing import Any, Optional

import pandas as pd

from ..analysis import correctness_summary, correctness_table, worst_measurement, worst_tokens  # noqa: F401 (re-exported for the notebook)
from ..measure.correctness import COSINE_TOL, REL_L2_TOL, TOKEN_REL_TOL  # noqa: F401 (re-exported for the notebook)
from ..plotting import error_boxplot, token_error_plot  # noqa: F401 (re-exported for the notebook)
from .context import CPU_HIDDEN_SCALE, TUNE_COLUMNS, ReportContext, context, environment_table, load_report_data  # noqa: F401 (re-exported)
from .display import fmt, show_figure, show_markdown, try_figure  # noqa: F401 (re-exported)


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
    from ..problem.case import MoECase
    from ..problem.shapes import load_vllm_cases

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

    from ..backends import get_backend
    from ..problem.inputs import build_inputs
    from ..measure.correctness import per_token_errors, poison_
    from ..problem.reference import reference_moe
    from ..tune import correctness_inputs

    be = get_backend(backend)
    sup = be.supports(device)
    if not sup.ok:
        raise ValueError(f"backend: {backend} cannot run on {device}: {sup.reason}")
    inputs = build_inputs(case, device)
    check = correctness_inputs(inputs)
    ref = reference_moe(check, torch.float32)
    prepared = be.prepare(check)
    tactics = be.tactics(case, prepared=prepared)
    if tactic_label is None:
        t = next((x for x in tactics if x.is_default), tactics[0])
    else:
        t = be.tactic_by_label(case, tactic_label, prepared)
    out = poison_(torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=device))
    y = be.run(prepared, t, out)
    err = per_token_errors(y, ref).numpy()
    return pd.DataFrame({"token": range(len(err)), "rel_err": err, "over_tol": err > TOKEN_REL_TOL,
                         "backend": backend, "tactic_label": t.label})


def try_token_errors(row: Optional[pd.Series], ctx: ReportContext) -> tuple[pd.DataFrame, str]:
    """Per-token errors of ``row``'s tactic, re-run here if its backend runs on this device."""
    from ..backends import get_backend

    if row is None:
        return pd.DataFrame(), "no measurement with an error metric"
    b = str(row["backend"])
    sup = get_backend(b).supports(ctx.device)
    what = f"{b} / {row['tactic_label']} on {row['model']} EP{row['ep_size']} T={row['num_tokens']}"
    if not sup.ok:
        return pd.DataFrame(), (f"The worst measurement is {what}, but {b} cannot run here ({sup.reason}); "
                                f"its recorded worst token is #{row['worst_token']} with "
                                f"{float(row['frac_tokens_over_tol'] or 0):.1%} of tokens over the per-token tolerance.")
    case = case_from_row(row, ctx.shapes_file)
    te = token_errors(case, b, ctx.device, str(row["tactic_label"]))
    return te, f"Per-token errors of the worst measurement, re-run here: {what} ({case.label})."
