"""Notebook 01 (reproduce the meta bug): the seed case, verdict and tuner-input tables, the device-safe
tuner on the seed case, the FlashInfer version matrix.  The notebook imports this module only."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd

from ..bugrepro import reproduce_meta_bug  # noqa: F401 (re-exported for the notebook)
from ..paths import REPO_ROOT, RUNS_ROOT, SEED_FILE, VERSION_MATRIX_CSV, repo_path
from ..runs import scaled_case
from ..problem.vllm_log import extract_kwargs_log
from .context import CPU_HIDDEN_SCALE, TUNE_COLUMNS, ReportContext, context, environment_table, load_report_data  # noqa: F401 (re-exported)
from .display import fmt, show_figure, show_markdown, try_figure  # noqa: F401 (re-exported)


def seed_case(seed_file: Any = None) -> tuple[Any, str]:
    """The seed's case, parsed from the bug report's vLLM log if present, else :data:`bugrepro.SEED_CASE`.

    Returns ``(case, note)``.  The logged case is the vLLM batch (T=16384); notebook 01 runs the
    report's minimal repro size (T=16) via ``case.with_tokens``.
    """
    from ..bugrepro import SEED_CASE
    from ..problem.vllm_log import parse_vllm_kwargs_log

    path = Path(seed_file) if seed_file else SEED_FILE
    if path.is_file():
        log = extract_kwargs_log(path.read_text(encoding="utf-8", errors="replace"))
        case = parse_vllm_kwargs_log(log, model="gpt-oss-20b")
        return case, f"parsed from the vLLM kwargs log in {path} ({len(log.splitlines())} kwarg lines)"
    return SEED_CASE, f"{path} not found: using fp4moe_diag.bugrepro.SEED_CASE (the seed's minimal repro)"


def evidence_case(evidence: Any = None, seed_file: Any = None) -> tuple[Any, str, Optional[pd.DataFrame]]:
    """``(case, note, sources)``: the case of the user's evidence -- a FlashInfer API log, a vLLM kwargs log or a
    FlashInfer dump directory (:mod:`fp4moe_diag.capture.source`) -- with a table of every field, its value and
    the log line / dump file it came from; without evidence the seed's case (:func:`seed_case`, no table)."""
    if evidence is None:
        case, note = seed_case(seed_file)
        return case, note, None
    from ..capture.source import source_cases

    path = repo_path(evidence)
    cases, _ = source_cases(f"{'dump' if path.is_dir() else 'log'}:{path}")
    sc = cases[0]
    rec = sc.case.to_record()
    table = pd.DataFrame([{"field": k, "value": rec[k], "from": v} for k, v in sc.sources.items()])
    more = f"; {len(cases) - 1} more case(s) in it, the first is shown" if len(cases) > 1 else ""
    return sc.case, (f"from {sc.origin}: {sc.entry_point}, FlashInfer {sc.flashinfer_version or '?'} "
                     f"({len(sc.calls)} call(s)){more}"), table


def traceback_summary(tb: str, keep: Sequence[str] = ("flashinfer", "tvm_ffi", "fp4moe_diag")) -> str:
    """The Python frames of ``tb`` that mention ``keep`` (file + the code line) and the exception line."""
    if not tb:
        return ""
    lines = tb.splitlines()
    is_exc = re.compile(r"^\s*[A-Za-z_.]*(Error|Exception)\b.*:")
    out = []
    for i, ln in enumerate(lines):
        s = re.sub(r'"[^"]*/site-packages/', '"', ln.strip())
        if s.startswith("File ") and any(k in s for k in keep):
            out.append(s)
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if nxt and not nxt.startswith(("File ", "^")) and not is_exc.match(nxt):
                out.append("    " + nxt)
    exc = next((ln.strip() for ln in lines if is_exc.match(ln)), "")
    if exc:
        out.append(exc)
    return "\n".join(out)


def verdict_table(v: Any) -> pd.DataFrame:
    rows = [("status", v.status), ("reason", v.reason), ("mode", v.mode),
            ("flashinfer", v.flashinfer_version or "not installed"), ("device", v.device),
            ("meta tuner inputs", ", ".join(f"{m.name}{list(m.shape or [])}" for m in v.meta_inputs) or "none")]
    return pd.DataFrame(rows, columns=["field", "value"])


def tuner_input_table(v: Any) -> pd.DataFrame:
    """What ``AutoTuner.choose_one`` received: one row per input, ``is_meta`` marked."""
    rows = [{"index": i.index, "name": i.name, "kind": i.kind, "device": i.device, "dtype": i.dtype,
             "shape": "" if i.shape is None else str(tuple(i.shape)), "is_meta": bool(i.is_meta)}
            for i in v.tuner_inputs]
    return pd.DataFrame(rows, columns=["index", "name", "kind", "device", "dtype", "shape", "is_meta"])


def style_meta_rows(table: pd.DataFrame) -> Any:
    """Styler with the ``meta`` rows in red/bold (the tensor TVM-FFI cannot pack)."""
    def row_style(r: pd.Series) -> list[str]:
        css = "background-color: #f8d0d0; color: #7a0000; font-weight: bold" if bool(r.get("is_meta")) else ""
        return [css] * len(r)

    return table.style.apply(row_style, axis=1).hide(axis="index")


def device_safe_tune(case: Any, ctx: ReportContext, backend: Optional[str] = None) -> tuple[Any, str]:
    """:func:`fp4moe_diag.tune.tune` on the seed case: every tactic, no meta tensor, a best tactic.

    On CPU (or when the backend cannot run here) it uses the reference backend, on a scaled-down
    case in quick mode.  Returns ``(TuneResult, note)``.
    """
    from ..backends import get_backend
    from ..measure.options import MeasureOptions
    from ..tune import tune

    kernels = [b for b in ctx.backends if b != "reference"]
    name = backend or (kernels[0] if ctx.is_gpu and kernels else "reference")
    be = get_backend(name)
    note = ""
    if not be.supports(ctx.device).ok or not be.check_case(case).ok:
        why = be.supports(ctx.device).reason or be.check_case(case).reason
        note = f"{name} cannot run this case here ({why}); using the reference backend. "
        be = get_backend("reference")
    if ctx.quick or not ctx.is_gpu:
        scale = CPU_HIDDEN_SCALE if ctx.quick else 4
        if not ctx.is_gpu:
            case = scaled_case(case, scale)
            note += f"Case scaled down for CPU: H={case.hidden_size}, I={case.intermediate_size}. "
    res = tune(case, be, ctx.device, options=MeasureOptions(warmup=1 if ctx.quick else 3, repeats=3 if ctx.quick else 10))
    note += (f"tune({case.label}, {be.name}) on {ctx.device}: {len(res.rows)} tactic(s), "
             f"{len(res.ok_rows)} ok, best = {res.best.label if res.best else 'none'}")
    return res, note


def installed_version_row(verdict: Any = None) -> pd.DataFrame:
    """The version-matrix row of the flashinfer importable here (no subprocess; uses ``verdict`` if given)."""
    from ..backends.flashinfer.status import flashinfer_status

    st = flashinfer_status()
    row: dict[str, Any] = {"path": "(installed)", "version": st.version}
    if st.importable:
        try:
            import inspect

            core = importlib.import_module("flashinfer.fused_moe.core")
            row["meta_placeholder_in_source"] = bool(re.search(r'device\s*=\s*"meta"', inspect.getsource(core)))
        except Exception as e:  # noqa: BLE001
            row["meta_placeholder_in_source"] = f"? ({type(e).__name__})"
        row.update(has_routed_moe=st.has_routed_moe, routed_signature=st.routed_signature,
                   has_sm90_interleave=st.has_sm90_interleave)
    else:
        row["error"] = st.reason
    if verdict is not None:
        row.update(static_status=verdict.status, static_reason=verdict.reason,
                   meta_inputs=[m.name for m in verdict.meta_inputs])
    return pd.DataFrame([row])


def version_matrix_table(version_dirs: Any = None, verdict: Any = None) -> tuple[pd.DataFrame, str]:
    """flashinfer version matrix: probe ``version_dirs`` (pip --target dirs), else the committed CSV, else this install."""
    from ..bugrepro import version_matrix

    if isinstance(version_dirs, str):
        version_dirs = [d.strip() for d in version_dirs.split(",") if d.strip()]
    if version_dirs:
        dirs = [str(repo_path(d)) for d in version_dirs]
        return version_matrix(dirs), f"probed {len(dirs)} install dir(s) in subprocesses"
    if VERSION_MATRIX_CSV.is_file():
        return pd.read_csv(VERSION_MATRIX_CSV), f"committed {VERSION_MATRIX_CSV.relative_to(REPO_ROOT)}"
    per_run = sorted(RUNS_ROOT.glob("*/version_matrix.csv"))
    if per_run:
        return pd.read_csv(per_run[-1]), f"committed {per_run[-1].relative_to(REPO_ROOT)} (latest run that has one)"
    return installed_version_row(verdict), ("only the installed flashinfer (pass version_dirs, or commit "
                                            "data/flashinfer_version_matrix.csv from `python -m fp4moe_diag versions`)")


def committed_verdicts(root: Any = None) -> pd.DataFrame:
    """Bug verdicts committed with GPU runs (``data/runs/*/verdict_*.json``), one row each."""
    base = Path(root) if root is not None else RUNS_ROOT
    rows = []
    for f in sorted(base.glob("*/verdict_*.json")):
        try:
            v = json.loads(f.read_text())
        except Exception as e:  # noqa: BLE001
            rows.append({"run": f.parent.name, "file": f.name, "status": f"unreadable: {type(e).__name__}"})
            continue
        meta = v.get("meta_inputs") or []
        rows.append({"run": f.parent.name, "file": f.name, "status": v.get("status"), "device": v.get("device"),
                     "flashinfer": v.get("flashinfer_version"), "mode": v.get("mode"),
                     "meta tuner inputs": ", ".join(f"{m.get('name')}{m.get('shape')}" for m in meta) or "none",
                     "reason": v.get("reason")})
    return pd.DataFrame(rows)
