"""Command line: ``python -m fp4moe_diag {reproduce,sweep,profile,report,shapes,versions}``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

SUMMARY_COLUMNS = [
    "model", "ep_size", "num_tokens", "backend", "tactic_label", "status", "time_median_us",
    "time_spread", "frac_bw_roofline", "rel_l2", "correct", "is_best", "is_default_tactic",
]


def _ints(text: Optional[str]) -> Optional[list[int]]:
    if not text:
        return None
    return [int(x) for x in text.split(",") if x.strip()]


def _strs(text: Optional[str]) -> Optional[list[str]]:
    if not text:
        return None
    return [x.strip() for x in text.split(",") if x.strip()]


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .bugrepro import SEED_CASE, reproduce_meta_bug, static_meta_check

    case = SEED_CASE
    if args.log:
        from .vllm_log import parse_vllm_kwargs_log

        case = parse_vllm_kwargs_log(Path(args.log).read_text())
        if args.tokens:
            case = case.with_tokens(args.tokens)
    elif args.tokens:
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


def split_labels(text: Optional[str]) -> list[str]:
    """Comma list of tactic labels; commas inside parentheses belong to the label ("default(-1,-1)")."""
    return [x.strip() for x in re.split(r",(?![^()]*\))", text or "") if x.strip()]


def cmd_profile(args: argparse.Namespace) -> int:
    """Nsight Compute (through nsight-python) per-kernel metrics of chosen tactics of one shape."""
    from .report import nsight_status, profile_kernels  # report re-exports report_profile (import order)
    from .shapes import load_vllm_cases

    device = args.device or "cuda"
    ok, why = nsight_status(device)
    if not ok:
        print(f"cannot profile here: {why}", file=sys.stderr)
        return 2
    cases = load_vllm_cases(models=[args.model], ep_sizes=[args.ep], token_counts=[args.tokens])
    if not cases:
        print(f"no shape {args.model} EP{args.ep} in the shape table", file=sys.stderr)
        return 2
    labels = split_labels(args.tactics)
    tactics = {f"t{i}": lab for i, lab in enumerate(labels)}
    out = Path(args.out)
    k = profile_kernels(cases[0], args.backend, device, out, tactics, runs=args.runs)  # also writes kernels.csv
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(k.drop(columns=["annotation"], errors="ignore").to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


def summary_table(df: pd.DataFrame, max_rows: int = 150) -> str:
    """The sweep's closing table: every row when there are at most ``max_rows``, else per case x
    backend the best, the default and the combined tactic only (with default/best)."""
    cols = [c for c in SUMMARY_COLUMNS if c in df]
    d = df
    head = ""
    if len(df) > max_rows:
        keep = df["is_best"].fillna(False).astype(bool) | df["is_default_tactic"].fillna(False).astype(bool)
        keep |= df["tactic_label"].astype(str).str.contains(r"\+", regex=True) | (df["status"] != "ok")
        d = df[keep].copy()
        key = ["model", "ep_size", "num_tokens", "backend"]
        best = df[df["is_best"].fillna(False).astype(bool)].set_index(key)["time_median_us"]
        d["x_best"] = [r.time_median_us / best.get(tuple(r[k] for k in key), float("nan")) for _, r in d.iterrows()]
        cols = cols + ["x_best"]
        head = (f"{len(df)} rows; shown: best, default and combined tactic per case x backend, and rows that are "
                f"not ok (x_best = time / best time)\n")
    with pd.option_context("display.width", 220, "display.max_rows", 2000):
        return head + d[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}")


def cmd_sweep(args: argparse.Namespace) -> int:
    import torch

    from .tune import sweep
    from .backends import get_backend
    from .measure.ceilings import measure_ceilings
    from .results import environment_info, run_dir_name, save_run
    from .shapes import load_vllm_cases

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cases = []
    for spec in _strs(args.models) or []:
        # "model", "model:ep" or "model:ep:max_tokens" (in the order given: earlier specs run first)
        parts = spec.split(":")
        eps = [int(parts[1])] if len(parts) > 1 and parts[1] else _ints(args.ep)
        mx = int(parts[2]) if len(parts) > 2 else args.max_tokens
        cases += load_vllm_cases(models=[parts[0]], ep_sizes=eps, token_counts=_ints(args.tokens), max_tokens=mx)
    if not cases:
        print("no cases match the filters", file=sys.stderr)
        return 2
    if args.hidden_scale:
        cases = [c.replace(hidden_size=c.hidden_size // args.hidden_scale,
                           intermediate_size=c.intermediate_size // args.hidden_scale) for c in cases]
    backends = [get_backend(b) for b in _strs(args.backends) or ["reference"]]
    ceilings = None
    if torch.device(device).type == "cuda" and not args.no_ceilings:
        ceilings = measure_ceilings(device)
        print(f"ceilings: copy {ceilings.copy_bytes_per_s/1e9:.0f} GB/s, bf16 {ceilings.bf16_flops_per_s/1e12:.0f} TFLOP/s")
    env = environment_info(device)
    out_dir = Path(args.out) if args.out else Path("data/runs") / run_dir_name(env["gpu_name"], tag=args.tag)
    partial: list = []

    def checkpoint(res) -> None:  # a killed run still leaves every finished case on disk
        from .results import to_frame

        partial.append(res.rows)
        part = to_frame(pd.concat(partial, ignore_index=True).to_dict("records"))
        part["run_id"] = out_dir.name
        save_run(part, out_dir)
        b = res.best.label if res.best else "-"
        print(f"  {res.case.label} {res.backend}: {len(res.rows)} rows, best {b}", flush=True)

    t0 = time.perf_counter()
    df = sweep(cases, backends, device, env=env, warmup=args.warmup, repeats=args.repeats,
               cuda_graph=args.cuda_graph, ceilings=ceilings, progress_bar=not args.no_progress,
               max_seconds_per_tactic=args.max_seconds_per_tactic, screen_repeats=args.screen,
               screen_top=args.screen_top, on_result=checkpoint)
    wall = time.perf_counter() - t0
    df["run_id"] = out_dir.name
    paths = save_run(df, out_dir)
    print(f"\n{len(df)} rows in {wall:.0f} s -> {paths['parquet']} and {paths['csv']}\n")
    print(summary_table(df, max_rows=args.max_table_rows))
    return 0


def cmd_shapes(args: argparse.Namespace) -> int:
    from .shapes import load_shape_table

    df = load_shape_table()
    if args.model:
        df = df[df["model"].isin(_strs(args.model))]
    cols = [c for c in df.columns if c != "source"] if not args.source else list(df.columns)
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(df[cols].to_string(index=False))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import run_notebooks

    extra = {}
    for kv in args.param or []:
        if "=" not in kv:
            raise SystemExit(f"--param: expected key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        extra[k] = json.loads(v) if v[:1] in "[{0123456789-" or v in ("true", "false", "null") else v
    out = run_notebooks(out_dir=args.out, quick=args.quick, backend=args.backend, device=args.device,
                        only=_strs(args.only), html=not args.no_html, extra_parameters=extra)
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fp4moe-diag", description=__doc__.split("\n")[0] + "\n\n"
                                "Profiling and diagnostics for FlashInfer's FP4 fused-MoE kernels.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("reproduce", help="reproduce the routed-MoE + autotune 'Cannot pack tensors on meta' bug",
                       description="Run the seed's call (autotune(True) + trtllm_fp4_block_scale_routed_moe). On "
                       "SM100 it runs the real kernel; elsewhere it reports not-applicable and runs the stock op "
                       "over a TVM-FFI packing stub to show which tuner input is on 'meta'.")
    r.add_argument("--device", help="cuda:N or cpu (default: cuda if present)")
    r.add_argument("--log", help="a vLLM kwargs log (seed format) to take the case from")
    r.add_argument("--tokens", type=int, help="override the number of tokens")
    r.add_argument("--static", action="store_true", help="only the stub check (any machine)")
    r.add_argument("--traceback", action="store_true", help="print the full traceback")
    r.add_argument("--json", help="write the verdict as JSON here")
    r.set_defaults(func=cmd_reproduce)

    s = sub.add_parser("sweep", help="every tactic of every backend over vLLM shapes -> data/runs/",
                       description="Tune every tactic of the chosen backends on the vLLM-captured shapes "
                       "(data/vllm_shapes.csv); one row per case x backend x tactic; prints the table last.")
    s.add_argument("--backends", default="reference", help="comma list: reference,cutlass,triton,trtllm")
    s.add_argument("--models", default="gpt-oss-20b",
                   help="comma list of models from data/vllm_shapes.csv; an entry may be model:ep[:max_tokens]")
    s.add_argument("--ep", default=None, help="comma list of EP sizes (default: all in the table)")
    s.add_argument("--tokens", default=None, help="comma list of token counts (default: the table's)")
    s.add_argument("--max-tokens", type=int, default=None)
    s.add_argument("--hidden-scale", type=int, default=0, help="divide H and I by this (CPU smoke runs)")
    s.add_argument("--device")
    s.add_argument("--warmup", type=int, default=5)
    s.add_argument("--repeats", type=int, default=30)
    s.add_argument("--cuda-graph", action="store_true", help="time CUDA-graph replays")
    s.add_argument("--max-seconds-per-tactic", type=float, default=10.0,
                   help="stop timing a tactic after this many seconds (fewer repeats, still a median)")
    s.add_argument("--screen", type=int, default=None, metavar="N",
                   help="two-pass timing: every tactic N timed runs, then the --screen-top fastest, the default "
                        "and the combined tactic in full (every tactic is still checked for correctness)")
    s.add_argument("--screen-top", type=int, default=4, help="tactics re-timed in full after --screen (default 4)")
    s.add_argument("--max-table-rows", type=int, default=150,
                   help="print every row up to this many, else only best/default/combined per case x backend")
    s.add_argument("--no-ceilings", action="store_true", help="skip the copy/GEMM roofline measurement")
    s.add_argument("--out", help="run folder (default data/runs/<date>-<gpu>[-tag])")
    s.add_argument("--tag", default="")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=cmd_sweep)

    pr = sub.add_parser("profile", help="Nsight Compute metrics per kernel of chosen tactics (nsight-python)",
                        description="Runs the given tactics of one backend on one vLLM shape under ncu (through "
                        "nsight-python) and prints per-kernel time, DRAM/SM throughput, issue-slot use, occupancy.")
    pr.add_argument("--backend", default="triton")
    pr.add_argument("--model", default="gpt-oss-20b")
    pr.add_argument("--ep", type=int, default=1)
    pr.add_argument("--tokens", type=int, default=64)
    pr.add_argument("--tactics", required=True, help="comma list of tactic labels (as in the sweep table)")
    pr.add_argument("--runs", type=int, default=3)
    pr.add_argument("--device", default=None)
    pr.add_argument("--out", default="reports/profile")
    pr.set_defaults(func=cmd_profile)

    rp = sub.add_parser("report", help="execute the notebooks headless (papermill) into reports/ + HTML",
                        description="Runs notebooks/*.ipynb with papermill into reports/ and exports HTML. "
                        "On a CPU machine it uses the reference backend and the committed GPU runs in data/.")
    rp.add_argument("--out", default="reports")
    rp.add_argument("--quick", action="store_true", help="small shapes, few repeats (CI)")
    rp.add_argument("--backend", default=None)
    rp.add_argument("--device", default=None)
    rp.add_argument("--only", default=None, help="comma list of notebook name prefixes, e.g. 01,05")
    rp.add_argument("--no-html", action="store_true")
    rp.add_argument("--param", action="append", help="extra papermill parameter key=value (JSON values)")
    rp.set_defaults(func=cmd_report)

    sh = sub.add_parser("shapes", help="print the vLLM-captured shape table")
    sh.add_argument("--model", default=None)
    sh.add_argument("--source", action="store_true", help="include the provenance column")
    sh.set_defaults(func=cmd_shapes)

    v = sub.add_parser("versions", help="flashinfer version matrix: meta placeholder / routed API per install")
    v.add_argument("dirs", nargs="+", help="pip --target dirs, one flashinfer version each")
    v.add_argument("--csv", default=None)
    v.set_defaults(func=cmd_versions)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
