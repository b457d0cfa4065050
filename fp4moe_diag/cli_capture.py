"""CLI of the capture room: ``cases``, ``bundle``, ``export-fib`` and the ``--from-log``/``--from-dump``/
``--flashinfer-log`` flags of ``sweep`` and ``reproduce`` (:mod:`fp4moe_diag.capture`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from . import cli_args as A


def log_file_any(text: str) -> Path:
    """A FlashInfer or vLLM log: an existing UTF-8 file up to 256 MiB (what it holds is read later)."""
    from .capture.source import MAX_LOG_BYTES  # noqa: PLC0415

    p = Path(text).expanduser()
    if not p.is_file():
        raise A.Err(f"{text!r} does not exist or is not a file")
    if p.stat().st_size > MAX_LOG_BYTES:
        raise A.Err(f"{text!r} is {p.stat().st_size} bytes (limit {MAX_LOG_BYTES})")
    return p


def case_json(text: str) -> Any:
    """``--case '{"num_tokens": 16, ...}'``: MoECase fields as JSON (a file path holding it works too)."""
    from .problem.case import MoECase  # noqa: PLC0415

    p = Path(text).expanduser()
    raw = p.read_text(encoding="utf-8") if len(text) < 4096 and p.is_file() else text
    try:
        rec = json.loads(raw)
    except json.JSONDecodeError as e:
        raise A.Err(f"not JSON ({e.msg} at column {e.colno})") from None
    try:
        return MoECase.from_record(rec)
    except (ValueError, TypeError) as e:
        raise A.Err(str(e)) from None


def source_of(args: argparse.Namespace) -> Optional[str]:
    """``log:FILE`` / ``dump:DIR`` (with ``#call=``/``#process=``/``#layout=``) of ``--from-log``/``--from-dump``."""
    log, dump = getattr(args, "from_log", None), getattr(args, "from_dump", None)
    if log and dump:
        raise ValueError("--from-log/--from-dump: give one of them")
    if not (log or dump):
        return None
    src = f"log:{log}" if log else f"dump:{dump}"
    if getattr(args, "call", None):
        src += f"#call={args.call}"
    if getattr(args, "process", None) and log:
        src += f"#process={args.process}"
    if getattr(args, "dump_layout", None) and dump:
        src += f"#layout={args.dump_layout}"
    return src


def add_source_flags(p: argparse.ArgumentParser, process: bool = True) -> None:
    p.add_argument("--from-log", type=log_file_any, default=None, metavar="FILE",
                   help="a FlashInfer API log (FLASHINFER_LOGLEVEL=3/5) or a vLLM kwargs log: its case(s)")
    p.add_argument("--from-dump", type=A.existing_dir, default=None, metavar="DIR",
                   help="a FlashInfer Flight-Recorder dump (FLASHINFER_LOGLEVEL=10): its case(s) and recorded tensors")
    p.add_argument("--call", type=A.positive_int, default=None, help="only the N-th MoE call of the log / dump")
    if process:
        p.add_argument("--process", dest="process", default=None,
                       help="only this process of the log (a vLLM prefix such as EngineCore_DP0, or a pid)")
    p.add_argument("--dump-layout", choices=("kernel", "canonical"), default=None,
                   help="weights in the dump: 'kernel' (default: as the entry point's kernel takes them, "
                        "inverted) or 'canonical' (unprepared)")


def cmd_cases(args: argparse.Namespace) -> int:
    from .capture.source import source_cases

    src = source_of(args)
    if src is None:
        raise ValueError("--from-log/--from-dump: give one of them")
    cases, _ = source_cases(src)
    if args.json:
        print(json.dumps([c.to_dict() for c in cases], indent=2, default=str))
        return 0
    for i, sc in enumerate(cases, 1):
        print(f"case {i}: {sc.case.label}  ({sc.entry_point}, FlashInfer {sc.flashinfer_version or '?'}; "
              f"{len(sc.calls)} call(s): {', '.join(sc.calls[:3])}{' ...' if len(sc.calls) > 3 else ''})")
        rec = sc.case.to_record()
        for k, where in sc.sources.items():
            print(f"  {k:<22} {str(rec[k]):<12} <- {where}")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from .capture.bundle import write_bundle

    src = source_of(args)
    case = None
    if src is None and args.case is None:
        raise ValueError("--from-log/--from-dump/--case: give one of them")
    if src is None:
        case = args.case
    path = write_bundle(args.out, source=src, case=case, runs=args.runs or (), device=args.device or "cpu")
    print(f"bug bundle -> {path}")
    return 0


def cmd_export_fib(args: argparse.Namespace) -> int:
    from .capture.fib import export_fib

    report = export_fib(args.runs, args.out)
    print(report.summary())
    return 0


def reproduce_case_from_flashinfer_log(args: argparse.Namespace) -> Optional[Any]:
    """``reproduce --flashinfer-log FILE``: the one case of the log (several are refused, naming them)."""
    if not getattr(args, "flashinfer_log", None):
        return None
    if getattr(args, "log", None):
        raise ValueError("--flashinfer-log: not with --log (a vLLM kwargs log); give one of them")
    from .capture.flashinfer_log import cases_from_log
    from .capture.source import read_log_text

    cases = cases_from_log(read_log_text(Path(args.flashinfer_log)), str(args.flashinfer_log),
                           process=getattr(args, "process", None), call=getattr(args, "call", None))
    if len(cases) > 1:
        raise ValueError(f"--flashinfer-log: {len(cases)} distinct cases ({', '.join(c.case.label for c in cases)}); "
                         "pick one with --call N")
    case = cases[0].case
    return case.with_tokens(args.tokens) if getattr(args, "tokens", None) else case


def add_parsers(sub: Any) -> None:
    c = sub.add_parser("cases", help="the case(s) a FlashInfer/vLLM log or a FlashInfer dump becomes, field by field",
                       description="Prints every MoECase field of each case and the log line / dump file it came "
                       "from, before anything runs.")
    add_source_flags(c)
    c.add_argument("--json", action="store_true", help="JSON instead of the table")
    c.set_defaults(func=cmd_cases)

    b = sub.add_parser("bundle", help="a bug bundle: standalone repro script, environment, verdicts, rows",
                       description="Writes a .tar.gz holding repro.py (the exact FlashInfer call, inputs from the "
                       "seed or the dump, needing only torch and flashinfer), case.json, environment.json, "
                       "verdict.json (the bug verdict per installed FlashInfer), rows.csv and report.md.")
    add_source_flags(b)
    b.add_argument("--case", type=case_json, default=None, metavar="JSON",
                   help="a case as JSON (MoECase fields), e.g. '{\"num_tokens\": 16, ...}'")
    b.add_argument("--runs", type=Path, action="append", default=None, help="run folder(s) whose rows of the case go in")
    b.add_argument("--device", type=A.device, default=None)
    b.add_argument("--out", type=A.out_file, required=True, help="bundle path, e.g. bug.tar.gz")
    b.set_defaults(func=cmd_bundle)

    f = sub.add_parser("export-fib", help="run folders -> a FlashInfer-Bench trace set",
                       description="Writes definitions/, workloads/, solutions/, traces/ (FlashInfer-Bench's "
                       "layout): one Definition per op (FlashInfer's fi_trace one where it has it), one Workload "
                       "per case, one Solution per backend x tactic, one Trace per row.")
    f.add_argument("runs", nargs="+", type=Path, help="run folders")
    f.add_argument("--out", type=A.out_dir, required=True)
    f.set_defaults(func=cmd_export_fib)


def main_error(cmd: str, e: Exception) -> int:
    print(f"fp4moe-diag {cmd}: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
    return 2
