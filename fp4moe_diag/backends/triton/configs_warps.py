"""Tactics of mode ps with more warps per SM scheduler (issue #25): 8-warp decode tiles and 16-warp gate/up prefill
tiles.  Imports nothing of ours but :mod:`.configs`, no triton.

Why: both ends are latency-bound, not bound by a pipe or by DRAM (Nsight Compute):
- decode (20b EP1 T=64, s9d): gemm1 m16n128k128w4s3 reads DRAM at 3.04 TB/s with the issue slots 67 % busy; 168
  registers, so 3 programs of 4 warps per SM, 3 warps per scheduler.  Session 10 cut the loop by 7 % of its
  instructions at the same occupancy (-r168) and gained nothing;
- prefill (20b EP1 T=4096, s12e): the m256n64 -gu gemm1 issues in 32 % of the cycles, its warps stalled on
  fixed-latency dependencies ('wait', 36 %) of the upcast; 255 registers, 1 program of 8 warps per SM, 2 warps per
  scheduler.
The lever left is more warps per scheduler, each with less of the tile.  Registers, spills and residency below:
sm_90a, K = 3072 (gpt-oss as the sweeps run it: H = I = 3072, vLLM's padding), triton 3.6.0, ``python -m
fp4moe_diag.profiling.sass``, whose registers there match the H200's Nsight Compute for the tiles profiled
(m16n64k256w4s3-ps-sk2 113 / 116, m16n128k128w4s3 168 / 123, m64n128k64w8s4 128, m128n128k64w8s3 255).  None of these
spills in its K loop.  Measured on the H200 (session 15, data/runs/2026-12-05-nvidia-h200-s15a-d): the 16-warp -gu
prefill tiles win at 120b EP4 T=4096 and 20b EP1 T=1024..16384, EP2 T=4096 (gemm1 at 20b EP2 T=4096: 605 -> 563 us);
the 8-warp decode tiles win nowhere that counts (20b EP1 T=64: the issue rate stays at 69 % while the instructions
grow 17 %; under triton 3.7.1 they are 1.7-1.8x slower).
Capping registers instead (Triton's ``maxnreg``, 3 programs of the 8-warp decode tile need <= 80) makes ptxas wait
for every wgmma before the next at K = 3072 (``WARPGROUP.DEPBAR.LE gsb0, 0x0`` after each, at every cap <= 88): not
offered.
"""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig

#: decode (offered where PS_DECODE_CONFIGS are): the 128-row tiles over two warpgroups, half the weight fragment per
#: thread.  m16n128k128w8: gemm1 91 registers (2 programs = 16 warps per SM, against 3 x 4 = 12 for the 4-warp
#: winner), gemm2 70 (3 programs = 24 warps, against 16), at 3.55 / 4.33 loop instructions per weight against 3.02 /
#: 3.48 (the per-iteration overhead over half the weights).  m16n128k256w8s3-ps-sk2 (for T <= 16, as the split
#: winners there): 109 / 121 registers, 2 programs of 8 warps.
PS_DECODE8_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 128, 128, 8, 3, "ps"),
    (16, 128, 128, 8, 4, "ps"),
    (16, 128, 256, 8, 3, "ps", 2),
))

#: the same with programmatic dependent launch (compiled only, as PS_PDL_CONFIGS), and the 8-warp tile with gemm2
#: split in two (the shape of the T=16 winner m16n128k128w4s3-ps-g2sk2-pdl)
PS_DECODE8_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_DECODE8_CONFIGS) + (
    KernelConfig(16, 128, 128, 8, 3, "ps", 1, 2, pdl=1),
)

#: prefill (offered above the decode sizes, as PS_GU_WIDE_CONFIGS): triton_kernels' tile shape (128 tokens x 256
#: gate/up-interleaved weight rows, -gu) over 16 warps, four warpgroups of 64 weight rows each (Triton puts all 16
#: warps along the weight rows: no weight is upcast twice).  gemm1 128 registers (the 8-warp tile: 255 and 8 bytes of
#: stack), 1 program of 16 warps per SM (4 warps per scheduler); 43 loop instructions per 1000 weight-token products
#: against 33 for the 8-warp tile (each thread's share of the activation loads and loop upkeep over half the weights).
#: gemm2 on 256 weight rows: 128 registers and 80 bytes of stack, outside its K loop.  m64n128: 90 / 105 registers.
PS_GU16_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c, "ps", block_n2=256, gate_up=True, tail_m=t)
                                                  for *c, t in (
    (128, 128, 64, 16, 3, 0),
    (128, 128, 64, 16, 4, 0),
    (64, 128, 64, 16, 4, 0),
    (128, 128, 64, 16, 3, 64),
    (128, 128, 64, 16, 3, 32),  # session 33: 32-row tails (why: configs_tail)
)) + (KernelConfig(128, 128, 64, 16, 3, "ps", block_n2=256, gate_up=True, tail_m=32, tail_fused=True),  # -t32f: s34
      ) + tuple(KernelConfig(*c, "ps", block_n2=256, gate_up=True, fused=True) for c in (
    # -fs: gemm2 sums each token's top-k rows itself (the last program to finish a token's rows), the top-k sum kernel
    # left out: at 20b EP2 T=4096, where these tiles trail triton_kernels by 1.2 % (s15b-d), that kernel took 18.5 us
    # of 896 (Nsight Compute, s15a). The cost (sm_90a, K = 3072, triton 3.6.0): gemm2 5.66 loop instructions per weight
    # against 5.53, and 2 spill operations in its loop; whether the 18.5 us outweigh them is for the H200 to say (not
    # timed yet; tools/device/plans/headline.sh sweeps them). No tail variant (-tN excludes -fs). Interpreter-tested.
    (128, 128, 64, 16, 3),
    (128, 128, 64, 16, 4),
))

#: the 16-warp ``-gu`` tiles with K steps of 128 (session 26; triton_kernels' 128 x 256 x 128 tile, over 16 warps).
#: Why: at 20b EP2 T=4096, goal 1's last miss, ours' gemm1 (the k64 tile above) is 0.4-0.7 % slower than triton_kernels'
#: SwiGLU matmul in the same replays (H100, ``duel --kernel-time``, ``docs/conditions-s26.md``), and Nsight Compute
#: calls it latency-bound (issue 49-51 %, math-pipe stalls 16-18 %).  sm_90a, K = 3072, triton 3.6.0
#: (``profiling.sass``): gemm1 4.81 loop instructions per weight against 5.53, 8 wgmma groups an iteration (<= 7
#: waits) against 4 (<= 3); gemm2 4.84 against 5.53; both 128 registers, no spill, 1 program of 16 warps an SM (49 KB of
#: shared memory a stage).  Measured slower (H100, ``data/runs/2026-12-06-nvidia-h100-s26g``, the prefill half of the
#: headline: every row correct, 17 screen pairs against the k64 twins at 20b EP1 / EP2 T = 4096 / 16384 and 120b EP4
#: T=4096: 1.11-1.14x, median 1.135): fewer instructions do not make up for what a K step of 128 costs with one
#: program an SM: Nsight Compute (H100 ``-s27a``): gemm1 635.8 against 560.9 us, issue slots busy 39 against 50 %,
#: MIO-queue stalls 6.3 against 2.4 %.  Not offered (:meth:`.backend.TritonMXFP4Backend.tactics`); kept for that
#: run's labels and run by label (:func:`.backend.label_only_configs`).
PS_GU16_K128_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c, "ps", block_n2=256, gate_up=True, tail_m=t)
                                                       for *c, t in ((128, 128, 128, 16, 3, 0),
                                                                     (128, 128, 128, 16, 4, 0),
                                                                     (128, 128, 128, 16, 3, 64)))

#: the same 16-warp ``-gu`` tiles (not ``-fs``) with programmatic dependent launch (``-pdl``; GPU only): the kernels
#: of a call (gemm1, its tails, gemm2, the top-k sum) chained, so the next kernel's programs are resident when one
#: ends (:data:`.configs_tail.PS_TAIL_PDL_CONFIGS`: 0.5-1 % faster on the 8-warp prefill tiles, H200 s12f / s12g).
#: These tiles won at T >= 1024 from session 15 on without a ``-pdl`` twin; the gap left to triton_kernels at 20b EP2
#: T=4096 is 0.4-0.6 % in duels (H100 ``-s25b``, H200 ``-s24c``); traced on the same replays (session 26) it is
#: gemm1's, not what lies between the kernels.  Offered in session 25; level on the H100 (``-s25c``: 31 of 32 pairs,
#: median 0.999: one program of 16 warps fills an SM, so only the launch latency is hidden) and on the H200 (``-s26c``:
#: 116 pairs of every -pdl family, 103 level, 9 faster, median 0.996; a -pdl twin is ours' best at 7 of 8 prefill
#: shapes).
PS_GU16_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_GU16_CONFIGS
                                                      if not c.fused)

#: session 37: the ``-t32f`` tile over 64-token blocks (run by label only, ``backend.label_only_configs``).  ptxas
#: from 13.3 on (Triton 3.9 calls 13.4 for sm_90) serialises the 128-token tile's wgmmas (C7512: insufficient register
#: resources, ``profiling.sass_over``); this one keeps 3 and 1 groups in flight there with 128 registers and no spill.
#: Measured slower on the H200 (``-s37a``, 3.6.0, 3.9.0 and 3.9.0 with ptxas 12.8): 1.08-1.52x of each build's best at
#: the six prefill shapes, never the best (the 128-token tile reads each weight tile for twice the tokens).
PS_GU16_T32F_M64_CONFIGS: tuple[KernelConfig, ...] = (
    KernelConfig(64, 128, 64, 16, 3, "ps", block_n2=256, gate_up=True, tail_m=32, tail_fused=True),
    KernelConfig(64, 128, 64, 16, 3, "ps", block_n2=256, gate_up=True, tail_m=32, tail_fused=True, pdl=1),
)

#: the k128 16-warp tiles' ``-pdl`` twins (GPU only)
PS_GU16_K128_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_GU16_K128_CONFIGS)
