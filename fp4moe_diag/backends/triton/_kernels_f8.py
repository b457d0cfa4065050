"""Triton kernels of the W4A8 tactics (mode ``f8``, backend ``triton_w4a8``; issue #25): FP8 e4m3 activations
quantized per row, MXFP4 weights folded to e4m3 in-kernel, FP8 MMAs with fp32 accumulation.

Only :mod:`.launch_f8` imports this module (lazily, through :mod:`.backend_w4a8`); it needs triton and the shared
pieces of :mod:`._kernels` (tile arithmetic, gemm1's bias + activation epilogue, gemm2's store).

* :func:`_quant_rows_e4m3_kernel`: one row per program, ``scale = amax(|row|) / 448`` (a zero row: 1),
  ``q = e4m3_rn(row * inv)``, ``inv = 1 / scale`` (one IEEE division per row, ``div.rn``; a division per
  element kept the kernel issue-bound: 85 % issue slots, 83 us for 16k rows of 3072 at 20b EP1 T=4096, s9d), stored
  with its fp32 scale.
* The weight fold (:func:`_fold`): ``E[n]`` is the largest ue8m0 scale byte of weight row ``n`` (all K blocks; made
  in ``prepare``); an e2m1 code of value ``v`` in a block with scale byte ``s`` becomes the e4m3 value
  ``v * 2**(s - E[n])``: decoded to fp32 -- the code ``s.e1.e0.m`` placed as the fp32 bit pattern of ``v * 2**-126``
  (sign to bit 31, ``e1.e0.m`` to bits 24..22: e1.e0 the exponent's low bits, code 1 the subnormal 2**-127; as
  :func:`._kernels._e2m1_to_f32` gives, times 2**-126, in two integer ops instead of a select chain) -- times the
  bit-built ``2**(d + 126)`` (``d = s - E[n] <= 0``; ``d < -126`` is taken as ``-126``: 6 * 2**-126 rounds to 0 in
  e4m3 either way), rounded to e4m3 (round to nearest even, values below e4m3's subnormal range round to 0 or
  2**-9).  That is the interpreter's path; compiled, :data:`_F8_ASM` does the same in f16x2 (code bits -> ``v *
  2**-14``, times ``2**(d + 14)``, ``cvt.rn.satfinite.e4m3x2.f16x2``): the same values, half the instructions.  Exact where
  ``d >= -8`` (e2m1 values have one mantissa bit); blocks far below their row's largest scale lose bits.
* The GEMMs are swap-AB like mode ``sw`` (``_kernels._sw_dot``): the folded weight tile ``[BLOCK_N, BLOCK_K]`` (row
  n, K in order: the two nibbles of a byte interleaved by ``tl.join``) is the MMA's A operand, the activation tile
  ``[BLOCK_M, BLOCK_K]`` transposed its B operand (K-major, as FP8 wgmma needs), ``acc_t [BLOCK_N, BLOCK_M]``.
  After the K loop row ``n`` is multiplied by ``2**(E[n] - 127)`` and column ``t`` by the activation row's scale.
  gemm1 then runs :func:`._kernels._gemm1_epilogue` (bias, gated activation, bf16 store); gemm2 the routing weight
  and the per-pair store of :func:`._kernels._gemm2_store`.  No split-K.

Under the interpreter (``DOT_F32``) the fp32 -> e4m3 rounding is done by hand (Triton's interpreter does not round
to nearest even) and the FP8 operands are upcast to fp32 before ``tl.dot`` (exact: e4m3 x e4m3 products fit fp32).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._kernels import _gemm1_epilogue, _gemm2_store, _sw_masks, _sw_ptrs, _tile_at, _ue8m0_to_f32
from ._kernels_ps import _grid_ids

E4M3_MAX = tl.constexpr(448.0)


@triton.jit
def _to_e4m3(v, INTERP: tl.constexpr):
    """fp32 -> e4m3 (``tl.float8e4nv``), round to nearest even, saturating at +-448.  Compiled: ``cvt.rn.satfinite``.
    Interpreter: the value is rounded in fp32 to the e4m3 grid first (quantum ``2**(max(exp, -6) - 3)``: adding
    and subtracting 2**23 rounds ``|v| / quantum`` < 16 to an integer, ties to even), then cast exactly."""
    if INTERP:
        a = tl.minimum(tl.abs(v), E4M3_MAX)
        ex = (a.to(tl.int32, bitcast=True) >> 23) & 0xFF
        q = ((tl.maximum(ex, 121) - 3) << 23).to(tl.float32, bitcast=True)
        r = ((a / q + 8388608.0) - 8388608.0) * q
        return tl.where(v < 0, -r, r).to(tl.float8e4nv)
    else:
        return v.to(tl.float8e4nv)


# 4 packed bytes (8 e2m1 codes; byte i = K elements 2i (low nibble), 2i + 1) and 4 f16 factors 2**(d + 14) (two
# f16x2 registers) -> $0 the e4m3 values of the low nibbles (K 0, 2, 4, 6), $1 of the high ones (K 1, 3, 5, 7).
# prmt spreads bytes (0, 1) and (2, 3) to the two 16-bit halves; a code s.e1.e0.m becomes the f16 bit pattern of its
# value times 2**-14 (s to bit 15, e1.e0.m to bits 11..9; code 1 the f16 subnormal 2**-15); mul.f16x2 by the factor
# makes v * 2**d exactly (f16 keeps subnormals; below 2**-24, where it would round, e4m3 gives 0 anyway), and
# cvt.rn.satfinite.e4m3x2.f16x2 rounds two values to e4m3 (nearest even), the same rounding as the fp32 path.
_F8_ASM = tl.constexpr(r"""
{
  .reg .b32 t0, t1, u, v, w;
  .reg .b16 a0, a1, b0, b1;
  prmt.b32 t0, $2, 0, 0x4140;
  prmt.b32 t1, $2, 0, 0x4342;
  shl.b32 u, t0, 9;  and.b32 u, u, 0x0E000E00;  shl.b32 v, t0, 12;  and.b32 v, v, 0x80008000;
  or.b32 w, u, v;  mul.rn.f16x2 w, w, $3;  cvt.rn.satfinite.e4m3x2.f16x2 a0, w;
  shl.b32 u, t1, 9;  and.b32 u, u, 0x0E000E00;  shl.b32 v, t1, 12;  and.b32 v, v, 0x80008000;
  or.b32 w, u, v;  mul.rn.f16x2 w, w, $4;  cvt.rn.satfinite.e4m3x2.f16x2 a1, w;
  shl.b32 u, t0, 5;  and.b32 u, u, 0x0E000E00;  shl.b32 v, t0, 8;  and.b32 v, v, 0x80008000;
  or.b32 w, u, v;  mul.rn.f16x2 w, w, $3;  cvt.rn.satfinite.e4m3x2.f16x2 b0, w;
  shl.b32 u, t1, 5;  and.b32 u, u, 0x0E000E00;  shl.b32 v, t1, 8;  and.b32 v, v, 0x80008000;
  or.b32 w, u, v;  mul.rn.f16x2 w, w, $4;  cvt.rn.satfinite.e4m3x2.f16x2 b1, w;
  mov.b32 $0, {a0, a1};
  mov.b32 $1, {b0, b1};
}
""")


@triton.jit
def _fold(b, s, emax, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """Packed bytes ``b`` [BLOCK_N, BLOCK_K // 2] (row n, byte h = K elements 2h, 2h + 1), scale bytes ``s``
    [BLOCK_N, BLOCK_K // 32] and the rows' largest scale bytes ``emax`` [BLOCK_N] (int32) -> the e4m3 tile
    [BLOCK_N, BLOCK_K] of ``v * 2**(s - emax)`` in K order.  Compiled: :data:`_F8_ASM` (f16x2, 8 codes per call);
    interpreter: the fp32 path of the module docstring.  Both are exact up to the one e4m3 rounding: the same bits."""
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    d = s.to(tl.int32) - emax[:, None]
    if INTERP:
        f = ((tl.maximum(d + 253, 127)) << 23).to(tl.float32, bitcast=True)
        f = tl.reshape(tl.broadcast_to(f[:, :, None], (BLOCK_N, NB, 16)), (BLOCK_N, HALF))
        bi = b.to(tl.int32)
        lo = (((bi & 7) << 22) | ((bi & 8) << 28)).to(tl.float32, bitcast=True)
        hi = (((bi & 0x70) << 18) | ((bi & 0x80) << 24)).to(tl.float32, bitcast=True)
        return _to_e4m3(tl.reshape(tl.join(lo * f, hi * f), (BLOCK_N, BLOCK_K)), INTERP)
    else:
        f = ((tl.maximum(d + 29, 1)) << 10).to(tl.int16).to(tl.float16, bitcast=True)  # 2**(max(d, -28) + 14)
        f = tl.reshape(tl.broadcast_to(f[:, :, None], (BLOCK_N, NB, 16)), (BLOCK_N, HALF))
        even, odd = tl.inline_asm_elementwise(_F8_ASM, constraints="=r,=r,r,r,r", args=[b, f],
                                              dtype=(tl.float8e4nv, tl.float8e4nv), is_pure=True, pack=4)
        return tl.reshape(tl.join(even, odd), (BLOCK_N, BLOCK_K))


@triton.jit
def _dot8(a, b, acc, DOT_F32: tl.constexpr):
    """``acc + a @ b`` on e4m3 operands (FP8 MMA); ``DOT_F32`` (interpreter only) on their exact fp32 values."""
    if DOT_F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc)


@triton.jit
def _unscale(acc_t, emax, a_scale):
    """``acc_t [BLOCK_N, BLOCK_M]`` times ``2**(emax[n] - 127)`` per row and the activation scale per column,
    transposed to ``[BLOCK_M, BLOCK_N]``."""
    return tl.trans(acc_t * _ue8m0_to_f32(emax)[:, None] * a_scale[None, :])


@triton.jit
def _quant_rows_e4m3_kernel(x_ptr, q_ptr, s_ptr, stride_x, stride_q, C: tl.constexpr, BLOCK_C: tl.constexpr,
                            INTERP: tl.constexpr):
    """Row ``program_id(0)`` of ``x`` [R, C] (bf16 or fp32) -> e4m3 ``q`` [R, C] and the fp32 scale ``s`` [R]."""
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_C)
    mask = offs < C
    x = tl.load(x_ptr + r * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.where(amax > 0, tl.math.div_rn(amax, E4M3_MAX), 1.0)
    inv = tl.math.div_rn(1.0, scale)
    q = _to_e4m3(x * inv, INTERP)
    tl.store(q_ptr + r * stride_q + offs, q, mask=mask)
    tl.store(s_ptr + r, scale)


@triton.jit
def _moe_w4a8_gemm1_kernel(
    x_ptr, xs_ptr, w_ptr, ws_ptr, we_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_wn, stride_se, stride_sn, stride_ee, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
):
    """Grouped gate/up GEMM on e4m3 ``x8`` [T, H] (row scales ``xs`` [T]) and the folded weights, then bias,
    activation and the bf16 store of ``out`` [padded pairs, I].  N = I, K = H; ``we`` [L, 2I] the rows' E bytes."""
    _, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(tl.program_id(0), tl.program_id(1), 0, block_expert_ptr,
                                                          sorted_pair_ptr, num_pairs, N, BLOCK_M, BLOCK_N)
    tok = tl.where(mask_m, pair // top_k, 0).to(tl.int64)
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tok[:, None] * stride_xm + offs_k[None, :]
    w_lin, s_lin = _sw_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, 0, HALF, NB)
    w_gate = w_lin + N * stride_wn
    s_gate = s_lin + N * stride_sn
    e_lin = tl.load(we_ptr + e * stride_ee + offs_n, mask=mask_n, other=0).to(tl.int32)
    e_gate = tl.load(we_ptr + e * stride_ee + N + offs_n, mask=mask_n, other=0).to(tl.int32)
    acc_lt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc_gt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for kk in range(0, K, BLOCK_K):
        mask_x, mask_w, mask_s = _sw_masks(kk, mask_m, mask_n, offs_k, K, HALF, NB, EVEN_K)
        xt = tl.trans(tl.load(x_ptrs, mask=mask_x, other=0.0))
        w8 = _fold(tl.load(w_lin, mask=mask_w, other=0), tl.load(s_lin, mask=mask_s, other=0), e_lin,
                   BLOCK_N, BLOCK_K, DOT_F32)
        acc_lt = _dot8(w8, xt, acc_lt, DOT_F32)
        w8 = _fold(tl.load(w_gate, mask=mask_w, other=0), tl.load(s_gate, mask=mask_s, other=0), e_gate,
                   BLOCK_N, BLOCK_K, DOT_F32)
        acc_gt = _dot8(w8, xt, acc_gt, DOT_F32)
        x_ptrs += BLOCK_K
        w_lin += HALF
        w_gate += HALF
        s_lin += NB
        s_gate += NB
    xs = tl.load(xs_ptr + tok, mask=mask_m, other=0.0)
    _gemm1_epilogue(_unscale(acc_lt, e_lin, xs), _unscale(acc_gt, e_gate, xs), e, offs_m, offs_n, mask_m, mask_n,
                    b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, N, stride_be, stride_om, ACTIVATION, HAS_BIAS,
                    DOT_F32)


@triton.jit
def _moe_w4a8_gemm2_kernel(
    a_ptr, as_ptr, w_ptr, ws_ptr, we_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N,
    stride_am, stride_we, stride_wn, stride_se, stride_sn, stride_ee, stride_be, stride_om,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, N_FASTEST: tl.constexpr = False,
):
    """Grouped down GEMM on the e4m3 intermediate ``a8`` [padded pairs, I] (row scales ``as`` [padded pairs]) and the
    folded weights, plus bias, times the routing weight, stored fp32 by pair to ``out`` [T * k, H].  N = H, K = I."""
    pid_m, pid_n = _grid_ids(N_FASTEST)
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, 0, block_expert_ptr, sorted_pair_ptr,
                                                              num_pairs, N, BLOCK_M, BLOCK_N)
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    w_ptrs, s_ptrs = _sw_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, 0, HALF, NB)
    emax = tl.load(we_ptr + e * stride_ee + offs_n, mask=mask_n, other=0).to(tl.int32)
    acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for kk in range(0, K, BLOCK_K):
        mask_a, mask_w, mask_s = _sw_masks(kk, mask_m, mask_n, offs_k, K, HALF, NB, EVEN_K)
        at = tl.trans(tl.load(a_ptrs, mask=mask_a, other=0.0))
        w8 = _fold(tl.load(w_ptrs, mask=mask_w, other=0), tl.load(s_ptrs, mask=mask_s, other=0), emax,
                   BLOCK_N, BLOCK_K, DOT_F32)
        acc_t = _dot8(w8, at, acc_t, DOT_F32)
        a_ptrs += BLOCK_K
        w_ptrs += HALF
        s_ptrs += NB
    a_scale = tl.load(as_ptr + offs_m, mask=mask_m, other=0.0)
    _gemm2_store(_unscale(acc_t, emax, a_scale), pid_k, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, 0, HAS_BIAS)


@triton.jit
def _fold_test_kernel(b_ptr, s_ptr, e_ptr, out_ptr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      INTERP: tl.constexpr):
    """Test hook: :func:`_fold` of one packed tile [BLOCK_N, BLOCK_K // 2] (row-major), stored as e4m3 [BLOCK_N,
    BLOCK_K]."""
    rows = tl.arange(0, BLOCK_N)
    b = tl.load(b_ptr + rows[:, None] * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)[None, :])
    s = tl.load(s_ptr + rows[:, None] * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)[None, :])
    w8 = _fold(b, s, tl.load(e_ptr + rows).to(tl.int32), BLOCK_N, BLOCK_K, INTERP)
    tl.store(out_ptr + rows[:, None] * BLOCK_K + tl.arange(0, BLOCK_K)[None, :], w8)


#: whether the kernels above were decorated in interpreter mode (TRITON_INTERPRET=1 at import)
INTERPRETED: bool = type(_moe_w4a8_gemm1_kernel).__name__ == "InterpretedFunction"
