"""Where a kernel's warps wait, per SASS instruction: Nsight Compute's source-level warp-stall samples.

``profile --source REGEX`` runs one call of a tactic (:mod:`.source_driver`, three times) under ``ncu --section
SourceCounters --section WarpStateStats --section SpeedOfLight -k regex:REGEX -s 1 -c 1`` (the second launch of the
first kernel whose name matches: the first one warms up), then exports the report's source page as CSV (``ncu -i
REPORT --page source --csv --print-source sass``: one row per SASS instruction with its stall samples by reason) and
sums it here (pure pandas):

* :func:`stall_reasons`: the share of all samples per stall reason (``stall_wait``, ``stall_math``, ...);
* :func:`by_opcode`: samples and the main reasons per opcode (``LOP3``, ``HGMMA``, ...) -- where the time goes;
* :func:`hot_instructions`: the instructions with the most samples.

Why (H200, data/runs/2026-12-04-nvidia-h200-s10c): the kernel-level stall shares of ``profile --stalls`` said our
prefill gemm1 waits on fixed-latency dependencies 30 % of the time against 12 % for triton_kernels'; the samples per
instruction say where: 42 % of ours sit on the upcast's LOP3 / SHF and 7 % on the wgmma (HGMMA), while
triton_kernels' warps wait at the HGMMA (24 %): its gemm1 is fed faster than its tensor cores drain it, ours is not.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

#: the ncu sections of a source profile (per-instruction samples, the warp-state totals, the speed-of-light page)
SOURCE_SECTIONS = ("SourceCounters", "WarpStateStats", "SpeedOfLight")
SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
_PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")


def check_kernel_regex(regex: str) -> str:
    """``--source``: a non-empty, valid regular expression for the kernel name; ``ValueError`` otherwise."""
    if not isinstance(regex, str) or not regex.strip():
        raise ValueError(f"source: expected a regular expression for the kernel name (e.g. gemm1_ps), got {regex!r}")
    try:
        re.compile(regex)
    except re.error as e:
        raise ValueError(f"source: {regex!r} is not a valid regular expression ({e})") from None
    return regex


def ncu_command(ncu: str, kernel_regex: str, report: Path, driver_argv: Sequence[str]) -> list[str]:
    """The ncu command line of a source profile: the second matching launch, one kernel, ``report`` (.ncu-rep)."""
    check_kernel_regex(kernel_regex)
    sections = [a for s in SOURCE_SECTIONS for a in ("--section", s)]
    return [ncu, *sections, "-k", f"regex:{kernel_regex}", "-s", "1", "-c", "1", "-f", "-o", str(report),
            *driver_argv]


def export_command(ncu: str, report: Path) -> list[str]:
    """ncu's CSV export of the source page of ``report``, SASS only."""
    return [ncu, "-i", str(report), "--page", "source", "--csv", "--print-source", "sass"]


def read_source_csv(path: Path) -> pd.DataFrame:
    """The export of :func:`export_command` (``.csv`` or ``.csv.gz``; first line: the kernel's name) -> one row per
    instruction, the
    sample and stall columns numeric, ``opcode`` (the mnemonic without predicate and modifiers) and ``kernel``."""
    path = Path(path)
    with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as f:
        first = f.readline().rstrip("\n")
    if not first.startswith('"Kernel Name"'):
        raise ValueError(f"{path}: expected ncu's source-page CSV (first line \"Kernel Name\",...), got {first[:80]!r}")
    df = pd.read_csv(path, skiprows=1)
    numeric = [c for c in df.columns if c.startswith("stall_") or c in (SAMPLES, EXECUTED)]
    for c in numeric:
        df[c] = pd.to_numeric(df[c], errors="coerce").fillna(0.0).astype(float)
    src = df["Source"].astype(str).str.strip().str.replace(_PREDICATE, "", regex=True)
    df["opcode"] = src.str.split().str[0].str.split(".").str[0]
    df["kernel"] = first.split(",")[1].strip('"') if "," in first else ""
    return df


def _reasons(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith("stall_") and "Not Issued" not in c]


def stall_reasons(df: pd.DataFrame) -> pd.Series:
    """Percent of all samples per stall reason (``stall_selected``: issuing), largest first."""
    total = df[SAMPLES].sum()
    if total <= 0:
        raise ValueError("source profile: no warp-stall samples in this export (was SourceCounters collected?)")
    return (df[_reasons(df)].sum() / total * 100).sort_values(ascending=False)


def by_opcode(df: pd.DataFrame, top_reasons: int = 4) -> pd.DataFrame:
    """Per opcode: ``samples_pct`` (of all samples), ``executed`` (warp instructions) and the ``top_reasons``
    largest stall reasons overall, each as percent of all samples; sorted by ``samples_pct``."""
    total = df[SAMPLES].sum()
    reasons = list(stall_reasons(df).index[:top_reasons])
    g = df.groupby("opcode")[[SAMPLES, EXECUTED, *reasons]].sum()
    out = pd.DataFrame({"samples_pct": g[SAMPLES] / total * 100, "executed": g[EXECUTED]})
    for r in reasons:
        out[f"{r}_pct"] = g[r] / total * 100
    return out.sort_values("samples_pct", ascending=False)


def hot_instructions(df: pd.DataFrame, n: int = 15) -> pd.DataFrame:
    """The ``n`` instructions with the most samples: source text, percent of samples, the main reason."""
    total = df[SAMPLES].sum()
    reasons = _reasons(df)
    top = df.nlargest(n, SAMPLES)
    return pd.DataFrame({"source": top["Source"].astype(str).str.strip(), "samples_pct": top[SAMPLES] / total * 100,
                         "main_reason": top[reasons].idxmax(axis=1)}).reset_index(drop=True)


def run_source_profile(backend: str, model: str, ep: int, tokens: int, tactic: str, kernel_regex: str,
                       out_dir: Path, ncu: Optional[str] = None, timeout: float = 600.0) -> pd.DataFrame:
    """Profile one kernel of one call (see the module docstring) into ``out_dir``: ``source.ncu-rep``,
    ``source.csv`` (the export), ``source_by_opcode.csv``; returns :func:`by_opcode` of it.  Needs a GPU and ncu."""
    check_kernel_regex(kernel_regex)
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        raise ValueError("source: Nsight Compute's `ncu` is not on PATH")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "source.ncu-rep"
    driver = [sys.executable, "-m", "fp4moe_diag.profiling.source_driver", backend, model, str(ep), str(tokens), tactic]
    subprocess.run(ncu_command(ncu, kernel_regex, out_dir / "source", driver), check=True, timeout=timeout)
    csv = subprocess.run(export_command(ncu, report), check=True, capture_output=True, text=True, timeout=timeout)
    (out_dir / "source.csv").write_text(csv.stdout)
    table = by_opcode(read_source_csv(out_dir / "source.csv"))
    table.to_csv(out_dir / "source_by_opcode.csv")
    return table
