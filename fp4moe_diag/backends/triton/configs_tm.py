"""The ``-tm`` tactics of mode ps (:class:`.configs.KernelConfig` ``tile_major``): the headline's winners reading a copy
of the weights stored tile by tile (:func:`.ps_layout.tile_major`), so that each K step of a program reads one
contiguous range of ``S x C x 512`` bytes instead of ``S`` pieces of ``C x 512`` bytes one slab (``K / 64 x 512``
bytes) apart.  The loop is the ps one but for its addresses (sm_90a, triton 3.6.0, K = 3072: 2-6 % fewer loop
instructions, the same loads; ``m16n128k128w4s3-ps-tm``'s gemm1 takes 182 registers against 168, 2 programs per SM,
not 3).  Offered where the ablation ``~seq`` (:mod:`._kernels_ablate`) would say whether the access pattern costs the
weight stream; not timed yet.  Imports nothing of ours but :mod:`.configs`, no triton."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from .configs import KernelConfig, parse_config

#: decode (tiling.decode_sized): the s15 winners at T = 1..64 (each with its plain twin); the -pdl ones on a GPU only
PS_TM_DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(parse_config(lab), tile_major=True)
                                                       for lab in ("m16n64k256w4s3-ps-sk2", "m16n128k128w4s3-ps",
                                                                   "m16n128k128w4s3-ps-g2sk2"))
PS_TM_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_TM_DECODE_CONFIGS)
#: prefill: the s15 winners at T = 1024..16384
PS_TM_PREFILL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(parse_config(lab), tile_major=True)
                                                        for lab in ("m128n128k64w16s3-ps-gu-g2n256",
                                                                    "m128n128k64w16s4-ps-gu-g2n256",
                                                                    "m128n128k64w16s3-ps-gu-g2n256-t64",
                                                                    "m128n128k64w16s3-ps-gu-g2n256-t32",
                                                                    "m128n128k64w16s3-ps-gu-g2n256-t32f",
                                                                    "m256n64k64w8s3-ps-gu-g2n128"))


def tm_refusal(case: Any, kc: KernelConfig) -> Optional[str]:
    """Why ``kc`` (a ``-tm`` tactic) cannot run ``case`` (None when it can): its tiles must not straddle gemm1's
    up / gate halves nor run past a matrix's rows (K is padded with zeros to whole tiles)."""
    i_slabs, h_slabs = case.intermediate_size // 16, case.hidden_size // 16
    s1, s2 = kc.block_n // 16, kc.gemm2_block_n // 16
    if i_slabs % s1 or h_slabs % s2:
        return (f"the tile-major copy needs whole tiles: I / 16 = {i_slabs} slabs in tiles of {s1} (gemm1) and H / 16 "
                f"= {h_slabs} in tiles of {s2} (gemm2)")
    return None


#: their ``-pdl`` twins (GPU only), as :data:`.configs_warps.PS_GU16_PDL_CONFIGS`
PS_TM_PREFILL_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1)
                                                            for c in PS_TM_PREFILL_CONFIGS)
