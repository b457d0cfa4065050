"""Triton kernels of the routed MXFP4 MoE: BF16 activations, MXFP4 weights dequantized in-kernel.

Only :mod:`fp4moe_diag.backends.triton_mxfp4` imports this module, lazily: it imports triton.
Set ``TRITON_INTERPRET=1`` *before* importing it to get the CPU interpreter (``@triton.jit``
picks the interpreter when the decorator runs).

Both GEMMs work on the expert grouping of :mod:`.triton_routing`: program ``(pid_m, pid_n)``
takes ``BLOCK_M`` rows of ``sorted_pair_ids`` (all of one local expert) and ``BLOCK_N`` output
columns.  A weight tile is loaded as packed bytes ``[BLOCK_K // 32, 16, BLOCK_N]`` (32-element
MX block, 16 bytes of it, output column); the low nibble holds the even K element and the high
nibble the odd one, so the tile is multiplied as two half-K dots against the even and odd
activation columns, which needs no nibble interleaving.  Codes decode to exact fp32 by bit
arithmetic, the ue8m0 byte ``b`` to ``2**(b - 127)`` by bit shift; the product is exact in bf16
and feeds ``tl.dot`` with fp32 accumulation.

* gemm1: ``act(x[tok] @ w13[e, n].T + b13[e, n], x[tok] @ w13[e, I + n].T + b13[e, I + n])``,
  stored bf16 ``[num_padded_pairs, I]`` (row = position in ``sorted_pair_ids``).
* gemm2: ``(inter @ w2[e].T + b2[e]) * topk_weight[pair]``, stored fp32 ``[T * top_k, H]`` by
  pair; the sum over ``top_k`` is done in torch (deterministic, no atomics).

The reduction length ``K`` (H for gemm1, I for gemm2) is a ``tl.constexpr``: one compile per
(shape, config, activation, bias) and a constant trip count; Triton 3.6's interpreter also
fails on a loop bounded by a runtime scalar under NumPy >= 2.4.  Under the interpreter the
bf16 dots run on fp32-upcast operands (see :func:`_dot`); compiled kernels use bf16 ``tl.dot``.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

ACT_SWIGLU = 0
ACT_SWIGLU_OAI = 1


@triton.jit
def _e2m1_to_f32(c):
    """int32 e2m1 codes (0..15) -> exact fp32 values (0, .5, 1, 1.5, 2, 3, 4, 6, signed)."""
    mag = c & 7
    normal = ((mag << 22) + (126 << 23)).to(tl.float32, bitcast=True)  # exponent e + 126, mantissa m
    v = tl.where(mag >= 2, normal, mag.to(tl.float32) * 0.5)
    return tl.where((c & 8) != 0, -v, v)


@triton.jit
def _ue8m0_to_f32(s):
    """ue8m0 bytes (int32) -> 2**(s - 127), exact (s == 0 gives the fp32 subnormal 2**-127)."""
    return tl.where(s > 0, s << 23, 0x400000).to(tl.float32, bitcast=True)


@triton.jit
def _dequant_tile(b, s, HALF: tl.constexpr, BLOCK_N: tl.constexpr):
    """Packed bytes ``b`` [NB, 16, BLOCK_N] and scale bytes ``s`` [NB, BLOCK_N] (uint8) ->
    (even-K, odd-K) bf16 tiles of shape [BLOCK_K // 2, BLOCK_N]."""
    b = b.to(tl.int32)
    sf = _ue8m0_to_f32(s.to(tl.int32))[:, None, :]
    lo = (_e2m1_to_f32(b & 0xF) * sf).to(tl.bfloat16)
    hi = (_e2m1_to_f32(b >> 4) * sf).to(tl.bfloat16)
    return tl.reshape(lo, (HALF, BLOCK_N)), tl.reshape(hi, (HALF, BLOCK_N))


@triton.jit
def _dot(a, b, acc, DOT_F32: tl.constexpr):
    """``acc + a @ b`` on bf16 operands.  ``DOT_F32`` (interpreter only: its bf16 ``tl.dot``
    multiplies raw bit patterns, triton-lang/triton#11584) upcasts the operands to fp32 first,
    which is exact: bf16 x bf16 products fit in fp32."""
    if DOT_F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc)


@triton.jit
def _load_act(ptrs, mask, BLOCK_M: tl.constexpr, HALF: tl.constexpr):
    """Contiguous [BLOCK_M, BLOCK_K] bf16 load split into even and odd K columns."""
    x = tl.load(ptrs, mask=mask, other=0.0)
    return tl.split(tl.reshape(x, (BLOCK_M, HALF, 2)))


@triton.jit
def _mx_dot(xa, xb, w, s, acc, HALF: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr):
    """``acc + x @ dequant(w, s)`` for a packed tile ``w`` [NB, 16, BLOCK_N] with scale bytes ``s``
    [NB, BLOCK_N]: the bit-arithmetic dequant of :func:`_dequant_tile` and two half-K dots on the
    even (``xa``) and odd (``xb``) K columns."""
    w_even, w_odd = _dequant_tile(w, s, HALF, BLOCK_N)
    return _dot(xb, w_odd, _dot(xa, w_even, acc, DOT_F32), DOT_F32)


@triton.jit
def _ds_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn,
             HALF: tl.constexpr, NB: tl.constexpr):
    """2-D tile pointers for ``tl.dot_scaled``: packed weights [HALF, BLOCK_N] (byte h holds K
    elements 2h, 2h+1: the e2m1 K-packing dot_scaled expects) and scale bytes [BLOCK_N, NB]."""
    offs_h = tl.arange(0, HALF)
    offs_b = tl.arange(0, NB)
    w = w_ptr + e * stride_we + offs_n[None, :].to(tl.int64) * stride_wn + offs_h[:, None]
    s = ws_ptr + e * stride_se + offs_n[:, None].to(tl.int64) * stride_sn + offs_b[None, :]
    return w, s


@triton.jit
def _bits_masks(k0, mask_m, mask_n, offs_k, offs_b, K: tl.constexpr, EVEN_K: tl.constexpr):
    """(activation, weight) masks of the bit-dequant K step at ``k0`` (weights as [NB, 16, BLOCK_N])."""
    if EVEN_K:
        return mask_m[:, None], mask_n[None, None, :]
    else:
        return (mask_m[:, None] & (k0 + offs_k[None, :] < K),
                (mask_n[None, :] & (k0 // 32 + offs_b[:, None] < K // 32))[:, None, :])


@triton.jit
def _ds_masks(k0, mask_m, mask_n, K: tl.constexpr, HALF: tl.constexpr, NB: tl.constexpr,
              BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """(activation, weight, scale) masks of the ``tl.dot_scaled`` K step at ``k0``."""
    if EVEN_K:
        return mask_m[:, None], mask_n[None, :], mask_n[:, None]
    else:
        kx = k0 + tl.arange(0, BLOCK_K)
        kh = k0 // 2 + tl.arange(0, HALF)
        kb = k0 // 32 + tl.arange(0, NB)
        return (mask_m[:, None] & (kx[None, :] < K), mask_n[None, :] & (kh[:, None] < K // 2),
                mask_n[:, None] & (kb[None, :] < K // 32))


@triton.jit
def _ds_dot(x, w_ptrs, s_ptrs, mask_w, mask_s, acc):
    """``acc + x @ dequant(w)`` by Triton's ``tl.dot_scaled`` (bf16 x e2m1, ue8m0 scales; on Hopper
    the compiler upcasts e2m1 with its packed conversion).  GPU only: Triton 3.6's interpreter has
    no dot_scaled."""
    w = tl.load(w_ptrs, mask=mask_w, other=0)
    sc = tl.load(s_ptrs, mask=mask_s, other=0)
    return tl.dot_scaled(x, None, "bf16", w, sc, "e2m1", acc, fast_math=True)


@triton.jit
def _moe_mxfp4_gemm1_kernel(
    x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_wn, stride_se, stride_sn, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    DOT_SCALED: tl.constexpr,
):
    """Grouped gate/up GEMM + gated activation. N = I (output columns), K = H."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_pair_ptr + offs_m)
    mask_m = pair < num_pairs
    tok = tl.where(mask_m, pair // top_k, 0).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    offs_b = tl.arange(0, NB)
    offs_j = tl.arange(0, 16)

    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tok[:, None] * stride_xm + offs_k[None, :]
    acc_l = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if DOT_SCALED:
        w_lin, s_lin = _ds_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, HALF, NB)
        for k0 in range(0, K, BLOCK_K):
            mask_x, mask_w, mask_s = _ds_masks(k0, mask_m, mask_n, K, HALF, NB, BLOCK_K, EVEN_K)
            x = tl.load(x_ptrs, mask=mask_x, other=0.0)
            acc_l = _ds_dot(x, w_lin, s_lin, mask_w, mask_s, acc_l)
            acc_g = _ds_dot(x, w_lin + N * stride_wn, s_lin + N * stride_sn, mask_w, mask_s, acc_g)
            x_ptrs += BLOCK_K
            w_lin += HALF
            s_lin += NB
    else:
        w_lin = (w_ptr + e * stride_we + offs_n[None, None, :].to(tl.int64) * stride_wn
                 + offs_b[:, None, None] * 16 + offs_j[None, :, None])
        w_gate = w_lin + N * stride_wn
        s_lin = ws_ptr + e * stride_se + offs_n[None, :].to(tl.int64) * stride_sn + offs_b[:, None]
        s_gate = s_lin + N * stride_sn
        # scale bytes are too narrow for cp.async: prefetch them one iteration ahead in registers
        mask_s = mask_n[None, :] & (offs_b[:, None] < K // 32)
        sl_next = tl.load(s_lin, mask=mask_s, other=0)
        sg_next = tl.load(s_gate, mask=mask_s, other=0)
        for k0 in range(0, K, BLOCK_K):
            mask_x, mask_w = _bits_masks(k0, mask_m, mask_n, offs_k, offs_b, K, EVEN_K)
            sl = sl_next
            sg = sg_next
            mask_s = mask_n[None, :] & (k0 // 32 + NB + offs_b[:, None] < K // 32)
            sl_next = tl.load(s_lin + NB, mask=mask_s, other=0)
            sg_next = tl.load(s_gate + NB, mask=mask_s, other=0)
            xa, xb = _load_act(x_ptrs, mask_x, BLOCK_M, HALF)
            acc_l = _mx_dot(xa, xb, tl.load(w_lin, mask=mask_w, other=0), sl, acc_l, HALF, BLOCK_N, DOT_F32)
            acc_g = _mx_dot(xa, xb, tl.load(w_gate, mask=mask_w, other=0), sg, acc_g, HALF, BLOCK_N, DOT_F32)
            x_ptrs += BLOCK_K
            w_lin += HALF
            w_gate += HALF
            s_lin += NB
            s_gate += NB

    if HAS_BIAS:
        b_row = b_ptr + e * stride_be
        acc_l += tl.load(b_row + offs_n, mask=mask_n, other=0.0)[None, :]
        acc_g += tl.load(b_row + N + offs_n, mask=mask_n, other=0.0)[None, :]
    if ACTIVATION == 1:  # gpt-oss clamped SwiGLU
        alpha = tl.load(alpha_ptr + e)
        beta = tl.load(beta_ptr + e)
        limit = tl.load(limit_ptr + e)
        g = tl.minimum(acc_g, limit)
        lin = tl.minimum(tl.maximum(acc_l, -limit), limit)
        act = g * tl.sigmoid(alpha * g) * (lin + beta)
    else:
        act = acc_g * tl.sigmoid(acc_g) * acc_l
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, act.to(tl.bfloat16), mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _moe_mxfp4_gemm2_kernel(
    a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N,
    stride_am, stride_we, stride_wn, stride_se, stride_sn, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, DOT_SCALED: tl.constexpr,
):
    """Grouped down GEMM, times the routing weight, stored per pair. N = H, K = I."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_pair_ptr + offs_m)
    mask_m = pair < num_pairs
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    offs_b = tl.arange(0, NB)
    offs_j = tl.arange(0, 16)

    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if DOT_SCALED:
        w_ptrs, s_ptrs = _ds_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, HALF, NB)
        for k0 in range(0, K, BLOCK_K):
            mask_a, mask_w, mask_s = _ds_masks(k0, mask_m, mask_n, K, HALF, NB, BLOCK_K, EVEN_K)
            acc = _ds_dot(tl.load(a_ptrs, mask=mask_a, other=0.0), w_ptrs, s_ptrs, mask_w, mask_s, acc)
            a_ptrs += BLOCK_K
            w_ptrs += HALF
            s_ptrs += NB
    else:
        w_ptrs = (w_ptr + e * stride_we + offs_n[None, None, :].to(tl.int64) * stride_wn
                  + offs_b[:, None, None] * 16 + offs_j[None, :, None])
        s_ptrs = ws_ptr + e * stride_se + offs_n[None, :].to(tl.int64) * stride_sn + offs_b[:, None]
        mask_s = mask_n[None, :] & (offs_b[:, None] < K // 32)
        s_next = tl.load(s_ptrs, mask=mask_s, other=0)
        for k0 in range(0, K, BLOCK_K):
            mask_a, mask_w = _bits_masks(k0, mask_m, mask_n, offs_k, offs_b, K, EVEN_K)
            sc = s_next
            mask_s = mask_n[None, :] & (k0 // 32 + NB + offs_b[:, None] < K // 32)
            s_next = tl.load(s_ptrs + NB, mask=mask_s, other=0)
            aa, ab = _load_act(a_ptrs, mask_a, BLOCK_M, HALF)
            acc = _mx_dot(aa, ab, tl.load(w_ptrs, mask=mask_w, other=0), sc, acc, HALF, BLOCK_N, DOT_F32)
            a_ptrs += BLOCK_K
            w_ptrs += HALF
            s_ptrs += NB

    if HAS_BIAS:
        acc += tl.load(b_ptr + e * stride_be + offs_n, mask=mask_n, other=0.0)[None, :]
    wt = tl.load(topk_w_ptr + pair, mask=mask_m, other=0.0)
    acc = acc * wt[:, None]
    out_ptrs = out_ptr + pair[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


#: whether the kernels above were decorated in interpreter mode (TRITON_INTERPRET=1 at import)
INTERPRETED: bool = type(_moe_mxfp4_gemm1_kernel).__name__ == "InterpretedFunction"


def _dot_scaled(requested: bool) -> bool:
    if requested and INTERPRETED:
        raise ValueError("dot_scaled: tl.dot_scaled has no interpreter implementation in Triton 3.6; "
                         "use the bit-arithmetic dequant tactics under TRITON_INTERPRET=1")
    return bool(requested)


def launch_gemm1(
    x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor],
    alpha: Optional[torch.Tensor], beta: Optional[torch.Tensor], limit: Optional[torch.Tensor],
    out: torch.Tensor, sorted_pair_ids: torch.Tensor, block_expert_ids: torch.Tensor,
    num_pairs: int, top_k: int, activation: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, dot_scaled: bool = False,
) -> None:
    """Launch gemm1 on ``block_expert_ids.numel()`` M-blocks. ``w [L, 2I, H/2]``, ``out [P, I]``."""
    inter, hidden = w.shape[1] // 2, x.shape[1]
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return
    dummy = w_scale  # never read when the constexpr switch is off
    grid = (num_blocks, triton.cdiv(inter, block_n))
    _moe_mxfp4_gemm1_kernel[grid](
        x, w, w_scale, dummy if bias is None else bias,
        dummy if alpha is None else alpha, dummy if beta is None else beta, dummy if limit is None else limit,
        out, sorted_pair_ids, block_expert_ids,
        num_pairs, top_k, inter,
        x.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1),
        0 if bias is None else bias.stride(0), out.stride(0),
        K=hidden, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        ACTIVATION=activation, HAS_BIAS=bias is not None, EVEN_K=hidden % block_k == 0, DOT_F32=INTERPRETED,
        DOT_SCALED=_dot_scaled(dot_scaled),
        num_warps=num_warps, num_stages=num_stages,
    )


def launch_gemm2(
    a: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor],
    topk_weights: torch.Tensor, out: torch.Tensor, sorted_pair_ids: torch.Tensor,
    block_expert_ids: torch.Tensor, num_pairs: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, dot_scaled: bool = False,
) -> None:
    """Launch gemm2. ``a [P, I]`` bf16, ``w [L, H, I/2]``, ``out [T*k, H]`` (rows by pair index)."""
    hidden, inter = w.shape[1], a.shape[1]
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return
    grid = (num_blocks, triton.cdiv(hidden, block_n))
    _moe_mxfp4_gemm2_kernel[grid](
        a, w, w_scale, w_scale if bias is None else bias, topk_weights, out,
        sorted_pair_ids, block_expert_ids,
        num_pairs, hidden,
        a.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1),
        0 if bias is None else bias.stride(0), out.stride(0),
        K=inter, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        HAS_BIAS=bias is not None, EVEN_K=inter % block_k == 0, DOT_F32=INTERPRETED,
        DOT_SCALED=_dot_scaled(dot_scaled), num_warps=num_warps, num_stages=num_stages,
    )
