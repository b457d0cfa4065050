"""Ablations of the ``ps`` kernels (tactic suffixes ``~nodeq``, ``~load``, ``~seq``; :data:`.configs.ABLATIONS`): the
same launches, grid, tiles, pipeline depth and weight loads with a part of each K step taken out, so that timing them
next to the real tactic says what each part costs.  Their outputs are wrong by design: they are timed and profiled
(``python -m fp4moe_diag.profiling.ablate``, ``profile``, ``profiling.sass``), never swept or offered as tactics.

* ``ABLATE == 1`` (``~nodeq``): the upcast of :data:`._kernels_ps_tile._PS_ASM` (about 2 instructions per weight) is
  replaced by :data:`_NODEQ_ASM`, 2 instructions per 8 weights that still read the word and both scale factors; the
  wgmmas, loads and everything else are as in the tactic.  Its time against the tactic's: the cost of the dequant.
* ``ABLATE == 2`` (``~load``): each K step loads the weight and scale words of the tactic's tiles, as 32-bit words in
  the same order (a thread's 16 bytes, one vector load), and XORs them into a per-thread sink; no upcast, no wgmma,
  no activation load.  The sink's sum is added to the accumulator once after the loop (so nothing is dead code).
  Its time: how fast this grid and this tile schedule stream the weights, the floor of the tactic's loop.
* ``ABLATE == 3`` (``~seq``): ``~load`` with each program's tiles read from one contiguous range of the expert's
  matrix (as if it were stored tile by tile): the same grid, the same bytes in all and per program.  Against
  ``~load``: what the ps layout's access pattern (a program reads ``S`` slabs of 1 KB a step, each slab's K range
  contiguous) costs against a layout made for the tile.

A variant may hold fewer registers than its tactic and so more programs per SM (``profiling.sass`` reports both):
then it streams with more loads in flight than the tactic could, and its floor is a bound, not the same schedule.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import _scale_words, _tile_rows

# $4: one word of the layout; $5 / $6: the bf16x2 factors.  Out: 4 registers shaped as the upcast's, no decode.
_NODEQ_ASM = tl.constexpr("xor.b32 $0, $4, $5; mov.b32 $1, $4; mov.b32 $2, $4; xor.b32 $3, $4, $6;")


@triton.jit
def _nodeq_values(p, f, INTERP: tl.constexpr):
    """``~nodeq``: bytes ``p`` [..., 4] and factors ``f`` -> two bf16 tensors of ``p``'s shape that read both but
    decode nothing (under the interpreter: the byte times the factor)."""
    if INTERP:
        v = p.to(tl.float32) * f
        return v.to(tl.bfloat16), (v + 1.0).to(tl.bfloat16)
    else:
        return tl.inline_asm_elementwise(_NODEQ_ASM, constraints="=r,=r,=r,=r,r,r,r", args=[p, f],
                                         dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def _ps_words(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S: tl.constexpr,
              C: tl.constexpr):
    """``~load``: the weight words ``[S, C, 128]`` and scale words ``[S, C, 8]`` (int32) of the tile that
    :func:`._kernels_ps._ps_tile` upcasts, loaded as stored; slabs and chunks past the matrix read as zeros."""
    row, ch, ok = _tile_rows(slab0, chunk0, n_slabs, n_chunks, S, C)
    wp = (w_base + row * stride_ws).to(tl.pointer_type(tl.int32))
    words = tl.load(wp + ch[None, :, None] * 128 + tl.arange(0, 128)[None, None, :], mask=ok, other=0)
    return words, _scale_words(s_base, row, ch, ok, stride_ss)


@triton.jit
def _seq_words(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, S: tl.constexpr, C: tl.constexpr):
    """``~seq``: as many words as :func:`_ps_words`, from the matrix read as if it were stored tile by tile (tile
    ``(slab0 / S, chunk0 / C)`` at ``S C`` 512-byte chunks each): the programs read the same bytes in all, each its
    K steps from one contiguous range."""
    q = (slab0 // S) * tl.cdiv(n_chunks, C) + chunk0 // C
    ow = q * (S * C * 128) + tl.arange(0, S * C * 128)
    words = tl.load(w_base.to(tl.pointer_type(tl.int32)) + ow, mask=ow < n_slabs * n_chunks * 128, other=0)
    os = q * (S * C * 8) + tl.arange(0, S * C * 8)
    scales = tl.load(s_base.to(tl.pointer_type(tl.int32)) + os, mask=os < n_slabs * n_chunks * 8, other=0)
    return tl.reshape(words, (S, C, 128)), tl.reshape(scales, (S, C, 8))


@triton.jit
def _sink_step(sink, ssink, w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S: tl.constexpr,
               C: tl.constexpr, SEQ: tl.constexpr):
    """``~load`` / ``~seq``: one K step of one tile XORed into the sinks ``[S, C, 128]`` / ``[S, C, 8]``."""
    if SEQ:
        words, scales = _seq_words(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, S, C)
    else:
        words, scales = _ps_words(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S, C)
    return sink ^ words, ssink ^ scales


@triton.jit
def _sink_loop(acc, w_base, s_base, w_base2, s_base2, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss,
               K_SPLIT: tl.constexpr, BLOCK_K: tl.constexpr, S: tl.constexpr, C: tl.constexpr, TILES: tl.constexpr,
               STAGES: tl.constexpr, SEQ: tl.constexpr = False):
    """``~load``: the K loop of a program with only its weight and scale loads (``TILES`` 2: also the second
    tile's, gemm1's gate rows at ``w_base2`` / ``s_base2``), pipelined ``STAGES`` deep as the tactic's loop (Triton
    pipelines a loop's loads into cp.async only where they feed a dot, or where the loop asks for stages, as here);
    ``SEQ`` (``~seq``): each program's bytes from one contiguous range instead; returns ``acc`` plus the sinks' sum."""
    sink = tl.zeros((S, C, 128), dtype=tl.int32)
    ssink = tl.zeros((S, C, 8), dtype=tl.int32)
    for kk in tl.range(0, K_SPLIT, BLOCK_K, num_stages=STAGES):
        c0 = chunk0 + kk // 64
        sink, ssink = _sink_step(sink, ssink, w_base, s_base, slab0, c0, n_slabs, n_chunks, stride_ws, stride_ss, S, C,
                                 SEQ)
        if TILES == 2:
            sink, ssink = _sink_step(sink, ssink, w_base2, s_base2, slab0, c0, n_slabs, n_chunks, stride_ws,
                                     stride_ss, S, C, SEQ)
    return _sink_into(acc, sink, ssink)


@triton.jit
def _sink_into(acc, sink, ssink):
    """``~load``: ``acc`` plus the sinks' sum (one reduction after the loop: the loads are not dead code)."""
    total = tl.sum(tl.reshape(sink, (sink.numel,)).to(tl.float32)) + tl.sum(
        tl.reshape(ssink, (ssink.numel,)).to(tl.float32))
    return acc + total
