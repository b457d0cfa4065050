"""The notebooks' logic and the headless report runner.

:func:`run_notebooks` executes ``notebooks/*.ipynb`` in order with papermill (parameters
injected, kernel ``python3``, cwd = repo root) into ``out_dir/<name>.ipynb`` and exports each to
HTML; ``05_report`` is also written as the shareable ``out_dir/report.html`` (code hidden).

Everything else here is what the notebooks call, so they stay thin and this stays tested:
:func:`context` (resolved parameters), :func:`load_report_data` (committed ``data/runs`` or a
quick local run), :func:`summary_tables`; notebook 01's helpers are in :mod:`.report_bug`, 03's in
:mod:`.report_correctness`, 04's (Nsight Compute via nsight-python) in :mod:`.report_profile`.
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

#: columns of a tune() result shown in notebooks 01 and 04
TUNE_COLUMNS = ["backend", "tactic_label", "is_default_tactic", "is_best", "status", "time_median_us", "time_spread",
                "rel_l2", "correct", "error_type", "error_message"]

#: ncu metrics collected per kernel in notebook 04 (Speed Of Light + occupancy section names).
NCU_METRICS = {
    "gpu__time_duration.sum": "duration",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__inst_issued.avg.pct_of_peak_sustained_active": "issue_slots_busy_pct",
    "dram__bytes_read.sum": "dram_read_bytes",
    "launch__registers_per_thread": "registers_per_thread",
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

    from .tune import sweep
    from .backends import get_backend
    from .measure.ceilings import measure_ceilings
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
        from .report_bug import scaled_case  # noqa: PLC0415 -- report_bug imports this module

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
    from .plotting import DECODE_MAX_TOKENS, best_per_shape, latest_per_shape

    if df is None or df.empty:
        raise ValueError("df: summary_tables needs measured rows, got an empty DataFrame")
    tables: dict[str, pd.DataFrame] = {}
    best = best_per_shape(df)
    cols = ["gpu_name", "backend", "model", "ep_size", "num_tokens", "best_tactic", "best_us", "default_tactic",
            "default_status", "default_us", "speedup", "frac_bw_roofline", "achieved_GBps", "best_rel_l2", "n_ok", "n_tactics"]
    tables["best_per_shape"] = best[cols].sort_values(["gpu_name", "model", "ep_size", "num_tokens", "backend"]).reset_index(drop=True)

    b = latest_per_shape(best, df)  # one run per shape: old runs of the same shape do not vote twice
    b = b[b["best_us"].notna()].copy()
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
                f"best_roofline_decode(T<={DECODE_MAX_TOKENS})": dec["frac_bw_roofline"].max() if len(dec) else math.nan,
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
    from .report_correctness import correctness_summary  # noqa: PLC0415

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
    from .report_correctness import case_from_row, token_errors  # noqa: PLC0415

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


# notebook-specific helpers live in their own modules; re-exported lazily (PEP 562) so notebooks keep
# using `report.X` and each of those modules can also be imported first (they import this module).
_REEXPORTS: dict[str, tuple[str, ...]] = {
    "report_correctness": (
        "correctness_table", "correctness_summary", "worst_tokens", "style_pass_fail", "case_from_row",
        "token_errors",
    ),
    "report_bug": (
        "extract_kwargs_log", "seed_case", "scaled_case", "traceback_summary", "verdict_table",
        "tuner_input_table", "style_meta_rows", "device_safe_tune", "installed_version_row",
        "version_matrix_table", "committed_verdicts",
    ),
    "report_profile": (
        "nsight_status", "_ncu_python_dir", "committed_ncu_results", "profile_kernels", "ncu_csv_export",
        "raw_from_ncu_csv", "kernels_from_calls", "kernels_table", "_period", "_nsight_profile_main", "profile_vs_events",
        "kernel_profile_session",
    ),
}


def __getattr__(name: str) -> Any:
    for mod, names in _REEXPORTS.items():
        if name in names:
            return getattr(importlib.import_module(f"{__package__}.{mod}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
