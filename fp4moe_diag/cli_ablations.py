"""``python -m fp4moe_diag ablations RUN [RUN ...]``: the ablations (``ablate*.csv``, written by
``python -m fp4moe_diag.profiling.ablate``) of run folders as one Markdown table, each case with its run folder:
what the dequant, the rest of the K loop and the weight stream cost of each tactic's time
(:mod:`fp4moe_diag.analysis.ablations`).  Repeated runs of the same ablation stay apart, one row each."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def cmd_ablations(args: argparse.Namespace) -> int:
    from .analysis.ablations import ablations_per_run, markdown

    for d in args.runs:
        if not d.is_dir():
            raise ValueError(f"argument runs: {d} is not a folder")
        if not any(d.glob("ablate*.csv")):
            raise ValueError(f"argument runs: {d} holds no ablate*.csv (python -m fp4moe_diag.profiling.ablate)")
    table = ablations_per_run(args.runs).sort_values(["gpu_name", "model", "ep_size", "num_tokens", "tactic", "run"],
                                                     kind="stable").reset_index(drop=True)
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(markdown(table))
    return 0


def add_parser(sub: Any) -> None:
    a = sub.add_parser("ablations", help="the ablations of run folders: dequant, rest of the loop, weight stream",
                       description="Read the ablate*.csv of run folders (python -m fp4moe_diag.profiling.ablate) and "
                       "print one row per run x case x tactic: the tactic's time beside ~nodeq, ~load and ~seq, the "
                       "shares of its time and the read-ceiling fractions, sorted so that repeats sit together "
                       "(Markdown; a GPU column where the runs come from several GPUs).")
    a.add_argument("runs", nargs="+", type=Path, help="run folders holding ablate*.csv")
    a.add_argument("--csv", type=Path, default=None, help="also write the table here")
    a.set_defaults(func=cmd_ablations)
