"""gemm1 (``-gu``) and gemm2 of mode ``ps`` with an expert's tail rows in its last block's program (tactic ``-tNf``,
:mod:`.configs_tail`): one weight tile per K step, two dots.

Under ``-tN`` an expert's last ``r <= N`` pairs run as a block of N rows in a second launch pair, whose programs each
stream and upcast a whole weight slice for those few rows (at 120b EP4 T=4096 on the H100 the two tail launches take
83 + 54 of 566 us, ``-s34b``).  Here a block of the second launch pair holds an expert's last ``BLOCK_M`` pairs and
its ``r`` pairs after them: ``BLOCK_M + OVER_M`` entries of the grouping (:func:`.grouping.overflow_groupings`), the
first ``BLOCK_M`` as a plain block's rows, the last ``OVER_M`` (``r`` of them valid) as a second activation tile.
Each K step upcasts the weight tile once and runs two dots into two accumulators, ``[rows, BLOCK_M]`` and ``[rows,
OVER_M]``; the epilogues are those of :mod:`._kernels_ps_gu` and :mod:`._kernels_ps`, once per accumulator.  Rows of
the intermediate plane are the grouping's positions, as in every ps launch, so gemm2 reads what gemm1 wrote.

No split-K, no ``-fs``, no ablation, no persistent grid, no chunk dots (16- and 8-warp tiles only): the launcher
(:func:`.launch.gemm1_calls` / :func:`.launch.gemm2_calls` with ``over_m``) refuses the rest.  ``PDL`` as
:func:`._kernels_ps._pdl_enter` / :func:`._kernels_ps._pdl_exit` (5: work before the wait, the wait last).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import X2_UNSCALE, _dot, _gemm1_store, _gemm2_store
from ._kernels_ps import _act_tile, _grid_ids, _pdl_enter, _pdl_exit
from ._kernels_ps_gu import _gate_up_split
from ._kernels_ps_tile import _ps_tile


@triton.jit
def _over_rows(pid_m, sorted_pair_ptr, num_pairs, BLOCK_M: tl.constexpr, OVER_M: tl.constexpr):
    """Block ``pid_m``'s two row sets (positions in the grouping, their pair ids, valid masks): ``BLOCK_M`` rows from
    ``pid_m (BLOCK_M + OVER_M)``, then ``OVER_M``."""
    offs_m = pid_m * (BLOCK_M + OVER_M) + tl.arange(0, BLOCK_M)
    offs_o = pid_m * (BLOCK_M + OVER_M) + BLOCK_M + tl.arange(0, OVER_M)
    pair = tl.load(sorted_pair_ptr + offs_m)
    pair_o = tl.load(sorted_pair_ptr + offs_o)
    return offs_m, pair, pair < num_pairs, offs_o, pair_o, pair_o < num_pairs


@triton.jit
def _moe_mxfp4_gemm1_ps_gu_over_kernel(
    x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, OVER_M: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    N_FASTEST: tl.constexpr, PDL: tl.constexpr = 0, SCALE_WORDS: tl.constexpr = False,
    TILE_MAJOR: tl.constexpr = False,
):
    """gemm1 on the gate/up-interleaved ps matrix (:func:`._kernels_ps_gu._moe_mxfp4_gemm1_ps_gu_kernel`) for blocks
    of ``BLOCK_M + OVER_M`` grouping entries: both row sets against each upcast weight tile."""
    _pdl_enter(PDL, True)
    pid_m, pid_n = _grid_ids(N_FASTEST)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m, pair, mask_m, offs_o, pair_o, mask_o = _over_rows(pid_m, sorted_pair_ptr, num_pairs, BLOCK_M, OVER_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    S: tl.constexpr = BLOCK_N // 8  # slabs per tile: lin and gate rows of BLOCK_N output columns
    C: tl.constexpr = BLOCK_K // 64
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tl.where(mask_m, pair // top_k, 0).to(tl.int64)[:, None] * stride_xm + offs_k[None, :]
    o_ptrs = x_ptr + tl.where(mask_o, pair_o // top_k, 0).to(tl.int64)[:, None] * stride_xm + offs_k[None, :]
    w_base = w_ptr + e * stride_we
    s_base = ws_ptr + e * stride_se
    acc_t = tl.zeros((2 * BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc_o = tl.zeros((2 * BLOCK_N, OVER_M), dtype=tl.float32)
    for kk in tl.range(0, K, BLOCK_K):
        w = _ps_tile(w_base, s_base, pid_n * S, kk // 64, N // 8, K // 64, stride_ws, stride_ss, S, C, DOT_F32,
                     SCALE_WORDS, 0, TILE_MAJOR)
        acc_t = _dot(w, tl.trans(_act_tile(x_ptrs, mask_m, kk, offs_k, K, EVEN_K)), acc_t, DOT_F32)
        acc_o = _dot(w, tl.trans(_act_tile(o_ptrs, mask_o, kk, offs_k, K, EVEN_K)), acc_o, DOT_F32)
        x_ptrs += BLOCK_K
        o_ptrs += BLOCK_K
    lin, gate = _gate_up_split(acc_t * X2_UNSCALE, BLOCK_M, BLOCK_N)
    _gemm1_store(lin, gate, 0, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
                 out_ptr, N, stride_be, stride_om, 0, 0, ACTIVATION, HAS_BIAS, 1)
    lin, gate = _gate_up_split(acc_o * X2_UNSCALE, OVER_M, BLOCK_N)
    _gemm1_store(lin, gate, 0, e, offs_o, offs_n, mask_o, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
                 out_ptr, N, stride_be, stride_om, 0, 0, ACTIVATION, HAS_BIAS, 1)
    _pdl_exit(PDL)


@triton.jit
def _moe_mxfp4_gemm2_ps_over_kernel(
    a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N,
    stride_am, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, OVER_M: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, N_FASTEST: tl.constexpr,
    PDL: tl.constexpr = 0, SCALE_WORDS: tl.constexpr = False, TILE_MAJOR: tl.constexpr = False,
):
    """gemm2 on the ps matrix (:func:`._kernels_ps._moe_mxfp4_gemm2_ps_kernel`) for blocks of ``BLOCK_M + OVER_M``
    grouping entries: both row sets against each upcast weight tile, each stored by pair (one plane)."""
    _pdl_enter(PDL, True)  # PDL 5 (-pdltt): gemm1's rows read past L1, the wait last
    pid_m, pid_n = _grid_ids(N_FASTEST)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m, pair, mask_m, offs_o, pair_o, mask_o = _over_rows(pid_m, sorted_pair_ptr, num_pairs, BLOCK_M, OVER_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    S: tl.constexpr = BLOCK_N // 16
    C: tl.constexpr = BLOCK_K // 64
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    o_ptrs = a_ptr + offs_o[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    w_base = w_ptr + e * stride_we
    s_base = ws_ptr + e * stride_se
    acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc_o = tl.zeros((BLOCK_N, OVER_M), dtype=tl.float32)
    for kk in tl.range(0, K, BLOCK_K):
        w = _ps_tile(w_base, s_base, pid_n * S, kk // 64, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32,
                     SCALE_WORDS, 0, TILE_MAJOR)
        acc_t = _dot(w, tl.trans(_act_tile(a_ptrs, mask_m, kk, offs_k, K, EVEN_K, PDL == 5)), acc_t, DOT_F32)
        acc_o = _dot(w, tl.trans(_act_tile(o_ptrs, mask_o, kk, offs_k, K, EVEN_K, PDL == 5)), acc_o, DOT_F32)
        a_ptrs += BLOCK_K
        o_ptrs += BLOCK_K
    _gemm2_store(tl.trans(acc_t) * X2_UNSCALE, 0, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, 0, HAS_BIAS)
    _gemm2_store(tl.trans(acc_o) * X2_UNSCALE, 0, e, pair_o, mask_o, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, 0, HAS_BIAS)
    _pdl_exit(PDL)
