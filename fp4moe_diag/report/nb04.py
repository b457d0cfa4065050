"""Notebook 04 (kernel profile): committed Nsight Compute tables and ablations (``profiling.ablate``), and a live
profile of one shape's best and default tactic when this machine has a GPU, ``ncu`` and nsight-python."""

from __future__ import annotations

import subprocess
from typing import Any, Optional

import pandas as pd

from ..analysis.ablations import committed_ablations, markdown as ablation_markdown  # noqa: F401 (re-exported)
from ..analysis.duels import committed_duels  # noqa: F401 (re-exported for the notebook)
from ..analysis.traced_duels import committed_traced  # noqa: F401 (re-exported for the notebook)
from ..profiling.ncu import committed_ncu_results  # noqa: F401 (re-exported for the notebook)
from ..profiling.session import nsight_status, profile_kernels, profile_vs_events
from .context import CPU_HIDDEN_SCALE, TUNE_COLUMNS, ReportContext, context, environment_table, load_report_data  # noqa: F401 (re-exported)
from .display import fmt, show_figure, show_markdown, try_figure  # noqa: F401 (re-exported)
from .context import slug


def kernel_profile_session(ctx: ReportContext, model: str = "gpt-oss-20b", ep_size: int = 2, num_tokens: int = 16,
                           runs: int = 3, backend: Optional[str] = None) -> dict[str, Any]:
    """Notebook 04's live part: tune one shape, then ncu-profile its best and default tactic.

    Never raises for a missing GPU / ncu / nsight-python or a failing profile: the returned dict's
    ``message`` says what happened; ``kernels`` (per kernel), ``summary`` (ncu sum vs CUDA events)
    and ``tune_rows`` are DataFrames (empty when skipped); ``csv`` is where the kernel table went.
    """
    from ..backends import get_backend
    from ..problem.shapes import load_vllm_cases
    from ..measure.options import MeasureOptions
    from ..tune import tune

    empty = pd.DataFrame()
    res: dict[str, Any] = {"kernels": empty, "summary": empty, "tune_rows": empty, "csv": None}
    ok, why = nsight_status(ctx.device)
    if not ok:
        res["message"] = f"Live kernel profiling skipped: {why}."
        return res
    kernels = [b for b in ctx.backends if b != "reference"]
    name = backend or (kernels[0] if kernels else "reference")
    cases = load_vllm_cases(ctx.shapes_file, models=[model], ep_sizes=[ep_size], token_counts=[num_tokens])
    if not cases:
        res["message"] = f"Live kernel profiling skipped: no shape {model} EP{ep_size} in {ctx.shapes_file}."
        return res
    case = cases[0]
    tr = tune(case, get_backend(name), ctx.device, options=MeasureOptions(warmup=3, repeats=10 if ctx.quick else 30))
    res["tune_rows"] = tr.rows
    if tr.best is None:
        res["message"] = f"Live kernel profiling skipped: {name} has no correct tactic on {case.label}."
        return res
    tactics = {"best": tr.best.label}
    if tr.default is not None and tr.default.label != tr.best.label:
        tactics["default"] = tr.default.label
    out = ctx.work_dir / f"ncu-{slug(name, case.label)}"
    try:
        k = profile_kernels(case, name, ctx.device, out, tactics, runs=runs)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        res["message"] = f"Live kernel profiling failed (the rest of the report is unaffected): {e}"
        return res
    k.insert(0, "backend", name)
    k.insert(1, "case", case.label)
    csv = ctx.out_dir / f"ncu_{slug(name, case.label)}.csv"
    k.to_csv(csv, index=False)
    res.update(kernels=k, summary=profile_vs_events(k, tr.rows), csv=csv,
               message=f"Profiled {', '.join(f'{r}={t}' for r, t in tactics.items())} of {name} on {case.label}; "
                       f"kernel table written to {csv} (copy it to data/runs/<run>/ to commit it).")
    return res
