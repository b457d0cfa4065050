"""One tidy DataFrame schema for every measurement: one row per case x backend x tactic.

:data:`SCHEMA` is the single source of truth (the README's table is generated from it by
:func:`schema_markdown`).  :func:`save_run` writes parquet + CSV atomically under
``data/runs/<date>-<gpu>/`` with a manifest naming both; :func:`load_run` reads one run folder (parts, manifest,
or an older parquet/CSV pair), :func:`load_runs` concatenates runs.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any, Iterable, Optional

import pandas as pd
import torch

from .inputs import default_device
from .paths import REPO_ROOT, RUNS_ROOT

# (column, pandas dtype, description)
SCHEMA: list[tuple[str, str, str]] = [
    ("run_id", "string", "run folder name, <date>-<gpu>[-tag]"),
    ("timestamp", "string", "UTC time the row was measured (ISO 8601)"),
    ("git_commit", "string", "fp4moe-diag commit that produced the row"),
    ("gpu_name", "string", "torch.cuda.get_device_name, or 'cpu'"),
    ("compute_capability", "string", "e.g. '9.0'; '' on CPU"),
    ("driver_version", "string", "NVIDIA driver (nvidia-smi)"),
    ("torch_version", "string", "torch.__version__"),
    ("cuda_version", "string", "torch.version.cuda"),
    ("flashinfer_version", "string", "flashinfer.__version__ or ''"),
    ("triton_version", "string", "triton.__version__ or ''"),
    ("rank", "Int64", "torch.distributed rank that measured the row (sharded sweeps; '' otherwise)"),
    ("world_size", "Int64", "ranks of the sharded sweep (1 or empty: one process)"),
    ("model", "string", "model the shape comes from (data/vllm_shapes.csv)"),
    ("num_tokens", "Int64", "tokens in the batch (T)"),
    ("hidden_size", "Int64", "H"),
    ("intermediate_size", "Int64", "I (gemm1 makes 2*I)"),
    ("num_experts", "Int64", "global experts"),
    ("local_num_experts", "Int64", "experts on this EP rank"),
    ("local_expert_offset", "Int64", "first local expert id"),
    ("ep_size", "Int64", "expert-parallel size"),
    ("ep_rank", "Int64", "expert-parallel rank"),
    ("top_k", "Int64", "experts per token"),
    ("routing_method", "string", "FlashInfer RoutingMethodType name"),
    ("weight_format", "string", "mxfp4 | nvfp4"),
    ("activation_format", "string", "bf16 | mxfp8"),
    ("activation", "string", "swiglu | swiglu_oai"),
    ("has_bias", "boolean", "gemm1/gemm2 biases present"),
    ("seed", "Int64", "seed of the random inputs"),
    ("backend", "string", "reference | cutlass | trtllm | triton"),
    ("tactic", "string", "the kernel's own tactic id, as str"),
    ("tactic_label", "string", "human-readable tactic"),
    ("is_default_tactic", "boolean", "what the library runs without tuning"),
    ("is_best", "boolean", "fastest correct tactic of this case x backend"),
    ("status", "string", "ok | incorrect | failed | unsupported | aborted"),
    ("stage", "string", "where a failure happened: support, prepare, tactics, run, timing"),
    ("error_type", "string", "exception class, or ''"),
    ("error_message", "string", "first line of the exception / reason"),
    ("time_median_us", "float64", "median over repeats (us)"),
    ("time_p10_us", "float64", "10th percentile (us)"),
    ("time_p90_us", "float64", "90th percentile (us)"),
    ("time_mean_us", "float64", "mean (us)"),
    ("time_std_us", "float64", "standard deviation (us)"),
    ("time_min_us", "float64", "fastest repeat (us)"),
    ("time_max_us", "float64", "slowest repeat (us)"),
    ("time_repeats", "Int64", "timed repeats"),
    ("time_method", "string", "cuda-events | cuda-graph | wall-clock"),
    ("time_capture_error", "string", "why the requested CUDA-graph capture failed (then timed with cuda-events), or ''"),
    ("timing_pass", "string", "full, or screen: timed with the --screen repeats only (the fastest --screen-top "
                              "tactics, the default and the combined tactic are re-timed in full)"),
    ("time_spread", "float64", "(p90 - p10) / median"),
    ("time_median_us_repeat", "float64", "best tactic only: the same tactic timed again at the end of its sweep"),
    ("noise_ratio", "float64", "best tactic only: max/min of the two medians (1.0 = identical)"),
    ("weight_bytes", "Int64", "FP4 weight + scale + bias bytes of experts that received tokens"),
    ("active_experts", "Int64", "local experts that received tokens"),
    ("routed_pairs", "Int64", "(token, k) pairs on this rank"),
    ("flops", "Int64", "2 * pairs * (H*2I + I*H)"),
    ("achieved_GBps", "float64", "(weight + activation bytes) / median time"),
    ("achieved_TFLOPs", "float64", "flops / median time"),
    ("time_kernel_median_us", "float64", "summed GPU kernel time per call, median (torch.profiler / CUPTI; sweep --kernel-time)"),
    ("time_kernel_p10_us", "float64", "10th percentile of the per-call kernel-time sums (us)"),
    ("time_kernel_p90_us", "float64", "90th percentile of the per-call kernel-time sums (us)"),
    ("time_kernel_spread", "float64", "(p90 - p10) / median of the kernel-time sums"),
    ("time_kernel_span_median_us", "float64", "first kernel start to last kernel end per call, median (us)"),
    ("time_kernel_count", "Int64", "kernels per call"),
    ("time_kernel_method", "string", "how the kernel time was taken (eager or cuda-graph replay), or why it failed"),
    ("frac_bw_roofline", "float64", "achieved bytes/s over the measured read-only streaming ceiling (copy where unmeasured)"),
    ("frac_flops_roofline", "float64", "achieved FLOP/s over the measured bf16 GEMM ceiling"),
    ("ceiling_copy_GBps", "float64", "measured device copy (read + write) GB/s in this run"),
    ("ceiling_bf16_TFLOPs", "float64", "measured bf16 GEMM TFLOP/s in this run"),
    ("ceiling_read_GBps", "float64", "measured read-only streaming GB/s in this run (int32 sum over 2 GiB)"),
    ("ceiling_datasheet_GBps", "float64", "the GPU's datasheet HBM bandwidth, GB/s (H200: 4800)"),
    ("rel_l2", "float64", "||out - ref|| / ||ref|| vs the float32 reference"),
    ("max_abs_err", "float64", "max |out - ref|"),
    ("mean_abs_err", "float64", "mean |out - ref|"),
    ("cosine", "float64", "cosine similarity of out and ref"),
    ("frac_tokens_over_tol", "float64", "tokens whose relative error exceeds 5e-2"),
    ("worst_token", "Int64", "index of the token with the largest relative error"),
    ("nan_count", "Int64", "NaN elements in the output"),
    ("inf_count", "Int64", "Inf elements in the output"),
    ("unwritten_rows", "Int64", "rows left at the NaN poison (never written)"),
    ("ref_abs_mean", "float64", "mean |ref| (scale of the numbers compared)"),
    ("correct", "boolean", "within the FP4 tolerances (see correctness.py)"),
    ("input_source", "string", "'' (random inputs from the seed), or the log / dump call the inputs came from"),
    ("recorded_rel_l2", "float64", "||out - recorded|| / ||recorded|| vs the output the dumped call returned"),
    ("matches_recorded", "boolean", "within the FP4 tolerances of the dumped call's own output (NA: none recorded)"),
]

COLUMNS = [c for c, _, _ in SCHEMA]
_DTYPES = {c: d for c, d, _ in SCHEMA}


def schema_markdown() -> str:
    lines = ["| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c}` | {d} | {m} |" for c, d, m in SCHEMA]
    return "\n".join(lines)


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out.splitlines()[0] if out else ""
    except Exception:  # noqa: BLE001
        return ""


def environment_info(device: Any = None) -> dict[str, str]:
    """GPU, driver and library versions for every row of a run."""
    dev = torch.device(device if device is not None else default_device())
    info = {
        "git_commit": os.environ.get("FP4MOE_GIT_COMMIT") or _git_commit(),
        "torch_version": torch.__version__,
        "cuda_version": str(torch.version.cuda or ""),
        "gpu_name": "cpu",
        "compute_capability": "",
        "driver_version": "",
        "flashinfer_version": "",
        "triton_version": "",
        "host": platform.node(),
    }
    if dev.type == "cuda" and torch.cuda.is_available():
        cc = torch.cuda.get_device_capability(dev)
        info.update(gpu_name=torch.cuda.get_device_name(dev), compute_capability=f"{cc[0]}.{cc[1]}",
                    driver_version=_driver_version())
    try:
        import flashinfer  # noqa: PLC0415

        info["flashinfer_version"] = str(getattr(flashinfer, "__version__", ""))
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton  # noqa: PLC0415

        info["triton_version"] = str(triton.__version__)
    except Exception:  # noqa: BLE001
        pass
    return info


def to_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> DataFrame with exactly :data:`COLUMNS` (missing ones filled with NA), typed."""
    df = pd.DataFrame(list(rows))
    for c in COLUMNS:
        if c not in df:
            df[c] = pd.NA
    df = df[COLUMNS]
    return coerce(df)


def coerce(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c, d in _DTYPES.items():
        if c not in df:
            continue
        if d == "string":
            df[c] = df[c].astype("string")
        elif d == "Int64":
            df[c] = pd.to_numeric(df[c], errors="coerce").round().astype("Int64")
        elif d == "boolean":
            df[c] = df[c].astype("boolean")
        else:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    return df


def validate_frame(df: pd.DataFrame) -> None:
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"df: missing schema columns {missing}")
    bad = set(df["status"].dropna().unique()) - {"ok", "incorrect", "failed", "unsupported", "aborted"}
    if bad:
        raise ValueError(f"df: unknown status values {sorted(bad)}")


def run_dir_name(gpu_name: str, date: Optional[str] = None, tag: str = "") -> str:
    date = date or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    gpu = re.sub(r"[^A-Za-z0-9]+", "-", gpu_name).strip("-").lower() or "cpu"
    return f"{date}-{gpu}" + (f"-{tag}" if tag else "")


#: a run folder's files (see :mod:`fp4moe_diag.run_folder`)
PARTS_DIR, MANIFEST, RUN_JSON, LOCK = "parts", "manifest.json", "run.json", ".lock"
TMP_PREFIX = ".tmp-"
MANIFEST_FORMAT = 1


def atomic_write(path: Path, write: Any) -> Path:
    """``write(fileobj)`` into a temp file next to ``path`` (``.tmp-<pid>-<name>``), fsync, ``os.replace``, fsync
    the folder.  The file gets normal permissions (0666 less the umask, 0644 by default), not mkstemp's 0600; a
    kill leaves ``path`` as it was plus at most a temp file, which the next :class:`RunFolder` start removes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}-{path.name}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)
    return path


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_run(df: pd.DataFrame, out_dir: Any, name: str = "results", extra: Optional[dict] = None) -> dict[str, Path]:
    """Write ``<out_dir>/<name>.parquet`` and ``.csv`` (each atomically), then ``manifest.json`` naming both with
    the row count and sha256.  A kill in between leaves an old manifest that no longer matches: :func:`load_run`
    then trusts the parts (or refuses), never a torn pair."""
    validate_frame(df)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    pq, csv = out / f"{name}.parquet", out / f"{name}.csv"
    atomic_write(pq, lambda f: df.to_parquet(f, index=False))
    atomic_write(csv, lambda f: f.write(df.to_csv(index=False).encode()))
    manifest = {"format": MANIFEST_FORMAT, "rows": int(len(df)), **(extra or {}),
                "files": {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in (pq, csv)}}
    atomic_write(out / MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1, sort_keys=True).encode()))
    return {"parquet": pq, "csv": csv, "manifest": out / MANIFEST}


def default_runs_root() -> Path:
    return RUNS_ROOT


def _read_csv(p: Path) -> pd.DataFrame:
    return coerce(pd.read_csv(p, keep_default_na=True, dtype={c: "string" for c, d, _ in SCHEMA if d == "string"}))


def part_files(run_dir: Path, config_hash: Optional[str] = None) -> list[Path]:
    """The per-case part files of a run folder (those of ``config_hash`` only, when given), oldest first."""
    d = Path(run_dir) / PARTS_DIR
    if not d.is_dir():
        return []
    parts = [p for p in d.glob("*.parquet") if not p.name.startswith(TMP_PREFIX)]
    if config_hash is not None:
        parts = [p for p in parts if p.stem.rpartition("@")[2] == config_hash]
    return sorted(parts, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _run_config_hash(run_dir: Path) -> Optional[str]:
    try:
        return json.loads((run_dir / RUN_JSON).read_text()).get("config_hash")
    except (OSError, ValueError):
        return None


def read_parts(run_dir: Path, config_hash: Optional[str] = None) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in part_files(run_dir, config_hash)]
    return coerce(pd.concat(frames, ignore_index=True)) if frames else to_frame([])


def load_run(path: Any) -> pd.DataFrame:
    """One run folder -> its rows.  Trusts, in this order: the per-case parts (``parts/``, those of the run's
    current configuration); else ``manifest.json`` (the parquet, or the CSV, whose sha256 and row count match
    it); else a run without a manifest (older runs): parquet and CSV must agree in row count, and a CSV-only
    run is read from the CSV.  A missing path, a folder with no results or a torn pair -> ValueError."""
    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"path: {d} is not a run folder (it does not exist or is not a directory)")
    if part_files(d):
        df = read_parts(d, _run_config_hash(d))
    elif (d / MANIFEST).is_file():
        man = json.loads((d / MANIFEST).read_text())
        df = None
        for name, info in sorted(man.get("files", {}).items(), key=lambda kv: not kv[0].endswith(".parquet")):
            p = d / name
            if p.is_file() and sha256_file(p) == info.get("sha256"):
                df = pd.read_parquet(p) if name.endswith(".parquet") else _read_csv(p)
                break
        if df is None or len(df) != man.get("rows"):
            raise ValueError(f"path: {d}: no results file matches {MANIFEST} (a write was interrupted and there are "
                             "no parts to rebuild from)")
    else:
        pq, csv = d / "results.parquet", d / "results.csv"
        if pq.is_file():
            df = pd.read_parquet(pq)
            if csv.is_file():
                n_csv = len(pd.read_csv(csv, usecols=[0]))
                if n_csv != len(df):
                    raise ValueError(f"path: {d}: results.parquet ({len(df)} rows) and results.csv ({n_csv} rows) "
                                     "disagree and there is no manifest to say which is whole")
        elif csv.is_file():
            df = _read_csv(csv)
        else:
            raise ValueError(f"path: {d} has no results (no parts/, results.parquet or results.csv)")
    if "run_id" not in df or df["run_id"].isna().all():
        df["run_id"] = d.name
    return coerce(df)


def is_run_folder(d: Path) -> bool:
    return d.is_dir() and any((d / n).exists() for n in (PARTS_DIR, MANIFEST, "results.parquet", "results.csv"))


def load_runs(root: Any = None, pattern: Optional[str] = None, *, allow_empty: bool = True) -> pd.DataFrame:
    """Concatenate the runs under ``root`` (default ``data/runs``): every sub-folder that is a run (CSV-only runs
    included), or the folders holding the files ``pattern`` matches (e.g. ``"*/results.parquet"``); ``root``
    itself when it is a run.  A missing ``root`` -> ValueError; no runs -> an empty frame, or ValueError when
    ``allow_empty`` is False."""
    root = Path(root) if root is not None else default_runs_root()
    if not root.is_dir():
        raise ValueError(f"root: {root} does not exist or is not a directory")
    if pattern is not None:
        dirs = sorted({p.parent for p in root.glob(pattern)})
    elif is_run_folder(root) and not any(is_run_folder(c) for c in root.iterdir()):
        dirs = [root]
    else:
        dirs = sorted(c for c in root.iterdir() if is_run_folder(c))
    frames = [load_run(d) for d in dirs]
    if not frames:
        if not allow_empty:
            raise ValueError(f"root: no run folders under {root}" + (f" matching {pattern!r}" if pattern else ""))
        return to_frame([])
    return coerce(pd.concat(frames, ignore_index=True))
