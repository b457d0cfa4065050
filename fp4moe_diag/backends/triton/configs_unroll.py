"""The ``-uN`` tactics of mode ps (:class:`.configs.KernelConfig` ``unroll``): the 16-warp ``-gu`` prefill tiles with
both K loops (gemm1's ``-gu`` one, gemm2's) unrolled N times (``tl.range(..., loop_unroll_factor=N)``).

Why (session 27): at 20b EP2 T=4096, goal 1's last miss, ours' gemm1 is latency-bound (Nsight Compute, H100
``-s27b``: issue slots busy 49 %, SM 63 %), as busy issuing as triton_kernels' gemm1 is not (36 % at the same 63 %
SM throughput, H200 ``-s9c`` / ``-s11a``).  Of the 174 instructions an iteration of the k64 tile takes per thread
(32 weights), 67 upcast the weights and about 80 keep the software pipeline's books (stage indices and shared-memory
offsets: uniform-datapath IADD3 / MOV / ISETP / SEL, integer address arithmetic); unrolled twice, that bookkeeping is
paid once for two K steps.  sm_90a, K = 3072 (``python -m fp4moe_diag.profiling.sass``; loop instructions per weight,
``-u2`` against the twin, no spill in either, 128 registers, 1 program of 16 warps an SM):

| tile | gemm1 3.6.0 | gemm2 3.6.0 | gemm1 3.9.0 | gemm2 3.9.0 |
| --- | --- | --- | --- | --- |
| ``m128n128k64w16s3-ps-gu-tm`` | 4.08 / 5.44 | 4.11 / 5.44 | 4.33 / 5.72 | 4.38 / 5.50 |
| ``m128n128k64w16s4-ps-gu`` | 4.19 / 5.53 | 4.28 / 5.53 | 4.64 / 5.88 | 4.69 / 5.81 |

The risk: the unrolled loop waits for its wgmma groups at once (2 groups an iteration, at most 0 left in flight at a
wait, against 4 and 3 under 3.6.0), so a warp's upcast of the next step no longer overlaps its own MMAs, only the
other warps'.  The k128 tile, which also cut the instructions (4.81), was 1.13x slower (H100 ``-s26g``, ``-s27a``:
MIO-queue stalls).  Timed in session 28 (H100 ``-s28a``, ``twins.sh`` at T = 4096 and 16384, 20b EP1 / EP2 and 120b
EP4, interleaved): slower in 29 of 36 pairs, level in 7, faster in none, median 1.058 (1.009-1.099).  So not offered:
they run by label (:func:`.backend.label_only_configs`; ``profile``, ``duel``).  Interpreter-tested against the
reference and their twins (bit for bit) under Triton 3.6 and 3.9.  Imports nothing of ours but :mod:`.configs`, no
triton.
"""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig, parse_config

#: the 16-warp -gu prefill winners of session 26's H200 headline (-tm, with and without the 64-row tails) and their
#: plain twin, unrolled twice (three, not every 16-warp tile: each adds two compiles to a prefill sweep)
PS_GU16_U2_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(parse_config(lab), unroll=2) for lab in (
    "m128n128k64w16s3-ps-gu-g2n256",
    "m128n128k64w16s3-ps-gu-tm-g2n256",
    "m128n128k64w16s3-ps-gu-tm-g2n256-t64",
))
#: their -pdl twins (a -pdl twin was ours' best at 7 of 8 H200 prefill shapes, s26c)
PS_GU16_U2_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_GU16_U2_CONFIGS)
