"""What the GPU-only tools of this package (:mod:`.ablate`, :mod:`.duel`, :mod:`.energy`) do the same way: check
before any GPU work the cases of ``--model`` / ``--ep`` / ``--tokens``, the two calls ``--a`` / ``--b`` of a
comparison, an ``--out`` that is not overwritten by accident, and a CUDA ``--device`` (each failure the parser's
one-line error, exit 2, naming the argument); write their rows to ``--out`` after every case, atomically."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Sequence


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


def contestant(text: str) -> tuple[str, str]:
    """``BACKEND=TACTIC`` -> (backend, tactic label); the backend must be one this install has."""
    from ..cli_args import backend_name

    backend, sep, tactic = str(text).partition("=")
    if not sep or not backend.strip() or not tactic.strip():
        raise argparse.ArgumentTypeError(f"expected BACKEND=TACTIC (e.g. triton=m16n128k128w4s3-ps), got {text!r}")
    return backend_name(backend.strip()), tactic.strip()


def add_pair_args(ap: argparse.ArgumentParser) -> None:
    """The cases (:func:`add_case_args`) and the two calls a comparison takes, ``--a`` and ``--b``."""
    add_case_args(ap)
    ap.add_argument("--a", type=contestant, required=True, help="BACKEND=TACTIC: the call compared")
    ap.add_argument("--b", type=contestant, required=True, help="BACKEND=TACTIC: the call it is compared with")


def checked_pair(ap: argparse.ArgumentParser, argv: Sequence[str] | None, timed: str) -> tuple[argparse.Namespace,
                                                                                             list]:
    """The arguments of a comparison and its cases, every check done before any GPU work (``--b`` the same call
    as ``--a`` refused; ``timed`` as :func:`cases_out_device`'s)."""
    args = ap.parse_args(argv)
    if args.a == args.b:
        ap.error(f"argument --b: the same call as --a ({args.a[0]}={args.a[1]}); two are compared")
    return args, cases_out_device(ap, args, timed)


#: the environment's columns after a comparison's own (:mod:`.duel`, :mod:`.energy`)
ENV = ("gpu_name", "triton_version", "flashinfer_version", "git_commit")


def rows_per_case(cases: list, row: Callable[[Any], dict], device: Any, columns: Sequence[str], out: Path) -> list:
    """``row(case)`` for each case with the environment's columns (:data:`ENV`), ``out`` rewritten after every case
    (:func:`write_rows`): a run cut off after a case keeps every case it finished."""
    from ..environment import environment_info

    env = environment_info(device)
    rows: list[dict] = []
    for case in cases:
        rows.append(row(case) | {k: env.get(k, "") for k in ENV})
        write_rows(rows, [*columns, *ENV], out)
    return rows


def pair_main(ap: argparse.ArgumentParser, argv: Sequence[str] | None, timed: str, row: Callable[..., dict],
              columns: Sequence[str], lines: Callable[[dict], str]) -> int:
    """The ``main`` of a comparison tool (:mod:`.duel`, :mod:`.energy`): the checked arguments and cases
    (:func:`checked_pair`; ``timed`` as there), ``row(case, args)`` for each case written to ``--out`` as it comes
    (:func:`rows_per_case`), ``lines(row)`` printed for each, then the JSON summary line."""
    import json

    args, cases = checked_pair(ap, argv, timed)
    rows = rows_per_case(cases, lambda case: row(case, args), args.device, columns, args.out)
    for r in rows:
        print(lines(r))
    print(json.dumps({"out": str(args.out), "rows": len(rows)}))
    return 0
