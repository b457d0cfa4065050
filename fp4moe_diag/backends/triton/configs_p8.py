"""The ``-p8`` tactics of backend ``triton_w4a8`` (mode ``p8``, :mod:`._kernels_p8`): the W4A8 GEMMs of mode ``f8``
(the same numbers, bit for bit) on the pre-shuffled weights of :mod:`.p8_layout` (codes + per-block e4m3 tables,
decoded by a byte-permute lookup).  Imports nothing of ours but :mod:`.configs`, no triton."""

from __future__ import annotations

from .configs import KernelConfig

#: mode ``"p8"`` (label suffix ``-p8``): prefill tiles only (BLOCK_M >= 64; the layout reads 0.75 bytes per weight
#: against MXFP4's 0.53, so decode stays with -f8); BLOCK_N a multiple of 16 (slabs) and >= 64 (a wgmma M), BLOCK_K
#: of 64 (chunks); no split-K.
P8_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c, "p8") for c in (
    (64, 64, 128, 4, 4),
    (128, 64, 128, 4, 3),
    (64, 128, 128, 8, 3),
    (128, 128, 64, 8, 3),
    (128, 128, 128, 8, 3),
    (256, 128, 64, 8, 3),
))
