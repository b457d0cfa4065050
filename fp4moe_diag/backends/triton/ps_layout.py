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

Word bits.  The upcast target of value pair ``j = 2kh + rh`` (slot ``j``: value ``e`` of the pair in half ``e``)
is the bf16 pattern ``s`` at bit 15 and ``e1 e0 m`` at bits 8..6 of each 16-bit half (the value times 2**-126; the
factor folds the 2**126 back, see ``_kernels.X2_OFFSET``), for a code ``s e1 e0 m``.  Each slot's bits are placed so
that one 32-bit rotation (``shf.l.wrap``) brings them there and one mask keeps them (:data:`ROTATIONS`):

* slot 0: rotation 0 -- ``w & 0x81C081C0``;
* slot 1: rotation 28 -- ``rotl(w, 28) & 0x81C081C0``;
* slot 2: rotation 22 -- ``rotl(w, 22) & 0x81C081C0``;
* slot 3: no single rotation is left for it (no 4-bit translate of the first three tiles the word), so two:
  ``s e1 e0`` by 26 and ``m`` by 2: ``(rotl(w, 26) & 0x81808180) | (rotl(w, 2) & 0x00400040)``.

Bit ``b`` of the target lands from bit ``(b - rotation) mod 32`` of the word, so a rotation moves some bits
between the halves (slot 1's low-half sign is stored at bit 19): :data:`SOURCE_BITS` lists every position.  Per
8 weights: 4 rotations, 5 logic ops, 4 ``mul.bf16x2`` (13; the shift-only layout before this one took 5 shifts and
6 logic ops for slot 3's scattered bits: 15; the layout of ``sw``: 2 byte permutes, 8 shifts, 8 logic ops, 4
multiplies, plus the shared-memory shuffles).

Scales ``[N, K/32]`` -> ``[N/16, K/64, 32]``: per (slab, chunk) ``[g 8, sb 2, rh 2]`` (block ``2c + sb`` of
row ``16r + 8rh + g``): the 4 bytes a lane's fragment needs are one 32-bit word.

Only torch here; the kernels that read the layout are in :mod:`._kernels_ps`.
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


def refusal(n: int, k: int) -> Optional[str]:
    """Why an ``[n, k]`` weight matrix has no ps layout (None when it has one)."""
    if n % ROWS or k % KCHUNK:
        return (f"the pre-shuffled layout needs rows divisible by {ROWS} and K divisible by {KCHUNK}; "
                f"got rows={n}, K={k}")
    return None


def _dims(name: str, t: torch.Tensor, k_per_column: int) -> tuple[int, int, int]:
    """(L, N, K) of ``t``, uint8 ``[L, N, K / k_per_column]``; a ValueError naming ``name`` otherwise."""
    if t.dtype != torch.uint8 or t.dim() != 3:
        raise ValueError(f"{name}: expected uint8 [L, N, K/{k_per_column}], got {t.dtype} {tuple(t.shape)}")
    nl, n, k = t.shape[0], t.shape[1], k_per_column * t.shape[2]
    why = refusal(n, k)
    if why:
        raise ValueError(f"{name}: {why}")
    return nl, n, k


#: slot -> the left rotation that decodes each code bit (m, e0, e1, s) of that slot (see the module docstring)
ROTATIONS = ((0, 0, 0, 0), (28, 28, 28, 28), (22, 22, 22, 22), (2, 26, 26, 26))
#: the bf16 bit each code bit (m, e0, e1, s) is decoded to, in the low half (the high half: + 16)
TARGET_BITS = (6, 7, 8, 15)
#: slot -> half -> the word bits holding code bits (m, e0, e1, s): ``(target + 16 half - rotation) mod 32``
SOURCE_BITS = tuple(tuple(tuple((b + 16 * h - r) % 32 for b, r in zip(TARGET_BITS, rot)) for h in range(2))
                    for rot in ROTATIONS)
#: slot -> ((rotation, mask), ...): the decode, one masked rotation per group of bits with the same rotation
DECODE = tuple(tuple((r, sum(((1 << b) | (1 << (b + 16))) for b, rb in zip(TARGET_BITS, rot) if rb == r))
                     for r in sorted(set(rot), reverse=True)) for rot in ROTATIONS)


def _encode(c: torch.Tensor, slot: int, half: int) -> torch.Tensor:
    """int32 e2m1 codes -> their bits in the 32-bit word for ``slot`` and ``half`` (see :data:`SOURCE_BITS`)."""
    out = torch.zeros_like(c)
    for i, pos in enumerate(SOURCE_BITS[slot][half]):
        out |= ((c >> i) & 1) << pos
    return out


def _codes(data: torch.Tensor) -> torch.Tensor:
    """Packed bytes ``[..., K/2]`` (low nibble = even K) -> int32 codes ``[..., K]``."""
    d = data.to(torch.int32)
    return torch.stack((d & 0xF, d >> 4), dim=-1).flatten(-2)


def shuffle_weights(data: torch.Tensor) -> torch.Tensor:
    """MXFP4 bytes ``[L, N, K/2]`` (uint8, low nibble = even K) -> the ps layout ``[L, N/16, K/64, 512]``."""
    nl, n, k = _dims("data", data, 2)
    out = torch.empty((nl, n // ROWS, k // KCHUNK, CHUNK_BYTES), dtype=torch.uint8, device=data.device)
    per = max(1, _TEMP_BYTES // (4 * n * k))  # experts per step: int32 codes of a step stay under _TEMP_BYTES
    for e0 in range(0, nl, per):
        d = data[e0:e0 + per]
        c = _codes(d).view(d.shape[0], n // ROWS, 2, 8, k // KCHUNK, 4, 2, 4, 2)  # L, r, rh, g, c, s, kh, t, e
        c = c.permute(0, 1, 4, 3, 7, 5, 6, 2, 8)  # L, r, c, g, t, s, kh, rh, e
        word = torch.zeros(c.shape[:6], dtype=torch.int32, device=data.device)
        for kh in range(2):
            for rh in range(2):
                slot = 2 * kh + rh
                word |= _encode(c[..., kh, rh, 0], slot, 0) | _encode(c[..., kh, rh, 1], slot, 1)
        out[e0:e0 + per] = word.contiguous().view(torch.uint8).view(d.shape[0], n // ROWS, k // KCHUNK, CHUNK_BYTES)
    return out


def shuffle_scales(scale: torch.Tensor) -> torch.Tensor:
    """ue8m0 bytes ``[L, N, K/32]`` -> ``[L, N/16, K/64, 32]`` (per slab and chunk: g, sb, rh)."""
    nl, n, k = _dims("scale", scale, 32)
    s = scale.view(nl, n // ROWS, 2, 8, k // KCHUNK, 2)  # L, r, rh, g, c, sb
    return s.permute(0, 1, 4, 3, 5, 2).contiguous().view(nl, n // ROWS, k // KCHUNK, SCALE_BYTES)


def _rotl(w: torch.Tensor, r: int) -> torch.Tensor:
    """32-bit left rotation of non-negative int64 words."""
    return ((w << r) | (w >> (32 - r))) & 0xFFFFFFFF if r else w


def _decode(word: torch.Tensor, slot: int) -> torch.Tensor:
    """The kernel's upcast of one slot as integer ops (:data:`DECODE`): 32-bit words -> the two bf16 patterns."""
    w = word.to(torch.int64) & 0xFFFFFFFF
    u = torch.zeros_like(w)
    for r, mask in DECODE[slot]:
        u |= _rotl(w, r) & mask
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
