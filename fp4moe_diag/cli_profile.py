"""``python -m fp4moe_diag profile``: Nsight Compute per kernel of chosen tactics of one shape (nsight-python), or
with ``--source REGEX`` the per-instruction warp-stall samples of one kernel (:mod:`.profiling.source`)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from . import cli_args as A


def split_labels(text: Optional[str]) -> list[str]:
    """Comma list of tactic labels; commas inside parentheses belong to the label ("default(-1,-1)")."""
    return [x.strip() for x in re.split(r",(?![^()]*\))", text or "") if x.strip()]


def _print(table: pd.DataFrame, **kw: Any) -> None:
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table.to_string(float_format=lambda x: f"{x:.4g}", **kw))


def cmd_source(args: argparse.Namespace, labels: list[str]) -> int:
    """``--source``: one tactic, one kernel, its SASS instructions' stall samples."""
    from .profiling.source import run_source_profile

    if len(labels) != 1:
        print(f"argument --tactics: --source profiles one tactic, got {len(labels)}: {labels}", file=sys.stderr)
        return 2
    table = run_source_profile(args.backend, args.model, args.ep, args.tokens, labels[0], args.source, Path(args.out))
    _print(table.head(20))
    print(f"per instruction: {Path(args.out) / 'source.csv'}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """Nsight Compute (through nsight-python) per-kernel metrics of chosen tactics of one shape."""
    from .problem.shapes import load_vllm_cases
    from .profiling.session import nsight_status, profile_kernels, source_status

    device = args.device or "cuda"
    ok, why = source_status(device) if args.source is not None else nsight_status(device)
    if not ok:
        print(f"cannot profile here: {why}", file=sys.stderr)
        return 2
    cases = load_vllm_cases(models=[args.model], ep_sizes=[args.ep], token_counts=[args.tokens])
    if not cases:
        print(f"no shape {args.model} EP{args.ep} in the shape table", file=sys.stderr)
        return 2
    labels = split_labels(args.tactics)
    if args.source is not None:
        return cmd_source(args, labels)
    tactics = {f"t{i}": lab for i, lab in enumerate(labels)}
    k = profile_kernels(cases[0], args.backend, device, Path(args.out), tactics, runs=args.runs,  # writes kernels.csv
                        stalls=args.stalls)
    _print(k.drop(columns=["annotation"], errors="ignore"), index=False)
    return 0


def _kernel_regex(text: str) -> str:
    from .profiling.source import check_kernel_regex

    try:
        return check_kernel_regex(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: Any) -> None:
    pr = sub.add_parser("profile", help="Nsight Compute metrics per kernel of chosen tactics (nsight-python)",
                        description="Runs the given tactics of one backend on one vLLM shape under ncu (through "
                        "nsight-python) and prints per-kernel time, DRAM/SM throughput, issue-slot use, occupancy. "
                        "With --source REGEX: one tactic, the second launch of the kernel matching REGEX, its warp-stall "
                        "samples per SASS instruction (ncu SourceCounters), summed per opcode.")
    pr.add_argument("--backend", type=A.backend_name, default="triton")
    pr.add_argument("--model", type=A.model_name, default="gpt-oss-20b")
    pr.add_argument("--ep", type=A.positive_int, default=1)
    pr.add_argument("--tokens", type=A.positive_int, default=64)
    pr.add_argument("--tactics", required=True, help="comma list of tactic labels (as in the sweep table)")
    pr.add_argument("--runs", type=A.positive_int, default=3)
    pr.add_argument("--device", type=A.device, default=None)
    pr.add_argument("--stalls", action="store_true",
                    help="also collect why the warps wait: ncu's warp-stall reasons per kernel")
    pr.add_argument("--source", type=_kernel_regex, default=None, metavar="KERNEL_REGEX",
                    help="per-instruction stall samples of the kernel whose name matches (one tactic; ncu only)")
    pr.add_argument("--out", type=A.out_dir, default="reports/profile")
    pr.set_defaults(func=cmd_profile)
