"""The goal report (:mod:`.goals`) as Markdown: one table per goal (shape, measured, goal, status, x needed, ours
and the peer with their tactics, the note, the measured reason), then per shape the profiled kernels of ours and
the peer (Nsight Compute: time, DRAM GB/s, SM / issue / occupancy %, registers, top stall; the folder each profile
came from and how it matches the timed tactic).  Pure pandas."""

from __future__ import annotations

import math

import pandas as pd

from .goals import GOAL_NAMES, LAUNCH_US, GoalReport
from .headline import gpu_label, several_gpus


def _model(model: str) -> str:
    return str(model).replace("gpt-oss-", "")


def shape_label(r: pd.Series, gpu: bool = False) -> str:
    """``"20b EP1 T=64"`` (``" (no bias)"`` for a shape without biases; ``gpu``: ``"H100 80GB HBM3 20b EP1 T=64"``,
    for a report over the runs of several GPUs)."""
    bias = "" if "has_bias" not in r or pd.isna(r["has_bias"]) or bool(r["has_bias"]) else " (no bias)"
    prefix = f"{gpu_label(r['gpu_name'])} " if gpu else ""
    return f"{prefix}{_model(r['model'])} EP{r['ep_size']} T={r['num_tokens']}{bias}"


def value(v: object, unit: str) -> str:
    """``"164.3 us"``, ``"2.94 TB/s"``, ``"61.8 %"``; ``-`` for a missing value."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return "-"
    f = float(v)  # type: ignore[arg-type]
    if unit == "TB/s":
        return f"{f:.2f} TB/s"
    return f"{f:,.1f} {unit}".strip()


def _who(r: pd.Series, side: str) -> str:
    b = r[f"{side}_backend"]
    if not isinstance(b, str):
        return "-"
    return f"{b} `{r[f'{side}_tactic']}`"


def _cell(text: object) -> str:
    if text is None or text is pd.NA or (isinstance(text, float) and math.isnan(text)):
        return ""
    return str(text).replace("|", "/")


def goal_section(t: pd.DataFrame, goal: int) -> list[str]:
    g = t[t["goal"] == goal]
    if g.empty:
        return []
    per_gpu = several_gpus(t)
    met, level = (g["status"] == "met").sum(), (g["status"] == "level").sum()
    beyond, chained = ((int((g[c] > g["target"]).sum()) if goal == 3 and c in g else 0)
                       for c in ("floor_us", "chain_us"))
    lines = [f"### Goal {goal}: {GOAL_NAMES[goal]} -- met at {met} of {len(g)} shapes"
             + (f", level (a duel: neither faster) at {level}" if level else "")
             + (f"; at {beyond} one kernel that only reads the weights takes longer than the goal allows (read "
                "floor)" if beyond else "")
             + (f"; at {chained} two dependent kernels that only read them (gemm1's share, then gemm2's) take "
                "longer than the goal allows" if chained else ""), "",
             "| shape | measured | goal | status | x needed | ours | peer | note | measured reason |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for _, r in g.iterrows():
        x = "-" if pd.isna(r["x_goal"]) else f"{r['x_goal']:.2f}x"
        note = _cell(r["note"])
        if goal == 5 and not pd.isna(r.get("ours_rel_l2_bf16_ref")):
            bf16 = r["bf16_rel_l2_bf16_ref"]
            note = (note + "; " if note else "") + (f"rel_l2 vs bf16 ref: w4a8 {r['ours_rel_l2_bf16_ref']:.2e}, bf16 path "
                                                    + ("not run" if pd.isna(bf16) else f"{bf16:.2e}"))
        status = f"**{r['status']}**" if r["status"] == "not met" else r["status"]
        sides = ("ours", "peer") if goal in (1, 5) else ("ours",)  # goals 2-4: the reason is ours' alone
        reason = _cell(r["reason"]) + "".join(f" [{s}: {r[f'{s}_profile']}]" for s in sides
                                              if isinstance(r[f"{s}_profile"], str))
        lines.append(f"| {shape_label(r, per_gpu)} | {value(r['measured'], r['unit'])} | "
                     f"{value(r['target'], r['unit'])} | "
                     f"{status} | {x} | {_who(r, 'ours')} | {_who(r, 'peer')} | {note} | {reason} |")
    return lines + [""]


def _num(v: object, digits: int = 0) -> str:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(f) else f"{f:,.{digits}f}"


def kernel_sections(k: pd.DataFrame) -> list[str]:
    """Per shape: a table of the profiled kernels of ours and the peer."""
    if k.empty:
        return ["No Nsight Compute profile matches a goal shape.", ""]
    lines, per_gpu = [], several_gpus(k)
    for _, g in k.groupby(["gpu_name", "model", "ep_size", "num_tokens"], sort=False):
        lines += [f"#### {shape_label(g.iloc[0], per_gpu)}", "",
                  "| side | backend | tactic (match) | from | kernel | us | DRAM GB/s | SM % | issue % | occ % | regs "
                  "| top stall |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for _, r in g.iterrows():
            match = "" if r["match"] == "exact" else f" ({r['match']})"
            lines.append(f"| {r['side']} | {r['backend']} | `{r['tactic']}`{match} | {r['source']} | {r['kernel']} | "
                         f"{_num(r['duration_us'], 1)} | {_num(r.get('dram_read_GBps'))} | "
                         f"{_num(r.get('sm_throughput_pct'))} | {_num(r.get('issue_slots_busy_pct'))} | "
                         f"{_num(r.get('achieved_occupancy_pct'))} | {_num(r.get('registers_per_thread'))} | "
                         f"{_cell(r.get('top_stall')) or '-'} |")
        lines.append("")
    return lines


def goals_markdown(report: GoalReport, launch_us: float = LAUNCH_US) -> str:
    """The whole report: a summary line per goal, a table per goal, the per-shape kernels."""
    t = report.table
    if t is None or t.empty:
        raise ValueError("report: goals_markdown needs goal rows (no goal shape was measured)")
    counts = t.groupby("goal")["status"].value_counts().unstack(fill_value=0)
    lines = ["## Issue #25 goals, per shape", "",
             f"x needed: the speed-up ours needs to meet the goal (<= 1: met). One launch = {launch_us:g} us. "
             "Reasons from Nsight Compute (ncu timing, not the run's); where no profile exists, the kernel times "
             "CUPTI measured in the run (per kernel role; under -pdl the kernels overlap, so their sum exceeds the "
             "span).", ""]
    for goal, c in counts.iterrows():
        lines.append(f"- goal {goal} ({GOAL_NAMES[int(goal)]}): " +
                     ", ".join(f"{c.get(s, 0)} {s}" for s in ("met", "level", "not met", "not compared")
                               if c.get(s, 0)))
    lines.append("")
    for goal in sorted(t["goal"].unique()):
        lines += goal_section(t, int(goal))
    lines += ["### Profiled kernels per shape", ""] + kernel_sections(report.kernels)
    return "\n".join(lines).rstrip() + "\n"
