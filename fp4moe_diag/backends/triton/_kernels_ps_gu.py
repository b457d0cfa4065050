"""gemm1 of mode ``ps`` with gate and up interleaved in every slab (tactic suffix ``-gu``): one weight tile, one dot.

The ps gemm1 of :mod:`._kernels_ps` loads two weight tiles per K step (the lin rows at slabs ``slab0..``, the gate
rows at slabs ``N / 16 + slab0..``) and runs two dots into two accumulators.  Here the expert matrix is the copy of
:func:`.ps_layout.shuffle_gate_up`: in slab ``j`` rows 0..7 are the lin rows of output columns ``8 j .. 8 j + 7`` and
rows 8..15 their gate rows.  A program with ``BLOCK_N`` output columns loads ``BLOCK_N / 8`` slabs (``2 BLOCK_N``
weight rows) per K step and runs ONE ``tl.dot`` into ONE accumulator ``[2 BLOCK_N, BLOCK_M]`` (as triton_kernels'
gemm1 runs one dot over a 256-row tile with gate and up interleaved).  BLOCK_N keeps its meaning (output columns per
program): the grid, the tactic labels and the bias ``[2I]`` (indexed by output column) are those of the plain ps
gemm1.

In the wgmma accumulator fragment a thread holds rows ``g`` and ``g + 8`` of its warp's 16-row slab, i.e. the lin
and the gate value of the same output column: :func:`_gate_up_split` names accumulator row ``16 j + 8 h + g`` as
``[j, h, g]``, moves ``h`` last and splits it (``tl.split``), giving lin and gate ``[BLOCK_M, BLOCK_N]`` at output
column ``8 j + g``; then :func:`._kernels._gemm1_store` (bias, activation, bf16 store; or the split-K partials to
the ``part`` planes as the plain ps gemm1 stores them, summed by the same finalize kernel).

Rows past N: ``N`` (= I) is a multiple of 64 wherever ps runs (``ps_layout.refusal``), so slabs are whole and a
tile's slabs past ``2N / 16`` read as zeros; output column ``c < N`` is valid (``mask_n``).  Grid order, PDL,
SCALE_WORDS (decided by the launcher for the ``2 BLOCK_N``-row tile) and EVEN_K masking as in :mod:`._kernels_ps`.

``CHUNK_DOTS`` (the launcher's choice, :func:`.configs_gu.ps_gu_chunk_dots`: 4 warps and BLOCK_K > 64): the K step's
tile is upcast and multiplied one 64-K chunk at a time (``BLOCK_K / 64`` dots into the same accumulator, the
activations loaded per chunk), so that fewer upcast weight registers are live at once.  sm_90a, K = 2880, triton
3.6.0 (``profiling.sass``; ptxas -v on the PTX): m64n128k128w4s3 gemm1 with one dot spills 252 bytes (1032 loop
instructions, 4.03 per weight), with chunk dots none (855, 3.34; the two-dot ps gemm1: 28 bytes, 868, 3.39);
m16n128k128w4s3 224 -> 205 registers, 781 -> 758 instructions (ps: 218, 799).  With 8 warps (m128n128k128w8s3)
chunk dots are worse (562 instructions and 16 bytes of spills against 532 and none): one dot there.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import X2_UNSCALE, _dot, _gemm1_store, _tile_at
from ._kernels_fused import _gemm1_fused_finalize
from ._kernels_ablate import _sink_loop
from ._kernels_ps import _act_tile, _grid_ids, _pdl_enter, _pdl_exit
from ._kernels_ps_tile import _ps_tile


@triton.jit
def _gate_up_split(acc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The accumulator ``[2 BLOCK_N, BLOCK_M]`` (row ``16 j + 8 h + g``: ``h`` 0 lin, 1 gate) -> ``(lin, gate)``,
    each ``[BLOCK_M, BLOCK_N]`` with output column ``8 j + g``."""
    a = tl.reshape(acc, (BLOCK_N // 8, 2, 8, BLOCK_M))  # j, h, g, m
    a = tl.permute(a, (3, 0, 2, 1))  # m, j, g, h
    return tl.split(tl.reshape(a, (BLOCK_M, BLOCK_N, 2)))


@triton.jit
def _moe_mxfp4_gemm1_ps_gu_kernel(
    x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, part_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om, stride_ps, stride_pm,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr, N_FASTEST: tl.constexpr, PDL: tl.constexpr = 0,
    SCALE_WORDS: tl.constexpr = False, CHUNK_DOTS: tl.constexpr = False, cnt_ptr=None, FUSED: tl.constexpr = False,
    ABLATE: tl.constexpr = 0, STAGES: tl.constexpr = 0, TILE_MAJOR: tl.constexpr = False, UNROLL: tl.constexpr = 1,
):
    """gemm1 (gate/up + activation, N = I, K = H) on the gate/up-interleaved ps matrix ``[2N / 16, K / 64, 512]``:
    ``BLOCK_N / 8`` slabs from slab ``pid_n * BLOCK_N / 8``, one dot per K step (``CHUNK_DOTS``: one per 64-K chunk,
    see :func:`.configs_gu.ps_gu_chunk_dots`).  Arguments as :func:`._kernels_ps._moe_mxfp4_gemm1_ps_kernel`
    (``ABLATE``, ``STAGES``: :mod:`._kernels_ablate`; ``UNROLL``: the K loop unrolled so many times, ``-uN``,
    :mod:`.configs_unroll`)."""
    _pdl_enter(PDL, True)
    pid_m, pid_n = _grid_ids(N_FASTEST)
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, tl.program_id(2), block_expert_ptr,
                                                              sorted_pair_ptr, num_pairs, N, BLOCK_M, BLOCK_N)
    tok = tl.where(mask_m, pair // top_k, 0).to(tl.int64)
    S: tl.constexpr = BLOCK_N // 8  # slabs per tile: lin and gate rows of BLOCK_N output columns
    C: tl.constexpr = BLOCK_K // 64
    kb = pid_k * K_SPLIT
    offs_k = tl.arange(0, 64 if CHUNK_DOTS else BLOCK_K)
    x_ptrs = x_ptr + tok[:, None] * stride_xm + kb + offs_k[None, :]
    w_base = w_ptr + e * stride_we
    s_base = ws_ptr + e * stride_se
    slab0 = pid_n * S
    acc_t = tl.zeros((2 * BLOCK_N, BLOCK_M), dtype=tl.float32)
    if ABLATE >= 2:  # ~load / ~seq (_kernels_ablate): the loop's weight and scale loads only
        acc_t = _sink_loop(acc_t, w_base, s_base, w_base, s_base, slab0, kb // 64, N // 8, K // 64, stride_ws,
                           stride_ss, K_SPLIT, BLOCK_K, S, C, 1, STAGES, ABLATE == 3)
    else:
        for kk in tl.range(0, K_SPLIT, BLOCK_K, loop_unroll_factor=UNROLL):  # -uN (configs_unroll): UNROLL > 1
            if CHUNK_DOTS:  # one dot per 64-K chunk of the tile (its activations loaded per chunk), same accumulator
                for c in tl.static_range(C):
                    xt = tl.trans(_act_tile(x_ptrs + 64 * c, mask_m, kb + kk + 64 * c, offs_k, K, EVEN_K))
                    w = _ps_tile(w_base, s_base, slab0, (kb + kk) // 64 + c, N // 8, K // 64, stride_ws, stride_ss,
                                 S, 1, DOT_F32, SCALE_WORDS, ABLATE, TILE_MAJOR, C)
                    acc_t = _dot(w, xt, acc_t, DOT_F32)
            else:
                xt = tl.trans(_act_tile(x_ptrs, mask_m, kb + kk, offs_k, K, EVEN_K))
                w = _ps_tile(w_base, s_base, slab0, (kb + kk) // 64, N // 8, K // 64, stride_ws, stride_ss, S, C,
                             DOT_F32, SCALE_WORDS, ABLATE, TILE_MAJOR)
                acc_t = _dot(w, xt, acc_t, DOT_F32)
            x_ptrs += BLOCK_K
    lin, gate = _gate_up_split(acc_t * X2_UNSCALE, BLOCK_M, BLOCK_N)
    _gemm1_store(lin, gate, pid_k, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
                 part_ptr, N, stride_be, stride_om, stride_ps, stride_pm, ACTIVATION, HAS_BIAS, SPLIT_K)
    if FUSED and SPLIT_K > 1:  # -fs: the last split of a tile finalizes it (the partials are those of the ps gemm1)
        _gemm1_fused_finalize(pid_m, pid_n, e, offs_m, offs_n, mask_m, mask_n, cnt_ptr, part_ptr, b_ptr, alpha_ptr,
                              beta_ptr, limit_ptr, out_ptr, N, stride_be, stride_om, stride_ps, stride_pm, ACTIVATION,
                              HAS_BIAS, SPLIT_K, BLOCK_M, BLOCK_N)
    _pdl_exit(PDL)
