"""Ablations of our Triton tactics on the GPU: what the dequant and the rest of the K loop cost, and how fast the
tactic's own grid and tile schedule stream the weights with nothing else in the loop.

``python -m fp4moe_diag.profiling.ablate --model gpt-oss-20b --ep 1 --tokens 16,64 --tactic m16n128k128w4s3-ps-pdl
--out data/runs/RUN/ablate.csv``

Per case (the shape table's model and EP at each token count, inputs built as the sweep builds them) and tactic, four
calls are timed with one method (CUDA-graph replays of the backend's bare launcher, the L2 flushed before each,
warm-up, median of ``--repeats``) and their kernels summed per name (torch.profiler / CUPTI, graph replays):

* the tactic itself;
* ``LABEL~nodeq``: the same loads and wgmmas without the dequant (2 instructions per 8 weights instead of ~16), built
  with at most the tactic's registers, so with the same programs per SM;
* ``LABEL~load``: only the weight and scale loads of the K loop, pipelined as deep (cp.async), the same grid;
* ``LABEL~seq``: ``~load`` with each program's bytes from one contiguous range (a layout made for the tile).

(``backends/triton/_kernels_ablate.py``; outputs are wrong by design: nothing here checks them.)  The table gives each
time, the weight bytes over it and over the read ceiling measured in the same process, and the shares: dequant
``(tactic - nodeq) / tactic``, the rest of the loop ``(nodeq - load) / tactic``, the weight stream ``load / tactic``,
and ``seq / load`` (below 1: the ps layout's access pattern costs that much of the stream).
``~load`` takes fewer registers than its tactic (m16n128k128w4s3-ps gemm1: 63 against 168, sm_90a, triton 3.6.0),
so more of its programs share an SM and more loads are in flight than the tactic can have: its time is a floor of the
schedule, not the tactic's loads alone (``profiling.sass --tactic LABEL~load`` gives its registers and residency).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional, Sequence

import pandas as pd

from ..analysis.ablations import COLUMNS, ablation_table, markdown

#: the calls of one ablation, in order: the tactic, then its ablations (backends/triton/configs.ABLATIONS)
VARIANTS = ("", "nodeq", "load", "seq")
#: untimed replays of each call before its timing.  With five, the H100's 120b EP4 T=64 tactic was bimodal over its
#: 30 timed replays (s17a, s18a: median 197.6 us, p10 178.3; over 100 replays, s17b: median 178.8, p90 197) while
#: every sweep, whose tactics are warm from the screening pass, timed it at 178.0-178.6 with the same kernel sums
WARMUP = 30


def variant_labels(tactic: str) -> list[str]:
    """The labels timed for ``tactic``: itself, ``~nodeq``, ``~load``, ``~seq``; a ValueError for a tactic that is
    not a ps one or is already an ablation."""
    from ..backends.triton.configs import parse_config

    kc = parse_config(tactic)
    if kc.ablate or not kc.ps:
        raise ValueError(f"tactic: expected a -ps tactic of backend triton (not an ablation), got {tactic!r}")
    return [kc.label + (f"~{v}" if v else "") for v in VARIANTS]


def ablate_case(case: Any, tactic: str, device: Any, repeats: int, read_gbps: float,
                warmup: int = WARMUP) -> list[dict]:
    """The rows of :data:`COLUMNS` (but the environment's) of ``tactic`` and its ablations on ``case``, each call
    replayed ``warmup`` times untimed before it is timed."""
    from ..measure.ceilings import moe_work
    from ..measure.kernel_time import breakdown_json, time_kernels
    from ..measure.timing import time_fn
    from .call_setup import prepare_call

    labels = variant_labels(tactic)
    call = prepare_call("triton", case, dict(zip(VARIANTS, labels)), device)
    work = moe_work(case, call.prepared.inputs.local_topk_ids)
    rows = []
    for variant, label in zip(VARIANTS, labels):
        launch = call.bind(call.tactics[variant])
        t = time_fn(launch, device, warmup=warmup, repeats=repeats, flush_l2=True, cuda_graph=True)
        k = time_kernels(launch, device, repeats=max(5, repeats // 3), flush_l2=True, cuda_graph=True)
        tbps = work.weight_bytes / (t.median_us * 1e-6) / 1e12
        rows.append(dict(model=case.model, ep_size=case.ep_size, num_tokens=case.num_tokens, tactic=labels[0],
                         variant=variant or "tactic", label=label, time_median_us=t.median_us, time_p10_us=t.p10_us,
                         time_p90_us=t.p90_us, time_spread=t.spread, time_method=t.method,
                         time_kernel_median_us=k.sum.median_us, time_kernel_breakdown=breakdown_json(k.per_kernel_us),
                         weight_bytes=work.weight_bytes, weight_TBps=tbps, frac_read_ceiling=tbps * 1e3 / read_gbps,
                         ceiling_read_GBps=read_gbps))
    return rows


def _parser() -> argparse.ArgumentParser:
    from .. import cli_args as A
    from .gpu_args import add_case_args, add_device_out_args

    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.ablate", description=__doc__.split("\n\n")[0])
    add_case_args(ap)
    ap.add_argument("--tactic", action="append", required=True, help="a -ps tactic of backend triton; repeat")
    ap.add_argument("--repeats", type=A.positive_int, default=30)
    ap.add_argument("--warmup", type=A.non_negative_int, default=WARMUP,
                    help=f"untimed replays of each call before it is timed (default {WARMUP})")
    add_device_out_args(ap)
    return ap


def _checked(ap: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> tuple[argparse.Namespace, list]:
    """The arguments and cases, every check done before any GPU work (one-line errors, exit 2)."""
    from .gpu_args import cases_out_device

    args = ap.parse_args(argv)
    try:
        for t in args.tactic:
            variant_labels(t)
    except ValueError as e:
        ap.error(str(e))
    return args, cases_out_device(ap, args, "ablations are timed on a CUDA GPU (on a CPU, profiling.sass --tactic "
                                            "LABEL~nodeq / ~load builds them)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..environment import environment_info
    from ..measure.ceilings import measure_ceilings
    from .gpu_args import write_rows

    ap = _parser()
    args, cases = _checked(ap, argv)
    ceilings = measure_ceilings(args.device, sustain_s=0.0)  # only the read ceiling is used: no 3 s of bf16 GEMMs
    read_gbps = ceilings.stream_bytes_per_s / 1e9
    env = environment_info(args.device)
    rows: list[dict] = []
    for case in cases:
        for t in args.tactic:
            rows += [r | {k: env.get(k, "") for k in ("gpu_name", "triton_version", "git_commit")}
                     for r in ablate_case(case, t, args.device, args.repeats, read_gbps, args.warmup)]
            write_rows(rows, COLUMNS, args.out)  # after every case: a cut-off run keeps what it finished
    print(markdown(ablation_table(pd.DataFrame(rows))))
    print(json.dumps({"out": str(args.out), "rows": len(rows), "read_GBps": round(read_gbps, 1)}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
