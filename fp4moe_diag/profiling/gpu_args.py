"""What the GPU-only tools of this package (:mod:`.ablate`, :mod:`.duel`) do the same way: check before any GPU work
the cases of ``--model`` / ``--ep`` / ``--tokens``, an ``--out`` that is not overwritten by accident, and a CUDA
``--device`` (each failure the parser's one-line error, exit 2, naming the argument); write their rows to ``--out``
after every case, atomically."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence


def add_case_args(ap: argparse.ArgumentParser) -> None:
    """``--model``, ``--ep`` and ``--tokens``: the cases."""
    from .. import cli_args as A

    ap.add_argument("--model", type=A.model_name, default="gpt-oss-20b")
    ap.add_argument("--ep", type=A.positive_int, default=1)
    ap.add_argument("--tokens", type=A.int_list, required=True, help="token counts, comma separated")


def add_device_out_args(ap: argparse.ArgumentParser) -> None:
    """``--device``, ``--out`` (CSV, never overwritten by accident) and ``--overwrite``."""
    from .. import cli_args as A

    ap.add_argument("--device", type=A.device, default="cuda")
    ap.add_argument("--out", type=A.out_file, required=True, help="the rows as CSV (never overwritten)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out")


def cases_out_device(ap: argparse.ArgumentParser, args: argparse.Namespace, timed: str) -> list:
    """The cases of ``args`` (the shape table's model and EP at each token count); ``timed`` completes the device
    error: ``ablations are timed on a CUDA GPU``."""
    import torch

    from ..problem.shapes import default_case

    try:
        cases = [default_case(args.model, args.ep, n) for n in args.tokens]
    except ValueError as e:
        ap.error(str(e))
    if args.out.exists() and not args.overwrite:
        ap.error(f"argument --out: {args.out} exists; pass --overwrite to replace it")
    if not str(args.device).startswith("cuda") or not torch.cuda.is_available():
        ap.error(f"argument --device: {timed}, got {args.device!r} (CUDA available: {torch.cuda.is_available()})")
    return cases


def write_rows(rows: list[dict], columns: Sequence[str], path: Path) -> None:
    """``rows`` as the CSV ``path`` (these ``columns``, in order), replaced atomically: a run cut off after a case
    keeps every case it finished."""
    import pandas as pd

    from ..atomic_io import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(pd.DataFrame(rows, columns=list(columns)).to_csv(index=False).encode()))
