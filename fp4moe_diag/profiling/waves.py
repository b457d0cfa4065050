"""Waves of one of our Triton tactics on one case, without a GPU: the programs of each gemm launch (the case's own
routing, grouped as the backend groups it), the programs one SM holds (registers and shared memory of the sm_90a build,
:func:`.sass.residency`) and so the waves on a GPU of ``sms`` SMs (an H200 has 132).

``python -m fp4moe_diag.profiling.waves --model gpt-oss-20b --ep 1 --tokens 1 --tactic m16n64k256w4s3-ps-sk2``

A wave count just above a whole number leaves most SMs idle for the last one; far below 1, SMs idle throughout.  It
counts the two GEMMs (and a ``-tN`` tactic's tail launches), not the split-K finalize or the top-k sum, and it is a
plan, not a timing: ``profile`` on the GPU says what the launches did.  The routing is drawn on ``--device`` (default
cpu): a GPU run's inputs come from the GPU's generator, other numbers from the same seed, so at a few tokens the
experts hit differ from a CPU draw (:func:`..problem.inputs.case_routing`); from a few hundred pairs the counts are
alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from ..backends.triton.configs import KernelConfig, parse_config, split_k_fits
from ..backends.triton.grouping import group_pairs_by_expert, tail_groupings
from ..problem.case import MoECase
from ..problem.inputs import case_routing, local_expert_ids

H200_SMS = 132


@dataclass(frozen=True)
class LaunchWaves:
    """One gemm launch of a tactic on a case."""
    kernel: str  # gemm1 / gemm2, "... tail" for a -tN tactic's second launch
    block_m: int
    programs: int
    per_sm: int  # programs one SM holds (sass.residency of the sm_90a build)
    sms: int

    @property
    def waves(self) -> float:
        return self.programs / (self.per_sm * self.sms) if self.programs else 0.0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _per_sm(kc: KernelConfig, gemm: str, k: int) -> int:
    from .sass import _compile, resident_programs

    return resident_programs(_compile(kc, gemm, k, 90), kc.num_warps)


def launch_waves(case: MoECase, tactic: str, sms: int = H200_SMS, device: str = "cpu") -> list[LaunchWaves]:
    """gemm1 and gemm2 (then their tail launches, for ``-tN``) of ``tactic`` on ``case``, its routing drawn on
    ``device``; ValueError before any build on a tactic of another backend, a split that leaves a split of K empty,
    or ``sms`` < 1."""
    kc = parse_config(tactic)
    if kc.w4a8 or kc.mode == "ds":
        raise ValueError(f"tactic: the bf16 Triton kernels' tactics only (not -f8 / -p8 / -ds), got {kc.label}")
    if not isinstance(sms, int) or isinstance(sms, bool) or sms < 1:
        raise ValueError(f"sms: expected a positive int, got {sms!r}")
    h, i = case.hidden_size, case.intermediate_size
    if not (split_k_fits(h, kc.block_k, kc.split_k) and split_k_fits(i, kc.block_k, kc.gemm2_split)):
        raise ValueError(f"tactic: {kc.label} leaves a split of K empty at H={h}, I={i}")
    ids = local_expert_ids(case_routing(case, device)[0].cpu(), case)
    n = case.local_num_experts
    if kc.tail_m:
        big, small = tail_groupings(ids, n, kc.block_m, kc.tail_m)
        rounds = [("", kc, big.num_blocks),
                  (" tail", dataclasses.replace(kc, block_m=kc.tail_m, tail_m=0), small.num_blocks)]
    else:
        rounds = [("", kc, group_pairs_by_expert(ids, n, kc.block_m).num_blocks)]
    out = []
    for gemm, k, tiles, split in (("gemm1", h, _cdiv(i, kc.block_n), kc.split_k),
                                  ("gemm2", i, _cdiv(h, kc.gemm2_block_n), kc.gemm2_split)):
        for suffix, rc, blocks in rounds:
            out.append(LaunchWaves(gemm + suffix, rc.block_m, blocks * tiles * split, _per_sm(rc, gemm, k), sms))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .. import cli_args as A
    from ..problem.shapes import default_case

    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.waves", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=A.model_name, default="gpt-oss-20b")
    ap.add_argument("--ep", type=A.positive_int, default=1)
    ap.add_argument("--tokens", type=A.positive_int, required=True)
    ap.add_argument("--tactic", action="append", required=True, help="a Triton tactic label; repeat for several")
    ap.add_argument("--sms", type=A.positive_int, default=H200_SMS, help="SMs of the GPU (H200: 132)")
    ap.add_argument("--device", type=A.device, default="cpu", help="where to draw the routing (a GPU run's: cuda)")
    args = ap.parse_args(argv)
    try:
        case = default_case(args.model, args.ep, args.tokens)
        plans = [(t, launch_waves(case, t, args.sms, args.device)) for t in args.tactic]
    except ValueError as e:
        print(f"waves: error: {e}", file=sys.stderr)
        return 2
    for t, plan in plans:
        for w in plan:
            print(f"{t} {w.kernel}: {w.programs} programs of BLOCK_M {w.block_m}, {w.per_sm} per SM x {w.sms} SMs: "
                  f"{w.waves:.2f} waves")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
