"""The ``-p8`` tactics of backend ``triton_w4a8`` (mode ``p8``, :mod:`._kernels_p8`): the W4A8 GEMMs of mode ``f8``
(the same numbers, bit for bit) on the pre-shuffled weights of :mod:`.p8_layout` (codes + per-block e4m3 tables,
decoded by a byte-permute lookup).  Imports nothing of ours but :mod:`.configs`, no triton."""

from __future__ import annotations

from .configs import KernelConfig

#: mode ``"p8"`` (label suffix ``-p8``): prefill tiles only (BLOCK_M >= 64; the layout reads 0.75 bytes per weight
#: against MXFP4's 0.53, so decode stays with -f8); BLOCK_N a multiple of 16 (slabs) and >= 64 (a wgmma M), BLOCK_K
#: of 64 (chunks); no split-K.  H200 (s11c, s11d): m128n64k128w4s3 the fastest W4A8 tile at every bias-free shape
#: measured (20b EP1 T=1024..16384, 120b EP1 T=4096), 1.7-1.9x faster than -f8's best.
P8_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c, "p8") for c in (
    (64, 64, 128, 4, 4),
    (128, 64, 128, 4, 3),
    (64, 128, 128, 8, 3),
    (128, 128, 64, 8, 3),
))
# sm_90a, K = 3072 (python -m fp4moe_diag.profiling.sass; cuobjdump -res-usage), triton 3.6.0 / 3.9.0: every loop is
# QGMMA with one PRMT per 4 weights and no STS; loop instructions per weight, gemm1 / gemm2 (f8 of the same tile):
# m64n64k128w4s4 2.09 / 2.77 (6.37 / 7.00) under 3.6, 2.38 / 2.97 under 3.9; m128n64k128w4s3 2.30 / 3.12 (6.56 / 7.34),
# 2.57 / 3.42; m64n128k128w8s3 2.02 / 2.59 (6.26 / 6.81), 2.34 / 2.86; m128n128k64w8s3 2.55 / 3.38 (6.73 / 7.56),
# 3.09 / 3.81.  Registers gemm1 163-255, gemm2 116-255; no spills under 3.6, except that under 3.9 m128n128k64w8s3's
# gemm1 has 8 bytes of stack.  Not offered: m128n128k128w8s3 (gemm1 spills 24 bytes under 3.6, 32 under 3.9) and
# m256n128k64w8s3 (gemm1 spills 1152 bytes: two fp32 accumulators of 128 x 256 over 256 threads).

#: the backend's default above the decode sizes where the case has the p8 layout (s11d: the fastest W4A8 tile at 20b EP1
#: T=1024, 4096, 16384 and 120b EP1 T=4096)
P8_DEFAULT = "m128n64k128w4s3-p8"
