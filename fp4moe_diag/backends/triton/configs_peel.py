"""The ``-pk`` tactics of mode ps (:class:`.configs.KernelConfig` ``peel``): the decode winners with their K loop split
in two (``_kernels_ps``: ``PEEL``, ``K_MAIN`` = :func:`.tiling.k_main`): first the K steps that lie inside K in every
split, with no K masks on the weight or the activation loads, then the rest of the split, masked.

Why: gpt-oss's K (H = I = 2880) is not a whole number of the decode tiles' 128- or 256-wide K steps, so every step of
the plain loop carries the masks of the last one.  sm_90a, Triton 3.6.0, K = 2880 (``python -m
fp4moe_diag.profiling.sass``): gemm1 of m16n128k128w4s3-ps takes 218 registers (2 programs an SM; at K = 2944, a whole
number of steps, 168 and 3); with ``-pk`` 170, capped at 168 (``tiling.residency_cap``: one granule of registers for
one more program, no spill) and 3 programs an SM, its loop 766 instructions against 799; gemm2 427 against 462
(3.34 instructions a weight against 3.61); m16n64k256w4s3-ps-sk2's gemm2 3.77 against 4.23.  The same products in
the same order: bit-identical to the plain twin (``tests/test_triton_peel.py``).  Imports nothing of ours but
:mod:`.configs`, no triton."""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig, parse_config

#: decode (tiling.decode_sized): the s15 / s17-s19 winners at T = 1..64 (H100 and H200), each beside its plain twin;
#: compiled and interpreted alike
PS_PK_DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(
    dataclasses.replace(parse_config(lab), peel=True)
    for lab in ("m16n64k256w4s3-ps-sk2", "m16n64k256w4s3-ps-sk4", "m16n128k128w4s3-ps", "m16n128k128w4s3-ps-g2sk2",
                "m16n128k128w4s4-ps"))
#: the same with programmatic dependent launch, their -fs ones, and the 8-warp EP2 T=4 winner (compiled only)
PS_PK_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = (
    tuple(dataclasses.replace(c, pdl=1) for c in PS_PK_DECODE_CONFIGS)
    + tuple(dataclasses.replace(c, pdl=1, fused=True) for c in PS_PK_DECODE_CONFIGS)
    + (dataclasses.replace(parse_config("m16n128k256w8s3-ps-sk2-pdl"), peel=True),))
