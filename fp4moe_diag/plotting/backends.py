"""Backends compared: roofline fraction of the best tactic, best time per backend."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..analysis.per_shape import (CASE_COLUMNS, DECODE_MAX_TOKENS, SHAPE_COLUMNS, best_per_shape, commit_label,
                               latest_per_shape, one_run_per_line, require_frame)
from ..analysis.tables import x_of_best
from .common import (ROOFLINE_GOAL, _CASE_MARKERS, _CASE_STYLES, _backend_color, _case_frame,
                     _time_axis, _title, _tokens_axis)


# --------------------------------------------------------------------------- 4. roofline fraction
def ceilings_used(df: pd.DataFrame) -> tuple[str, str]:
    """What ``frac_bw_roofline`` was divided by in the rows that have one: ``(name, caption)``, e.g.
    ``("read ceiling", " (read ceiling: 4420 GB/s)")``.  Rows without a read-only ceiling (older runs, or one
    below 0.8x the copy) used the copy ceiling; both are named when the frame mixes them."""
    def col(name: str) -> pd.Series:
        return pd.to_numeric(df[name], errors="coerce") if name in df else pd.Series(math.nan, index=df.index)

    has = col("frac_bw_roofline").notna()
    read, copy = col("ceiling_read_GBps")[has], col("ceiling_copy_GBps")[has]
    used_read, used_copy = read.notna().any(), (read.isna() & copy.notna()).any()
    parts = ([f"read ceiling: {read.median():.0f} GB/s"] if used_read else []) + (
        [f"copy ceiling: {copy[read.isna()].median():.0f} GB/s"] if used_copy else [])
    name = ("read (or copy) ceiling" if used_read and used_copy
            else "copy ceiling" if used_copy else "read ceiling")
    return name, f" ({'; '.join(parts)})" if parts else ""


def roofline_fraction(df: pd.DataFrame, *, goal: float = ROOFLINE_GOAL,
                      decode_max_tokens: int = DECODE_MAX_TOKENS) -> Figure:
    """``frac_bw_roofline`` of the best tactic per shape vs tokens, one line per backend x shape.

    ``frac_bw_roofline`` is against the read-only streaming ceiling measured in the same run (runs without a
    read ceiling, older or implausible ones, used the copy ceiling: the title says which).  Shaded: decode shapes
    (T <= ``decode_max_tokens``), whose points are drawn larger; red dashed: the goal (default 60 % of that
    ceiling).
    """
    require_frame(df, "roofline_fraction", ["frac_bw_roofline", "status", "time_median_us", *SHAPE_COLUMNS])
    best = latest_per_shape(best_per_shape(df), df)
    best = best[best["frac_bw_roofline"].notna() & np.isfinite(best["frac_bw_roofline"].astype(float))]
    if best.empty:
        raise ValueError("df: roofline_fraction needs rows with frac_bw_roofline; none of the best tactics has "
                         "one (runs without measured ceilings, e.g. CPU runs or --no-ceilings, leave it empty)")
    cases = _case_frame(best)
    multi_gpu = best["gpu_name"].nunique() > 1
    ceiling, caption = ceilings_used(df[df["run_id"].isin(best["run_id"])])
    fig = Figure(figsize=(10, 5.8), layout="constrained")
    ax = fig.add_subplot()
    tokens = best["num_tokens"].astype(int).tolist()
    ax.axvspan(min(tokens) / 1.3, min(decode_max_tokens * 1.15, max(tokens) * 1.3), color="#fff2cc", alpha=0.8,
               zorder=0, label=f"decode shapes (T ≤ {decode_max_tokens} tokens)")
    ax.axhline(goal, color="#d62728", ls="--", lw=1.6, zorder=2, label=f"goal: {goal:.0%} of the measured {ceiling}")
    backends = sorted(best["backend"].unique())
    gpus = sorted(best["gpu_name"].unique())
    for (b, gpu), g0 in best.groupby(["backend", "gpu_name"]):
        for ci, c in cases.iterrows():
            g = g0[_case_mask(g0, c)].sort_values("num_tokens")
            if g.empty:
                continue
            color = _backend_color(b, backends.index(b))
            k = ci + len(cases) * gpus.index(gpu)
            marker = _CASE_MARKERS[k % len(_CASE_MARKERS)]
            x = g["num_tokens"].astype(float).to_numpy()
            y = g["frac_bw_roofline"].to_numpy(dtype=float)
            name = f"{b}: {c['case_label']}" + (f" · {gpu}" if multi_gpu else "") + " (best tactic)"
            ax.plot(x, y, color=color, lw=1.6, ls=_CASE_STYLES[k % len(_CASE_STYLES)], marker=marker, ms=3.5,
                    zorder=3, label=name)
            dec = x <= decode_max_tokens
            ax.plot(x[dec], y[dec], ls="none", marker=marker, ms=8, mfc=color, mec="black", mew=0.9, zorder=4,
                    label="_nolegend_")
    _tokens_axis(ax, tokens)
    vals = best["frac_bw_roofline"].astype(float)
    ymax, ymin = float(vals.max()), float(vals[vals > 0].min()) if (vals > 0).any() else 1e-3
    if ymax < goal / 2 or ymin < ymax / 20:  # small fractions: a log axis keeps them readable next to the goal
        ax.set_yscale("log")
        ax.set_ylim(max(ymin / 2, 1e-4), max(1.0, ymax * 1.3))
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        scale = "log scale"
    else:
        ax.set_ylim(0, max(1.0, ymax * 1.08))
        scale = "linear"
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v * 100:.3g}%"))
    if len(best) <= 40:
        for _, r in best.iterrows():
            ax.annotate(f"{r['frac_bw_roofline']:.1%}", (float(r["num_tokens"]), float(r["frac_bw_roofline"])),
                        xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7, color="#333333")
    ax.set_ylabel(f"achieved bytes/s ÷ measured {ceiling} (%, {scale})")
    ax.grid(True, alpha=0.35)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    _title(fig, f"Memory-bandwidth roofline fraction of the best tactic{caption}", df)
    return fig


# --------------------------------------------------------------------------- 6. backend comparison
def backend_comparison(df: pd.DataFrame, *, max_panels: int = 12, runs: Any = None) -> Figure:
    """Best time of each backend vs tokens, one panel per shape (model x EP), log-log.

    A line is one code version: the rows of one run, by default the most recent run that measured that backend
    on that shape (``runs``: a run id for every line, or ``{backend: run_id}``); its legend names the git commit
    and the run.  (Lines stitched from many runs zigzag between the code versions that made them.)"""
    require_frame(df, "backend_comparison", ["status", "time_median_us", *SHAPE_COLUMNS])
    line_keys = ["backend", "gpu_name", *CASE_COLUMNS]
    picked = one_run_per_line(df, line_keys, runs)
    best = best_per_shape(picked)
    best = best[best["best_us"].notna()]
    if best.empty:
        raise ValueError("df: backend_comparison needs at least one shape with an 'ok' tactic timing")
    cases = _case_frame(best).head(max_panels)
    n = len(cases)
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    n_lines = int(best.groupby(["backend", "gpu_name", *CASE_COLUMNS], dropna=False).ngroups / max(n, 1)) + 1
    fig = Figure(figsize=(max(6.5, 5.2 * ncol), (3.9 + 0.2 * n_lines) * nrow + 1.0), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False)
    backends = sorted(best["backend"].unique())
    multi_gpu = best["gpu_name"].nunique() > 1
    gpus = sorted(best["gpu_name"].unique())
    styles = ["-", "--", ":", "-."]
    for k, (_, c) in enumerate(cases.iterrows()):
        ax = axes[k // ncol, k % ncol]
        g0 = best[_case_mask(best, c)]
        for (b, gpu), g in g0.groupby(["backend", "gpu_name"]):
            g = g.sort_values("num_tokens")
            rows = picked[(picked["backend"] == b) & (picked["gpu_name"] == gpu) & _case_mask(picked, c)]
            run = ", ".join(sorted(g["run_id"].astype(str).unique()))
            label = f"{b} @ {commit_label(rows)} (run {run})" + (f" · {gpu}" if multi_gpu else "")
            ax.plot(g["num_tokens"].astype(float), g["best_us"].astype(float), marker="o", ms=4, lw=1.8,
                    color=_backend_color(b, backends.index(b)), ls=styles[gpus.index(gpu) % len(styles)], label=label)
        _tokens_axis(ax, g0["num_tokens"].astype(int).tolist())
        _time_axis(ax)
        ax.set_title(f"{c['case_label']} (E{c['num_experts']}, top-{c['top_k']}, {c['weight_format']})", fontsize=10)
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(0.0, -0.16))  # below: run ids are long
    for k in range(n, nrow * ncol):
        axes[k // ncol, k % ncol].set_visible(False)
    _title(fig, "Backends compared: fastest correct tactic of each backend per shape (one run, one commit per line)",
           df)
    return fig


def _case_mask(frame: pd.DataFrame, case: pd.Series) -> np.ndarray:
    m = np.ones(len(frame), dtype=bool)
    for col in CASE_COLUMNS:
        m &= (frame[col].astype(str) == str(case[col])).to_numpy()
    return m


def x_of_best_figure(df: pd.DataFrame, *, max_panels: int = 12) -> Figure:
    """How far each backend is from the best kernel on the GPU: per shape panel, each backend's best time over the
    best of all backends vs tokens (1.0 = the fastest), with its read-roofline fraction on a second row."""
    table = x_of_best(df)
    ceiling = ceilings_used(df)[0]
    cases = table[["gpu_name", "model", "ep_size", "has_bias"]].drop_duplicates().head(max_panels).reset_index(drop=True)
    n = len(cases)
    fig = Figure(figsize=(5.2 * n, 7.4), layout="constrained")
    axes = fig.subplots(2, n, squeeze=False, sharex="col")
    for j, case in cases.iterrows():
        sub = table[(table["gpu_name"] == case["gpu_name"]) & (table["model"] == case["model"])
                    & (table["ep_size"] == case["ep_size"]) & (table["has_bias"] == case["has_bias"])]
        top, bottom = axes[0][j], axes[1][j]
        for i, (be, g) in enumerate(sub.groupby("backend")):
            g = g.sort_values("num_tokens")
            c = _backend_color(str(be), i)
            top.plot(g["num_tokens"], g["x_of_best"], marker="o", color=c, label=str(be))
            bottom.plot(g["num_tokens"], g["frac_bw_roofline"], marker="o", color=c, label=str(be))
        top.axhline(1.0, color="black", lw=0.8, ls=":")
        top.set_yscale("log")
        top.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: f"{y:g}x"))
        top.yaxis.set_minor_formatter(FuncFormatter(lambda y, _p: f"{y:g}x"))  # log minor ticks: 2x, 3x, not 2x10^0
        top.set_title(f"{case['model']} EP{case['ep_size']} ({case['gpu_name']})", fontsize=10)
        top.set_ylabel("best time / best of all backends (x, log)")
        bottom.set_ylabel(f"achieved bytes/s ÷ measured {ceiling}")
        bottom.set_ylim(0, max(1.0, float(sub["frac_bw_roofline"].max(skipna=True) or 0) * 1.1))
        for ax in (top, bottom):
            _tokens_axis(ax, sorted(sub["num_tokens"].astype(int).unique()))
            ax.grid(True, which="both", alpha=0.3)
        top.legend(fontsize=8)
    _title(fig, "How far from the best kernel on this GPU (best tactic of each backend)", df)
    return fig
