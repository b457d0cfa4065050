"""gemm1 (``-gu``) and gemm2 of mode ``ps`` with an expert's tail rows in its last block's program (tactic ``-tNf``,
:mod:`.configs_tail`): one weight tile per K step, two dots.

Under ``-tN`` an expert's last ``r <= N`` pairs run as a block of N rows in a second launch pair, whose programs each
stream and upcast a whole weight slice for those few rows (at 120b EP4 T=4096 on the H100 the two tail launches take
83 + 54 of 566 us, ``-s34b``).  Here one launch per GEMM runs every block (:func:`.grouping.fused_tail_grouping`): its
first ``n_over`` blocks hold an expert's last ``BLOCK_M`` pairs and its ``r`` pairs after them, ``BLOCK_M + OVER_M``
entries, the first ``BLOCK_M`` as a plain block's rows, the last ``OVER_M`` (``r`` of them valid) as a second
activation tile: each K step upcasts the weight tile once and runs two dots into two accumulators.  The blocks after
them are plain (``BLOCK_M`` entries, one dot); a program takes one branch or the other, each with its own pipelined K
loop.  The long blocks come first in the grid.  The epilogues are those of :mod:`._kernels_ps_gu` and
:mod:`._kernels_ps`, once per accumulator.  Rows of the intermediate plane are the grouping's positions, as in every
ps launch, so gemm2 reads what gemm1 wrote.  (Session 34 first ran the long blocks as a second launch, as ``-tN``
does: on the H100 both launches paid their last, partial wave; ``-s34f``.)

No split-K, no ``-fs``, no ablation, no persistent grid, no chunk dots (16- and 8-warp tiles only): the launchers of
:mod:`.launch_over` refuse the rest.  ``PDL`` as :func:`._kernels_ps._pdl_enter` (one launch per GEMM: 0 or 1).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import X2_UNSCALE, _dot, _gemm1_store, _gemm2_store
from ._kernels_ps import _act_tile, _grid_ids, _pdl_enter
from ._kernels_ps_gu import _gate_up_split
from ._kernels_ps_tile import _ps_tile


@triton.jit
def _program(block_expert_ptr, w_ptr, ws_ptr, stride_we, stride_se, N, BLOCK_N: tl.constexpr, N_FASTEST: tl.constexpr,
             PDL: tl.constexpr):
    """A program's start (after the grid-dependency wait under ``PDL``): its block and N tile, expert, output columns
    and their mask, and the expert's weight and scale bases."""
    _pdl_enter(PDL)
    pid_m, pid_n = _grid_ids(N_FASTEST)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return pid_m, pid_n, e, offs_n, offs_n < N, w_ptr + e * stride_we, ws_ptr + e * stride_se


@triton.jit
def _block_rows(pid_m, n_over, sorted_pair_ptr, num_pairs, BLOCK_M: tl.constexpr, ROWS: tl.constexpr):
    """Block ``pid_m``'s first position and its first ``BLOCK_M`` entries (positions, pair ids, valid mask): the
    blocks below ``n_over`` have ``ROWS`` entries, the others ``BLOCK_M``."""
    base = tl.where(pid_m < n_over, pid_m * ROWS, n_over * ROWS + (pid_m - n_over) * BLOCK_M)
    offs = base + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_pair_ptr + offs)
    return base, offs, pair, pair < num_pairs


@triton.jit
def _over_rows(base, sorted_pair_ptr, num_pairs, BLOCK_M: tl.constexpr, OVER_M: tl.constexpr):
    """The ``OVER_M`` entries after a block's first ``BLOCK_M`` (from position ``base``): positions, pair ids, mask."""
    offs_o = base + BLOCK_M + tl.arange(0, OVER_M)
    pair_o = tl.load(sorted_pair_ptr + offs_o)
    return offs_o, pair_o, pair_o < num_pairs


@triton.jit
def _k_loop(ptrs, mask_m, o_ptrs, mask_o, w_base, s_base, slab0, n_slabs, stride_ws, stride_ss, K: tl.constexpr,
            BLOCK_K: tl.constexpr, ROWS: tl.constexpr, BLOCK_M: tl.constexpr, OVER_M: tl.constexpr,
            HAS_OVER: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, SCALE_WORDS: tl.constexpr,
            TILE_MAJOR: tl.constexpr):
    """The K loop of a block: ``ROWS`` weight rows (slabs from ``slab0`` of ``n_slabs``) upcast once per step against
    the ``BLOCK_M`` activation rows at ``ptrs`` and, with ``HAS_OVER``, the ``OVER_M`` at ``o_ptrs``: the two
    accumulators (without ``HAS_OVER`` the first twice)."""
    S: tl.constexpr = ROWS // 16
    C: tl.constexpr = BLOCK_K // 64
    offs_k = tl.arange(0, BLOCK_K)
    acc_t = tl.zeros((ROWS, BLOCK_M), dtype=tl.float32)
    if HAS_OVER:
        acc_o = tl.zeros((ROWS, OVER_M), dtype=tl.float32)
    for kk in tl.range(0, K, BLOCK_K):
        w = _ps_tile(w_base, s_base, slab0, kk // 64, n_slabs, K // 64, stride_ws, stride_ss, S, C, DOT_F32,
                     SCALE_WORDS, 0, TILE_MAJOR)
        acc_t = _dot(w, tl.trans(_act_tile(ptrs, mask_m, kk, offs_k, K, EVEN_K)), acc_t, DOT_F32)
        ptrs += BLOCK_K
        if HAS_OVER:
            acc_o = _dot(w, tl.trans(_act_tile(o_ptrs, mask_o, kk, offs_k, K, EVEN_K)), acc_o, DOT_F32)
            o_ptrs += BLOCK_K
    if not HAS_OVER:
        acc_o = acc_t
    return acc_t, acc_o


@triton.jit
def _gemm1_tile(x_ptr, w_base, s_base, pid_m, pid_n, n_over, sorted_pair_ptr, num_pairs, top_k, N, stride_xm,
                stride_ws, stride_ss, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, OVER_M: tl.constexpr, HAS_OVER: tl.constexpr, EVEN_K: tl.constexpr,
                DOT_F32: tl.constexpr, SCALE_WORDS: tl.constexpr, TILE_MAJOR: tl.constexpr):
    """gemm1's K loop for block ``pid_m`` (``2 BLOCK_N`` gate/up weight rows, activations by token): (positions, valid
    mask, accumulator) of its ``BLOCK_M`` rows and, with ``HAS_OVER``, of its ``OVER_M`` rows after them (else the
    first three again)."""
    base, offs_m, pair, mask_m = _block_rows(pid_m, n_over, sorted_pair_ptr, num_pairs, BLOCK_M, BLOCK_M + OVER_M)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tl.where(mask_m, pair // top_k, 0).to(tl.int64)[:, None] * stride_xm + offs_k[None, :]
    offs_o, pair_o, mask_o = offs_m, pair, mask_m
    o_ptrs = x_ptrs
    if HAS_OVER:
        offs_o, pair_o, mask_o = _over_rows(base, sorted_pair_ptr, num_pairs, BLOCK_M, OVER_M)
        o_ptrs = x_ptr + tl.where(mask_o, pair_o // top_k, 0).to(tl.int64)[:, None] * stride_xm + offs_k[None, :]
    acc_t, acc_o = _k_loop(x_ptrs, mask_m, o_ptrs, mask_o, w_base, s_base, pid_n * (BLOCK_N // 8), N // 8, stride_ws,
                           stride_ss, K, BLOCK_K, 2 * BLOCK_N, BLOCK_M, OVER_M, HAS_OVER, EVEN_K, DOT_F32,
                           SCALE_WORDS, TILE_MAJOR)
    return offs_m, mask_m, acc_t, offs_o, mask_o, acc_o


@triton.jit
def _moe_mxfp4_gemm1_ps_gu_over_kernel(
    x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N, n_over,
    stride_xm, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, OVER_M: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    N_FASTEST: tl.constexpr, PDL: tl.constexpr = 0, SCALE_WORDS: tl.constexpr = False,
    TILE_MAJOR: tl.constexpr = False,
):
    """gemm1 on the gate/up-interleaved ps matrix (:func:`._kernels_ps_gu._moe_mxfp4_gemm1_ps_gu_kernel`) over
    :func:`.grouping.fused_tail_grouping`'s blocks: the first ``n_over`` with both row sets against each upcast weight
    tile, the rest with one."""
    pid_m, pid_n, e, offs_n, mask_n, w_base, s_base = _program(block_expert_ptr, w_ptr, ws_ptr, stride_we, stride_se, N,
                                                               BLOCK_N, N_FASTEST, PDL)
    if pid_m < n_over:
        offs_m, mask_m, acc_t, offs_o, mask_o, acc_o = _gemm1_tile(
            x_ptr, w_base, s_base, pid_m, pid_n, n_over, sorted_pair_ptr, num_pairs, top_k, N, stride_xm, stride_ws,
            stride_ss, K, BLOCK_M, BLOCK_N, BLOCK_K, OVER_M, True, EVEN_K, DOT_F32, SCALE_WORDS, TILE_MAJOR)
        lin, gate = _gate_up_split(acc_o * X2_UNSCALE, OVER_M, BLOCK_N)
        _gemm1_store(lin, gate, 0, e, offs_o, offs_n, mask_o, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
                     out_ptr, N, stride_be, stride_om, 0, 0, ACTIVATION, HAS_BIAS, 1)
    else:
        offs_m, mask_m, acc_t, _, _, _ = _gemm1_tile(
            x_ptr, w_base, s_base, pid_m, pid_n, n_over, sorted_pair_ptr, num_pairs, top_k, N, stride_xm, stride_ws,
            stride_ss, K, BLOCK_M, BLOCK_N, BLOCK_K, OVER_M, False, EVEN_K, DOT_F32, SCALE_WORDS, TILE_MAJOR)
    lin, gate = _gate_up_split(acc_t * X2_UNSCALE, BLOCK_M, BLOCK_N)
    _gemm1_store(lin, gate, 0, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
                 out_ptr, N, stride_be, stride_om, 0, 0, ACTIVATION, HAS_BIAS, 1)


@triton.jit
def _gemm2_tile(a_ptr, w_base, s_base, pid_m, pid_n, n_over, sorted_pair_ptr, num_pairs, N, stride_am, stride_ws,
                stride_ss, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                OVER_M: tl.constexpr, HAS_OVER: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
                SCALE_WORDS: tl.constexpr, TILE_MAJOR: tl.constexpr):
    """gemm2's K loop for block ``pid_m`` (``BLOCK_N`` weight rows, activations by position): (pair ids, valid mask,
    accumulator) of its ``BLOCK_M`` rows and, with ``HAS_OVER``, of its ``OVER_M`` rows after them (else the first
    three again)."""
    base, offs_m, pair, mask_m = _block_rows(pid_m, n_over, sorted_pair_ptr, num_pairs, BLOCK_M, BLOCK_M + OVER_M)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    pair_o, mask_o, o_ptrs = pair, mask_m, a_ptrs
    if HAS_OVER:
        offs_o, pair_o, mask_o = _over_rows(base, sorted_pair_ptr, num_pairs, BLOCK_M, OVER_M)
        o_ptrs = a_ptr + offs_o[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    acc_t, acc_o = _k_loop(a_ptrs, mask_m, o_ptrs, mask_o, w_base, s_base, pid_n * (BLOCK_N // 16), N // 16,
                           stride_ws, stride_ss, K, BLOCK_K, BLOCK_N, BLOCK_M, OVER_M, HAS_OVER, EVEN_K, DOT_F32,
                           SCALE_WORDS, TILE_MAJOR)
    return pair, mask_m, acc_t, pair_o, mask_o, acc_o


@triton.jit
def _moe_mxfp4_gemm2_ps_over_kernel(
    a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N, n_over,
    stride_am, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, OVER_M: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, N_FASTEST: tl.constexpr,
    PDL: tl.constexpr = 0, SCALE_WORDS: tl.constexpr = False, TILE_MAJOR: tl.constexpr = False,
):
    """gemm2 on the ps matrix (:func:`._kernels_ps._moe_mxfp4_gemm2_ps_kernel`) over
    :func:`.grouping.fused_tail_grouping`'s blocks, each row stored by pair (one plane)."""
    pid_m, pid_n, e, offs_n, mask_n, w_base, s_base = _program(block_expert_ptr, w_ptr, ws_ptr, stride_we, stride_se, N,
                                                               BLOCK_N, N_FASTEST, PDL)
    if pid_m < n_over:
        pair, mask_m, acc_t, pair_o, mask_o, acc_o = _gemm2_tile(
            a_ptr, w_base, s_base, pid_m, pid_n, n_over, sorted_pair_ptr, num_pairs, N, stride_am, stride_ws,
            stride_ss, K, BLOCK_M, BLOCK_N, BLOCK_K, OVER_M, True, EVEN_K, DOT_F32, SCALE_WORDS, TILE_MAJOR)
        _gemm2_store(tl.trans(acc_o) * X2_UNSCALE, 0, e, pair_o, mask_o, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                     stride_be, stride_om, 0, HAS_BIAS)
    else:
        pair, mask_m, acc_t, _, _, _ = _gemm2_tile(
            a_ptr, w_base, s_base, pid_m, pid_n, n_over, sorted_pair_ptr, num_pairs, N, stride_am, stride_ws,
            stride_ss, K, BLOCK_M, BLOCK_N, BLOCK_K, OVER_M, False, EVEN_K, DOT_F32, SCALE_WORDS, TILE_MAJOR)
    _gemm2_store(tl.trans(acc_t) * X2_UNSCALE, 0, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, 0, HAS_BIAS)
