"""Two backends over repeated runs: is one ahead, behind, or level within the run-to-run spread?

One run says which backend was faster that time; at a shape where two kernels are within 1-2 % the answer flips from
run to run (cross-process noise on the H200 is about 2 %, ``docs/history-h200-s12.md``).  :func:`sample_ratios` takes
runs of the same shapes (the same call repeated: ``-s15b`` .. ``-s15d``), computes in each run on its own the headline
(:func:`.headline.headline_table`: each backend's best tactic, the same labels), and per shape gives each backend's
median time over the runs and the ratio ``a / b`` per run: its median, min and max, and the verdict ``ahead`` (every
run below 1), ``behind`` (every run above 1) or ``level`` (the runs straddle 1).  A shape not measured by both in at
least two runs gets no line.

The same per run by CUPTI kernel time (``time_kernel_span_median_us``, first kernel start to last kernel end, of
each backend's fastest fully timed tactic by that measure): ``kratio_min`` / ``kratio_max`` and ``kernel_verdict``
(empty where a run has no kernel time for one of them).  Where the two verdicts differ, the call-to-call drift of
the timing pass is the size of the gap (20b EP1 T=16384 on the H100: the passes of one tactic 4-10 % apart, both
ways), and neither verdict alone settles it.  Pure pandas; ``python -m fp4moe_diag samples RUN RUN ... --a triton --b triton_kernels``
prints it.
"""

from __future__ import annotations

from typing import Optional

import pandas as pd

from .headline import gpu_label, headline_table, several_gpus, table_backends

SHAPE = ["gpu_name", "model", "ep_size", "has_bias", "num_tokens"]
COLUMNS = [*SHAPE, "runs", "a_us", "b_us", "ratio_median", "ratio_min", "ratio_max", "verdict", "kratio_min",
           "kratio_max", "kernel_verdict"]
SPAN = "time_kernel_span_median_us"


def _verdict(lo: float, hi: float) -> str:
    if pd.isna(lo) or pd.isna(hi):
        return ""
    return "ahead" if hi < 1 else "behind" if lo > 1 else "level"


def _kernel_ratios(df: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per run and shape: ``a``'s and ``b``'s fastest CUPTI span (ok, correct rows) and their ratio ``kratio``."""
    from .builds import backend_label

    if SPAN not in df:
        return pd.DataFrame(columns=[*SHAPE, "run_id", "kratio"])
    d = df[(df["status"] == "ok") & (df["correct"].fillna(True).astype(bool) if "correct" in df else True)]
    d = d[pd.to_numeric(d[SPAN], errors="coerce") > 0]
    d = d.assign(label=backend_label(d).astype(str), run_id=d["run_id"].astype(str))
    d = d[d["label"].isin([a, b])]
    best = d.groupby(["run_id", *SHAPE, "label"], dropna=False)[SPAN].min().unstack("label")
    if a not in best or b not in best:
        return pd.DataFrame(columns=[*SHAPE, "run_id", "kratio"])
    return (best[a] / best[b]).rename("kratio").dropna().reset_index()


def sample_ratios(df: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per shape measured by backends ``a`` and ``b`` (headline labels: ``triton``, ``cutlass@0.7.4``,
    ``triton@3.7.1``) in at least two runs (``run_id``): :data:`COLUMNS`.  A ``ValueError`` when ``a`` equals ``b``,
    the rows hold fewer than two runs, or ``a`` or ``b`` is in none of them (naming the labels there are)."""
    if a == b:
        raise ValueError(f"b: the backend to compare with must differ from a ({a!r})")
    runs = sorted(set(df["run_id"].dropna().astype(str))) if "run_id" in df else []
    if len(runs) < 2:
        raise ValueError(f"runs: sample_ratios needs at least two runs of the same shapes, got {len(runs)}")
    per_run, have = [], set()
    for rid in runs:
        t = headline_table(df[df["run_id"].astype(str) == rid])
        labels = set(table_backends(t))
        have |= labels
        if {a, b} <= labels:
            per_run.append(t[SHAPE].assign(run_id=rid, a_us=t[f"{a}:us"], b_us=t[f"{b}:us"]))
    for name, label in (("a", a), ("b", b)):
        if label not in have:
            raise ValueError(f"{name}: backend {label!r} is in none of these runs; they have {sorted(have)}")
    if not per_run:
        return pd.DataFrame(columns=COLUMNS)
    x = pd.concat(per_run, ignore_index=True).dropna(subset=["a_us", "b_us"])
    x["ratio"] = x["a_us"] / x["b_us"]
    g = x.groupby(SHAPE, dropna=False, sort=True)
    out = pd.DataFrame({"runs": g.size(), "a_us": g["a_us"].median(), "b_us": g["b_us"].median(),
                        "ratio_median": g["ratio"].median(), "ratio_min": g["ratio"].min(),
                        "ratio_max": g["ratio"].max()}).reset_index()
    out = out[out["runs"] >= 2].copy()
    out["verdict"] = [_verdict(lo, hi) for lo, hi in zip(out["ratio_min"], out["ratio_max"])]
    k = _kernel_ratios(df, a, b)
    k = k[k["run_id"].isin(set(x["run_id"]))].groupby(SHAPE, dropna=False)["kratio"].agg(["min", "max", "size"])
    out = out.merge(k.reset_index(), on=SHAPE, how="left")
    full = out["size"] == out["runs"]  # a kernel verdict only where every run has both kernel times
    out["kratio_min"], out["kratio_max"] = out["min"].where(full), out["max"].where(full)
    out["kernel_verdict"] = [_verdict(lo, hi) for lo, hi in zip(out["kratio_min"], out["kratio_max"])]
    return out[COLUMNS].reset_index(drop=True)


def clock_range(rows: pd.DataFrame) -> Optional[tuple[float, float, float]]:
    """The SM clock the timed ``rows`` read as their repeats finished (``time_sm_clock_mhz``): (median, min, max) MHz
    over the rows that have one; None where none has (older runs, CPU, no NVML)."""
    if "time_sm_clock_mhz" not in rows:
        return None
    c = pd.to_numeric(rows["time_sm_clock_mhz"], errors="coerce")
    c = c[c > 0]
    return (float(c.median()), float(c.min()), float(c.max())) if len(c) else None


def run_clocks(df: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Per run (``run_id``), its :func:`clock_range`; runs without one are left out."""
    if "run_id" not in df:
        return {}
    per_run = {rid: clock_range(rows) for rid, rows in df.groupby(df["run_id"].astype(str))}
    return {rid: c for rid, c in per_run.items() if c is not None}


def clocks_line(clocks: dict[str, tuple[float, float, float]]) -> str:
    """One Markdown line naming each run's SM clock while timing (median, range), or '' where no run has one."""
    if not clocks:
        return ""
    return ("SM clock while timing (NVML, median and range over the rows): "
            + "; ".join(f"{rid} {m:,.0f} MHz ({lo:,.0f}-{hi:,.0f})" for rid, (m, lo, hi) in sorted(clocks.items()))
            + ".")


def samples_markdown(table: pd.DataFrame, a: str, b: str) -> str:
    """:func:`sample_ratios` as Markdown, one line per shape (per GPU x shape, with a GPU column, where the runs come
    from several), then how many shapes are ahead / level / behind."""
    per_gpu = several_gpus(table)
    head = (["GPU"] if per_gpu else []) + ["model", "EP", "T", "runs", f"{a} us (median)", f"{b} us (median)",
                                           f"{a} / {b}: median", "min", "max", f"{a} is", "by kernel time (CUPTI)"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in table.itertuples(index=False):
        bias = "" if r.has_bias in (True, None) or pd.isna(r.has_bias) else " (no bias)"
        gpu = f"| {gpu_label(r.gpu_name)} " if per_gpu else ""
        lines.append(f"{gpu}| {r.model}{bias} | {r.ep_size} | {r.num_tokens} | {r.runs} | {r.a_us:,.1f} | {r.b_us:,.1f} | "
                     f"{r.ratio_median:.3f} | {r.ratio_min:.3f} | {r.ratio_max:.3f} | "
                     + (f"**{r.verdict}**" if r.verdict == "behind" else r.verdict) + f" | {_kernel_cell(r)} |")
    counts = table["verdict"].value_counts()
    lines += ["", f"{a} against {b}: " + ", ".join(f"{v} at {int(counts.get(v, 0))}" for v in ("ahead", "level",
                                                                                               "behind"))
              + f" of {len(table)} shapes (level: the runs straddle 1)."]
    differ = table[(table["kernel_verdict"] != "") & (table["kernel_verdict"] != table["verdict"])]
    if len(differ):
        lines.append(f"By kernel time the verdict differs at {len(differ)}: "
                     + ", ".join(f"{r.model} EP{r.ep_size} T={r.num_tokens} ({r.verdict} / {r.kernel_verdict})"
                                 for r in differ.itertuples(index=False)) + ".")
    return "\n".join(lines)


def _kernel_cell(r: object) -> str:
    v = getattr(r, "kernel_verdict")
    if not v:
        return "-"
    return f"{v} ({getattr(r, 'kratio_min'):.3f}-{getattr(r, 'kratio_max'):.3f})"
