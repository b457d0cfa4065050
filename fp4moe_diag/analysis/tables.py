"""The report's tables from the tidy results frame: summaries per backend, status counts, failures,
provenance, how far each backend is from the best, the sweep's closing text table.  Pure pandas."""

from __future__ import annotations

import math
from typing import Optional

import pandas as pd

from .builds import backend_label
from .correctness import correctness_summary
from .per_shape import CASE_COLUMNS, DECODE_MAX_TOKENS, best_per_shape, latest_per_shape


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
    tables["correctness"] = correctness_summary(df)
    tables["provenance"] = provenance_table(df)
    return tables


def provenance_table(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["run_id", "gpu_name", "compute_capability", "driver_version", "torch_version", "cuda_version",
            "flashinfer_version", "triton_version", "triton_ptxas", "git_commit", "time_method"]
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


SUMMARY_COLUMNS = [
    "model", "ep_size", "num_tokens", "backend", "tactic_label", "status", "time_median_us",
    "time_spread", "frac_bw_roofline", "rel_l2", "correct", "is_best", "is_default_tactic",
]


def summary_table(df: pd.DataFrame, max_rows: int = 150) -> str:
    """The sweep's closing table: every row when there are at most ``max_rows``, else per case x
    backend the best, the default and the combined tactic only (with default/best)."""
    cols = [c for c in SUMMARY_COLUMNS if c in df]
    d = df
    head = ""
    if len(df) > max_rows:
        keep = df["is_best"].fillna(False).astype(bool) | df["is_default_tactic"].fillna(False).astype(bool)
        keep |= df["tactic_label"].astype(str).str.contains(r"\+", regex=True) | (df["status"] != "ok")
        d = df[keep].copy()
        key = ["model", "ep_size", "num_tokens", "backend"]
        best = (df[df["is_best"].fillna(False).astype(bool)].groupby(key, dropna=False)["time_median_us"].first()
                .rename("_best").reset_index())
        d = d.merge(best, on=key, how="left")
        d["x_best"] = d["time_median_us"] / d["_best"]
        cols = cols + ["x_best"]
        head = (f"{len(df)} rows; shown: best, default and combined tactic per case x backend, and rows that are "
                f"not ok (x_best = time / best time)\n")
    with pd.option_context("display.width", 220, "display.max_rows", 2000):
        return head + d[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}")


def _precisions(df: pd.DataFrame) -> dict:
    """backend -> its rows' ``kernel_precision`` (rows from before that column: bf16 activations, ``w4a16``)."""
    if "kernel_precision" not in df:
        return {}
    kp = df["kernel_precision"].astype("string")
    return {b: str(v.dropna().iloc[0]) for b, v in kp.groupby(df["backend"].astype(str)) if v.notna().any()}


def x_of_best(df: pd.DataFrame) -> pd.DataFrame:
    """How far each backend is from the best kernel on the GPU, per shape (GPU x case x T, one run per shape).

    One row per shape x backend: the backend's best tactic and time, the best backend of the shape and its
    time, ``x_of_best`` (this backend's best time / the best of all backends; 1.0 = the fastest),
    ``frac_bw_roofline`` (weight + activation bytes over the read-only streaming ceiling), ``achieved_TFLOPs`` and
    ``frac_flops_roofline`` (of the bf16 GEMM ceiling) and ``best_sm_clock_mhz`` of that tactic, and the time method.  The reference backend is
    left out (it is the float32 check, not a kernel).  FlashInfer's backends are told apart by version and build
    (``cutlass@0.7.4``, ``cutlass@0.7.4 (fast build)``), the Triton-built ones by Triton release where the rows hold
    several (``triton@3.7.1``; :func:`.builds.backend_label`): each is a kernel of its own.
    Like for like: the best is the best *bf16-activation* kernel (``kernel_precision`` w4a16); a backend of another
    precision (W4A8: FP8 activations) gets its time over that best, never becomes the best itself, and carries its
    ``kernel_precision`` so that a table can say so.  FlashInfer's autotuner picks (``cutlass_autotune``) are left out
    (they are tactics of ``cutlass``, not a backend: :mod:`.tuner`)."""
    df = df[df["backend"] != "cutlass_autotune"].copy()
    df["backend"] = backend_label(df)
    best = latest_per_shape(best_per_shape(df), df)
    best = best[(best["backend"] != "reference") & best["best_us"].notna()].copy()
    if best.empty:
        raise ValueError("df: x_of_best needs ok rows of at least one kernel backend")
    shape = ["gpu_name", *CASE_COLUMNS, "num_tokens"]
    prec = _precisions(df)
    best["kernel_precision"] = [prec.get(str(b), "w4a16") for b in best["backend"]]
    bf16 = best[best["kernel_precision"] == "w4a16"]  # like for like: the best of the bf16-activation kernels
    top = bf16.loc[bf16.groupby(shape, dropna=False)["best_us"].idxmin(), shape + ["backend", "best_us"]]
    top = top.rename(columns={"backend": "best_backend", "best_us": "best_of_all_us"})
    out = best.merge(top, on=shape, how="left")
    out["x_of_best"] = out["best_us"] / out["best_of_all_us"]
    methods = df.groupby(["run_id", "backend"], dropna=False)["time_method"].agg(
        lambda s: ", ".join(sorted(set(s.dropna().astype(str)) - {""}))).rename("time_method").reset_index()
    out = out.merge(methods.astype({"run_id": "string", "backend": "string"}),
                    on=["run_id", "backend"], how="left")
    cols = ["gpu_name", "model", "ep_size", "has_bias", "num_tokens", "backend", "kernel_precision", "best_tactic",
            "best_us", "best_backend",
            "best_of_all_us", "x_of_best", "frac_bw_roofline", "achieved_GBps", "achieved_TFLOPs",
            "frac_flops_roofline", "best_sm_clock_mhz", "time_method", "run_id"]
    return out[cols].sort_values(["gpu_name", "model", "ep_size", "has_bias", "num_tokens", "x_of_best"]
                                 ).reset_index(drop=True)


#: the bf16 ceiling's SM clock, its sustained figure and that figure's clock
#: (:meth:`..measure.ceilings.Ceilings.as_dict`), where a run measured them (from session 25)
BF16_CLOCK_COLUMNS = ("ceiling_bf16_sm_clock_mhz", "ceiling_bf16_sustained_TFLOPs",
                      "ceiling_bf16_sustained_sm_clock_mhz")


def with_run_ceilings(df: pd.DataFrame) -> pd.DataFrame:
    """Rows without ceilings (a sweep run with ``--no-ceilings``) take the ceilings that another sweep measured in
    the same run folder on the same GPU (their median), and their ``frac_flops_roofline`` / ``frac_bw_roofline`` from them; rows of a run
    that measured none stay without (goals 2-4 then say "not compared")."""
    d = df.copy()
    for c in ("ceiling_read_GBps", "ceiling_bf16_TFLOPs", *(c for c in BF16_CLOCK_COLUMNS if c in d)):
        d[c] = d[c].fillna(d.groupby(["run_id", "gpu_name"], dropna=False)[c].transform("median"))
    d["frac_flops_roofline"] = d["frac_flops_roofline"].fillna(d["achieved_TFLOPs"] / d["ceiling_bf16_TFLOPs"])
    if "achieved_GBps" in d and "frac_bw_roofline" in d:
        d["frac_bw_roofline"] = d["frac_bw_roofline"].fillna(d["achieved_GBps"] / d["ceiling_read_GBps"])
    return d
