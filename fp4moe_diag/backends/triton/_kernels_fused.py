"""The fused ends of the ps kernels (tactic suffix ``-fs``, issue #25): the pass that a separate kernel made after a
GEMM is made by the last program of that GEMM to finish a tile, found with an int32 arrival counter per tile.

* gemm2 (:func:`_gemm2_fused_topk_sum`): per (token, N tile) a counter; a program stores its plane rows as the
  unfused gemm2 does, then increments the counter of each of its rows' tokens.  The program whose increment
  completes a token (its local pairs x gemm2's splits: pairs routed to other ranks never arrive, their plane rows
  stay zero as in the unfused call) sums that token's rows of every plane in the order of
  :func:`._kernels._topk_sum_kernel` (split planes, then top-k slots, from zero, in fp32) and stores bf16: the same
  bits.  Tokens with no local pair (expert parallelism) get their zero rows from M block 0, split 0 (:func:`_zero_rows`).
* split gemm1 (:func:`_gemm1_fused_finalize`): per (M block, N tile) a counter; the last of the ``SPLIT_K`` splits
  sums the fp32 partial planes in split order and runs ``_gemm1_epilogue``, as
  :func:`._kernels._moe_mxfp4_gemm1_finalize_kernel` does.

The counters are zeroed once with the workspace (never in the timed call); the program that completes a count
resets it to 0, so the next call (a CUDA-graph replay) starts clean.  Memory order on the GPU: the program's plane
stores, a CTA barrier, the atomic increment (``acq_rel``, scope ``gpu``: it releases the stores the barrier ordered
before it and acquires the other programs' released stores), a barrier, then the loads of the other programs' rows
(``.cg``: from L2).  Nothing waits on another program (no spin): no deadlock whatever the scheduling.  Under the
interpreter the programs run one after another and the barriers are no-ops.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import _bf16_rn, _gemm1_epilogue


@triton.jit
def _arrive(cnt_ptrs, mask):
    """Increment the counters ``cnt_ptrs`` (where ``mask``; None: one scalar counter) after every store of this
    program; the old counts, seen by every thread."""
    tl.debug_barrier()
    old = tl.atomic_add(cnt_ptrs, 1, mask=mask, sem="acq_rel", scope="gpu")
    tl.debug_barrier()
    return old


@triton.jit
def _zero_rows(pid_m, pid_k, orph_ptr, y_ptr, stride_ym, offs_n, mask_n, BLOCK_N: tl.constexpr, ORPH: tl.constexpr):
    """M block 0, split 0: zero rows ``orph_ptr[0 .. ORPH)`` (-1: none) of ``y`` in this program's columns."""
    if ORPH > 0:
        if (pid_m == 0) & (pid_k == 0):
            for i0 in range(0, ORPH, 16):
                r = tl.load(orph_ptr + i0 + tl.arange(0, 16))
                zero = tl.zeros((16, BLOCK_N), dtype=y_ptr.dtype.element_ty)
                tl.store(y_ptr + r[:, None].to(tl.int64) * stride_ym + offs_n[None, :], zero,
                         mask=(r >= 0)[:, None] & mask_n[None, :])


@triton.jit
def _gemm2_fused_topk_sum(pid_m, pid_n, pid_k, pair, mask_m, offs_n, mask_n, planes_ptr, stride_os, stride_om,
                          cnt_ptr, tok_pairs_ptr, orph_ptr, y_ptr, stride_ym, N,
                          TOP_K: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          ORPH: tl.constexpr, RNE_BF16: tl.constexpr):
    """After gemm2's plane stores: arrive at each row's (token, N tile) counter; for the tokens this program
    completes, ``y[t, offs_n]`` = the sum of ``planes[s, t * TOP_K + j, offs_n]`` over s, then j (bf16; ``RNE_BF16``:
    the interpreter, whose fp32 -> bf16 cast truncates, rounds to nearest even first, as cvt.rn does)."""
    tok = tl.where(mask_m, pair // TOP_K, 0).to(tl.int64)
    cnt = cnt_ptr + tok * tl.cdiv(N, BLOCK_N) + pid_n
    old = _arrive(cnt, mask_m)
    need = tl.load(tok_pairs_ptr + tok, mask=mask_m, other=0) * SPLIT_K
    last = mask_m & (old == need - 1)
    if tl.sum(last.to(tl.int32), axis=0) > 0:
        m2 = last[:, None] & mask_n[None, :]
        rows = planes_ptr + (tok * TOP_K)[:, None] * stride_om + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            for j in tl.static_range(TOP_K):
                acc += tl.load(rows + s * stride_os + j * stride_om, mask=m2, other=0.0, cache_modifier=".cg")
        if RNE_BF16:
            acc = _bf16_rn(acc)
        tl.store(y_ptr + tok[:, None] * stride_ym + offs_n[None, :], acc.to(y_ptr.dtype.element_ty), mask=m2)
        tl.store(cnt, tl.zeros((BLOCK_M,), dtype=tl.int32), mask=last)
    _zero_rows(pid_m, pid_k, orph_ptr, y_ptr, stride_ym, offs_n, mask_n, BLOCK_N, ORPH)


@triton.jit
def _gemm1_fused_finalize(pid_m, pid_n, e, offs_m, offs_n, mask_m, mask_n, cnt_ptr, part_ptr, b_ptr, alpha_ptr,
                          beta_ptr, limit_ptr, out_ptr, N, stride_be, stride_om, stride_ps, stride_pm,
                          ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """After a split's partial stores: arrive at the (M block, N tile) counter; the last split sums the ``SPLIT_K``
    planes in split order and runs the epilogue (bias, activation, bf16 store), then resets the counter."""
    cnt = cnt_ptr + pid_m * tl.cdiv(N, BLOCK_N) + pid_n
    old = _arrive(cnt, None)
    if old == SPLIT_K - 1:
        p = part_ptr + offs_m[:, None].to(tl.int64) * stride_pm + offs_n[None, :]
        mask = mask_m[:, None] & mask_n[None, :]
        acc_l = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            acc_l += tl.load(p + s * stride_ps, mask=mask, other=0.0, cache_modifier=".cg")
            acc_g += tl.load(p + s * stride_ps + N, mask=mask, other=0.0, cache_modifier=".cg")
        _gemm1_epilogue(acc_l, acc_g, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                        out_ptr, N, stride_be, stride_om, ACTIVATION, HAS_BIAS)
        tl.store(cnt, 0)
