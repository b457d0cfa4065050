"""``python -m fp4moe_diag twins RUN [RUN ...] --variant=-pdlw --base=-pdl``: each tactic of a family beside its twin
of the same run, shape and backend (:mod:`fp4moe_diag.analysis.twins`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd


def cmd_twins(args: argparse.Namespace) -> int:
    from .analysis.twins import twin_table, twins_markdown
    from .run_folder import load_run_args

    table = twin_table(pd.concat(load_run_args(args.runs), ignore_index=True), args.variant, args.base)
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(twins_markdown(table, args.variant, args.base))
    return 0


def add_parser(sub: Any) -> None:
    t = sub.add_parser("twins", help="a tactic family beside its twins (-pdlw against -pdl, -tm against ps, ...)",
                       description="Read run folders and print, per run x shape x backend, each tactic whose label "
                       "holds --variant beside the tactic whose label has --base there instead, timed in the same "
                       "sweep: both medians, their ratio (and by CUPTI kernel span), both spreads, and faster / "
                       "level / slower beyond the larger spread (Markdown).")
    t.add_argument("runs", nargs="+", type=Path, help="run folders")
    t.add_argument("--variant", required=True,
                   help="the label part of the family, e.g. --variant=-pdlw or --variant=-tm (with =: it starts with -)")
    t.add_argument("--base", default="", help="what the twin has there instead, e.g. --base=-pdl (default: nothing)")
    t.add_argument("--csv", type=Path, default=None, help="also write the table here")
    t.set_defaults(func=cmd_twins)
