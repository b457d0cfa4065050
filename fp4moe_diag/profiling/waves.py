"""Waves of one of our Triton tactics on one case, without a GPU: the programs of each gemm launch (the case's own
routing, grouped as the backend groups it), the programs one SM holds (registers and shared memory of the sm_90a build,
:func:`.sass.residency`) and so the waves on a GPU of ``sms`` SMs (an H200 has 132).

``python -m fp4moe_diag.profiling.waves --model gpt-oss-20b --ep 1 --tokens 1 --tactic m16n64k256w4s3-ps-sk2``

A wave count just above a whole number leaves most SMs idle for the last one; far below 1, SMs idle throughout.

Two floors per launch, also without a GPU: the **issue floor**, the time the SMs' 4 schedulers need to issue the K loops
alone at one instruction per cycle (programs x K steps x the build's loop instructions x warps, over SMs x 4 x the clock,
1.98 GHz by default: the H200's, as Nsight Compute runs it), and the **DRAM floor**, the weight and scale bytes of the
experts the launch reads over the read ceiling (4380 GB/s by default: the H200's measured one).  Their ratio is the
share of issue slots the loops alone take at the DRAM floor: a kernel whose warps issue in at most ~70 % of the cycles
(ours: 55-67 % at decode, Nsight Compute) cannot stream at the DRAM floor when that share is above it.  A third, the
**MMA floor**, is the launch's products (padded blocks included) at the measured bf16 ceiling (790 TFLOP/s by
default): the prefill yardstick.

It counts the two GEMMs (and a ``-tN`` tactic's tail launches), not the split-K finalize or the top-k sum, and it is a
plan, not a timing: ``profile`` on the GPU says what the launches did.  A ``-tNf`` launch runs two kinds of program
(:mod:`..backends.triton._kernels_over`): blocks with a tail (``BLOCK_M + N`` rows, two dots a K step) and plain ones;
each kind is a row (``gemm1 long`` / ``gemm1 plain``, its own K loop from :mod:`.sass_over`) whose waves are the whole
launch's, and whose floors add up.  The routing is drawn on ``--device`` (default cpu): a GPU run's inputs come from
the GPU's generator, other numbers from the same seed, so at a few tokens the experts hit differ from a CPU draw
(:func:`..problem.inputs.case_routing`); from a few hundred pairs the counts are alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..backends.triton.configs import KernelConfig, k_split, parse_config, split_k_fits
from ..backends.triton.grouping import fused_tail_grouping, group_pairs_by_expert, tail_groupings
from ..problem.case import MoECase
from ..problem.inputs import case_routing, local_expert_ids

H200_SMS = 132


H200_CLOCK_GHZ = 1.98  #: the H200's SM clock as Nsight Compute locks it (nsight-python's ComputeClock, data/runs/)
H200_READ_GBPS = 4380.0  #: the H200's measured read-only streaming ceiling (the low end of 4381-4464 GB/s)
H200_BF16_TFLOPS = 790.0  #: the H200's measured bf16 GEMM ceiling (786-816 TFLOP/s in the runs)


@dataclass(frozen=True)
class LaunchWaves:
    """One gemm launch of a tactic on a case."""
    kernel: str  # gemm1 / gemm2, "... tail" for a -tN tactic's second launch
    block_m: int
    programs: int
    per_sm: int  # programs one SM holds (sass.residency of the sm_90a build)
    sms: int
    k_steps: int = 0  # K loop iterations of one program (its split of K over BLOCK_K)
    loop_instructions: int = 0  # SASS instructions of the build's K loop (each warp issues them once per step)
    num_warps: int = 0
    weight_bytes: int = 0  # weight + scale bytes of the experts this launch reads (each once)
    step_flops: int = 0  # products x 2 of one program's K step: BLOCK_M x its weight rows x BLOCK_K x 2
    launch_programs: int = 0  # -tNf: the programs of the whole launch this kind of program is a part of (0: programs)

    @property
    def waves(self) -> float:
        total = self.launch_programs or self.programs
        return total / (self.per_sm * self.sms) if total else 0.0

    def issue_floor_us(self, clock_ghz: float = H200_CLOCK_GHZ) -> float:
        """The K loops' warp instructions over the SMs' issue rate (4 per SM per cycle)."""
        warp_instructions = self.programs * self.k_steps * self.loop_instructions * self.num_warps
        return warp_instructions / (self.sms * 4 * clock_ghz * 1e3)

    def dram_floor_us(self, read_gbps: float = H200_READ_GBPS) -> float:
        return self.weight_bytes / (read_gbps * 1e3)

    def mma_floor_us(self, bf16_tflops: float = H200_BF16_TFLOPS) -> float:
        return self.programs * self.k_steps * self.step_flops / (bf16_tflops * 1e6)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _expert_bytes(gemm: str, h: int, i: int) -> int:
    """MXFP4 weight + E8M0 scale bytes of one expert's gemm1 (``[2I, H]``) or gemm2 (``[H, I]``) matrix."""
    rows, k = (2 * i, h) if gemm == "gemm1" else (h, i)
    return rows * (k // 2 + k // 32)


def _gemms(case: MoECase, kc: KernelConfig) -> tuple[tuple[str, int, int, int, int], ...]:
    """Per GEMM of ``kc`` on ``case``: its name, reduction length, output tiles, split of K and the weight rows of one
    program (gemm1: lin and gate, ``2 BLOCK_N``)."""
    h, i = case.hidden_size, case.intermediate_size
    return (("gemm1", h, _cdiv(i, kc.block_n), kc.split_k, 2 * kc.block_n),
            ("gemm2", i, _cdiv(h, kc.gemm2_block_n), kc.gemm2_split, kc.gemm2_block_n))


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
    from .sass import count

    ids = local_expert_ids(case_routing(case, device)[0].cpu(), case)
    n = case.local_num_experts
    if kc.tail_fused:
        return _fused_launch_waves(case, kc, ids, sms)
    if kc.tail_m:
        big, small = tail_groupings(ids, n, kc.block_m, kc.tail_m)
        rounds = [("", kc, big), (" tail", dataclasses.replace(kc, block_m=kc.tail_m, tail_m=0), small)]
    else:
        rounds = [("", kc, group_pairs_by_expert(ids, n, kc.block_m))]
    out = []
    for gemm, k, tiles, split, rows in _gemms(case, kc):
        for suffix, rc, grouping in rounds:
            built = count(rc.label, gemm, k)  # the sm_90a build: residency and its K loop
            experts = int(grouping.block_expert_ids.unique().numel())
            out.append(LaunchWaves(gemm + suffix, rc.block_m, grouping.num_blocks * tiles * split,
                                   built.resident_programs, sms, k_split(k, rc.block_k, split) // rc.block_k,
                                   built.loop_instructions, rc.num_warps, experts * _expert_bytes(gemm, h, i),
                                   2 * rc.block_m * rows * rc.block_k))
    return out


def _fused_launch_waves(case: MoECase, kc: KernelConfig, ids: Any, sms: int) -> list[LaunchWaves]:
    """A ``-tNf`` tactic's two launches, each as its two kinds of program: the blocks with a tail first (``long``:
    ``BLOCK_M + N`` entries, the K loop with two dots), then the plain ones (:func:`.grouping.fused_tail_grouping`;
    the builds' loops from :func:`.sass_over.summary`)."""
    from .sass_over import summary

    h, i = case.hidden_size, case.intermediate_size
    grouping, n_over = fused_tail_grouping(ids, case.local_num_experts, kc.block_m, kc.tail_m)
    experts = grouping.block_expert_ids
    parts = (("long", kc.block_m + kc.tail_m, experts[:n_over]), ("plain", kc.block_m, experts[n_over:]))
    out = []
    for gemm, k, tiles, split, rows in _gemms(case, kc):  # split: 1 (parse_config refuses split-K for -tNf)
        built = summary(kc.label, gemm, k)
        by_dots = sorted(built["loops"], key=lambda lp: -lp["wgmma"])  # the two-dot loop first
        if len(by_dots) != 2:
            raise ValueError(f"tactic: {kc.label}'s {gemm} build has {len(by_dots)} K loops, expected 2 (one a kind)")
        for (name, block_rows, blocks), loop in zip(parts, by_dots):
            out.append(LaunchWaves(f"{gemm} {name}", block_rows, int(blocks.numel()) * tiles,
                                   built["resident_programs"], sms, k_split(k, kc.block_k, split) // kc.block_k,
                                   loop["instructions"], kc.num_warps,
                                   int(blocks.unique().numel()) * _expert_bytes(gemm, h, i),
                                   2 * block_rows * rows * kc.block_k, launch_programs=grouping.num_blocks * tiles))
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
    ap.add_argument("--clock-ghz", type=A.positive_float, default=H200_CLOCK_GHZ, help="SM clock for the issue floor")
    ap.add_argument("--read-gbps", type=A.positive_float, default=H200_READ_GBPS,
                    help="read ceiling for the DRAM floor (GB/s)")
    ap.add_argument("--bf16-tflops", type=A.positive_float, default=H200_BF16_TFLOPS,
                    help="bf16 GEMM ceiling for the MMA floor (TFLOP/s)")
    args = ap.parse_args(argv)
    try:
        case = default_case(args.model, args.ep, args.tokens)
        plans = [(t, launch_waves(case, t, args.sms, args.device)) for t in args.tactic]
    except ValueError as e:
        print(f"waves: error: {e}", file=sys.stderr)
        return 2
    for t, plan in plans:
        for w in plan:
            issue, dram, mma = (w.issue_floor_us(args.clock_ghz), w.dram_floor_us(args.read_gbps),
                                w.mma_floor_us(args.bf16_tflops))
            share = f"{issue / dram:.0%}" if dram else "-"
            top = max((issue, "issue"), (dram, "DRAM"), (mma, "MMA"))[1]
            of = f" (of {w.launch_programs} in the launch)" if w.launch_programs else ""
            print(f"{t} {w.kernel}: {w.programs} programs{of} of BLOCK_M {w.block_m}, {w.per_sm} per SM x {w.sms} SMs: "
                  f"{w.waves:.2f} waves; floors: issue {issue:.1f} us ({w.k_steps} K steps x {w.loop_instructions} "
                  f"loop instructions x {w.num_warps} warps), DRAM {dram:.1f} us ({w.weight_bytes / 1e6:.1f} MB), "
                  f"MMA {mma:.1f} us (largest: {top}); the loops alone take {share} of the issue slots at the DRAM "
                  f"floor")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
