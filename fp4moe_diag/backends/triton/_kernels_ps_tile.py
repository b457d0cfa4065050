"""The weight tile of the ps kernels (:mod:`._kernels_ps`, :mod:`._kernels_ps_gu`): its loads and its upcast.

The weight tile of a program is ``S = BLOCK_N // 16`` slabs by ``C = BLOCK_K // 64`` chunks of that layout: bytes
``[S, C, 512]``, loaded as stored (a warp's 512 bytes are contiguous, a thread's 16 are one vector load), and
read as ``[S, C, g 8, t 4, s 4, byte 4]``.  :data:`_PS_ASM` turns each 32-bit word (8 codes) and two bf16x2
scale factors into 4 bf16x2 registers, which are the thread's ``a0..a7`` wgmma A fragment of one k16 step;
``join`` + ``reshape`` + ``permute`` then name that data as the logical tile ``W [BLOCK_N, BLOCK_K]`` (row
``16 slab + 8 rh + g``, K ``64 chunk + 16 s + 8 kh + 2 t + e``) for ``tl.dot(W, x.T)``.  Triton carries the dot
operand layout back through those views to the load, so on sm_90a the tile goes global -> shared (cp.async,
num_stages deep) -> registers (16-byte loads) with no shuffle, and wgmma takes it from registers.

The scale of (row, 32-block) is applied in the upcast by one ``mul.bf16x2`` with the factor of
:func:`._kernels._x2_factor` (2**(s - 1 - X2_OFFSET), the 2**126 of the bit patterns folded in), and the fp32
accumulator is multiplied by 2**X2_OFFSET after the K loop, as in mode x2; the same scale-byte range applies.

Under the interpreter (no inline asm) :func:`_ps_values` builds the same bit patterns from the words with integer
ops and multiplies in fp32 (bit-identical values).  The interpreter does not check the register grouping that
the asm relies on (4 consecutive bytes of the last dim in one register, as the layout gives on the GPU); every
GPU run checks it: each tactic's output is compared to the float32 reference.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import _scale_words, _tile_rows, _word_bytes, _x2_factor
from ._kernels_ablate import _nodeq_values

# $4: one word of the layout; $5 / $6: the bf16x2 factors of rows g / g+8.  Out: $0 a0a1 (row g), $1 a2a3 (g+8),
# $2 a4a5 (g), $3 a6a7 (g+8): slots 0..3 of both halves decoded to bf16 patterns (value x 2**-126), times the factor.
_PS_ASM = tl.constexpr(r"""
{
  .reg .b32 u, v, q;
  and.b32 u, $4, 0x81C081C0;  mul.rn.bf16x2 $0, u, $5;
  shl.b32 u, $4, 3;  and.b32 u, u, 0x81C081C0;  mul.rn.bf16x2 $1, u, $6;
  shl.b32 u, $4, 6;  and.b32 u, u, 0x81C081C0;  mul.rn.bf16x2 $2, u, $5;
  shl.b32 u, $4, 4;  and.b32 u, u, 0x80008000;
  shr.b32 v, $4, 6;  and.b32 v, v, 0x01800180;  or.b32 u, u, v;
  shr.b32 q, $4, 4;  and.b32 q, q, 0x00400040;  or.b32 u, u, q;  mul.rn.bf16x2 $3, u, $6;
}
""")


@triton.jit
def _slot(w, SLOT: tl.constexpr):
    """Interpreter: slot ``SLOT`` of uint32 words -> (low, high) bf16 patterns as fp32 values (times 2**-126)."""
    if SLOT == 3:
        u = ((w << 4) & 0x80008000) | ((w >> 6) & 0x01800180) | ((w >> 4) & 0x00400040)
    else:
        u = (w << (3 * SLOT)) & 0x81C081C0
    lo = ((u & 0xFFFF) << 16).to(tl.float32, bitcast=True)
    hi = (u & 0xFFFF0000).to(tl.float32, bitcast=True)
    return lo, hi


@triton.jit
def _ps_values(p, f, INTERP: tl.constexpr):
    """Bytes ``p`` [..., 4] (the last dim: one word) and factors ``f`` (same shape; ``f[..., b]`` of row
    ``g + 8 (b // 2)``) -> ``(r0, r1)``: ``r0[..., b]`` = value ``b`` of the word (slots 0, 1), ``r1[..., b]`` = value
    ``4 + b`` (slots 2, 3), times the factor; bf16."""
    if INTERP:
        shift = (tl.arange(0, 4) * 8).to(tl.uint32)
        w = tl.sum(p.to(tl.uint32) << shift, axis=len(p.shape) - 1)  # disjoint bits: the sum is the or
        a_lo, a_hi = _slot(w, 0)
        b_lo, b_hi = _slot(w, 1)
        c_lo, c_hi = _slot(w, 2)
        d_lo, d_hi = _slot(w, 3)
        r0 = tl.reshape(tl.join(tl.join(a_lo, b_lo), tl.join(a_hi, b_hi)), p.shape)
        r1 = tl.reshape(tl.join(tl.join(c_lo, d_lo), tl.join(c_hi, d_hi)), p.shape)
        return (r0 * f).to(tl.bfloat16), (r1 * f).to(tl.bfloat16)
    else:
        return tl.inline_asm_elementwise(_PS_ASM, constraints="=r,=r,=r,=r,r,r,r", args=[p, f],
                                         dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def _ps_scale_bytes(s_base, row, ch, ok, stride_ss, S: tl.constexpr, C: tl.constexpr):
    """The scale bytes ``[S, C, 32]`` of a tile, loaded as 32-bit words (8 per slab-chunk) and split into bytes.

    Loaded as bytes, a tile has ``S * C * 32`` of them, one per thread or fewer with 8 warps (m128n128k64w8: 256
    bytes for 256 threads), and Triton then cannot use cp.async (4 bytes at least per thread): the 8-warp tiles read
    them with a synchronous LDG + STS inside the K loop (SASS, sm_90a, triton 3.6), which stalls every iteration on
    a global load (H200, s9a: m128n128k64w8s3 gemm2 1221 us at 20b EP1 T=4096 against 626 for triton_kernels'
    8-warp 128x256 tile).  As words, every thread that loads takes 4 bytes and the load joins the cp.async pipeline.
    The matrix rows are 32-byte multiples (``ps_layout``), so the words are aligned."""
    return _word_bytes(_scale_words(s_base, row, ch, ok, stride_ss), S, C)


@triton.jit
def _tm_bytes(w_base, s_base, slab0, chunk0, stride_ws, stride_ss, S: tl.constexpr, C: tl.constexpr,
              CT: tl.constexpr, SCALE_WORDS: tl.constexpr):
    """``-tm``: the weight bytes ``[S, C, 512]`` and scale bytes ``[S, C, 32]`` at (``slab0``, ``chunk0``) of the
    tile-major copy (:func:`.ps_layout.tile_major`, tiles of ``S`` slabs by ``CT`` chunks, K padded to whole tiles):
    a block of ``S`` slabs starts where its first slab starts (``slab0 x stride_ws``), its tiles follow one another
    along K, each ``[S, CT, 512]``; with ``C == CT`` the tile is one contiguous range (``C`` 1 of ``CT``: one chunk of
    it, the ``-gu`` tiles that dot per chunk)."""
    t0 = slab0.to(tl.int64) * stride_ws + (chunk0 // CT) * (S * CT * 512) + (chunk0 % CT) * 512
    w_off = tl.arange(0, S)[:, None, None] * (CT * 512) + tl.arange(0, C)[None, :, None] * 512
    p = tl.load(w_base + t0 + w_off + tl.arange(0, 512)[None, None, :])
    s0 = slab0.to(tl.int64) * stride_ss + (chunk0 // CT) * (S * CT * 32) + (chunk0 % CT) * 32
    s_off = tl.arange(0, S)[:, None, None] * (CT * 32) + tl.arange(0, C)[None, :, None] * 32
    if SCALE_WORDS:  # as words: each thread 4 bytes, in the cp.async pipeline (see _ps_scale_bytes)
        sc = _word_bytes(tl.load((s_base + s0 + s_off).to(tl.pointer_type(tl.int32)) + tl.arange(0, 8)[None, None, :]),
                         S, C)
    else:
        sc = tl.load(s_base + s0 + s_off + tl.arange(0, 32)[None, None, :])
    return p, sc


@triton.jit
def _ps_bytes(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S: tl.constexpr,
              C: tl.constexpr, SCALE_WORDS: tl.constexpr = False, TILE_MAJOR: tl.constexpr = False,
              CT: tl.constexpr = 0, MASK_K: tl.constexpr = True):
    """The weight bytes ``[S, C, 512]`` and scale bytes ``[S, C, 32]`` of the tile at slabs ``slab0..`` and chunks
    ``chunk0..`` of one expert (``w_base`` / ``s_base``); slabs and chunks past the matrix read as zeros.
    ``TILE_MAJOR`` (``-tm``): the copy stored tile by tile in tiles of ``CT`` chunks (0: ``C``), :func:`_tm_bytes`.
    ``MASK_K=False`` (``-pk``'s full K steps): the caller knows every chunk is in the matrix; only slabs are masked."""
    if TILE_MAJOR:
        p, sc = _tm_bytes(w_base, s_base, slab0, chunk0, stride_ws, stride_ss, S, C, C if CT == 0 else CT,
                          SCALE_WORDS)
    else:
        row, ch, ok = _tile_rows(slab0, chunk0, n_slabs, n_chunks, S, C)
        if not MASK_K:
            ok = tl.broadcast_to(row < n_slabs, (S, C, 1))
        p = tl.load(w_base + row * stride_ws + ch[None, :, None] * 512 + tl.arange(0, 512)[None, None, :], mask=ok,
                    other=0)
        if SCALE_WORDS:
            sc = _ps_scale_bytes(s_base, row, ch, ok, stride_ss, S, C)
        else:
            sc = tl.load(s_base + row * stride_ss + ch[None, :, None] * 32 + tl.arange(0, 32)[None, None, :],
                         mask=ok, other=0)
    return p, sc


@triton.jit
def _ps_decode(p, sc, S: tl.constexpr, C: tl.constexpr, INTERP: tl.constexpr, ABLATE: tl.constexpr = 0):
    """Bytes of :func:`_ps_bytes` -> the upcast weight tile ``W [16 S, 64 C]`` (bf16, times 2**-X2_OFFSET).
    ``ABLATE`` 1 (``~nodeq``, :mod:`._kernels_ablate`): the same shapes, no decode."""
    f = tl.reshape(_x2_factor(sc, INTERP), (S, C, 8, 1, 2, 1, 2, 1))  # slab, chunk, g, -, sb, -, rh, -
    f = tl.reshape(tl.broadcast_to(f, (S, C, 8, 4, 2, 2, 2, 2)), (S, C, 8, 4, 4, 4))
    if ABLATE == 1:
        r0, r1 = _nodeq_values(tl.reshape(p, (S, C, 8, 4, 4, 4)), f, INTERP)
    else:
        r0, r1 = _ps_values(tl.reshape(p, (S, C, 8, 4, 4, 4)), f, INTERP)
    y = tl.reshape(tl.join(r0, r1), (S, C, 8, 4, 4, 2, 2, 2))  # slab, chunk, g, t, s, rh, e, kh
    y = tl.permute(y, (0, 5, 2, 1, 4, 7, 3, 6))  # slab, rh, g, chunk, s, kh, t, e
    return tl.reshape(y, (S * 16, C * 64))


@triton.jit
def _ps_tile(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S: tl.constexpr,
             C: tl.constexpr, INTERP: tl.constexpr, SCALE_WORDS: tl.constexpr = False, ABLATE: tl.constexpr = 0,
             TILE_MAJOR: tl.constexpr = False, CT: tl.constexpr = 0, MASK_K: tl.constexpr = True):
    """The upcast weight tile ``W [16 S, 64 C]`` of :func:`_ps_bytes`' tile (:func:`_ps_decode`)."""
    p, sc = _ps_bytes(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S, C, SCALE_WORDS,
                      TILE_MAJOR, CT, MASK_K)
    return _ps_decode(p, sc, S, C, INTERP, ABLATE)
