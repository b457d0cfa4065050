"""Nsight Compute's side: the metrics we collect, ``ncu --import --csv`` export of a report, and its rows
turned into one row per kernel launch (pure pandas; the CLI export needs ``ncu`` on PATH)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd

from ..paths import REPO_ROOT, RUNS_ROOT

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

#: ``profile --stalls``: why the warps wait (percent of active warps stalled on each reason, ncu's WarpStateStats
#: metrics; the names ``ncu --query-metrics --chip gh100`` lists with ncu 2025.3 on the H200).  Opt-in: a name an
#: ncu does not know makes nsight-python refuse the whole profile (a wgmma-pipe metric did, H200 s9), and notebook
#: 04 does not collect these.
NCU_STALL_METRICS = {
    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct": "stall_long_scoreboard_pct",
    "smsp__warp_issue_stalled_wait_per_warp_active.pct": "stall_wait_pct",
    "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct": "stall_math_pipe_pct",
    "smsp__warp_issue_stalled_barrier_per_warp_active.pct": "stall_barrier_pct",
    "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct": "stall_mio_pct",
    "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct": "stall_short_scoreboard_pct",
    "smsp__warp_issue_stalled_selected_per_warp_active.pct": "stall_selected_pct",
}


def metric_names(stalls: bool = False) -> dict[str, str]:
    """ncu metric -> column name: :data:`NCU_METRICS`, plus :data:`NCU_STALL_METRICS` with ``stalls``."""
    return {**NCU_METRICS, **(NCU_STALL_METRICS if stalls else {})}


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


def ncu_csv_export(report: Any, metrics: Sequence[str] = tuple(NCU_METRICS), ncu: Optional[str] = None) -> str:
    """``ncu --import <report> --csv --page raw --metrics ...``: one CSV row per profiled kernel.

    The ncu CLI, not ncu's ``ncu_report`` Python module: loading a report with the latter crashed
    the process (SIGSEGV in ``load_report``) on the H200 image (ncu 2025.3.1, Python 3.12)."""
    exe = ncu or shutil.which("ncu")
    if not exe:
        raise RuntimeError("ncu is not on PATH")
    cp = subprocess.run([exe, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
                        "--metrics", ",".join(metrics)],
                        capture_output=True, text=True, timeout=300)
    if cp.returncode != 0:
        raise RuntimeError(f"ncu --import failed ({cp.returncode}): {cp.stderr.strip()[-500:]}")
    return cp.stdout


def raw_from_ncu_csv(text: str, calls: pd.DataFrame, metrics: Sequence[str] = tuple(NCU_METRICS)) -> pd.DataFrame:
    """Rows of :func:`ncu_csv_export` (launch order; the 2nd CSV row holds the units) -> the raw frame of
    :func:`kernels_table` (``annotation``, ``kernel``, metric and ``<metric>.unit`` columns).

    The annotation of each launch comes from nsight-python's per-annotation table ``calls`` (its
    ``Kernel`` column lists the kernels of one call, '|'-joined): every run launches the annotated
    ranges in order.  Returns an empty frame when the launches do not follow that pattern."""
    import csv
    import io as _io

    rows = list(csv.reader(_io.StringIO(text.strip())))
    rows = [r for r in rows if r and not r[0].startswith("==")]  # drop ncu's own "==PROF==" lines
    if len(rows) < 3 or "Kernel Name" not in rows[0]:
        return pd.DataFrame()
    head, units, body = rows[0], rows[1], rows[2:]
    name_col = head.index("Kernel Name")
    seq = (calls.drop_duplicates("Annotation")[["Annotation", "Kernel"]] if len(calls) else calls)
    per_run = [(str(a), str(k).split("|")) for a, k in zip(seq.get("Annotation", []), seq.get("Kernel", []))]
    expected = [(a, k) for a, ks in per_run for k in ks]
    if not expected or len(body) % len(expected):
        return pd.DataFrame()
    out = []
    for i, r in enumerate(body):
        ann, want = expected[i % len(expected)]
        got = r[name_col]
        if not (got == want or got.startswith(want + "(") or want in got):
            return pd.DataFrame()
        rec = {"annotation": ann, "kernel": want}
        for m in metrics:
            if m in head:
                j = head.index(m)
                rec[m] = pd.to_numeric(r[j].replace(",", ""), errors="coerce")
                rec[m + ".unit"] = units[j] if j < len(units) else ""
        out.append(rec)
    return pd.DataFrame(out)


def kernels_from_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """Fallback when per-kernel rows are not available: nsight-python's own table, one row per
    annotation (role: tactic) with the additive metrics summed over the call's kernels (duration,
    DRAM bytes read and their ratio); percentages summed over kernels mean nothing and are left out."""
    if calls.empty:
        return pd.DataFrame()
    piv = calls.pivot_table(index=["Annotation", "Kernel"], columns="Metric", values="AvgValue", aggfunc="first")
    out = pd.DataFrame({"annotation": [a for a, _ in piv.index], "kernel": [k for _, k in piv.index]})
    if "gpu__time_duration.sum" in piv:
        out["duration_us"] = piv["gpu__time_duration.sum"].to_numpy() * 1e-3  # nsight-python reports ns
    if "dram__bytes_read.sum" in piv:
        out["dram_read_bytes"] = piv["dram__bytes_read.sum"].to_numpy()
        if "duration_us" in out:
            out["dram_read_GBps"] = out["dram_read_bytes"] / (out["duration_us"] * 1e3)
    runs = calls.groupby("Annotation")["NumRuns"].max() if "NumRuns" in calls else None
    out["runs"] = out["annotation"].map(runs) if runs is not None else pd.NA
    out["role"] = out["annotation"].str.split(":").str[0]
    out["tactic_label"] = out["annotation"].str.split(":", n=1).str[1].str.strip()
    out["launch"] = "all"
    return out


def _in_unit(d: pd.DataFrame, metric: str, scales: dict[str, float], default_unit: str) -> pd.Series:
    """Column ``metric`` converted with ``scales[<its .unit column>]`` (``default_unit`` if none)."""
    unit = str(d.get(metric + ".unit", pd.Series([default_unit])).iloc[0]).lower()
    return pd.to_numeric(d[metric], errors="coerce") * scales.get(unit, scales[default_unit])


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
        d["duration_us"] = _in_unit(d, dur, {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1.0, "us": 1.0,
                                             "msecond": 1e3, "ms": 1e3}, "ns")
    byt = "dram__bytes_read.sum"
    if byt in d:
        d[byt] = _in_unit(d, byt, {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9}, "byte")
    ren = {m: v for m, v in metric_names(stalls=True).items() if m in d and m != dur}
    d = d.rename(columns=ren)
    if "dram_read_bytes" in d and "duration_us" in d:
        d["dram_read_GBps"] = d["dram_read_bytes"] / (d["duration_us"] * 1e3)
    keep = ["duration_us"] + list(ren.values()) + (["dram_read_GBps"] if "dram_read_GBps" in d else [])
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
