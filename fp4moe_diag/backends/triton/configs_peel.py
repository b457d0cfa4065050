"""The ``-pk`` tactics of mode ps (:class:`.configs.KernelConfig` ``peel``): the decode winners with their K loop split
in two (``_kernels_ps``: ``PEEL``, ``K_MAIN`` = :func:`.tiling.k_main`): first the K steps that lie inside K in every
split, with no K masks on the weight or the activation loads, then the rest of the split, masked.

What it takes out: the K masks of every step but the last ones.  The suite runs gpt-oss as vLLM pads it for MXFP4,
H = I = 3072, a whole number of the decode tiles' 128- and 256-wide steps, so there it takes out the weight loads'
chunk masks (the activations already load unmasked): sm_90a, Triton 3.6.0, K = 3072 (``python -m
fp4moe_diag.profiling.sass``): gemm2 of m16n128k128w4s3-ps 430 loop instructions against 445, of
m16n64k256w4s3-ps-sk2 483 against 507, the registers the same.  At a K that is not whole steps (the unpadded 2880)
every plain step carries the last one's masks: gemm1 of m16n128k128w4s3-ps takes 218 registers there (2 programs an
SM), ``-pk`` 170, capped at 168 (``tiling.residency_cap``: one granule for one more program, no spill), 3 programs
(Triton 3.9 builds 243 and 255 registers there, 2 programs both, ``-pk`` with 8 bytes of stack).
The same products in the same order: bit-identical to the plain twin (``tests/test_triton_peel.py``).

Measured (H100, data/runs/2026-12-05-nvidia-h100-s20c: the 16 twins below beside their plain twins at 20b EP1, 20b
EP2 and 120b EP4, T = 1, 4, 16, 64, one sweep, every tactic timed in full, all correct; ``python -m fp4moe_diag twins
RUN --variant=-ps-pk --base=-ps``): 192 pairs, 6 faster (by 1-6 %, four of them ``-sk4-pdl-fs`` twins), 185 level, 1
slower, median ratio 0.997; Nsight Compute of the 20b EP1 T=64 winner (plain / -pk): gemm1 118.8 / 117.8 us, 168
registers both, DRAM 82 %, issue 58 % (the loop's issue is not what bounds it on the H100).  Offered at decode, so
that the H200 (issue 69 % at decode, s15's profiles) measures them in its next headline.
Imports nothing of ours but
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
