"""The headline of a comparison: one line per shape, one column group per kernel backend.

Built on :func:`.tables.x_of_best` (every backend's best tactic against the best of all backends on the
same GPU, case and token count; FlashInfer backends told apart by version, ``cutlass@0.7.4``).  Each
backend gets its best time, ``x_of_best`` and its share of the read-only streaming ceiling
(``frac_bw_roofline``); each shape also gets the fastest backend's achieved TFLOP/s and its share of the
measured bf16 GEMM ceiling, the prefill yardstick.  :func:`headline_markdown` renders it as the README's
tables; ``python -m fp4moe_diag headline RUN_DIR ...`` prints it for any set of run folders.  Pure pandas.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import pandas as pd

from ..measure import SUSTAIN_S
from .builds import release_tactic_mismatches
from .duels import CLOCK_GAP
from .tables import BF16_CLOCK_COLUMNS, with_run_ceilings, x_of_best

SHAPE = ["gpu_name", "model", "ep_size", "has_bias", "num_tokens"]


def headline_table(df: pd.DataFrame, backends: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """One row per shape (GPU x model x EP x T) with, per backend ``b``: ``b:us`` (best median time),
    ``b:tactic``, ``b:x_of_best``, ``b:frac_read`` (share of the read ceiling) and ``b:clock_mhz`` (the SM clock
    its best row read as its repeats finished, NaN where none was read), and per shape
    ``best_backend``, ``best_us``, ``best_TFLOPs`` and ``best_frac_bf16`` (of the fastest backend's best row), and
    ``b:precision`` (``kernel_precision``: a W4A8 backend's x of best is against the best bf16-activation kernel and
    its column says so; it is never the fastest).

    ``backends`` picks and orders the column groups (names as :func:`x_of_best` gives them); a name that
    no shape has is a ``ValueError`` naming the ones there are.  A backend not measured at a shape is NaN; a shape none of them measured
    has no line."""
    x = x_of_best(with_run_ceilings(df))  # a sweep run without ceilings: its run folder's
    have = list(dict.fromkeys(x["backend"].astype(str)))
    if backends is None:
        backends = sorted(have, key=lambda b: (b.startswith("cutlass"), b.startswith("triton"), b))
    else:
        unknown = [b for b in backends if b not in have]
        if unknown:
            raise ValueError(f"backends: {unknown} not measured in these rows; there are {have}")
    out = x[SHAPE].drop_duplicates().reset_index(drop=True)
    for b in backends:
        part = x[x["backend"] == b][SHAPE + ["best_us", "best_tactic", "x_of_best", "frac_bw_roofline",
                                              "kernel_precision", "best_sm_clock_mhz"]]
        part = part.rename(columns={"best_us": f"{b}:us", "best_tactic": f"{b}:tactic",
                                    "x_of_best": f"{b}:x_of_best", "frac_bw_roofline": f"{b}:frac_read",
                                    "kernel_precision": f"{b}:precision", "best_sm_clock_mhz": f"{b}:clock_mhz"})
        out = out.merge(part, on=SHAPE, how="left")
    top = x[x["x_of_best"] == 1.0].drop_duplicates(SHAPE)
    top = top[SHAPE + ["backend", "best_us", "achieved_TFLOPs", "frac_flops_roofline"]].rename(
        columns={"backend": "best_backend", "achieved_TFLOPs": "best_TFLOPs", "frac_flops_roofline": "best_frac_bf16"})
    out = out.merge(top, on=SHAPE, how="left")
    out = out[out[[f"{b}:us" for b in backends]].notna().any(axis=1)]  # a shape none of them measured: no line
    return out.sort_values(SHAPE).reset_index(drop=True)


def several_gpus(table: pd.DataFrame) -> bool:
    """Whether ``table``'s rows come from more than one GPU (then a Markdown table of it needs a GPU column)."""
    return "gpu_name" in table and table["gpu_name"].dropna().astype(str).nunique() > 1


def table_backends(table: pd.DataFrame) -> list[str]:
    """The backends of a :func:`headline_table`, in its column order (one ``b:us`` column each)."""
    return [c[:-3] for c in table.columns if c.endswith(":us")]


def gpu_label(name: object) -> str:
    """A GPU column's cell: the device name without its vendor prefix."""
    return str(name).removeprefix("NVIDIA ")


def _num(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.1f}" if abs(v) < 100 else f"{v:,.0f}"


def headline_markdown(table: pd.DataFrame, backends: Optional[Sequence[str]] = None) -> str:
    """The table of :func:`headline_table` as Markdown: per backend ``time us (x of best, % of read ceiling)``,
    the fastest in bold; then the fastest backend's TFLOP/s and share of the bf16 ceiling.  Rows of more than one GPU
    (an H200 and an H100 run, say) start with a GPU column: the same shape on two cards is two lines."""
    if table is None or table.empty:
        raise ValueError("table: headline_markdown needs the rows of headline_table, got none")
    if backends is None:
        backends = table_backends(table)
    other = {b for b in backends if f"{b}:precision" in table
             and (table[f"{b}:precision"].dropna().astype(str) != "w4a16").any()}
    per_gpu = several_gpus(table)
    head = (["GPU"] if per_gpu else []) + ["model", "EP", "T", *[f"{b} us (x best, % read)" if b not in other else
                                  f"{b} us (x best bf16: other precision, % read)" for b in backends],
            "fastest: TFLOP/s (% bf16)"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for _, r in table.iterrows():
        model = str(r["model"]) + ("" if r.get("has_bias", True) in (True, None) or pd.isna(r.get("has_bias")) else
                                   " (no bias)")
        cells = ([gpu_label(r["gpu_name"])] if per_gpu else []) + [model, str(r["ep_size"]), str(r["num_tokens"])]
        for b in backends:
            us = r.get(f"{b}:us", math.nan)
            if pd.isna(us):
                cells.append("-")
                continue
            frac = r.get(f"{b}:frac_read", math.nan)
            pct = "" if pd.isna(frac) else f", {100 * frac:.0f} %"
            best = r.get("best_backend")  # NA where only W4A8 kernels ran (they are never the best)
            t = f"**{_num(us)}**" if isinstance(best, str) and best == b else _num(us)
            x = r.get(f"{b}:x_of_best", math.nan)
            cells.append(f"{t} ({'-' if pd.isna(x) else f'{x:.2f}x'}{pct})")
        tf, fb = r.get("best_TFLOPs", math.nan), r.get("best_frac_bf16", math.nan)
        cells.append("-" if pd.isna(tf) else f"{tf:.0f}" + ("" if pd.isna(fb) else f" ({100 * fb:.0f} %)"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def release_note(df: pd.DataFrame) -> str:
    """One line under a headline whose Triton-built columns (``triton@3.6.0``, ``triton@3.7.1``) were given different
    tactics at some shapes (:func:`.builds.release_tactic_mismatches`): there a column pair compares tactic sets as well
    as releases; ``headline --common-tactics`` compares the tactics both ran.  Empty when like for like."""
    m = release_tactic_mismatches(df)
    if m.empty:
        return ""
    parts = [f"{b} ({len(g)} shapes, {g['tactics'].iloc[0]} tactics, {g['common'].iloc[0]} in common)"
             for b, g in m.groupby("backend", sort=True)]
    return ("Not like for like: the Triton releases were given different tactics for " + "; ".join(parts)
            + " (the counts at the first such shape); --common-tactics compares only the tactics every release ran.")


def clock_note(table: pd.DataFrame, backends: Optional[Sequence[str]] = None) -> str:
    """One line under a headline where, at some shapes, the backends' best rows were timed at SM clocks more than
    :data:`CLOCK_GAP` apart (``b:clock_mhz``): there a column pair compares clocks as well as kernels (on the H100,
    a power-limited 20b EP1 T=16384 ran at 1455-1935 MHz; session 21). Empty where the clocks agree or none was
    read. A duel (``profiling.duel``, alternating rounds) compares two kernels at the same clocks."""
    if backends is None:
        backends = table_backends(table)
    cols = [f"{b}:clock_mhz" for b in backends if f"{b}:clock_mhz" in table]
    if len(cols) < 2:
        return ""
    clk = table[cols].apply(pd.to_numeric, errors="coerce")
    clk = clk.where(clk > 0)
    gap = clk.max(axis=1) / clk.min(axis=1)
    apart = table[(clk.notna().sum(axis=1) >= 2) & (gap > CLOCK_GAP)]
    if apart.empty:
        return ""
    parts = []
    for i, r in apart.iterrows():
        each = ", ".join(f"{c[:-10]} {clk.loc[i, c]:,.0f}" for c in cols if pd.notna(clk.loc[i, c]))
        parts.append(f"{r['model']} EP{r['ep_size']} T={r['num_tokens']} ({each} MHz)")
    return (f"Not like for like in clocks at {len(parts)} shape(s): the best rows were timed at SM clocks more than "
            f"{100 * (CLOCK_GAP - 1):.0f} % apart: " + "; ".join(parts) + ". A duel compares them at the same clocks.")


def ceiling_note(df: pd.DataFrame) -> str:
    """One line under a headline whose rows measured the bf16 ceiling twice (:class:`..measure.ceilings.Ceilings`):
    the ``% bf16`` column is of the first figure (GEMMs from a cold start); a GEMM after seconds of them, the load a
    long prefill call runs under, sustains less.  Per GPU, the medians over its rows; empty where none measured it."""
    cols = ["ceiling_bf16_TFLOPs", *BF16_CLOCK_COLUMNS]
    if not set(cols) <= set(df.columns):
        return ""
    d = df[["gpu_name", *cols]].copy()
    d[cols] = d[cols].apply(pd.to_numeric, errors="coerce")
    d = d[d["ceiling_bf16_sustained_TFLOPs"].notna()]
    parts = []
    for gpu, g in d.groupby("gpu_name", sort=True):
        burst, at, held, held_at = (g[c].median() for c in cols)
        mhz = lambda v: "" if pd.isna(v) else f" at {v:,.0f} MHz"  # noqa: E731
        parts.append(f"{gpu_label(gpu)}: {burst:.0f} TFLOP/s{mhz(at)} from cold, {held:.0f}{mhz(held_at)} after "
                     f"{SUSTAIN_S:g} s ({100 * held / burst:.0f} %)")
    if not parts:
        return ""
    return ("% bf16 is of the bf16 GEMM timed from a cold start; after seconds of GEMMs (a long prefill call's load) "
            "it sustains less: " + "; ".join(parts) + ".")
