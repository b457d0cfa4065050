"""``python -m fp4moe_diag samples RUN RUN [RUN ...] --a triton --b triton_kernels``: two backends over repeated runs of
the same shapes, per shape ahead / level / behind within the run-to-run spread (:mod:`fp4moe_diag.analysis.samples`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd


def cmd_samples(args: argparse.Namespace) -> int:
    from .analysis.samples import clocks_line, run_clocks, sample_ratios, samples_markdown
    from .run_folder import load_run_args

    if len(set(args.runs)) < 2:
        raise ValueError("argument runs: expected at least two run folders (repeated runs of the same shapes)")
    # each folder one sample, whatever run_id its rows carry
    frames = [f.assign(run_id=str(d)) for d, f in zip(args.runs, load_run_args(args.runs))]
    rows = pd.concat(frames, ignore_index=True)
    table = sample_ratios(rows, args.a, args.b)
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(samples_markdown(table, args.a, args.b))
    clocks = clocks_line(run_clocks(rows))  # runs from before the column (or without NVML): no line
    if clocks:
        print(clocks)
    return 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("samples", help="two backends over repeated runs: ahead, level or behind per shape",
                       description="Read repeated run folders of the same shapes and print, per shape, both "
                       "backends' median best time and the ratio a / b per run (median, min, max): ahead when every "
                       "run is below 1, behind when every run is above, level when they straddle 1 (Markdown).")
    s.add_argument("runs", nargs="+", type=Path, help="two or more run folders, each one sample")
    s.add_argument("--a", default="triton", help="the backend compared (headline label, default triton)")
    s.add_argument("--b", default="triton_kernels", help="the backend compared with (default triton_kernels)")
    s.add_argument("--csv", type=Path, default=None, help="also write the table here")
    s.set_defaults(func=cmd_samples)
