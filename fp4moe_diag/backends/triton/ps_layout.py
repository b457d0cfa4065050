"""The pre-shuffled MXFP4 weight layout of our ``ps`` kernels (issue #16): made once in ``prepare``, not timed.

Goal: on Hopper, wgmma takes its A operand (here the weights: swap-AB, ``acc.T += W @ x.T``) from registers in
the mma fragment layout; a row-major weight tile reaches that layout only through shared-memory shuffles and
byte permutes (the ``sw`` kernels: 6 SASS instructions per weight).  Here every thread's fragment bytes are
stored contiguously, in the order the fragment takes them, and the 8 e2m1 codes of a 32-bit word are placed
bit by bit so that the upcast is shifts, masks and one ``mul.bf16x2`` (which applies the block scale).

Fragment (one warp, rows ``16w..16w+15`` of a 64-row wgmma tile, one k16 step): lane ``4g + t`` holds
``a0..a7`` = (row g, K 2t, 2t+1), (row g+8, K 2t, 2t+1), (row g, K 2t+8, 2t+9), (row g+8, K 2t+8, 2t+9).

Weights ``[N, K]`` of one expert -> bytes ``[N/16, K/64, 512]``: slab ``r`` (rows 16r..16r+15), chunk ``c``
(K 64c..64c+63), then ``[g 8, t 4, s 4, 4 bytes]``: lane ``4g + t`` of the warp gets its 16 bytes in one
16-byte load, word ``s`` = k16 step ``s`` of the chunk holding ``a0..a7`` of rows (g, g+8), i.e. logical row
``16r + 8 rh + g`` and K ``64c + 16s + 8kh + 2t + e`` for value ``i = 4kh + 2rh + e`` of the word.

Word bits (two 16-bit halves, ``e`` = 0 low, 1 high; value pair ``j = 2kh + rh`` in slot ``j`` of both halves;
code ``c`` = sign s, exponent e1 e0, mantissa m).  The upcast target is the bf16 pattern ``s`` at bit 15 and
``e1 e0 m`` at bits 8..6 (the value times 2**-126; the factor folds the 2**126 back, see ``_kernels.X2_OFFSET``):

* slot 0: ``e1 e0 m`` at bits 8..6, ``s`` at 15: decoded by one mask ``& 0x81C081C0``;
* slot 1: the same shifted right by 3 (bits 5..3, 12): ``(w << 3) & 0x81C081C0``;
* slot 2: shifted right by 6 (bits 2..0, 9): ``(w << 6) & 0x81C081C0``;
* slot 3, the bits left (10, 11, 13, 14): ``m`` at 10, ``s`` at 11, ``e0 e1`` at 13, 14:
  ``((w << 4) & 0x80008000) | ((w >> 6) & 0x01800180) | ((w >> 4) & 0x00400040)``.

Per 8 weights: 5 shifts, 6 logic ops, 4 ``mul.bf16x2`` (the layout of ``sw``: 2 byte permutes, 8 shifts, 8
logic ops, 4 multiplies, plus the shared-memory shuffles).

Measured and not adopted (session 10, data/runs/2026-12-04-nvidia-h200-s10a, -s10b): a placement where every slot
is one 32-bit rotation (``shf.l.wrap``) and mask away from its target (slot 3 two: no 4-bit translate of the other
three tiles the word), 13 instructions per 8 weights.  The gemm1 loop of m16n128k128w4s3 went from 3.12 to 2.85
instructions per weight (sm_90a), but on the H200 gemm1 took 183 registers instead of 168 (2 programs per SM, not 3)
and decode ran 2-3 % slower; capped at 168 registers (Triton's ``maxnreg``) it ran as fast as this layout, not
faster, and a cap of 128 made ptxas wait for every wgmma.  The decode kernels are latency-bound, not issue-bound.

Scales ``[N, K/32]`` -> ``[N/16, K/64, 32]``: per (slab, chunk) ``[g 8, sb 2, rh 2]`` (block ``2c + sb`` of
row ``16r + 8rh + g``): the 4 bytes a lane's fragment needs are one 32-bit word.

Gate/up interleaved (tactics ``-gu``, :mod:`._kernels_ps_gu`): w13 ``[L, 2I, K/2]`` (rows ``0..I-1`` lin / up,
``I..2I-1`` gate) with its rows in the order of :func:`gate_up_rows`, so that slab ``j`` holds lin rows
``8j..8j+7`` as its rows 0..7 (``rh`` 0: a thread's accumulator row g) and the gate rows of the same output columns
as rows 8..15 (``rh`` 1: row g + 8), then this layout (:func:`shuffle_gate_up`).  The bias keeps its order.

Tile-major (tactics ``-tm``, :func:`tile_major`): a copy of either layout stored tile by tile (``S`` slabs by ``C``
chunks, a program's tile of one K step), so that the step reads one contiguous range (``S x C x 512`` bytes) instead
of ``S`` pieces of ``C x 512`` bytes one slab apart.

Only torch here; the kernels that read the layout are in :mod:`._kernels_ps` and :mod:`._kernels_ps_gu`.
"""

from __future__ import annotations

from typing import Optional

import torch

ROWS = 16  #: weight rows per slab (one warp's m16 of the wgmma tile)
KCHUNK = 64  #: K elements per chunk (4 k16 steps)
CHUNK_BYTES = ROWS * KCHUNK // 2  #: 512: 32 lanes x 16 bytes
SCALE_BYTES = ROWS * KCHUNK // 32  #: 32
#: temporaries of :func:`shuffle_weights` per step (int32 codes; a few such buffers are alive at once), so the
#: re-layout of a 128-expert layer needs ~1 GB beside the weights, not ~30
_TEMP_BYTES = 256 << 20


def refusal(n: int, k: int, layout: str = "pre-shuffled") -> Optional[str]:
    """Why an ``[n, k]`` weight matrix has no ps layout (None when it has one); the p8 layout (:mod:`.p8_layout`) has
    the same slabs and chunks and asks this too, naming itself ``layout``."""
    if n % ROWS or k % KCHUNK:
        return (f"the {layout} layout needs rows divisible by {ROWS} and K divisible by {KCHUNK}; "
                f"got rows={n}, K={k}")
    return None


def layout_dims(name: str, t: torch.Tensor, k_per_column: int, layout: str = "pre-shuffled") -> tuple[int, int, int]:
    """(L, N, K) of ``t``, uint8 ``[L, N, K / k_per_column]``; a ValueError naming ``name`` otherwise."""
    if t.dtype != torch.uint8 or t.dim() != 3:
        raise ValueError(f"{name}: expected uint8 [L, N, K/{k_per_column}], got {t.dtype} {tuple(t.shape)}")
    nl, n, k = t.shape[0], t.shape[1], k_per_column * t.shape[2]
    why = refusal(n, k, layout)
    if why:
        raise ValueError(f"{name}: {why}")
    return nl, n, k


def _encode(c: torch.Tensor, slot: int) -> torch.Tensor:
    """int32 e2m1 codes -> their bits in one 16-bit half for ``slot`` (see the module docstring)."""
    if slot == 3:
        return ((c & 1) << 10) | ((c & 8) << 8) | ((c & 6) << 12)
    return (((c & 7) << 6) | ((c & 8) << 12)) >> (3 * slot)


def codes(data: torch.Tensor) -> torch.Tensor:
    """Packed bytes ``[..., K/2]`` (low nibble = even K) -> int32 codes ``[..., K]``."""
    d = data.to(torch.int32)
    return torch.stack((d & 0xF, d >> 4), dim=-1).flatten(-2)


def shuffle_weights(data: torch.Tensor) -> torch.Tensor:
    """MXFP4 bytes ``[L, N, K/2]`` (uint8, low nibble = even K) -> the ps layout ``[L, N/16, K/64, 512]``."""
    nl, n, k = layout_dims("data", data, 2)
    out = torch.empty((nl, n // ROWS, k // KCHUNK, CHUNK_BYTES), dtype=torch.uint8, device=data.device)
    per = max(1, _TEMP_BYTES // (4 * n * k))  # experts per step: int32 codes of a step stay under _TEMP_BYTES
    for e0 in range(0, nl, per):
        d = data[e0:e0 + per]
        c = codes(d).view(d.shape[0], n // ROWS, 2, 8, k // KCHUNK, 4, 2, 4, 2)  # L, r, rh, g, c, s, kh, t, e
        c = c.permute(0, 1, 4, 3, 7, 5, 6, 2, 8)  # L, r, c, g, t, s, kh, rh, e
        word = torch.zeros(c.shape[:6], dtype=torch.int32, device=data.device)
        for kh in range(2):
            for rh in range(2):
                slot = 2 * kh + rh
                word |= _encode(c[..., kh, rh, 0], slot) | (_encode(c[..., kh, rh, 1], slot) << 16)
        out[e0:e0 + per] = word.contiguous().view(torch.uint8).view(d.shape[0], n // ROWS, k // KCHUNK, CHUNK_BYTES)
    return out


def shuffle_scales(scale: torch.Tensor) -> torch.Tensor:
    """ue8m0 bytes ``[L, N, K/32]`` -> ``[L, N/16, K/64, 32]`` (per slab and chunk: g, sb, rh)."""
    nl, n, k = layout_dims("scale", scale, 32)
    s = scale.view(nl, n // ROWS, 2, 8, k // KCHUNK, 2)  # L, r, rh, g, c, sb
    return s.permute(0, 1, 4, 3, 5, 2).contiguous().view(nl, n // ROWS, k // KCHUNK, SCALE_BYTES)


def _decode(word: torch.Tensor, slot: int) -> torch.Tensor:
    """The kernel's upcast of one slot as integer ops: 32-bit words -> the two bf16 patterns (int32)."""
    w = word.to(torch.int64) & 0xFFFFFFFF
    if slot == 3:
        u = ((w << 4) & 0x80008000) | ((w >> 6) & 0x01800180) | ((w >> 4) & 0x00400040)
    else:
        u = (w << (3 * slot)) & 0x81C081C0
    return u


def unshuffle_codes(ps: torch.Tensor, k: int) -> torch.Tensor:
    """Inverse of :func:`shuffle_weights` through the kernel's decode: ``[L, N/16, K/64, 512]`` -> int32 e2m1
    codes ``[L, N, K]`` (tests: shuffle, then decode the way the kernel does, must give the codes back)."""
    nl, slabs, chunks = ps.shape[:3]
    if chunks * KCHUNK != k:
        raise ValueError(f"k: expected {chunks * KCHUNK} for {chunks} chunks, got {k}")
    word = ps.contiguous().view(torch.int32).view(nl, slabs, chunks, 8, 4, 4)  # L, r, c, g, t, s
    out = torch.empty((nl, slabs, chunks, 8, 4, 4, 2, 2, 2), dtype=torch.int32, device=ps.device)
    for kh in range(2):
        for rh in range(2):
            u = _decode(word, 2 * kh + rh)
            for e in range(2):
                pat = (u >> (16 * e)) & 0xFFFF  # bf16 pattern: s at 15, e1 e0 m at 8..6
                out[..., kh, rh, e] = (((pat >> 15) & 1) << 3) | ((pat >> 6) & 7)
    # L, r, c, g, t, s, kh, rh, e -> L, r, rh, g, c, s, kh, t, e
    return out.permute(0, 1, 7, 3, 2, 5, 6, 4, 8).reshape(nl, slabs * ROWS, k)


def gate_up_rows(inter: int) -> torch.Tensor:
    """The rows of w13 ``[lin I; gate I]`` in the ``-gu`` order (int64 ``[2I]``): new row ``16 j + 8 h + g`` is old
    row ``h I + 8 j + g`` (``h`` 0 lin, 1 gate), i.e. output column ``8 j + g``'s lin row, then its gate row 8 later."""
    if not isinstance(inter, int) or inter <= 0 or inter % 8:
        raise ValueError(f"inter: the gate/up interleave takes 8 output columns per slab; got I={inter!r}")
    j, h, g = torch.arange(inter // 8), torch.arange(2), torch.arange(8)
    return (h[None, :, None] * inter + 8 * j[:, None, None] + g[None, None, :]).reshape(-1)


def shuffle_gate_up(w13: torch.Tensor, w13_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w13 ``[L, 2I, K/2]`` and its scales ``[L, 2I, K/32]`` -> their ps layouts (:func:`shuffle_weights`,
    :func:`shuffle_scales`) with the rows in :func:`gate_up_rows` order: as large as the plain ps copy.  Made in
    steps of experts, so the row-permuted temporaries stay under ``_TEMP_BYTES`` (beside those of the shuffle)."""
    nl, n, k = layout_dims("w13", w13, 2)
    if tuple(w13_scale.shape) != (nl, n, k // 32):
        raise ValueError(f"w13_scale: expected [{nl}, {n}, {k // 32}] for w13 {tuple(w13.shape)}, got "
                         f"{tuple(w13_scale.shape)}")
    rows = gate_up_rows(n // 2).to(w13.device)
    w = torch.empty((nl, n // ROWS, k // KCHUNK, CHUNK_BYTES), dtype=torch.uint8, device=w13.device)
    s = torch.empty((nl, n // ROWS, k // KCHUNK, SCALE_BYTES), dtype=torch.uint8, device=w13.device)
    per = max(1, _TEMP_BYTES // (n * k))
    for e0 in range(0, nl, per):
        w[e0:e0 + per] = shuffle_weights(w13[e0:e0 + per].index_select(1, rows))
        s[e0:e0 + per] = shuffle_scales(w13_scale[e0:e0 + per].index_select(1, rows))
    return w, s


def tile_major(t: torch.Tensor, slabs: int, chunks: int, name: str = "t") -> torch.Tensor:
    """The ps weights ``[L, NS, NC, 512]`` (or scales ``[L, NS, NC, 32]``) stored tile by tile for tiles of ``slabs``
    slabs by ``chunks`` chunks (tactics ``-tm``, :func:`._kernels_ps_tile._tm_bytes`): ``[L, NS / slabs, NC' / chunks,
    slabs, chunks, B]`` viewed as ``[L, NS, NC', B]``, ``NC'`` the chunks padded with zeros to whole tiles (a block of
    ``slabs`` slabs then starts where its first slab would, ``stride(1)`` bytes per slab).  A ValueError when
    ``slabs`` does not divide NS."""
    if t.dim() != 4 or t.dtype != torch.uint8:
        raise ValueError(f"{name}: expected uint8 [L, slabs, chunks, bytes], got {t.dtype} {tuple(t.shape)}")
    nl, ns, nc, b = t.shape
    if slabs < 1 or chunks < 1 or ns % slabs:
        raise ValueError(f"{name}: the tile-major copy needs whole tiles of {slabs} slabs; the matrix has {ns} slabs "
                         f"of {ROWS} rows")
    ncp = -(-nc // chunks) * chunks
    if ncp != nc:
        t = torch.cat((t, t.new_zeros((nl, ns, ncp - nc, b))), dim=2)
    tiles = t.view(nl, ns // slabs, slabs, ncp // chunks, chunks, b).permute(0, 1, 3, 2, 4, 5)
    return tiles.contiguous().view(nl, ns, ncp, b)
