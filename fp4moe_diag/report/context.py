"""The notebooks' resolved parameters (:class:`ReportContext`) and their data: the committed runs, or a
local run through :func:`fp4moe_diag.runs.run_sweep` when there are none."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd

from ..paths import RUNS_ROOT, SHAPES_CSV, repo_path
from ..profiling.session import module_version

#: Token counts of the quick local run (used when there are no committed runs).
QUICK_TOKENS = (1, 4, 16, 64)


#: Token counts of the (non-quick) local fallback run.
LOCAL_TOKENS = (1, 4, 16, 64, 256, 1024)


#: On CPU the local run divides H and I by this (the float32 reference of full gpt-oss shapes is slow).
CPU_HIDDEN_SCALE = 24


#: columns of a tune() result shown in notebooks 01 and 04
TUNE_COLUMNS = ["backend", "tactic_label", "is_default_tactic", "is_best", "status", "time_median_us", "time_spread",
                "rel_l2", "correct", "error_type", "error_message"]


@dataclass
class ReportContext:
    """The notebook parameters, resolved."""

    backend: Optional[str]
    shapes_file: Path
    device: str
    out_dir: Path
    quick: bool
    notes: list = field(default_factory=list)

    @property
    def work_dir(self) -> Path:
        return self.out_dir / "_work"

    @property
    def fig_dir(self) -> Path:
        return self.out_dir / "figures"

    @property
    def is_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def backends(self) -> list[str]:
        """The requested backends, or every backend this device supports (reference on CPU)."""
        from ..backends import available_backends, get_backend

        if self.backend:
            return [b.strip() for b in str(self.backend).split(",") if b.strip()]
        if not self.is_gpu:
            return ["reference"]
        names = []
        for name in available_backends():
            try:
                if get_backend(name).supports(self.device).ok:
                    names.append(name)
            except Exception:  # noqa: BLE001 - a backend that cannot even be built is not offered
                continue
        return names or ["reference"]


def context(backend: Optional[str] = None, shapes_file: Any = None, device: Optional[str] = None,
            out_dir: Any = "reports", quick: bool = False) -> ReportContext:
    """Resolve the notebook parameters (device None -> cuda if present, else cpu; paths absolute)."""
    from ..problem.inputs import resolve_device

    device = str(resolve_device(device))
    sf = repo_path(shapes_file) if shapes_file else SHAPES_CSV
    od = repo_path(out_dir)
    od.mkdir(parents=True, exist_ok=True)
    return ReportContext(backend or None, sf, device, od, bool(quick))


def environment_table(ctx: Optional[ReportContext] = None) -> pd.DataFrame:
    """What this kernel runs on: device, torch/CUDA, flashinfer, triton, nsight-python, ncu."""
    from ..environment import environment_info

    env = environment_info(ctx.device if ctx else None)
    rows = {k: env.get(k, "") for k in ("gpu_name", "compute_capability", "driver_version", "torch_version",
                                         "cuda_version", "flashinfer_version", "triton_version", "triton_ptxas",
                                         "git_commit")}
    rows["device (this notebook)"] = ctx.device if ctx else ""
    rows["nsight-python"] = module_version("nsight") or "not installed"
    rows["ncu"] = shutil.which("ncu") or "not on PATH"
    rows["python"] = sys.version.split()[0]
    return pd.DataFrame({"item": list(rows), "value": [str(v) for v in rows.values()]})


def local_run(ctx: ReportContext, *, models: Sequence[str] = ("gpt-oss-20b",), ep_sizes: Sequence[int] = (2,),
              tokens: Optional[Sequence[int]] = None, hidden_scale: Optional[int] = None,
              options: Optional[Any] = None, reuse: bool = True, runs_dir: Any = None) -> pd.DataFrame:
    """A small sweep on this machine through :func:`~fp4moe_diag.runs.run_sweep` (cached under ``out_dir/_work``
    unless ``runs_dir`` is given).

    On CPU it runs the float32 reference on shapes divided by :data:`CPU_HIDDEN_SCALE`; on a GPU every backend of
    :attr:`ReportContext.backends` on the real shapes.  ``options`` (a
    :class:`~fp4moe_diag.measure.options.MeasureOptions`) default to :func:`local_options`.
    """
    import warnings

    with warnings.catch_warnings():  # tqdm.auto warns about ipywidgets inside a kernel
        warnings.simplefilter("ignore")
        import tqdm.auto  # noqa: F401

    from ..environment import environment_info
    from ..run_folder import load_runs, run_dir_name
    from ..runs import SweepSpec, run_sweep

    tokens = tuple(tokens or (QUICK_TOKENS if ctx.quick else LOCAL_TOKENS))
    if hidden_scale is None:
        hidden_scale = CPU_HIDDEN_SCALE if not ctx.is_gpu else 1
    spec = SweepSpec(models=tuple(models), backends=tuple(ctx.backends), ep_sizes=tuple(ep_sizes), tokens=tokens,
                     hidden_scale=hidden_scale, device=ctx.device, shapes_file=str(ctx.shapes_file),
                     options=options if options is not None else local_options(ctx))
    key = json.dumps(spec.to_dict(), sort_keys=True, default=str)
    tag = "local-quick" if ctx.quick else "local"
    if runs_dir is None:
        gpu = environment_info(ctx.device)["gpu_name"]
        runs_dir = ctx.work_dir / f"{run_dir_name(gpu, tag=tag)}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    runs_dir = Path(runs_dir)
    if reuse and (runs_dir / "results.parquet").exists():
        return load_runs(runs_dir.parent, pattern=f"{runs_dir.name}/results.parquet")
    df, _ = run_sweep(spec, runs_dir, progress_bar=False, log=lambda _m: None)
    return df


def local_options(ctx: ReportContext) -> Any:
    """The notebooks' timing: few repeats when quick or on CPU, the sweep's defaults on a GPU."""
    from ..measure.options import MeasureOptions

    return MeasureOptions(warmup=1 if ctx.quick or not ctx.is_gpu else 5,
                          repeats=3 if ctx.quick else (5 if not ctx.is_gpu else 30))


def load_report_data(ctx: ReportContext, runs_root: Any = None, fresh: bool = False) -> tuple[pd.DataFrame, str]:
    """The committed runs (``data/runs``), or -- when there are none, or ``fresh`` -- a local run.

    Returns ``(df, note)``; the note says where the rows come from.  A fresh sweep (minutes on a GPU) runs only
    when asked (``fresh=True``), never because the machine has a GPU.
    """
    from ..run_folder import load_runs

    if not isinstance(fresh, bool):
        raise ValueError(f"fresh: expected True (a fresh sweep on this machine) or False (the committed runs), "
                         f"got {fresh!r}")
    root = Path(runs_root) if runs_root is not None else RUNS_ROOT
    committed = load_runs(root, allow_empty=True)
    if fresh:
        df = local_run(ctx)
        note = (f"Fresh sweep on this machine ({ctx.device}, backends {', '.join(ctx.backends)}): {len(df)} rows "
                f"in {df['run_id'].iloc[0] if len(df) else '?'} under {ctx.work_dir}. Copy that folder to data/runs/ "
                "(or run `python -m fp4moe_diag sweep`) to commit it.")
        if len(committed):
            note += f" Committed runs ({committed['run_id'].nunique()}) are shown alongside."
            df = pd.concat([committed, df], ignore_index=True)
        return df, note
    if len(committed):
        ids = sorted(committed["run_id"].dropna().unique())
        return committed, (f"{len(committed)} rows from {len(ids)} committed run(s) under {root}: "
                           f"{', '.join(map(str, ids))}.")
    df = local_run(ctx)
    what = (f"the float32 reference on CPU with H and I divided by {CPU_HIDDEN_SCALE}" if not ctx.is_gpu
            else f"backends {', '.join(ctx.backends)} on {ctx.device}")
    return df, (f"No committed runs under {root}: using a {'quick ' if ctx.quick else ''}local run instead "
                f"({what}; tokens {sorted(df['num_tokens'].dropna().astype(int).unique().tolist())}). "
                "It shows the pipeline, not FP4 kernel performance.")


def slug(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", "_".join(str(p) for p in parts)).strip("-").lower()
