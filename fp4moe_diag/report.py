"""The notebooks' logic and the headless report runner.

:func:`run_notebooks` executes ``notebooks/*.ipynb`` in order with papermill (parameters
injected, kernel ``python3``, cwd = repo root) into ``out_dir/<name>.ipynb`` and exports each to
HTML; ``05_report`` is also written as the shareable ``out_dir/report.html`` (code hidden).

Everything else here is what the notebooks call, so they stay thin and this stays tested:
:func:`context` (resolved parameters), :func:`load_report_data` (committed ``data/runs`` or a
quick local run), :func:`summary_tables`, the bug-reproduction helpers for notebook 01, the
correctness tables for 03 and the Nsight Compute (nsight-python) profiling for 04.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
RUNS_ROOT = REPO_ROOT / "data" / "runs"
SEED_FILE = REPO_ROOT.parent / "shared" / "seeds" / "flashinfer-routed-moe-autotune-bug.txt"
VERSION_MATRIX_CSV = REPO_ROOT / "data" / "flashinfer_version_matrix.csv"
REPORT_NOTEBOOK_PREFIX = "05"

#: Token counts of the quick local run (used when there are no committed runs).
QUICK_TOKENS = (1, 4, 16, 64)
#: Token counts of the (non-quick) local fallback run.
LOCAL_TOKENS = (1, 4, 16, 64, 256, 1024)
#: On CPU the local run divides H and I by this (the float32 reference of full gpt-oss shapes is slow).
CPU_HIDDEN_SCALE = 24

#: ncu metrics collected per kernel in notebook 04 (Speed Of Light + occupancy section names).
NCU_METRICS = {
    "gpu__time_duration.sum": "duration",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
}


class NotebookError(RuntimeError):
    """One or more notebooks raised; ``failures`` maps the output notebook to the error's first line."""

    def __init__(self, failures: dict[Path, str], outputs: list[Path]):
        self.failures = failures
        self.outputs = outputs
        lines = [f"  {p}: {msg}" for p, msg in failures.items()]
        super().__init__(f"{len(failures)} notebook(s) failed:\n" + "\n".join(lines))


# =========================================================================== running notebooks
def list_notebooks(only: Optional[Iterable[str]] = None, notebooks_dir: Any = None) -> list[Path]:
    """``notebooks/NN_*.ipynb`` in order; ``only`` keeps names starting with any of the prefixes."""
    nb_dir = Path(notebooks_dir) if notebooks_dir is not None else NOTEBOOK_DIR
    nbs = sorted(p for p in nb_dir.glob("[0-9]*.ipynb") if not p.name.startswith("."))
    if only:
        prefixes = [str(o).strip() for o in only if str(o).strip()]
        nbs = [p for p in nbs if any(p.name.startswith(pre) for pre in prefixes)]
        if not nbs:
            raise ValueError(f"only: no notebook in {nb_dir} starts with {prefixes}")
    if not nbs:
        raise ValueError(f"notebooks_dir: no NN_*.ipynb notebooks in {nb_dir}")
    return nbs


def ensure_kernel(name: str = "python3") -> str:
    """Make sure a Jupyter kernel ``name`` exists (registers this interpreter's ipykernel if not)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
        return name
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(user=True, kernel_name=name, display_name=f"Python 3 ({name})")
    return name


def export_html(ipynb: Any, html: Any, hide_code: bool = False) -> Path:
    """nbconvert an executed notebook to a self-contained HTML file (figures inlined as <img>)."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter()
    exporter.exclude_input = hide_code
    exporter.exclude_input_prompt = hide_code
    exporter.exclude_output_prompt = hide_code
    nb = nbformat.read(str(ipynb), as_version=4)
    body, _ = exporter.from_notebook_node(nb)
    out = Path(html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body, encoding="utf-8")
    return out


def notebook_errors(ipynb: Any) -> list[str]:
    """``ename: evalue`` of every error output in an executed notebook (empty when it ran clean)."""
    import nbformat

    nb = nbformat.read(str(ipynb), as_version=4)
    errs = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errs.append(f"{out.get('ename')}: {out.get('evalue')}")
    return errs


@contextlib.contextmanager
def _pythonpath(root: Path):
    old = os.environ.get("PYTHONPATH")
    parts = [str(root)] + ([old] if old else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def run_notebooks(out_dir: Any = "reports", quick: bool = False, backend: Optional[str] = None,
                  device: Optional[str] = None, only: Optional[Iterable[str]] = None, html: bool = True, *,
                  shapes_file: Optional[str] = None, notebooks_dir: Any = None,
                  extra_parameters: Optional[dict] = None, kernel_name: str = "python3",
                  cell_timeout: Optional[int] = None, raise_on_error: bool = True) -> list[Path]:
    """Execute the notebooks headless; returns the written paths (``.ipynb``, ``.html``, ``report.html``).

    Each notebook gets the papermill parameters ``backend, shapes_file, device, out_dir, quick``
    (``extra_parameters`` are added to all).  A failing notebook does not stop the others; at the
    end :class:`NotebookError` lists the failures (the failed notebooks are still written, with
    the traceback in the failing cell).
    """
    import papermill as pm

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    nbs = list_notebooks(only, notebooks_dir)
    ensure_kernel(kernel_name)
    params = {
        "backend": backend,
        "shapes_file": str(shapes_file) if shapes_file else "data/vllm_shapes.csv",
        "device": device,
        "out_dir": str(out),
        "quick": bool(quick),
    }
    params.update(extra_parameters or {})
    written: list[Path] = []
    failures: dict[Path, str] = {}
    with _pythonpath(REPO_ROOT):
        for nb in nbs:
            target = out / nb.name
            try:
                pm.execute_notebook(str(nb), str(target), parameters=params, kernel_name=kernel_name,
                                    cwd=str(REPO_ROOT), progress_bar=False, log_output=False,
                                    execution_timeout=cell_timeout)
            except Exception as e:  # noqa: BLE001 - papermill's execution error or a kernel failure
                first = str(e).strip().splitlines()
                failures[target] = next((ln for ln in first if ln.strip() and not set(ln) <= {"-"}),
                                        type(e).__name__)
            if target.exists():
                written.append(target)
                if html:
                    try:  # an HTML export problem (missing nbconvert templates) must not lose the notebook
                        written.append(export_html(target, target.with_suffix(".html")))
                        if nb.name.startswith(REPORT_NOTEBOOK_PREFIX):
                            written.append(export_html(target, out / "report.html", hide_code=True))
                    except Exception as e:  # noqa: BLE001
                        failures[target.with_suffix(".html")] = f"HTML export failed: {type(e).__name__}: {e}"
    if failures and raise_on_error:
        raise NotebookError(failures, written)
    return written


# =========================================================================== context & display
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
        from .backends import available_backends, get_backend

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
    import torch

    if device is None or str(device).strip() in ("", "auto", "None"):
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = str(device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} was asked for but torch sees no CUDA device")
    sf = Path(shapes_file) if shapes_file else REPO_ROOT / "data" / "vllm_shapes.csv"
    if not sf.is_absolute():
        sf = REPO_ROOT / sf
    od = Path(out_dir)
    if not od.is_absolute():
        od = REPO_ROOT / od
    od.mkdir(parents=True, exist_ok=True)
    return ReportContext(backend or None, sf, device, od, bool(quick))


def environment_table(ctx: Optional[ReportContext] = None) -> pd.DataFrame:
    """What this kernel runs on: device, torch/CUDA, flashinfer, triton, nsight-python, ncu."""
    from .results import environment_info

    env = environment_info(ctx.device if ctx else None)
    rows = {k: env.get(k, "") for k in ("gpu_name", "compute_capability", "driver_version", "torch_version",
                                         "cuda_version", "flashinfer_version", "triton_version", "git_commit")}
    rows["device (this notebook)"] = ctx.device if ctx else ""
    rows["nsight-python"] = _module_version("nsight") or "not installed"
    rows["ncu"] = shutil.which("ncu") or "not on PATH"
    rows["python"] = sys.version.split()[0]
    return pd.DataFrame({"item": list(rows), "value": [str(v) for v in rows.values()]})


def _module_version(name: str) -> str:
    try:
        mod = importlib.import_module(name)
    except Exception:  # noqa: BLE001
        return ""
    v = getattr(mod, "__version__", None)
    if v:
        return str(v)
    try:
        from importlib.metadata import version

        return version({"nsight": "nsight-python"}.get(name, name))
    except Exception:  # noqa: BLE001
        return "?"


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def show_figure(fig: Any, save_as: Any = None, dpi: int = 110) -> Optional[dict]:
    """Display a Figure as an inline PNG (so HTML exports hold an <img>); optionally save PNG + SVG."""
    from IPython.display import Image, display

    paths = None
    if save_as is not None:
        from .plotting import save_figure

        paths = save_figure(fig, save_as)
    display(Image(data=figure_png(fig, dpi=dpi), format="png"))
    return paths


def try_figure(make: Callable[..., Any], *args: Any, save_as: Any = None, **kwargs: Any) -> None:
    """Build and show a figure; a ValueError (no rows to draw) is printed instead of raised.

    Returns None on purpose, so a notebook cell ending with it shows no ``<Figure ...>`` repr.
    """
    try:
        fig = make(*args, **kwargs)
    except ValueError as e:
        print(f"[skipped] {getattr(make, '__name__', 'figure')}: {e}")
        return None
    show_figure(fig, save_as=save_as)
    return None


def show_markdown(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


# =========================================================================== data
def local_run(ctx: ReportContext, *, models: Sequence[str] = ("gpt-oss-20b",), ep_sizes: Sequence[int] = (2,),
              tokens: Optional[Sequence[int]] = None, hidden_scale: Optional[int] = None,
              warmup: Optional[int] = None, repeats: Optional[int] = None, reuse: bool = True,
              runs_dir: Any = None) -> pd.DataFrame:
    """A small sweep on this machine (cached under ``out_dir/_work`` unless ``runs_dir`` is given).

    On CPU it runs the float32 reference on shapes divided by :data:`CPU_HIDDEN_SCALE`; on a GPU
    every backend of :attr:`ReportContext.backends` on the real shapes.
    """
    import warnings

    with warnings.catch_warnings():  # tqdm.auto warns about ipywidgets inside a kernel
        warnings.simplefilter("ignore")
        import tqdm.auto  # noqa: F401

    from .autotuning import sweep
    from .backends import get_backend
    from .measurement import measure_ceilings
    from .results import environment_info, load_runs, run_dir_name, save_run
    from .shapes import load_vllm_cases

    tokens = list(tokens or (QUICK_TOKENS if ctx.quick else LOCAL_TOKENS))
    if hidden_scale is None:
        hidden_scale = CPU_HIDDEN_SCALE if not ctx.is_gpu else 1
    warmup = warmup if warmup is not None else (1 if ctx.quick or not ctx.is_gpu else 5)
    repeats = repeats if repeats is not None else (3 if ctx.quick else (5 if not ctx.is_gpu else 30))
    backends = ctx.backends
    key = json.dumps([ctx.device, str(ctx.shapes_file), list(models), list(ep_sizes), tokens, hidden_scale,
                      warmup, repeats, backends])
    tag = "local-quick" if ctx.quick else "local"
    env = environment_info(ctx.device)
    if runs_dir is None:
        runs_dir = ctx.work_dir / f"{run_dir_name(env['gpu_name'], tag=tag)}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    runs_dir = Path(runs_dir)
    if reuse and (runs_dir / "results.parquet").exists():
        return load_runs(runs_dir.parent, pattern=f"{runs_dir.name}/results.parquet")
    cases = load_vllm_cases(ctx.shapes_file, models=list(models), ep_sizes=list(ep_sizes), token_counts=tokens)
    if not cases:
        raise ValueError(f"no cases in {ctx.shapes_file} for models={list(models)} ep_sizes={list(ep_sizes)}")
    if hidden_scale and hidden_scale > 1:
        cases = [scaled_case(c, hidden_scale) for c in cases]
    ceilings = measure_ceilings(ctx.device) if ctx.is_gpu else None
    df = sweep(cases, [get_backend(b) for b in backends], ctx.device, env=env, warmup=warmup, repeats=repeats,
               ceilings=ceilings, progress_bar=False)
    df["run_id"] = runs_dir.name
    save_run(df, runs_dir)
    return df


def load_report_data(ctx: ReportContext, runs_root: Any = None, fresh: Optional[bool] = None) -> tuple[pd.DataFrame, str]:
    """The committed runs (``data/runs``), or -- when there are none, or ``fresh`` -- a local run.

    Returns ``(df, note)``; the note says where the rows come from.  ``fresh=None`` means: run a
    fresh sweep only on a GPU and not in quick mode.
    """
    from .results import load_runs

    root = Path(runs_root) if runs_root is not None else RUNS_ROOT
    committed = load_runs(root)
    if fresh is None:
        fresh = ctx.is_gpu and not ctx.quick
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


def run_overview(df: pd.DataFrame) -> pd.DataFrame:
    """Per run x backend: GPU, shapes, tactics, rows per status."""
    if df.empty:
        return pd.DataFrame()
    d = df.copy()
    d["shape"] = d["model"].astype(str) + " EP" + d["ep_size"].astype(str)
    g = d.groupby(["run_id", "gpu_name", "backend"], dropna=False)
    out = g.agg(shapes=("shape", lambda s: ", ".join(sorted(set(s)))),
                token_counts=("num_tokens", lambda s: len(set(s.dropna()))),
                tactics=("tactic_label", lambda s: s.nunique()), rows=("status", "size"))
    counts = d.pivot_table(index=["run_id", "gpu_name", "backend"], columns="status", values="model",
                           aggfunc="size", fill_value=0)
    return out.join(counts).reset_index()


def plot_targets(df: pd.DataFrame, limit: Optional[int] = None) -> list[tuple[str, str, int]]:
    """(backend, model, ep_size) triples with 'ok' timings, for per-shape figures (heatmaps...)."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return []
    trip = ok[["backend", "model", "ep_size"]].drop_duplicates()
    out = sorted(((str(b), str(m), int(e)) for b, m, e in trip.itertuples(index=False)),
                 key=lambda t: (t[0] == "reference", t[1], t[2], t[0]))  # kernels first, the reference last
    return out[:limit] if limit else out


def _slug(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", "_".join(str(p) for p in parts)).strip("-").lower()


# =========================================================================== summary tables (05)
def summary_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The report's tables, by name.

    * ``best_per_shape`` -- per GPU x backend x shape x T: best and default tactic, times (µs),
      speedup, roofline fraction and error of the best.
    * ``backend_summary`` -- per GPU x backend: shapes measured, median speedup of tuning, median
      roofline fraction over decode shapes, how many shapes the backend is the fastest on.
    * ``status_counts`` -- rows per status per backend.
    * ``failures`` -- distinct failures (backend, tactic, stage, error), with how many shapes hit them.
    * ``correctness`` -- per backend x tactic: shapes checked, passed, worst rel_l2, min cosine.
    * ``provenance`` -- per run: GPU, CC, driver, torch, CUDA, flashinfer, triton, commit, timing method.
    """
    from .plotting import DECODE_MAX_TOKENS, best_per_shape

    if df is None or df.empty:
        raise ValueError("df: summary_tables needs measured rows, got an empty DataFrame")
    tables: dict[str, pd.DataFrame] = {}
    best = best_per_shape(df)
    cols = ["gpu_name", "backend", "model", "ep_size", "num_tokens", "best_tactic", "best_us", "default_tactic",
            "default_status", "default_us", "speedup", "frac_bw_roofline", "achieved_GBps", "best_rel_l2", "n_ok", "n_tactics"]
    tables["best_per_shape"] = best[cols].sort_values(["gpu_name", "model", "ep_size", "num_tokens", "backend"]).reset_index(drop=True)

    b = best[best["best_us"].notna()].copy()
    if len(b):
        keyc = ["gpu_name", "model", "ep_size", "hidden_size", "intermediate_size", "num_tokens"]
        fastest = b.loc[b.groupby(keyc, dropna=False)["best_us"].idxmin(), "backend"].value_counts()
        rows = []
        for (gpu, be), g in b.groupby(["gpu_name", "backend"]):
            dec = g[g["num_tokens"] <= DECODE_MAX_TOKENS]
            rows.append({
                "gpu_name": gpu, "backend": be, "shapes": len(g),
                "median_speedup_vs_default": g["speedup"].median(),
                "max_speedup_vs_default": g["speedup"].max(),
                f"median_roofline_decode(T<={DECODE_MAX_TOKENS})": dec["frac_bw_roofline"].median() if len(dec) else math.nan,
                "fastest_backend_on_shapes": int(fastest.get(be, 0)),
            })
        tables["backend_summary"] = pd.DataFrame(rows)
    else:
        tables["backend_summary"] = pd.DataFrame()

    tables["status_counts"] = df.pivot_table(index="backend", columns="status", values="run_id", aggfunc="size",
                                             fill_value=0).reset_index()
    fail = df[df["status"].isin(["failed", "aborted", "unsupported"])]
    if len(fail):
        tables["failures"] = (fail.assign(error_message=fail["error_message"].fillna("").str.slice(0, 160))
                              .groupby(["backend", "status", "stage", "tactic_label", "error_type", "error_message"],
                                       dropna=False).size().rename("rows").reset_index()
                              .sort_values(["backend", "rows"], ascending=[True, False]))
    else:
        tables["failures"] = pd.DataFrame(columns=["backend", "status", "stage", "tactic_label", "error_type",
                                                   "error_message", "rows"])
    tables["correctness"] = correctness_summary(df)
    tables["provenance"] = provenance_table(df)
    return tables


def provenance_table(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["run_id", "gpu_name", "compute_capability", "driver_version", "torch_version", "cuda_version",
            "flashinfer_version", "triton_version", "git_commit", "time_method"]
    d = df[[c for c in cols if c in df]].astype("string").fillna("")
    out = d.groupby("run_id", dropna=False).agg(lambda s: ", ".join(sorted(set(s) - {""})))
    out["rows"] = df.groupby("run_id", dropna=False).size()
    ts = df.groupby("run_id", dropna=False)["timestamp"].agg(lambda s: f"{s.dropna().min()} .. {s.dropna().max()}" if s.notna().any() else "")
    out["measured (UTC)"] = ts
    return out.reset_index()


# =========================================================================== correctness (03)
def correctness_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured tactic x shape: the error metrics and each tolerance check (PASS/FAIL)."""
    from .correctness import COSINE_TOL, REL_L2_TOL

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

    from .autotuning import _backend_tactics
    from .backends import get_backend
    from .correctness import TOKEN_REL_TOL, per_token_errors, poison_
    from .inputs import build_inputs, fresh_activations
    from .reference import reference_moe

    be = get_backend(backend)
    sup = be.supports(device)
    if not sup.ok:
        raise ValueError(f"backend: {backend} cannot run on {device}: {sup.reason}")
    inputs = build_inputs(case, device)
    check = fresh_activations(inputs, seed=case.seed + 1_000_003)
    ref = reference_moe(check, torch.float32)
    prepared = be.prepare(check)
    tactics = _backend_tactics(be, case, prepared)
    t = next((x for x in tactics if tactic_label is None and x.is_default or x.label == tactic_label), tactics[0])
    out = poison_(torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=device))
    y = be.run(prepared, t, out)
    err = per_token_errors(y, ref).numpy()
    return pd.DataFrame({"token": range(len(err)), "rel_err": err, "over_tol": err > TOKEN_REL_TOL,
                         "backend": backend, "tactic_label": t.label})


# =========================================================================== bug reproduction (01)
_KWARG_LINE = re.compile(r"^\s*\([A-Za-z][\w-]*(?:\s+\w+=\w+)*?\s+pid=\d+\)\s+[A-Za-z_]\w*\s+:\s")


def extract_kwargs_log(text: str) -> str:
    """The vLLM ``name : value`` kwarg lines of a bug report (traceback / prose dropped)."""
    lines = [ln.strip() for ln in text.splitlines() if _KWARG_LINE.match(ln)]
    if not lines:
        raise ValueError("text: no vLLM kwarg lines ('(EngineCore_DP0 pid=N) name : value') found")
    return "\n".join(lines)


def seed_case(seed_file: Any = None) -> tuple[Any, str]:
    """The seed's case, parsed from the bug report's vLLM log if present, else :data:`bugrepro.SEED_CASE`.

    Returns ``(case, note)``.  The logged case is the vLLM batch (T=16384); notebook 01 runs the
    report's minimal repro size (T=16) via ``case.with_tokens``.
    """
    from .bugrepro import SEED_CASE
    from .vllm_log import parse_vllm_kwargs_log

    path = Path(seed_file) if seed_file else SEED_FILE
    if path.is_file():
        log = extract_kwargs_log(path.read_text(encoding="utf-8", errors="replace"))
        case = parse_vllm_kwargs_log(log, model="gpt-oss-20b")
        return case, f"parsed from the vLLM kwargs log in {path} ({len(log.splitlines())} kwarg lines)"
    return SEED_CASE, f"{path} not found: using fp4moe_diag.bugrepro.SEED_CASE (the seed's minimal repro)"


def scaled_case(case: Any, scale: int, multiple: int = 128) -> Any:
    """``case`` with H and I divided by ``scale`` (kept a multiple of ``multiple``, at least ``multiple``)."""
    def s(v: int) -> int:
        return max(multiple, (v // scale) // multiple * multiple)

    return case.replace(hidden_size=s(case.hidden_size), intermediate_size=s(case.intermediate_size))


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
    """:func:`fp4moe_diag.autotuning.tune` on the seed case: every tactic, no meta tensor, a best tactic.

    On CPU (or when the backend cannot run here) it uses the reference backend, on a scaled-down
    case in quick mode.  Returns ``(TuneResult, note)``.
    """
    from .autotuning import tune
    from .backends import get_backend

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
    res = tune(case, be, ctx.device, warmup=1 if ctx.quick else 3, repeats=3 if ctx.quick else 10)
    note += (f"tune({case.label}, {be.name}) on {ctx.device}: {len(res.rows)} tactic(s), "
             f"{len(res.ok_rows)} ok, best = {res.best.label if res.best else 'none'}")
    return res, note


def installed_version_row(verdict: Any = None) -> pd.DataFrame:
    """The version-matrix row of the flashinfer importable here (no subprocess; uses ``verdict`` if given)."""
    from .flashinfer_hooks import flashinfer_status

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
    from .bugrepro import version_matrix

    if isinstance(version_dirs, str):
        version_dirs = [d.strip() for d in version_dirs.split(",") if d.strip()]
    if version_dirs:
        dirs = [str(Path(d) if Path(d).is_absolute() else REPO_ROOT / d) for d in version_dirs]
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


# =========================================================================== kernel profile (04)
def nsight_status(device: str) -> tuple[bool, str]:
    """Whether notebook 04 can profile here: a CUDA device, ``ncu`` on PATH, nsight-python importable."""
    import torch

    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return False, "no CUDA GPU here: Nsight Compute profiles GPU kernels only"
    ncu = shutil.which("ncu")
    if not ncu:
        return False, "Nsight Compute CLI `ncu` is not on PATH (install Nsight Compute / the CUDA toolkit)"
    try:
        _ncu_report_module()  # nsight-python imports it; older ones expect ncu's own copy on sys.path
    except ImportError:
        pass
    try:
        importlib.import_module("nsight")
    except Exception as e:  # noqa: BLE001
        return False, f"nsight-python is not importable ({type(e).__name__}: {e}); pip install nsight-python"
    return True, f"ncu at {ncu}, nsight-python {_module_version('nsight')}"


def _ncu_python_dir() -> Optional[Path]:
    """``<ncu install>/extras/python`` (holds ``ncu_report.py``), if ncu is on PATH."""
    ncu = shutil.which("ncu")
    if not ncu:
        return None
    for base in (Path(ncu).resolve().parent, Path(ncu).resolve().parent.parent):
        d = base / "extras" / "python"
        if (d / "ncu_report.py").is_file() or d.is_dir():
            return d
    return None


def committed_ncu_results(root: Any = None) -> pd.DataFrame:
    """Every committed ``ncu_*.csv`` under ``data/runs/*/`` (and ``data/``), with a ``source`` column."""
    base = Path(root) if root is not None else RUNS_ROOT
    files = sorted(base.glob("*/ncu_*.csv")) + sorted(base.parent.glob("ncu_*.csv"))
    frames = []
    for f in files:
        try:
            d = pd.read_csv(f)
        except Exception as e:  # noqa: BLE001
            d = pd.DataFrame([{"error": f"{type(e).__name__}: {e}"}])
        d.insert(0, "source", str(f.relative_to(REPO_ROOT)) if f.is_relative_to(REPO_ROOT) else str(f))
        frames.append(d)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


_NSIGHT_DRIVER = '''\
"""Generated by fp4moe_diag.report.profile_kernels: nsight-python may re-run this script under ncu."""
import sys
from fp4moe_diag.report import _nsight_profile_main
_nsight_profile_main(sys.argv[1])
'''


def profile_kernels(case: Any, backend: str, device: str, out_dir: Any, tactics: dict[str, str],
                    runs: int = 3, timeout: float = 900.0) -> pd.DataFrame:
    """Per-kernel ncu metrics of the given tactics (``{"best": label, "default": label}``) via nsight-python.

    nsight-python runs ncu over a script, not over a notebook kernel, so this writes a driver
    script and a JSON spec to ``out_dir`` and runs it in a subprocess.  Returns one row per
    (role, kernel): mean duration (µs), DRAM / SM throughput (% of peak) and achieved occupancy (%).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = {"case": case.to_record(), "backend": backend, "device": device, "tactics": tactics, "runs": runs,
            "prefix": str(out / "nspy_"), "kernels_csv": str(out / "kernels.csv"),
            "calls_csv": str(out / "calls.csv")}
    (out / "spec.json").write_text(json.dumps(spec, indent=2, default=str))
    script = out / "nsight_profile.py"
    script.write_text(_NSIGHT_DRIVER)
    env = dict(os.environ)
    extras = _ncu_python_dir()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
                                        + ([str(extras)] if extras else []))
    cp = subprocess.run([sys.executable, str(script), str(out / "spec.json")], cwd=str(REPO_ROOT), env=env,
                        capture_output=True, text=True, timeout=timeout)
    (out / "nsight_profile.log").write_text(cp.stdout + "\n--- stderr ---\n" + cp.stderr)
    if cp.returncode != 0 or not Path(spec["kernels_csv"]).exists():
        tail = "\n".join((cp.stderr or cp.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"nsight profiling failed (exit {cp.returncode}); log: {out / 'nsight_profile.log'}\n{tail}")
    return pd.read_csv(spec["kernels_csv"])


def _ncu_report_module() -> Any:
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        extras = _ncu_python_dir()
        if extras is not None and str(extras) not in sys.path:
            sys.path.append(str(extras))
            return importlib.import_module("ncu_report")
        raise


def read_ncu_report(path: Any, metrics: Sequence[str] = tuple(NCU_METRICS)) -> pd.DataFrame:
    """Every profiled kernel of an ``.ncu-rep`` with its nsight-python annotation and ``metrics``."""
    ncu_report = _ncu_report_module()
    ctx = ncu_report.load_report(str(path))
    rows = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            ann = ""
            state = act.nvtx_state()
            for did in state.domains():
                dom = state.domain_by_id(did)
                if dom.name() != "nsight-python":
                    continue
                names = []
                for getter in ("start_end_ranges", "push_pop_ranges"):
                    if hasattr(dom, getter):
                        names = list(getattr(dom, getter)() or [])
                        if names:
                            break
                ann = names[0] if names else ""
            row = {"annotation": ann, "kernel": act.name()}
            have = set(act.metric_names())
            for m in metrics:
                if m in have:
                    row[m] = act[m].value()
                    row[m + ".unit"] = act[m].unit()
            rows.append(row)
    return pd.DataFrame(rows)


def kernels_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Raw ncu rows -> one row per (annotation, launch index): mean over runs, readable columns."""
    if raw.empty:
        return raw
    d = raw[raw["annotation"] != ""].copy()
    d["launch"] = d.groupby("annotation").cumcount()
    n_k = d.groupby("annotation")["kernel"].transform(lambda s: _period(list(s)))
    d["launch"] = d["launch"] % n_k
    dur = "gpu__time_duration.sum"
    if dur in d:
        unit = str(d.get(dur + ".unit", pd.Series(["ns"])).iloc[0]).lower()
        scale = {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
        d["duration_us"] = pd.to_numeric(d[dur], errors="coerce") * scale
    ren = {m: v for m, v in NCU_METRICS.items() if m in d and m != dur}
    d = d.rename(columns=ren)
    keep = ["duration_us"] + list(ren.values())
    out = d.groupby(["annotation", "launch", "kernel"], sort=False)[[c for c in keep if c in d]].mean().reset_index()
    out["runs"] = d.groupby(["annotation", "launch", "kernel"], sort=False).size().values
    out["role"] = out["annotation"].str.split(":").str[0]
    out["tactic_label"] = out["annotation"].str.split(":", n=1).str[1].str.strip()
    return out


def _period(names: list[str]) -> int:
    """Kernels per call: the smallest p such that the launch sequence repeats with period p."""
    n = len(names)
    for p in range(1, n + 1):
        if n % p == 0 and names == names[:p] * (n // p):
            return p
    return n


def _nsight_profile_main(spec_path: str) -> None:  # pragma: no cover - needs a GPU, ncu and nsight-python
    import torch

    import nsight

    from .autotuning import _backend_tactics
    from .backends import get_backend
    from .case import MoECase
    from .inputs import build_inputs

    spec = json.loads(Path(spec_path).read_text())
    case = MoECase.from_record(spec["case"])
    dev = torch.device(spec["device"])
    be = get_backend(spec["backend"])
    inputs = build_inputs(case, dev)
    prepared = be.prepare(inputs)
    by_label = {t.label: t for t in _backend_tactics(be, case, prepared)}
    chosen = [(role, by_label[label]) for role, label in spec["tactics"].items() if label in by_label]
    if not chosen:
        raise SystemExit(f"none of the tactics {spec['tactics']} is in {sorted(by_label)}")
    out = torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=dev)
    for _, t in chosen:  # JIT / autotuner warm-up outside the profiled ranges
        be.run(prepared, t, out)
    torch.cuda.synchronize(dev)

    @nsight.analyze.kernel(configs=[(case.num_tokens,)], runs=int(spec["runs"]), metrics=list(NCU_METRICS),
                           combine_kernel_metrics=lambda a, b: a + b, output_prefix=spec["prefix"],
                           output_csv=True)
    def fused_moe(num_tokens: int) -> None:
        for role, t in chosen:
            with nsight.annotate(f"{role}: {t.label}"):
                be.run(prepared, t, out)
        torch.cuda.synchronize(dev)

    res = fused_moe()
    if res is None:  # nsight-python < 1.0 re-ran this script under ncu; the child stops here
        return
    calls = res.to_dataframe()
    calls.to_csv(spec["calls_csv"], index=False)
    reps = sorted(Path(spec["prefix"]).parent.glob(Path(spec["prefix"]).name + "ncu-output-*.ncu-rep"))
    if not reps:
        raise SystemExit(f"no .ncu-rep written under {spec['prefix']}*")
    kernels_table(read_ncu_report(reps[-1])).to_csv(spec["kernels_csv"], index=False)


def profile_vs_events(kernels: pd.DataFrame, tune_rows: pd.DataFrame) -> pd.DataFrame:
    """Per role (best/default): sum of ncu kernel durations next to the CUDA-event median of the tuner."""
    if kernels.empty:
        return pd.DataFrame()
    aggs = {"kernels": ("kernel", "size")}
    if "duration_us" in kernels:
        aggs["ncu_sum_us"] = ("duration_us", "sum")
    if "dram_throughput_pct" in kernels:
        aggs["max_dram_pct"] = ("dram_throughput_pct", "max")
    k = kernels.groupby(["role", "tactic_label"]).agg(**aggs).reset_index()
    ev = tune_rows[["tactic_label", "time_median_us", "time_p10_us", "time_p90_us", "frac_bw_roofline"]]
    return k.merge(ev, on="tactic_label", how="left").rename(columns={"time_median_us": "event_median_us"})


#: Columns of a tune() result shown in the notebooks.
TUNE_COLUMNS = ["backend", "tactic_label", "is_default_tactic", "is_best", "status", "time_median_us", "time_spread",
                "rel_l2", "correct", "error_type", "error_message"]


def kernel_profile_session(ctx: ReportContext, model: str = "gpt-oss-20b", ep_size: int = 2, num_tokens: int = 16,
                           runs: int = 3, backend: Optional[str] = None) -> dict[str, Any]:
    """Notebook 04's live part: tune one shape, then ncu-profile its best and default tactic.

    Never raises for a missing GPU / ncu / nsight-python or a failing profile: the returned dict's
    ``message`` says what happened; ``kernels`` (per kernel), ``summary`` (ncu sum vs CUDA events)
    and ``tune_rows`` are DataFrames (empty when skipped); ``csv`` is where the kernel table went.
    """
    from .autotuning import tune
    from .backends import get_backend
    from .shapes import load_vllm_cases

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
    tr = tune(case, get_backend(name), ctx.device, warmup=3, repeats=10 if ctx.quick else 30)
    res["tune_rows"] = tr.rows
    if tr.best is None:
        res["message"] = f"Live kernel profiling skipped: {name} has no correct tactic on {case.label}."
        return res
    tactics = {"best": tr.best.label}
    if tr.default is not None and tr.default.label != tr.best.label:
        tactics["default"] = tr.default.label
    out = ctx.work_dir / f"ncu-{_slug(name, case.label)}"
    try:
        k = profile_kernels(case, name, ctx.device, out, tactics, runs=runs)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        res["message"] = f"Live kernel profiling failed (the rest of the report is unaffected): {e}"
        return res
    k.insert(0, "backend", name)
    k.insert(1, "case", case.label)
    csv = ctx.out_dir / f"ncu_{_slug(name, case.label)}.csv"
    k.to_csv(csv, index=False)
    res.update(kernels=k, summary=profile_vs_events(k, tr.rows), csv=csv,
               message=f"Profiled {', '.join(f'{r}={t}' for r, t in tactics.items())} of {name} on {case.label}; "
                       f"kernel table written to {csv} (copy it to data/runs/<run>/ to commit it).")
    return res


def worst_measurement(df: pd.DataFrame) -> Optional[pd.Series]:
    """The row with the largest rel_l2 (NaN/Inf first), or None when no row has one."""
    d = df[df["rel_l2"].notna()]
    if d.empty:
        return None
    key = d["rel_l2"].astype(float).replace(float("inf"), 1e300)
    return d.loc[key.idxmax()]


def try_token_errors(row: Optional[pd.Series], ctx: ReportContext) -> tuple[pd.DataFrame, str]:
    """Per-token errors of ``row``'s tactic, re-run here if its backend runs on this device."""
    from .backends import get_backend

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


def fmt(df: pd.DataFrame, precision: int = 4, max_chars: int = 90) -> Any:
    """A Styler with fixed precision, no index and long strings cut to ``max_chars`` (readable HTML tables)."""
    d = df.copy()
    for c in d.columns:
        if pd.api.types.is_object_dtype(d[c]) or pd.api.types.is_string_dtype(d[c]):
            d[c] = d[c].map(lambda v: v if not isinstance(v, str) or len(v) <= max_chars else v[: max_chars - 1] + "…")
    return d.style.format(precision=precision, na_rep="", thousands=None).hide(axis="index")


def report_header(df: pd.DataFrame, note: str) -> str:
    """Markdown: where the data comes from and what it was measured on."""
    from .plotting import provenance

    prov = provenance_table(df)
    lines = [f"**Data:** {note}", "", f"**Measured on:** {provenance(df)}", ""]
    for _, r in prov.iterrows():
        lines.append(f"- `{r['run_id']}`: {r.get('gpu_name', '')} (CC {r.get('compute_capability', '') or 'n/a'}), "
                     f"driver {r.get('driver_version', '') or 'n/a'}, torch {r.get('torch_version', '')}, "
                     f"CUDA {r.get('cuda_version', '') or 'n/a'}, flashinfer {r.get('flashinfer_version', '') or 'n/a'}, "
                     f"triton {r.get('triton_version', '') or 'n/a'}, commit {r.get('git_commit', '') or 'n/a'}, "
                     f"timing {r.get('time_method', '')}, {r['rows']} rows")
    return "\n".join(lines)


REPORT_FIGURES = [
    ("backend_comparison", "Backends compared (best tactic per shape)"),
    ("best_vs_default", "Best vs default tactic"),
    ("roofline_fraction", "Memory-bandwidth roofline fraction"),
    ("error_boxplot", "Correctness: error per tactic"),
]


def build_report_figures(df: pd.DataFrame, fig_dir: Any, max_shape_figures: int = 4,
                         show: bool = True) -> list[dict[str, Any]]:
    """Every report figure: saved as PNG + SVG under ``fig_dir``, shown inline when ``show``.

    Returns one dict per figure: ``name``, ``title``, ``paths`` (png/svg) or ``skipped`` (why).
    """
    from . import plotting as P

    fig_dir = Path(fig_dir)
    items: list[tuple[str, str, Callable[[], Any]]] = [
        (name, title, (lambda n=name: getattr(P, n)(df))) for name, title in REPORT_FIGURES]
    for b, m, e in plot_targets(df, max_shape_figures):
        items.append((f"heatmap_{_slug(b, m, 'ep', e)}", f"Tactic heatmap: {b}, {m} EP{e}",
                      lambda b=b, m=m, e=e: P.tactic_heatmap(df, b, m, e)))
        items.append((f"time_vs_tokens_{_slug(b, m, 'ep', e)}", f"Time vs tokens: {b}, {m} EP{e}",
                      lambda b=b, m=m, e=e: P.time_vs_tokens(df, b, m, e)))
    out = []
    for name, title, make in items:
        try:
            fig = make()
        except ValueError as e:
            out.append({"name": name, "title": title, "skipped": str(e)})
            if show:
                show_markdown(f"#### {title}\n_Skipped: {e}_")
            continue
        paths = P.save_figure(fig, fig_dir / name)
        out.append({"name": name, "title": title, "paths": paths})
        if show:
            show_markdown(f"#### {title}\n`{paths['png'].name}` / `{paths['svg'].name}` in `{fig_dir}`")
            show_figure(fig)
    return out
