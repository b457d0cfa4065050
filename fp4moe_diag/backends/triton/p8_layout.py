"""The pre-shuffled W4A8 weight layout of our ``p8`` kernels (backend ``triton_w4a8``): made once in ``prepare``,
not timed.  Same numbers as mode ``f8`` (:func:`~fp4moe_diag.problem.reference_w4a8.fold_mxfp4_e4m3`: the code of
value ``v`` in a block with scale byte ``s`` of row ``n`` becomes ``e4m3_rn(v * 2**max(s - E[n], -126))``, ``E[n]``
the row's largest scale byte), but the fold's rounding is done here, once per (row, 32-block) and magnitude, and the
kernel only looks the values up.

Fragment (FP8 wgmma m64nNk32, A from registers; one warp = rows ``16w..16w+15`` of the m64 tile): lane ``4g + t``
holds four .b32 registers of 4 consecutive K values each: a0 = (row g, K 4t..4t+3), a1 = (row g+8, K 4t..), a2 =
(row g, K 16+4t..), a3 = (row g+8, K 16+4t..).

Codes ``[N, K]`` of one expert -> bytes ``[N/16, K/64, 512]``: slab ``r`` (rows 16r..16r+15), chunk ``c`` (K
64c..64c+63), then ``[g 8, t 4, s 2, rh 2, 4 bytes]``: lane ``4g + t`` gets its 16 bytes in one 16-byte load; word
``(s, rh)`` holds the 8 codes of row ``16r + 8rh + g`` at K ``64c + 32s + 16kh + 4t + j`` (kh 0, 1; j 0..3).
Word bits: the magnitude (``code & 7``) of (kh 0, j) at bits ``4j..4j+2``, of (kh 1, j) at ``16+4j..16+4j+2``; the
sign (code bit 3) of (kh 0, j) at bit ``8j+7``, of (kh 1, j) at bit ``8j+3`` (bit 3 of every nibble is a sign).

Decode of one word ``w`` with the row's table ``T`` (8 bytes: ``T0`` bytes 0..3, ``T1`` 4..7): ``A = prmt(T0, T1,
w & 0x7777) | (w & 0x80808080)`` (a0 or a1), ``B = prmt(T0, T1, (w >> 16) & 0x7777) | ((w << 4) & 0x80808080)`` (a2
or a3): 10 PTX instructions for 8 values (:data:`._kernels_p8._P8_ASM`), 8 in the sm_90a SASS (ptxas merges the sign
mask and the or into one LOP3; gemm1 loop of m128n64k128w4s3, K = 3072: 64 LOP3, 32 PRMT, 31 SHF for 128 weights per
thread).  prmt's default mode reads 4 selector nibbles
from the low 16 bits; a nibble's bit 3 would replicate the sign of the chosen byte, hence the ``0x7777`` clear.
``T[c]`` = the e4m3 bits of ``rn(mag(c) * 2**max(s - E[n], -126))``, ``mag`` = 0, .5, 1, 1.5, 2, 3, 4, 6: positive,
bit 7 clear; the sign is or-ed in (a negative zero code gives 0x80, -0).

Tables ``[N, K/32]`` blocks -> bytes ``[N/16, K/32, 128]``: per slab and 32-block ``[g 8, rh 2, 8 bytes]``: lane
``(g, t)`` reads the tables of its rows g and g+8 (16 bytes, the same for every t) in one load per k32 step.

Bytes per weight: 0.5 (codes) + 0.25 (tables), against 0.53 for MXFP4: a layout for prefill.

Only torch here; the kernels that read the layout are in :mod:`._kernels_p8`.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...problem.reference_w4a8 import fold_factors
from . import ps_layout

ROWS = ps_layout.ROWS  #: weight rows per slab (one warp's m16 of the wgmma tile)
KCHUNK = ps_layout.KCHUNK  #: K elements per chunk (2 k32 steps)
CHUNK_BYTES = ROWS * KCHUNK // 2  #: 512: 32 lanes x 16 bytes
TABLE_BYTES = ROWS * 8  #: 128 per slab and 32-block
#: the e2m1 magnitudes of codes 0..7
MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_TEMP_BYTES = 256 << 20  # temporaries per step of shuffle_codes, as ps_layout


def refusal(n: int, k: int) -> Optional[str]:
    """Why an ``[n, k]`` weight matrix has no p8 layout (None when it has one): the slabs and chunks of ps_layout."""
    return ps_layout.refusal(n, k, "p8")


def _dims(name: str, t: torch.Tensor, k_per_column: int) -> tuple[int, int, int]:
    """(L, N, K) of ``t``, uint8 ``[L, N, K / k_per_column]``; a ValueError naming ``name`` otherwise."""
    return ps_layout.layout_dims(name, t, k_per_column, "p8")


def shuffle_codes(data: torch.Tensor) -> torch.Tensor:
    """MXFP4 bytes ``[L, N, K/2]`` (uint8, low nibble = even K) -> the p8 codes ``[L, N/16, K/64, 512]``."""
    nl, n, k = _dims("data", data, 2)
    out = torch.empty((nl, n // ROWS, k // KCHUNK, CHUNK_BYTES), dtype=torch.uint8, device=data.device)
    per = max(1, _TEMP_BYTES // (16 * n * k))  # experts per step: int64 codes and their fields under ~2 _TEMP_BYTES
    j = torch.arange(4, device=data.device)
    for e0 in range(0, nl, per):
        d = data[e0:e0 + per]
        c = ps_layout.codes(d).view(d.shape[0], n // ROWS, 2, 8, k // KCHUNK, 2, 2, 4, 4)  # L, r, rh, g, c, s, kh, t, j
        c = c.permute(0, 1, 4, 3, 7, 5, 2, 6, 8)  # L, r, c, g, t, s, rh, kh, j
        c = c.to(torch.int64)
        mag, sign = c & 7, (c >> 3) & 1
        word = ((mag[..., 0, :] << (4 * j)) | (mag[..., 1, :] << (16 + 4 * j))
                | (sign[..., 0, :] << (8 * j + 7)) | (sign[..., 1, :] << (8 * j + 3))).sum(-1)  # disjoint bits
        word = torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)
        out[e0:e0 + per] = word.contiguous().view(torch.uint8).view(d.shape[0], n // ROWS, k // KCHUNK, CHUNK_BYTES)
    return out


def fold_tables(scale: torch.Tensor) -> torch.Tensor:
    """ue8m0 bytes ``[L, N, K/32]`` -> the folded value of each magnitude per (row, block): uint8 e4m3 bits
    ``[L, N, K/32, 8]``, ``e4m3_rn(MAGNITUDES[c] * 2**max(s - E[n], -126))`` (as ``fold_mxfp4_e4m3``)."""
    mags = torch.tensor(MAGNITUDES, dtype=torch.float32, device=scale.device)
    v = mags * fold_factors(scale)[0][..., None]  # exact: a 2-bit mantissa times a power of two >= 2**-126
    return v.to(torch.float8_e4m3fn).view(torch.uint8)


def shuffle_tables(scale: torch.Tensor) -> torch.Tensor:
    """ue8m0 bytes ``[L, N, K/32]`` -> the p8 tables ``[L, N/16, K/32, 128]`` (per slab and block: g, rh, 8 bytes)."""
    nl, n, k = _dims("scale", scale, 32)
    t = fold_tables(scale).view(nl, n // ROWS, 2, 8, k // 32, 8)  # L, r, rh, g, b, byte
    return t.permute(0, 1, 4, 3, 2, 5).contiguous().view(nl, n // ROWS, k // 32, TABLE_BYTES)


def _words(b: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., 4m]`` -> int64 little-endian 32-bit words ``[..., m]`` (non-negative)."""
    b = b.to(torch.int64).view(*b.shape[:-1], -1, 4)
    return b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)


def decode(codes: torch.Tensor, tables: torch.Tensor, k: int) -> torch.Tensor:
    """The kernel's decode as integer ops (prmt as a table lookup): the p8 codes ``[L, N/16, K/64, 512]`` and tables
    ``[L, N/16, K/32, 128]`` -> the e4m3 weights ``[L, N, K]`` (torch.float8_e4m3fn).  Tests: shuffle, then this,
    must equal ``fold_mxfp4_e4m3`` bit for bit."""
    nl, slabs, chunks = codes.shape[:3]
    if chunks * KCHUNK != k or tuple(tables.shape) != (nl, slabs, k // 32, TABLE_BYTES):
        raise ValueError(f"k: expected {chunks * KCHUNK} for {chunks} chunks and tables [{nl}, {slabs}, {k // 32}, "
                         f"{TABLE_BYTES}], got k={k}, tables {tuple(tables.shape)}")
    w = _words(codes).view(nl, slabs, chunks, 8, 4, 2, 2)  # L, r, c, g, t, s, rh
    tw = _words(tables).view(nl, slabs, chunks, 2, 8, 2, 2)  # L, r, c, s, g, rh, (T0, T1)
    t64 = (tw[..., 0] | (tw[..., 1] << 32)).permute(0, 1, 2, 4, 3, 5)[:, :, :, :, None]  # L, r, c, g, 1, s, rh
    out = torch.empty((nl, slabs, chunks, 8, 4, 2, 2, 2, 4), dtype=torch.int64, device=codes.device)
    for j in range(4):
        sel_a, sel_b = (w >> (4 * j)) & 7, (w >> (16 + 4 * j)) & 7  # = nibble j of w & 0x7777, (w >> 16) & 0x7777
        out[..., 0, j] = ((t64 >> (8 * sel_a)) & 0xFF) | (w & (0x80 << (8 * j))) >> (8 * j)
        out[..., 1, j] = ((t64 >> (8 * sel_b)) & 0xFF) | ((w << 4) & (0x80 << (8 * j))) >> (8 * j)
    # L, r, c, g, t, s, rh, kh, j -> L, r, rh, g, c, s, kh, t, j
    out = out.permute(0, 1, 6, 3, 2, 5, 7, 4, 8).reshape(nl, slabs * ROWS, k)
    return out.to(torch.uint8).view(torch.float8_e4m3fn)


def shuffle(data: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP4 ``data [L, N, K/2]`` and ``scale [L, N, K/32]`` -> (codes, tables) of the p8 layout."""
    nl, n, k = _dims("data", data, 2)
    if tuple(scale.shape) != (nl, n, k // 32):
        raise ValueError(f"scale: expected [{nl}, {n}, {k // 32}] for data {tuple(data.shape)}, got "
                         f"{tuple(scale.shape)}")
    return shuffle_codes(data), shuffle_tables(scale)
