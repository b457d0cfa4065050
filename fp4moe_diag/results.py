"""One tidy DataFrame schema for every measurement: one row per case x backend x tactic.

:data:`SCHEMA` is the single source of truth (the README's table is generated from it by
:func:`schema_markdown`); :func:`to_frame` / :func:`coerce` / :func:`conform` make and check frames of it, and
:func:`read_results_file` reads one file.  Run folders (writing and reading them) are :mod:`fp4moe_diag.run_folder`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .measure import SUSTAIN_S

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
    ("flashinfer_build", "string", "FlashInfer's CUTLASS MoE module: the prebuilt file's name (FP4MOE_CUTLASS_MODULE, e.g. "
     "fused_moe_90_slim074_full: every tactic; fused_moe_90_slim074: the fast build), 'stock' (FlashInfer's own JIT "
     "build) or '' (no FlashInfer)"),
    ("triton_version", "string", "triton.__version__ ('' without Triton); '+ptxasX.Y' after it where TRITON_PTXAS_PATH "
     "or TRITON_PTXAS_BLACKWELL_PATH points Triton at a ptxas other than the one it ships"),
    ("triton_ptxas", "string", "version of the ptxas that built the row's kernels: Triton's for this GPU (3.9: CUDA "
     "13.4 from sm_90 on; 3.6, 3.7: 12.8 below sm_100), our -tNf tactics' on sm_90 where that one serialises them "
     "(3.9: its 12.9; FP4MOE_TNF_PTXAS); '' on CPU"),
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
    ("backend", "string", "reference | cutlass | trtllm | triton | triton_w4a8 | ... (fp4moe_diag.backends)"),
    ("kernel_precision", "string", "what the kernel computes in: w4a16 (4-bit weights, bf16 activations), w4a8 (FP8 "
                                   "activations: triton_w4a8, cutlass_humming), fp32 (the reference backend)"),
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
                              "tactics, the default and the combined tactic are re-timed in full; with --interleave "
                              "the mean of a forward and a reverse screen), or interleaved: re-timed in full in "
                              "--interleave's alternating rounds"),
    ("time_screen_median_us", "float64", "with --screen: the screen's median (us), kept when the tactic is re-timed in "
                                         "full: what picked the finalists"),
    ("time_spread", "float64", "(p90 - p10) / median"),
    ("time_sm_clock_mhz", "float64", "SM clock (MHz, NVML) read as the timed repeats finish; empty on CPU or without "
                                     "NVML"),
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
    ("time_kernel_breakdown", "string", "JSON {kernel name: median us per call} of the same profile, slowest first "
     "(names cut at 160 characters): which kernels a call ran and where its time went"),
    ("frac_bw_roofline", "float64", "achieved bytes/s over the measured read-only streaming ceiling (copy where unmeasured)"),
    ("frac_flops_roofline", "float64", "achieved FLOP/s over the measured bf16 GEMM ceiling"),
    ("ceiling_copy_GBps", "float64", "measured device copy (read + write) GB/s in this run"),
    ("ceiling_bf16_TFLOPs", "float64", "measured bf16 GEMM TFLOP/s in this run"),
    ("ceiling_read_GBps", "float64", "measured read-only streaming GB/s in this run (float32 sum over 2 GiB; empty when "
                                     "below 0.8 x the copy ceiling)"),
    ("ceiling_datasheet_GBps", "float64", "the GPU's datasheet HBM bandwidth, GB/s (H200: 4800)"),
    ("ceiling_bf16_sm_clock_mhz", "float64", "the SM clock (MHz, NVML) the ceiling_bf16_TFLOPs GEMMs ran at"),
    ("ceiling_bf16_sustained_TFLOPs", "float64", f"the bf16 GEMM again after {SUSTAIN_S:g} s of them (the power "
                                                 "limit's clock)"),
    ("ceiling_bf16_sustained_sm_clock_mhz", "float64", "the SM clock (MHz) of ceiling_bf16_sustained_TFLOPs"),
    ("rel_l2", "float64", "||out - ref|| / ||ref|| vs the float32 reference; w4a8 rows of triton_w4a8: vs the W4A8 "
                          "reference, which quantizes activations and weights as its kernels do"),
    ("rel_l2_bf16_ref", "float64", "||out - ref|| / ||ref|| vs the float32 reference of the bf16 activations, what "
                                   "rel_l2 is for the w4a16 rows (equal to it there): the accuracy next to the bf16 path"),
    ("max_abs_err", "float64", "max |out - ref|"),
    ("mean_abs_err", "float64", "mean |out - ref|"),
    ("cosine", "float64", "cosine similarity of out and ref"),
    ("frac_tokens_over_tol", "float64", "tokens whose relative error exceeds 5e-2"),
    ("worst_token", "Int64", "index of the token with the largest relative error"),
    ("nan_count", "Int64", "NaN elements in the output"),
    ("inf_count", "Int64", "Inf elements in the output"),
    ("unwritten_rows", "Int64", "rows left at the NaN poison (never written)"),
    ("ref_abs_mean", "float64", "mean |ref| (scale of the numbers compared)"),
    ("correct", "boolean", "within the FP4 tolerances (see correctness.py); triton_w4a8: rel_l2 <= 2e-2 against its "
                           "own reference"),
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


STATUSES = ("ok", "incorrect", "failed", "unsupported", "aborted")

#: columns a run written before they joined the schema may lack (read as empty; ``run_id``: the folder's name)
ADDED_LATER = ("run_id", "flashinfer_build", "rank", "world_size", "time_capture_error", "timing_pass",
               "time_median_us_repeat", "noise_ratio", *(f"time_kernel_{s}" for s in (
                   "median_us", "p10_us", "p90_us", "spread", "span_median_us", "count", "method", "breakdown")),
               "ceiling_read_GBps", "ceiling_datasheet_GBps", "input_source", "recorded_rel_l2", "matches_recorded",
               "kernel_precision", "rel_l2_bf16_ref", "time_sm_clock_mhz", "time_screen_median_us",
               "ceiling_bf16_sm_clock_mhz", "ceiling_bf16_sustained_TFLOPs", "ceiling_bf16_sustained_sm_clock_mhz", "triton_ptxas")
_BOOLS = {True: True, False: False, "True": True, "False": False, "true": True, "false": False, "1": True, "0": False}


def validate_frame(df: pd.DataFrame) -> None:
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"df: missing schema columns {missing}")
    bad = set(df["status"].dropna().unique()) - set(STATUSES)
    if bad:
        raise ValueError(f"df: unknown status values {sorted(bad)}")


def _bad_values(s: pd.Series, dtype: str) -> pd.Series:
    """Where ``s`` holds a value its schema ``dtype`` cannot (missing values are fine)."""
    given = s.notna()
    if dtype in ("Int64", "float64"):
        num = pd.to_numeric(s.astype(object).where(given, None), errors="coerce")
        bad = given & num.isna()
        return bad | (given & num.notna() & (num % 1 != 0)) if dtype == "Int64" else bad
    if dtype == "boolean":
        return given & ~s.astype(object).map(lambda v: isinstance(v, (bool, int, str)) and v in _BOOLS)
    return pd.Series(False, index=s.index)


def conform(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """A frame read from ``source`` (a results or part file) -> typed schema columns first, columns that joined
    the schema later (:data:`ADDED_LATER`) filled with NA.  A missing schema column, a value the column's type
    cannot hold (``num_tokens`` "abc") or an unknown ``status`` is a ``ValueError`` naming the file and column."""
    missing = [c for c in COLUMNS if c not in df.columns and c not in ADDED_LATER]
    if missing:
        raise ValueError(f"{source}: missing schema column(s) {missing} (see fp4moe_diag.results.SCHEMA); not a "
                         "results file of this suite, or a damaged one")
    for c, d in _DTYPES.items():
        if c in df.columns:
            bad = _bad_values(df[c], d)
            if bad.any():
                rows = bad[bad].index.tolist()
                raise ValueError(f"{source}: column {c!r} ({d}) holds {df[c][bad].head(3).tolist()} at row(s) "
                                 f"{rows[:3]}{' ...' if len(rows) > 3 else ''} (0-based, header not counted); "
                                 f"expected {d} values or empty")
    unknown = sorted(set(df["status"].dropna().astype(str)) - set(STATUSES))
    if unknown:
        raise ValueError(f"{source}: column 'status' holds {unknown}; expected one of {list(STATUSES)}")
    df = df.copy()
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = pd.NA
        elif _DTYPES[c] == "boolean":
            df[c] = df[c].astype(object).map(lambda v: _BOOLS.get(v, v) if pd.notna(v) else pd.NA)
    return coerce(df[COLUMNS + [c for c in df.columns if c not in COLUMNS]])


def read_results_file(path: Any) -> pd.DataFrame:
    """One ``.parquet`` or ``.csv`` results (or part) file -> a schema frame (:func:`conform`)."""
    p = Path(path)
    strings = {c: "string" for c, d, _ in SCHEMA if d == "string"}
    return conform(pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p, dtype=strings), str(p))
