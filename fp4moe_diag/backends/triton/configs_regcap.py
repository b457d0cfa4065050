"""The ``-rN`` tactics of mode ps (:class:`.configs.KernelConfig` ``reg_cap``): a winner's gemm1 built with at most N
registers a thread (Triton's ``maxnreg`` launch option, compiled only), N chosen so that an SM holds as many of its
programs as it did under Triton 3.6.0.  gemm2 is built uncapped: capped, ptxas gave it *more* registers and it ran
slower (Nsight Compute under 3.9.0, ``-s24c``: the 64-row tile's tail gemm2 64 -> 82 registers, 43.8 -> 49.4 us;
the k128 decode winner's gemm2 128 -> 160, 54.0 -> 57.1 us), while the capped gemm1 ran 9 % faster (110.7 -> 100.8
us) or level.  The rows of ``-s24a`` / ``-s24b`` (``git_commit`` c6a57ae) capped both.

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
- ``m16n128k128w4s3-ps-g2sk2-pdl-r128`` (:data:`PS_RC4_DECODE_PDL_CONFIGS`): gemm1 103 registers (94 under 3.6.0),
  4 programs an SM, no spill, every wgmma waited.  Why it was tried: on the H200 the decode loop's SM work no longer
  hides under the weight stream (``-s23c``: dequant 14 % and the rest of the loop 7 % of 20b EP1 T=16's time, 3 %
  and 4 % on the H100) and Nsight Compute finds 16-17 % occupancy (``-s23a``).

Measured on the H200 (``-s24a``, ``-s24b``, screened sweeps: each twin beside its uncapped twin of the same release
and timing pass; ``python -m fp4moe_diag twins data/runs/2026-12-06-nvidia-h200-s24b --variant=-r128``):

- the 64-row tile capped at 128 under 3.9.0: faster in 12 of 14 like pairs at T = 256 .. 4096 (median 0.907,
  0.88-0.99), level in 2; the best of ours at T = 256 under 3.9.0 (293.5 us at 20b EP1; 3.6.0's uncapped: 261.5).
- ``-r168`` at decode under 3.9.0: 2 of 23 like pairs faster (20b EP1 T=1 ``-fs-r168`` 0.91x, the best of ours
  there; 20b EP1 T=4 the k128 tile 0.96x), 10 level, 11 slower (median 1.020).
- ``-r128`` at decode (4 programs an SM): under 3.6.0 slower in 9 of 11 like pairs (1.04-1.30x; two level at 120b
  EP4 T=1, 4 us), so not offered there; under 3.9.0 2 of 13 faster, 4 level, 7 slower.  A fourth program
  does not hide the H200's decode dequant: waiting on every wgmma costs more than the occupancy gives.  Nsight
  Compute under 3.9.0 (``-s24c``, 20b EP1 T=16): ``-r168``'s gemm1 at 19 % occupancy against 11 % uncapped, the
  same 116 us.

Those capped both GEMMs.  With gemm1 alone capped (an H100, ``-s24d``, every tactic timed in full): the 64-row tile
18 of 21 pairs faster (median 0.904), decode ``-r168`` 7 of 15 (``-fs-r168`` at 5 of 6 shapes, 0.93-0.98),
``-r128`` 3 of 9.  All: ``docs/regcap-s24.md``.

Imports nothing of ours but :mod:`.configs` and :mod:`fp4moe_diag.release`, no triton."""

from __future__ import annotations

import dataclasses
from typing import Optional

from ...release import release_tuple
from .configs import KernelConfig, parse_config

#: (3 programs of 4 warps an SM hold at most 168 registers a thread; 2 of 8 warps, or 4 of 4, at most 128)
_CAP_4_WARPS, _CAP_8_WARPS = 168, 128

#: decode (tiling.decode_sized), with programmatic dependent launch: the decode winners and defaults
PS_RC_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(
    dataclasses.replace(parse_config(lab), reg_cap=_CAP_4_WARPS)
    for lab in ("m16n128k128w4s3-ps-g2sk2-pdl", "m16n128k128w4s3-ps-pdl", "m16n64k256w4s3-ps-sk2-pdl",
                "m16n64k256w4s3-ps-sk2-pdl-fs"))
#: decode, from Triton 3.7 on: the k128 winners with 4 programs of 4 warps an SM (at most 128 registers)
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
    return release_tuple(version, 2) or (0, 0)  # type: ignore[return-value]


def regcap_configs(decode: bool, triton_version: Optional[str]) -> tuple[KernelConfig, ...]:
    """The ``-rN`` tactics a compiled ps run offers (``decode``: :func:`.tiling.decode_sized`) when built by
    ``triton_version``: from Triton 3.7 on the caps that restore 3.6.0's programs per SM and, at decode, the
    4-program twins; none before 3.7 (the 4-program twins measured slower under 3.6.0, ``-s24a``)."""
    if triton_release(triton_version) < (3, 7):
        return ()
    four = PS_RC4_DECODE_PDL_CONFIGS if decode else ()
    return PS_RC_CONFIGS + (PS_RC_DECODE_PDL_CONFIGS if decode else PS_RC_PREFILL_CONFIGS) + four
