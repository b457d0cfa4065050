"""The ``-f8`` tactics of backend ``triton_w4a8`` (mode ``f8``, :mod:`._kernels_f8`).  Imports nothing of ours but
:mod:`.configs`, no triton."""

from __future__ import annotations

from .configs import KernelConfig

#: mode ``"f8"`` (label suffix ``-f8``; issue #25), the tactics of backend ``triton_w4a8`` only: per-row e4m3
#: activations, MXFP4 weights folded to e4m3 with each row's largest block scale taken out (:mod:`._kernels_f8`), FP8
#: MMAs swap-AB like mode sw (the folded weights are the A operand: wgmma m64 per warpgroup, BLOCK_N >= 64), no
#: split-K.  Prefill tiles (BLOCK_M 64 / 128 tokens, 4 and 8 warps: FP8 doubles the bf16 MMA peak) and two decode
#: tiles (BLOCK_M 16), so every shape has a tactic.  H200: s9d, s9e (correct at 2e-2; slower than bf16, README).
F8_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 3, "f8"),
    (16, 128, 128, 4, 3, "f8"),
    (64, 64, 128, 4, 4, "f8"),
    (64, 128, 128, 8, 3, "f8"),
    (128, 64, 128, 4, 3, "f8"),
    (128, 128, 64, 8, 3, "f8"),
))
# sm_90a, K = 2880, triton 3.6.0 and 3.9.0 (python -m fp4moe_diag.profiling.sass, cuobjdump -res-usage): every loop
# above is QGMMA (FP8 wgmma), none spills (gemm1 126-255 registers, gemm2 94-190), 5.9-7.9 loop instructions per
# weight (bf16 mode sw at m16n64k128: 6.45).  Not offered: m64n128k128w4 and
# m128n128k128w8 (gemm1 spills 312 / 120 bytes: two fp32 accumulators of 128 x BLOCK_M), m128n64 with 8 warps (the
# two warpgroups split the tokens, so each folds the same 64 weight rows: twice the fold work per weight).
F8_DEFAULTS = ("m16n64k128w4s3-f8", "m64n64k128w4s4-f8")  # decode (tiling.decode_sized), above
