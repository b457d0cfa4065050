"""Command line: ``python -m fp4moe_diag {reproduce,sweep,profile,report,shapes,versions,headline,goals,...}``."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import pandas as pd

from . import cli_ablations as AB
from . import cli_args as A
from . import cli_capture as C
from . import cli_goals as G
from . import cli_samples as S
from . import cli_profile as P
from . import cli_twins as TW
from .cli_profile import split_labels  # noqa: F401 -- re-exported (tests)

if TYPE_CHECKING:
    from .runs import SweepSpec


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .bugrepro import SEED_CASE, reproduce_meta_bug, static_meta_check

    if getattr(args, "flashinfer_log", None):
        args.case = C.reproduce_case_from_flashinfer_log(args)
    case = args.case if getattr(args, "case", None) is not None else SEED_CASE  # --log parsed at parse time
    if args.tokens and getattr(args, "case", None) is None:
        case = case.with_tokens(args.tokens)
    v = static_meta_check(case, args.device or "cpu") if args.static else reproduce_meta_bug(case, args.device)
    print(v.summary())
    print()
    print("What FlashInfer's AutoTuner.choose_one received for", "flashinfer::trtllm_fp4_block_scale_moe:")
    rows = [{"index": i.index, "name": i.name, "device": i.device, "dtype": i.dtype,
             "shape": i.shape, "META": "<-- meta" if i.is_meta else ""} for i in v.tuner_inputs]
    print(pd.DataFrame(rows).to_string(index=False) if rows else "(no tuner call recorded)")
    if args.traceback and v.traceback:
        print()
        print(v.traceback)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(v.to_dict(), indent=2, default=str))
        print(f"\nverdict written to {args.json}")
    return 0


def check_log_case(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``reproduce --log``: a case the reproduction cannot build is refused for ``--log`` (it builds bf16 hidden
    states, the bug's path; an MXFP8-activation log cannot be replayed)."""
    case = getattr(args, "case", None)
    if case is not None and case.activation_format.value != "bf16":
        parser.error(f"argument --log: {args.log}: its hidden_states are {case.activation_format.value} "
                     "activations (float8_e4m3fn); reproduce builds bf16 hidden states only: pass the log of a "
                     "bf16-activation call")


def add_measure_flags(p: argparse.ArgumentParser) -> None:
    """The flags of :class:`~fp4moe_diag.measure.options.MeasureOptions`, the same on every command that sweeps."""
    p.add_argument("--warmup", type=A.non_negative_int, default=5)
    p.add_argument("--repeats", type=A.positive_int, default=30)
    p.add_argument("--cuda-graph", action="store_true", help="time CUDA-graph replays")
    p.add_argument("--max-seconds-per-tactic", type=A.positive_float, default=10.0,
                   help="stop timing a tactic after this many seconds (fewer repeats, still a median)")
    p.add_argument("--screen", type=A.positive_int, default=None, metavar="N",
                   help="two-pass timing: every tactic N timed runs, then the --screen-top fastest, the default "
                        "and the combined tactic in full (every tactic is still checked for correctness)")
    p.add_argument("--screen-top", type=A.positive_int, default=4, help="tactics re-timed in full after --screen (default 4)")
    p.add_argument("--interleave", action="store_true",
                   help="with --screen and --cuda-graph: the screen taken again in the reverse order before the "
                        "finalists are picked, and the finalists timed in --repeats alternating rounds (one replay "
                        "each a round, the order rotated), not one after another")
    p.add_argument("--kernel-time", action="store_true", help="also record the summed GPU kernel time per call "
                   "(torch.profiler / CUPTI) of every fully timed tactic, beside the event / graph timing")
    p.add_argument("--tactics", type=A.tactic_filter, action="append", default=None, metavar="BACKEND=REGEX",
                   help="only the tactics of BACKEND whose label matches REGEX (re.search), e.g. 'triton=-ps'; "
                        "repeat for several backends (the others run every tactic)")


#: MeasureOptions fields set by add_measure_flags (the others are library-only: runs.LIBRARY_ONLY_OPTIONS)
MEASURE_FLAGS = {"warmup": "warmup", "repeats": "repeats", "cuda_graph": "cuda_graph",
                 "max_seconds_per_tactic": "max_seconds_per_tactic", "screen": "screen", "screen_top": "screen_top",
                 "kernel_time": "kernel_time", "tactic_filters": "tactics", "interleave": "interleave"}


def sweep_spec(args: argparse.Namespace) -> "SweepSpec":
    """The :class:`~fp4moe_diag.runs.SweepSpec` of a sweeping command's flags (a ValueError names the field;
    :func:`~fp4moe_diag.cli_args.checked_spec` turns it into the flag)."""
    from .measure.options import MeasureOptions
    from .runs import SweepSpec

    opts = {field: getattr(args, flag) for field, flag in MEASURE_FLAGS.items()}
    opts["tactic_filters"] = tuple(opts["tactic_filters"] or ())
    spec = SweepSpec(models=tuple(args.models), backends=tuple(args.backends),
                     ep_sizes=tuple(args.ep) if args.ep else None, tokens=tuple(args.tokens) if args.tokens else None,
                     max_tokens=getattr(args, "max_tokens", None), hidden_scale=args.hidden_scale, device=args.device,
                     measure_ceilings=not args.no_ceilings, tag=getattr(args, "tag", ""),
                     shapes_file=getattr(args, "shapes_file", None),
                     options=MeasureOptions(**opts), source=C.source_of(args))
    return spec


def cmd_sweep(args: argparse.Namespace) -> int:
    from .analysis import summary_table
    from .runs import run_sweep

    spec = args.spec  # checked at parse time (main)

    def progress(res) -> None:
        b = res.best.label if res.best else "-"
        print(f"  {res.case.label} {res.backend}: {len(res.rows)} rows, best {b}", flush=True)

    mode = "resume" if args.resume else ("overwrite" if args.overwrite else "new")
    from .distributed.env import from_env

    d = from_env()
    if d.distributed:  # under torchrun: this rank's share, rank 0 merges (fp4moe_diag.distributed.shard)
        from .distributed.shard import run_sharded_sweep

        if args.out is None:
            raise ValueError("--out: a sharded sweep (torchrun) needs an explicit --out shared by every rank")
        if args.device is None or str(args.device) == "cuda":
            import dataclasses

            import torch

            if torch.cuda.is_available():
                spec = dataclasses.replace(spec, device=f"cuda:{d.local_rank}")
        df = run_sharded_sweep(spec, args.out, d.rank, d.world_size, progress_bar=False, on_case=progress, mode=mode)
        if df is None:
            return 0
        print(summary_table(df, max_rows=args.max_table_rows))
        return 0
    df, out = run_sweep(spec, args.out, progress_bar=not args.no_progress, on_case=progress, mode=mode)
    print()
    print(summary_table(df, max_rows=args.max_table_rows))
    if args.export_tuner_config:
        from .backends.flashinfer.tuner_config import export_tuner_config

        cfg = export_tuner_config(df, args.export_tuner_config, device=spec.device or "cpu")
        n = sum(1 for k in cfg if not str(k).startswith("_"))
        print(f"\n{n} tuner entries -> {args.export_tuner_config} (AutoTuner.load_configs / autotune(cache=...))")
    return 0


def cmd_compare_versions(args: argparse.Namespace) -> int:
    from .analysis import ratio_summary, version_ratio_table
    from .compare_versions import compare_versions

    dirs = dict(args.flashinfer)
    if len(dirs) < 2:
        raise ValueError("--flashinfer: give at least two versions (NAME=DIR, twice or more)")
    df = compare_versions(args.spec, dirs, args.out, cutlass_modules=dict(args.cutlass_module))
    df.to_csv(Path(args.out) / "results.csv", index=False)
    ok = df[df["status"] == "ok"] if "status" in df else df
    print(f"{len(df)} rows ({len(ok)} ok) -> {Path(args.out) / 'results.csv'}")
    try:
        table = version_ratio_table(df)
    except ValueError as e:
        print(f"no version comparison: {e}")
        return 0
    with pd.option_context("display.width", 220, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(ratio_summary(table).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


def cmd_shapes(args: argparse.Namespace) -> int:
    from .problem.shapes import load_shape_table

    df = load_shape_table()
    if args.model:
        df = df[df["model"].isin(args.model)]
    cols = [c for c in df.columns if c != "source"] if not args.source else list(df.columns)
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(df[cols].to_string(index=False))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report.runner import run_notebooks

    extra = dict(args.param or [])
    out = run_notebooks(out_dir=args.out, quick=args.quick, backend=",".join(args.backend) if args.backend else None, device=args.device,
                        only=args.only, html=not args.no_html, extra_parameters=extra)
    for p in out:
        print(p)
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from .bugrepro import version_matrix

    df = version_matrix(args.dirs)
    with pd.option_context("display.width", 250, "display.max_colwidth", 80):
        print(df.to_string(index=False))
    if args.csv:
        df.to_csv(args.csv, index=False)
    return 0


def cmd_headline(args: argparse.Namespace) -> int:
    from .analysis.builds import common_release_tactics
    from .analysis.headline import ceiling_note, clock_note, headline_markdown, headline_table, release_note
    from .run_folder import load_runs

    df = pd.concat([load_runs(d) for d in args.runs], ignore_index=True)
    if args.common_tactics:
        df = common_release_tactics(df)
    table = headline_table(df, backends=args.backends)
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(headline_markdown(table, backends=args.backends))
    for note in (release_note(df), clock_note(table, args.backends), ceiling_note(df)):
        if note:
            print("\n" + note)
    return 0


def _add_sweep(sub: Any) -> None:
    s = sub.add_parser("sweep", help="every tactic of every backend over vLLM shapes -> data/runs/",
                       description="Tune every tactic of the chosen backends on the vLLM-captured shapes "
                       "(data/vllm_shapes.csv); one row per case x backend x tactic; prints the table last.")
    s.add_argument("--backends", type=A.backend_names, default=("reference",),
                   help="comma list: reference,cutlass,triton,triton_kernels,trtllm")
    s.add_argument("--models", type=A.model_entries, default=("gpt-oss-20b",),
                   help="comma list of models from data/vllm_shapes.csv; an entry may be model:ep[:max_tokens]")
    s.add_argument("--ep", type=A.ep_list, default=None, help="comma list of EP sizes (default: all in the table)")
    s.add_argument("--tokens", type=A.token_list, default=None, help="comma list of token counts (default: the table's)")
    s.add_argument("--max-tokens", type=A.positive_int, default=None)
    s.add_argument("--hidden-scale", type=A.positive_int, default=1,
                   help="divide H and I by this, rounded to a multiple of 128 (CPU smoke runs; as the notebooks do)")
    s.add_argument("--device", type=A.device)
    add_measure_flags(s)
    s.add_argument("--max-table-rows", type=A.positive_int, default=150,
                   help="print every row up to this many, else only best/default/combined per case x backend")
    s.add_argument("--no-ceilings", action="store_true", help="skip the copy/GEMM roofline measurement")
    s.add_argument("--out", type=A.out_dir, help="run folder (default data/runs/<date>-<gpu>[-tag])")
    s.add_argument("--resume", action="store_true", help="continue the run at --out: skip cases already complete "
                   "with the same configuration")
    s.add_argument("--overwrite", action="store_true", help="replace the run at --out")
    s.add_argument("--export-tuner-config", type=A.out_file, default=None, metavar="FILE",
                   help="write the best tactic per op and shape bucket as FlashInfer 0.7's AutoTuner config JSON "
                        "(load it with AutoTuner.load_configs or autotune(cache=FILE))")
    s.add_argument("--tag", default="")
    s.add_argument("--shapes-file", type=A.in_file, default=None, metavar="CSV",
                   help="shape table instead of data/vllm_shapes.csv (same columns), e.g. data/shapes/gpt-oss-nobias.csv")
    s.add_argument("--no-progress", action="store_true")
    C.add_source_flags(s)
    s.set_defaults(func=cmd_sweep)


def _add_compare_versions(sub: Any) -> None:
    cv = sub.add_parser("compare-versions", help="the same cases x backends x every tactic under several FlashInfers",
                        description="One subprocess per FlashInfer (its site dir first on PYTHONPATH) runs the same "
                        "sweep; the rows land in one table with flashinfer_version filled in, then the per-shape "
                        "'version B / version A' table of the best, the default and the tuned tactic is printed.")
    cv.add_argument("--flashinfer", type=A.version_dir, action="append", required=True, metavar="NAME=DIR",
                    help="a FlashInfer install (pip --target dir), e.g. 0.5.2=.alt/flashinfer-python-0.5.2; twice or more")
    cv.add_argument("--cutlass-module", type=A.version_file, action="append", default=[], metavar="NAME=SO",
                    help="that version's prebuilt slim CUTLASS module (FP4MOE_CUTLASS_MODULE of its subprocess)")
    cv.add_argument("--backends", type=A.backend_names, default=("cutlass",))
    cv.add_argument("--models", type=A.model_entries, default=("gpt-oss-20b",))
    cv.add_argument("--ep", type=A.ep_list, default=None)
    cv.add_argument("--tokens", type=A.token_list, default=None)
    cv.add_argument("--hidden-scale", type=A.positive_int, default=1)
    cv.add_argument("--device", type=A.device, default=None)
    add_measure_flags(cv)
    cv.add_argument("--no-ceilings", action="store_true", help="skip the copy/GEMM roofline measurement")
    cv.add_argument("--out", type=A.out_dir, required=True, help="folder for each version's rows and the joint table")
    cv.set_defaults(func=cmd_compare_versions)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fp4moe-diag", description=__doc__.split("\n")[0] + "\n\n"
                                "Profiling and diagnostics for FlashInfer's FP4 fused-MoE kernels.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("reproduce", help="reproduce the routed-MoE + autotune 'Cannot pack tensors on meta' bug",
                       description="Run the seed's call (autotune(True) + trtllm_fp4_block_scale_routed_moe). On "
                       "SM100 it runs the real kernel; elsewhere it reports not-applicable and runs the stock op "
                       "over a TVM-FFI packing stub to show which tuner input is on 'meta'.")
    r.add_argument("--device", type=A.device, help="cuda:N or cpu (default: cuda if present)")
    r.add_argument("--log", type=A.log_file, help="a vLLM kwargs log (seed format) to take the case from")
    r.add_argument("--process", default=None, help="the vLLM process of --log to read, e.g. EngineCore_DP0 (a log "
                   "that mixes processes is refused without it)")
    r.add_argument("--flashinfer-log", type=C.log_file_any, default=None, metavar="FILE",
                   help="a FlashInfer API log (FLASHINFER_LOGLEVEL=3/5) to take the case from")
    r.add_argument("--call", type=A.positive_int, default=None, help="the N-th MoE call of --flashinfer-log")
    r.add_argument("--tokens", type=A.positive_int, help="override the number of tokens")
    r.add_argument("--static", action="store_true", help="only the stub check (any machine)")
    r.add_argument("--traceback", action="store_true", help="print the full traceback")
    r.add_argument("--json", type=A.out_file, help="write the verdict as JSON here")
    r.set_defaults(func=cmd_reproduce)

    _add_sweep(sub)

    P.add_parser(sub)

    rp = sub.add_parser("report", help="execute the notebooks headless (papermill) into reports/ + HTML",
                        description="Runs notebooks/*.ipynb with papermill into reports/ and exports HTML. "
                        "On a CPU machine it uses the reference backend and the committed GPU runs in data/.")
    rp.add_argument("--out", type=A.out_dir, default="reports")
    rp.add_argument("--quick", action="store_true", help="small shapes, few repeats (CI)")
    rp.add_argument("--backend", type=A.backend_names, default=None)
    rp.add_argument("--device", type=A.device, default=None)
    rp.add_argument("--only", type=A.notebook_prefixes, default=None, help="comma list of notebook name prefixes, e.g. 01,05")
    rp.add_argument("--no-html", action="store_true")
    rp.add_argument("--param", type=A.report_param, action="append", help="extra papermill parameter key=value (JSON values)")
    rp.set_defaults(func=cmd_report)

    sh = sub.add_parser("shapes", help="print the vLLM-captured shape table")
    sh.add_argument("--model", type=A.model_names, default=None)
    sh.add_argument("--source", action="store_true", help="include the provenance column")
    sh.set_defaults(func=cmd_shapes)

    v = sub.add_parser("versions", help="flashinfer version matrix: meta placeholder / routed API per install")
    v.add_argument("dirs", nargs="+", type=A.existing_dir, help="pip --target dirs, one flashinfer version each")
    v.add_argument("--csv", type=A.out_file, default=None)
    v.set_defaults(func=cmd_versions)

    ep = sub.add_parser("ep-layer", help="one expert-parallel MoE layer over the ranks of torchrun (all-to-all)",
                        description="Run under torchrun --nproc-per-node N: see fp4moe_diag.distributed.ep_layer.",
                        add_help=False)
    ep.add_argument("rest", nargs=argparse.REMAINDER)
    ep.set_defaults(func=lambda a: __import__("fp4moe_diag.distributed.ep_layer", fromlist=["main"]).main(a.rest))

    _add_compare_versions(sub)
    _add_headline(sub)
    G.add_parser(sub)
    S.add_parser(sub)
    AB.add_parser(sub)
    TW.add_parser(sub)
    C.add_parsers(sub)
    return p


def _add_headline(sub: Any) -> None:
    hl = sub.add_parser("headline", help="per shape: every backend's best time, x of the best, share of the ceilings",
                        description="Read run folders (or folders of runs) and print, per GPU x shape x T, each "
                        "kernel backend's best time with x_of_best and its share of the read ceiling, and the "
                        "fastest backend's TFLOP/s (Markdown, as in the README).")
    hl.add_argument("runs", nargs="+", type=Path, help="run folders, or folders holding run folders")
    hl.add_argument("--backends", type=lambda s: [b for b in s.split(",") if b], default=None,
                    help="column groups in this order, e.g. triton_kernels,triton,cutlass@0.5.2")
    hl.add_argument("--csv", type=Path, default=None, help="also write the wide table here")
    hl.add_argument("--common-tactics", action="store_true",
                    help="where a Triton-built backend ran under several Triton releases, compare at each shape only "
                    "the tactics every release ran (like for like)")
    hl.set_defaults(func=cmd_headline)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "sweep":
        A.check_sweep_args(parser, args)
    if args.cmd in ("sweep", "compare-versions"):
        args.spec = A.checked_spec(parser, lambda: sweep_spec(args))
    elif args.cmd == "reproduce":
        args.case = A.check_reproduce_args(parser, args)
        check_log_case(parser, args)
    try:
        return int(args.func(args) or 0)
    except ValueError as e:  # bad input, found before any kernel ran: one line naming the flag, exit 2
        print(f"fp4moe-diag {args.cmd}: error: {A.flag_message(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
