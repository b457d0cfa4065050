"""Triton kernels of mode ``p8`` (backend ``triton_w4a8``): the W4A8 GEMMs of :mod:`._kernels_f8` (same numbers, bit
for bit: e4m3 weights ``e4m3_rn(v * 2**(s - E[n]))``, the accumulator times ``2**(E[n] - 127)`` and the activation
row scale after the K loop, :func:`._kernels_f8._unscale`) on the pre-shuffled weights of :mod:`.p8_layout`, whose
per-(row, 32-block) tables hold the already rounded e4m3 values: the decode is a byte-permute table lookup.

The weight tile of a program is ``S = BLOCK_N // 16`` slabs by ``C = BLOCK_K // 64`` chunks: code bytes ``[S, C,
512]`` read as ``[S, C, g 8, t 4, s 2, rh 2, byte 4]`` and table bytes ``[S, C, 256]`` read as ``[S, C, s 2, g 8, rh
2, T0 / T1, byte 4]`` (broadcast along t).  :data:`_P8_ASM` turns one code word and its row's two table words into
two e4m3x4 registers, the thread's wgmma A registers a0 / a2 (rh 0) or a1 / a3 (rh 1) of k32 step ``s``; ``join``
+ ``permute`` + ``reshape`` name them as the logical tile ``W8 [BLOCK_N, BLOCK_K]`` (row ``16 slab + 8 rh + g``, K
``64 chunk + 32 s + 16 kh + 4 t + j``) for ``tl.dot(W8, x8.T)``, as :func:`._kernels_ps._ps_tile` does for bf16.

Checked on sm_90a (CPU compile, triton 3.6.0, m128n64k128w4s3 gemm2): the TTGIR layout of the decoded ``[64, 32]``
slices is the linear layout register ``(k 1, k 2, row 8, k 16)``, lane ``(k 4, k 8, row 1, 2, 4)``, warp ``(row 16,
32)`` -- the fragment above -- and its ``convert_layout`` to the wgmma dot operand (kWidth 4) lowers to nothing (no
STS / LDS / SHFL of the weights in the SASS loop: the asm's output registers are the QGMMA's A registers); the asm
operands' layout has the last dim of 4 in register bits 0, 1 (one 32-bit register, as pack=4 needs).

Swap-AB as :mod:`._kernels_f8`; grid order and tile lookup as :mod:`._kernels_ps` (``N_FASTEST``).  No split-K.
Uneven K (a multiple of 64, not of BLOCK_K): chunks past K load as zero codes and zero tables (value 0), the
activations past K as zeros.

Under the interpreter (no inline asm) :func:`_p8_values` does the lookup with integer ops (``(T64 >> 8 sel) &
0xFF``) and ``_dot8`` multiplies the exact fp8 values in fp32 (``DOT_F32``).  The interpreter does not check the
register grouping the asm relies on (4 consecutive bytes of the last dim in one register); a GPU run does (H200,
s11c / s11d: ``tests/test_triton_p8.py -k gpu`` bit for bit, every sweep row correct).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import _gemm1_epilogue, _gemm2_store, _tile_at, _tile_rows
from ._kernels_f8 import _dot8, _unscale
from ._kernels_ps import _act_tile, _grid_ids

# $2: one code word (8 codes of one row); $3 / $4: the row's table bytes 0..3 / 4..7.  Out: $0 the e4m3x4 of K 4t..4t+3
# (a0 / a1), $1 of K 16+4t.. (a2 / a3).  prmt's default mode: selector nibble i (bits 4i..4i+3 of the low 16) picks
# byte i; bit 3 of a nibble (sign replicate) is cleared, the code's sign is or-ed into bit 7 of each byte.
_P8_ASM = tl.constexpr(r"""
{
  .reg .b32 s, p, q;
  and.b32 s, $2, 0x7777;  prmt.b32 p, $3, $4, s;  and.b32 q, $2, 0x80808080;  or.b32 $0, p, q;
  shr.b32 s, $2, 16;  and.b32 s, s, 0x7777;  prmt.b32 p, $3, $4, s;
  shl.b32 q, $2, 4;  and.b32 q, q, 0x80808080;  or.b32 $1, p, q;
}
""")


@triton.jit
def _word(b):
    """uint8 ``[..., 4]`` -> the uint64 little-endian word of the last dim, with a last dim of 1."""
    shift = (tl.arange(0, 4) * 8).to(tl.uint64)
    w = tl.sum(b.to(tl.uint64) << shift, axis=len(b.shape) - 1)  # disjoint bits: the sum is the or
    return tl.expand_dims(w, len(b.shape) - 1)


@triton.jit
def _p8_values(p, t0, t1, INTERP: tl.constexpr):
    """Code bytes ``p`` [..., 4] (one word) and the row's table bytes ``t0`` / ``t1`` [..., 4] -> ``(A, B)`` e4m3
    [..., 4]: ``A[..., j]`` the value of K ``4t + j``, ``B[..., j]`` of K ``16 + 4t + j`` (see :mod:`.p8_layout`)."""
    if INTERP:
        w = _word(p)
        t64 = _word(t0) | (_word(t1) << 32)
        j = tl.arange(0, 4).to(tl.uint64)
        sel_a = (w >> (4 * j)) & 7
        sel_b = (w >> (16 + 4 * j)) & 7
        a = ((t64 >> (8 * sel_a)) & 0xFF) | ((w >> (8 * j)) & 0x80)
        b = ((t64 >> (8 * sel_b)) & 0xFF) | (((w << 4) >> (8 * j)) & 0x80)
        return (a.to(tl.uint8).to(tl.float8e4nv, bitcast=True), b.to(tl.uint8).to(tl.float8e4nv, bitcast=True))
    else:
        return tl.inline_asm_elementwise(_P8_ASM, constraints="=r,=r,r,r,r", args=[p, t0, t1],
                                         dtype=(tl.float8e4nv, tl.float8e4nv), is_pure=True, pack=4)


@triton.jit
def _p8_tile(w_base, t_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ts, S: tl.constexpr,
             C: tl.constexpr, INTERP: tl.constexpr):
    """The e4m3 weight tile ``W8 [16 S, 64 C]`` of slabs ``slab0..`` and chunks ``chunk0..`` of one expert (codes at
    ``w_base``, tables at ``t_base``); slabs and chunks past the matrix read as zeros."""
    row, ch, ok = _tile_rows(slab0, chunk0, n_slabs, n_chunks, S, C)
    p = tl.load(w_base + row * stride_ws + ch[None, :, None] * 512 + tl.arange(0, 512)[None, None, :], mask=ok,
                other=0)
    tb = tl.load(t_base + row * stride_ts + ch[None, :, None] * 256 + tl.arange(0, 256)[None, None, :], mask=ok,
                 other=0)
    tb = tl.permute(tl.reshape(tb, (S, C, 2, 8, 2, 2, 4)), (0, 1, 3, 2, 4, 6, 5))  # slab, chunk, g, s, rh, byte, h
    t0, t1 = tl.split(tb)
    t0 = tl.broadcast_to(tl.reshape(t0, (S, C, 8, 1, 2, 2, 4)), (S, C, 8, 4, 2, 2, 4))
    t1 = tl.broadcast_to(tl.reshape(t1, (S, C, 8, 1, 2, 2, 4)), (S, C, 8, 4, 2, 2, 4))
    a, b = _p8_values(tl.reshape(p, (S, C, 8, 4, 2, 2, 4)), t0, t1, INTERP)
    y = tl.join(a, b)  # slab, chunk, g, t, s, rh, j, kh
    y = tl.permute(y, (0, 5, 2, 1, 4, 7, 3, 6))  # slab, rh, g, chunk, s, kh, t, j
    return tl.reshape(y, (S * 16, C * 64))


@triton.jit
def _moe_w4a8_gemm1_p8_kernel(
    x_ptr, xs_ptr, w_ptr, wt_ptr, we_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_ws, stride_te, stride_ts, stride_ee, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    N_FASTEST: tl.constexpr,
):
    """gemm1 of :mod:`._kernels_f8` (gate/up on e4m3 ``x8`` [T, H] with row scales ``xs``, bias, activation, bf16
    ``out`` [padded pairs, I]) on the p8 layout: codes ``[L, 2I/16, H/64, 512]``, tables ``[L, 2I/16, H/32, 128]``
    (the gate rows are slabs ``N / 16 ..``), ``we`` [L, 2I] the rows' E bytes."""
    pid_m, pid_n = _grid_ids(N_FASTEST)
    _, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, 0, block_expert_ptr, sorted_pair_ptr,
                                                          num_pairs, N, BLOCK_M, BLOCK_N)
    tok = tl.where(mask_m, pair // top_k, 0).to(tl.int64)
    S: tl.constexpr = BLOCK_N // 16
    C: tl.constexpr = BLOCK_K // 64
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tok[:, None] * stride_xm + offs_k[None, :]
    w_lin = w_ptr + e * stride_we
    t_lin = wt_ptr + e * stride_te
    w_gate = w_lin + (N // 16) * stride_ws
    t_gate = t_lin + (N // 16) * stride_ts
    e_lin = tl.load(we_ptr + e * stride_ee + offs_n, mask=mask_n, other=0).to(tl.int32)
    e_gate = tl.load(we_ptr + e * stride_ee + N + offs_n, mask=mask_n, other=0).to(tl.int32)
    slab0 = pid_n * S
    acc_lt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc_gt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for kk in range(0, K, BLOCK_K):
        xt = tl.trans(_act_tile(x_ptrs, mask_m, kk, offs_k, K, EVEN_K))
        c0 = kk // 64
        acc_lt = _dot8(_p8_tile(w_lin, t_lin, slab0, c0, N // 16, K // 64, stride_ws, stride_ts, S, C, DOT_F32),
                       xt, acc_lt, DOT_F32)
        acc_gt = _dot8(_p8_tile(w_gate, t_gate, slab0, c0, N // 16, K // 64, stride_ws, stride_ts, S, C, DOT_F32),
                       xt, acc_gt, DOT_F32)
        x_ptrs += BLOCK_K
    xs = tl.load(xs_ptr + tok, mask=mask_m, other=0.0)
    _gemm1_epilogue(_unscale(acc_lt, e_lin, xs), _unscale(acc_gt, e_gate, xs), e, offs_m, offs_n, mask_m, mask_n,
                    b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, N, stride_be, stride_om, ACTIVATION, HAS_BIAS,
                    DOT_F32)


@triton.jit
def _moe_w4a8_gemm2_p8_kernel(
    a_ptr, as_ptr, w_ptr, wt_ptr, we_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N,
    stride_am, stride_we, stride_ws, stride_te, stride_ts, stride_ee, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, N_FASTEST: tl.constexpr,
):
    """gemm2 of :mod:`._kernels_f8` (down on e4m3 ``a8`` [padded pairs, I] with row scales ``as``, bias, times the
    routing weight, fp32 per-pair store to ``out`` [T * k, H]) on the p8 layout (codes ``[L, H/16, I/64, 512]``,
    tables ``[L, H/16, I/32, 128]``)."""
    pid_m, pid_n = _grid_ids(N_FASTEST)
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, 0, block_expert_ptr, sorted_pair_ptr,
                                                              num_pairs, N, BLOCK_M, BLOCK_N)
    S: tl.constexpr = BLOCK_N // 16
    C: tl.constexpr = BLOCK_K // 64
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    w_base = w_ptr + e * stride_we
    t_base = wt_ptr + e * stride_te
    emax = tl.load(we_ptr + e * stride_ee + offs_n, mask=mask_n, other=0).to(tl.int32)
    slab0 = pid_n * S
    acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for kk in range(0, K, BLOCK_K):
        at = tl.trans(_act_tile(a_ptrs, mask_m, kk, offs_k, K, EVEN_K))
        w8 = _p8_tile(w_base, t_base, slab0, kk // 64, N // 16, K // 64, stride_ws, stride_ts, S, C, DOT_F32)
        acc_t = _dot8(w8, at, acc_t, DOT_F32)
        a_ptrs += BLOCK_K
    a_scale = tl.load(as_ptr + offs_m, mask=mask_m, other=0.0)
    _gemm2_store(_unscale(acc_t, emax, a_scale), pid_k, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, 0, HAS_BIAS)


@triton.jit
def _p8_decode_test_kernel(w_ptr, t_ptr, out_ptr, n_slabs, n_chunks, S: tl.constexpr, C: tl.constexpr,
                           INTERP: tl.constexpr):
    """Test hook: :func:`_p8_tile` of one expert's whole p8 matrix (``16 S`` rows, ``64 C`` K; S and C powers of two
    covering ``n_slabs`` / ``n_chunks``), stored as e4m3 ``[16 S, 64 C]`` row-major."""
    w8 = _p8_tile(w_ptr, t_ptr, 0, 0, n_slabs, n_chunks, n_chunks * 512, n_chunks * 256, S, C, INTERP)
    rows = tl.arange(0, S * 16)
    tl.store(out_ptr + rows[:, None] * (C * 64) + tl.arange(0, C * 64)[None, :], w8)
