"""Decode tactics of mode ps with 8 warps (two warpgroups, each the wgmma of 64 weight rows), and the 4-warp
m16n64k256 tile without split-K.  Imports nothing of ours but :mod:`.configs`, no triton.

Why (issue #25, goal 2): the decode kernels are latency-bound, not DRAM-bound (Nsight Compute, 20b EP1 T=64, s9d:
gemm1 m16n128k128w4s3 3.04 TB/s, issue slots 67 % busy, 168 registers: 3 programs of 4 warps per SM, 3 warps per
scheduler).  Session 10 cut the loop's instructions by 7 % at the same occupancy (-r168) and gained nothing, so the
lever left is more warps per scheduler.  With 8 warps the same 128-row tile is split over two warpgroups: half the
weight fragment per thread (gemm1 about 110 registers on sm_90a, gemm2 about 71; ``profiling.sass``), so 2 programs
of 8 warps per SM (4 warps per scheduler) on gemm1 and 3 on gemm2, at 3.6 / 4.4 loop instructions per weight instead
of 3.1 / 3.6 (the per-iteration overhead over half the weights).  The GPU says which wins.

``m16n64k256w4s3-ps`` without split-K: at T <= 4 the split-2 tile puts 720 programs on about 400 slots (20b EP1
T=1: 1.8 waves of 46 KB programs); unsplit, 360 programs of 92 KB are one wave of longer programs.
"""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig

#: offered at decode (``T * top_k <= DECODE_MAX_PAIRS``) wherever mode ps is, as PS_DECODE_CONFIGS
PS_DECODE8_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 128, 128, 8, 3, "ps"),
    (16, 128, 128, 8, 4, "ps"),
    (16, 128, 256, 8, 3, "ps", 2),
    (16, 64, 256, 4, 3, "ps"),
))

#: the same with programmatic dependent launch (compiled only, as PS_PDL_CONFIGS), and the 8-warp tile with gemm2
#: split in two (the shape of the T=16 winner m16n128k128w4s3-ps-g2sk2-pdl)
PS_DECODE8_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_DECODE8_CONFIGS) + (
    KernelConfig(16, 128, 128, 8, 3, "ps", 1, 2, pdl=1),
)
