"""The ``-rN`` tactics of mode ps (:class:`.configs.KernelConfig` ``reg_cap``): a winner's gemm1 and gemm2 built with
at most N registers a thread (Triton's ``maxnreg`` launch option, compiled only), N chosen so that an SM holds as many
of its programs as it did under Triton 3.6.0.

Why: from Triton 3.7 on the sm_90a builds of our winners take more registers, and an SM holds fewer of their
programs (``docs/triton39-h200-s23.md``; ``python -m fp4moe_diag.profiling.sass --table --triton 3.6.0 --triton
installed``).  Under 3.9.0 the decode gemm1 tiles take 240-243 registers (3.6.0: 113-168), 2 programs of 4 warps an
SM instead of 3, and the 64-row tile ``m64n128k64w8s4-ps`` 177 (3.6.0: 128), 1 program of 8 warps instead of 2.
Measured on the H200 (``-s23d``, ``-s23e``, ``-s23f``): under 3.9.0 ours is 7-11 % slower at decode and the 64-row
tile 15-25 % slower, where triton_kernels loses 2-8 %.

What the cap does to the sm_90a builds under 3.9.0 (static, on this CPU; K = 3072):

- ``m64n128k64w8s4-ps-t32-r128``: gemm1 128 registers, 2 programs an SM, 4.58 loop instructions a weight (uncapped:
  177, 1, 4.83), wgmma groups and waits as uncapped (4, <= 3), no spill in the loop (8 bytes of stack outside it);
  gemm2 already under the cap (115).
- ``m16n128k128w4s3-ps-g2sk2-pdl-r168``: gemm1 124 registers, 4 programs an SM, 3.20 loop instructions a weight
  (uncapped: 243, 2, 3.14), no spill, but ptxas then waits for every wgmma before the next (32 groups, waits <= 0;
  uncapped 4, <= 3): more programs to hide the weight stream, none of the MMA overlap inside one.

Which one wins is a question for the GPU: these are offered, compiled, from Triton 3.7 on, beside their uncapped
twins (under 3.6.0 the caps are at or above what the builds take, so not offered there).  Not timed yet.

Under any release, the k128 decode winner capped at 128 (``-r128``, :data:`PS_RC4_DECODE_PDL_CONFIGS`): gemm1 94
registers under 3.6.0 (103 under 3.9.0), 4 programs an SM instead of 3, no spill, every wgmma waited (3.6.0
uncapped: 16 groups, waits <= 7).  Why: on the H200 the decode loop's SM work no longer hides under the weight stream
(``-s23c``: dequant 14 % and the rest of the loop 7 % of 20b EP1 T=16's time, 3 % and 4 % on the H100) and Nsight
Compute finds 16-17 % occupancy (``-s23a``); a fourth program per SM is the other way to hide it.  Not timed yet.  Imports nothing of
ours but :mod:`.configs`, no triton."""

from __future__ import annotations

import dataclasses
from typing import Optional

from .configs import KernelConfig, parse_config

#: (3 programs of 4 warps an SM hold at most 168 registers a thread; 2 of 8 warps, or 4 of 4, at most 128)
_CAP_4_WARPS, _CAP_8_WARPS = 168, 128

#: decode (tiling.decode_sized), with programmatic dependent launch: the decode winners and defaults
PS_RC_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(
    dataclasses.replace(parse_config(lab), reg_cap=_CAP_4_WARPS)
    for lab in ("m16n128k128w4s3-ps-g2sk2-pdl", "m16n128k128w4s3-ps-pdl", "m16n64k256w4s3-ps-sk2-pdl",
                "m16n64k256w4s3-ps-sk2-pdl-fs"))
#: decode, any release: the k128 winners with 4 programs of 4 warps an SM (at most 128 registers)
PS_RC4_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(
    dataclasses.replace(parse_config(lab), reg_cap=_CAP_8_WARPS)
    for lab in ("m16n128k128w4s3-ps-g2sk2-pdl", "m16n128k128w4s3-ps-pdl"))
#: every size: the 64-row tile (20b EP2 T=256's winner); above decode also its tail-block twin (120b EP4 T=1024's)
PS_RC_CONFIGS: tuple[KernelConfig, ...] = (dataclasses.replace(parse_config("m64n128k64w8s4-ps"),
                                                               reg_cap=_CAP_8_WARPS),)
PS_RC_PREFILL_CONFIGS: tuple[KernelConfig, ...] = (dataclasses.replace(parse_config("m64n128k64w8s4-ps-t32"),
                                                                       reg_cap=_CAP_8_WARPS),)


def triton_release(version: Optional[str]) -> tuple[int, int]:
    """``"3.9.0"`` -> (3, 9); None or unreadable (``"not importable"``) -> (0, 0)."""
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return 0, 0


def regcap_configs(decode: bool, triton_version: Optional[str]) -> tuple[KernelConfig, ...]:
    """The ``-rN`` tactics a compiled ps run offers (``decode``: :func:`.tiling.decode_sized`) when built by
    ``triton_version``: at decode the 4-program twins, and from Triton 3.7 on the caps that restore 3.6.0's
    programs per SM."""
    four = PS_RC4_DECODE_PDL_CONFIGS if decode else ()
    if triton_release(triton_version) < (3, 7):
        return four
    return PS_RC_CONFIGS + (PS_RC_DECODE_PDL_CONFIGS if decode else PS_RC_PREFILL_CONFIGS) + four
