"""Triton kernels of the routed MXFP4 MoE: BF16 activations, MXFP4 weights dequantized in-kernel.

Only :mod:`.launch` imports this module (lazily, through :mod:`.backend`): it imports triton and
nothing of ours.
Set ``TRITON_INTERPRET=1`` *before* importing it to get the CPU interpreter (``@triton.jit``
picks the interpreter when the decorator runs).

Both GEMMs work on the expert grouping of :mod:`.grouping`: program ``(pid_m, pid_n)``
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
  pair; :func:`_topk_sum_kernel` sums the split planes and ``top_k`` in a fixed order (deterministic, no atomics).

Weight upcast modes (constexpr switches; :mod:`.configs` names them): bits (fp32 bit arithmetic), ``DOT_SCALED``
(``tl.dot_scaled``), ``X2`` (:data:`_X2_ASM`: packed bf16x2 bit patterns, one ``mul.bf16x2`` applies the scale) on
the [NB, 16, BLOCK_N] tile above, and ``SWAP`` with ``X2`` (swap-AB, :func:`_sw_dot`): the weight tile is loaded
as stored, ``[BLOCK_N, BLOCK_K // 2]`` bytes (row n, K contiguous), upcast in place and used as the MMA's A
operand, ``acc.T [BLOCK_N, BLOCK_M] += W_even @ x_even.T + W_odd @ x_odd.T``; the accumulator is transposed once
after the K loop.  On sm_90a that is wgmma m64n16 with A in registers instead of mma.sync m16.

The reduction length ``K`` (H for gemm1, I for gemm2) is a ``tl.constexpr``: one compile per
(shape, config, activation, bias) and a constant trip count; Triton 3.6's interpreter also
fails on a loop bounded by a runtime scalar under NumPy >= 2.4.  Under the interpreter the
bf16 dots run on fp32-upcast operands (see :func:`_dot`); compiled kernels use bf16 ``tl.dot``.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

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


#: ``x2`` mode: the weight scale 2**(s - 127) is applied as the bf16 factor 2**(s - 1 - X2_OFFSET) (the
#: 2**126 of the upcast folded in; exact for scale bytes X2_OFFSET + 2 .. X2_OFFSET + 128, which the
#: backend's ``prepare`` checks) and the fp32 accumulator is multiplied by 2**X2_OFFSET after the K loop.
X2_OFFSET = tl.constexpr(32)
X2_UNSCALE = tl.constexpr(float(2 ** X2_OFFSET.value))  # what the accumulator is multiplied by

# 4 packed bytes (8 e2m1 codes, byte i = codes 2i (low nibble) and 2i+1) and 4 bf16 scale factors (two
# bf16x2 registers) -> 4 bf16x2 registers: $0/$1 the low nibbles of bytes 0,1 / 2,3, $2/$3 the high ones.
# prmt spreads bytes (0,1) and (2,3) to the two 16-bit halves; a code s.e1.e0.m becomes the bf16 bit
# pattern s at bit 15, e1.e0.m at bits 8..6: the value times 2**-126 (e1.e0 lands in the exponent's low
# bits, m in the top mantissa bit; code 1 becomes the bf16 subnormal 2**-127), so one mul.bf16x2 by the
# factor finishes it.  14 instructions per 8 values before ptxas fuses the and/or pairs into LOP3.
_X2_ASM = tl.constexpr(r"""
{
  .reg .b32 t0, t1, u, v;
  prmt.b32 t0, $4, 0, 0x4140;
  prmt.b32 t1, $4, 0, 0x4342;
  shl.b32 u, t0, 6;  and.b32 u, u, 0x01C001C0;  shl.b32 v, t0, 12;  and.b32 v, v, 0x80008000;
  or.b32 u, u, v;  mul.rn.bf16x2 $0, u, $5;
  shl.b32 u, t1, 6;  and.b32 u, u, 0x01C001C0;  shl.b32 v, t1, 12;  and.b32 v, v, 0x80008000;
  or.b32 u, u, v;  mul.rn.bf16x2 $1, u, $6;
  shl.b32 u, t0, 2;  and.b32 u, u, 0x01C001C0;  shl.b32 v, t0, 8;  and.b32 v, v, 0x80008000;
  or.b32 u, u, v;  mul.rn.bf16x2 $2, u, $5;
  shl.b32 u, t1, 2;  and.b32 u, u, 0x01C001C0;  shl.b32 v, t1, 8;  and.b32 v, v, 0x80008000;
  or.b32 u, u, v;  mul.rn.bf16x2 $3, u, $6;
}
""")


@triton.jit
def _x2_factor(s, INTERP: tl.constexpr):
    """ue8m0 scale bytes -> the x2 factor 2**(s - 1 - X2_OFFSET): bf16 (compiled), fp32 (interpreter)."""
    if INTERP:
        return ((s.to(tl.int32) + (126 - X2_OFFSET)) << 23).to(tl.float32, bitcast=True)
    else:
        return ((s.to(tl.int32) + (126 - X2_OFFSET)) << 7).to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _x2_values(b, f, INTERP: tl.constexpr):
    """Packed bytes ``b`` and factors ``f`` of the same shape -> (low-nibble, high-nibble) bf16 values times
    2**-X2_OFFSET.  Compiled: :data:`_X2_ASM`, about 2 instructions per weight.  Interpreter (no inline asm):
    the same bit patterns built with integer ops and read as fp32 (a bf16 pattern in the high half of an fp32
    word is the same number), multiplied by the same factor in fp32: bit-identical values."""
    if INTERP:
        bi = b.to(tl.int32)
        lo = ((((bi & 7) << 6) | ((bi & 8) << 12)) << 16).to(tl.float32, bitcast=True)
        hi = ((((bi & 0x70) << 2) | ((bi & 0x80) << 8)) << 16).to(tl.float32, bitcast=True)
        return (lo * f).to(tl.bfloat16), (hi * f).to(tl.bfloat16)
    else:
        return tl.inline_asm_elementwise(_X2_ASM, constraints="=r,=r,=r,=r,r,r,r", args=[b, f],
                                         dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def _dequant_tile_x2(b, s, HALF: tl.constexpr, BLOCK_N: tl.constexpr, INTERP: tl.constexpr):
    """:func:`_dequant_tile` by the packed bf16x2 upcast (``x2`` mode; values times 2**-X2_OFFSET)."""
    f = tl.broadcast_to(_x2_factor(s, INTERP)[:, None, :], b.shape)
    lo, hi = _x2_values(b, f, INTERP)
    return tl.reshape(lo, (HALF, BLOCK_N)), tl.reshape(hi, (HALF, BLOCK_N))


@triton.jit
def _sw_dot(xa, xb, w, s, acc_t, HALF: tl.constexpr, NB: tl.constexpr, BLOCK_N: tl.constexpr,
            DOT_F32: tl.constexpr):
    """``sw`` mode (swap-AB): ``acc_t + dequant(w) @ x.T`` with the weights as the MMA's *A* operand.

    ``w`` [BLOCK_N, HALF] packed bytes as stored (row n, byte h = K elements 2h and 2h + 1), ``s`` [BLOCK_N, NB]
    scale bytes, ``xa`` / ``xb`` the even / odd K columns [BLOCK_M, HALF] of the activations; ``acc_t`` is
    [BLOCK_N, BLOCK_M].  The weight rows fill the MMA's M (64 per warpgroup on Hopper: wgmma, which takes A
    from registers, so the upcast values need no shared-memory round trip) and the few tokens of a decode
    step its N (>= 16); the x2 upcast runs on the tile as loaded."""
    f = tl.reshape(tl.broadcast_to(_x2_factor(s, DOT_F32)[:, :, None], (BLOCK_N, NB, 16)), (BLOCK_N, HALF))
    w_even, w_odd = _x2_values(w, f, DOT_F32)
    return _dot(w_odd, tl.trans(xb), _dot(w_even, tl.trans(xa), acc_t, DOT_F32), DOT_F32)


@triton.jit
def _sw_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, k0,
             HALF: tl.constexpr, NB: tl.constexpr):
    """``sw`` mode: pointers of the weight tile [BLOCK_N, HALF] and its scale bytes [BLOCK_N, NB] at K ``k0``."""
    rows = offs_n[:, None].to(tl.int64)
    w = w_ptr + e * stride_we + rows * stride_wn + k0 // 2 + tl.arange(0, HALF)[None, :]
    s = ws_ptr + e * stride_se + rows * stride_sn + k0 // 32 + tl.arange(0, NB)[None, :]
    return w, s


@triton.jit
def _sw_masks(k0, mask_m, mask_n, offs_k, K: tl.constexpr, HALF: tl.constexpr, NB: tl.constexpr,
              EVEN_K: tl.constexpr):
    """(activation, weight, scale) masks of the ``sw`` K step at ``k0``."""
    if EVEN_K:
        return mask_m[:, None], mask_n[:, None], mask_n[:, None]
    else:
        return (mask_m[:, None] & (k0 + offs_k[None, :] < K),
                mask_n[:, None] & (k0 // 2 + tl.arange(0, HALF)[None, :] < K // 2),
                mask_n[:, None] & (k0 // 32 + tl.arange(0, NB)[None, :] < K // 32))


@triton.jit
def _tile_rows(slab0, chunk0, n_slabs, n_chunks, S: tl.constexpr, C: tl.constexpr):
    """A tile of ``S`` slabs from ``slab0`` by ``C`` chunks from ``chunk0`` of a pre-shuffled matrix: its slab indices
    ``[S, 1, 1]`` (int64), chunk indices ``[C]`` and in-matrix mask ``[S, C, 1]``."""
    sl = slab0 + tl.arange(0, S)
    ch = chunk0 + tl.arange(0, C)
    ok = (sl < n_slabs)[:, None, None] & (ch < n_chunks)[None, :, None]
    return sl[:, None, None].to(tl.int64), ch, ok


@triton.jit
def _scale_words(s_base, row, ch, ok, stride_ss):
    """The scale bytes of a pre-shuffled tile (rows ``row``, chunks ``ch``, mask ``ok``: :func:`_tile_rows`) as 32-bit
    words ``[S, C, 8]`` (8 per slab-chunk; rows are 32-byte multiples, so the words are aligned)."""
    wptr = (s_base + row * stride_ss).to(tl.pointer_type(tl.int32))
    return tl.load(wptr + ch[None, :, None] * 8 + tl.arange(0, 8)[None, None, :], mask=ok, other=0)


@triton.jit
def _word_bytes(words, S: tl.constexpr, C: tl.constexpr):
    """Scale words ``[S, C, 8]`` -> their bytes ``[S, C, 32]`` (little-endian, as stored)."""
    b = (words[:, :, :, None] >> (tl.arange(0, 4) * 8)[None, None, None, :]) & 0xFF
    return tl.reshape(b, (S, C, 32))


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
def _mx_dot(xa, xb, w, s, acc, HALF: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr,
            X2: tl.constexpr):
    """``acc + x @ dequant(w, s)`` for a packed tile ``w`` [NB, 16, BLOCK_N] with scale bytes ``s``
    [NB, BLOCK_N]: the bit-arithmetic dequant of :func:`_dequant_tile` (or, with ``X2``, of
    :func:`_dequant_tile_x2`) and two half-K dots on the even (``xa``) and odd (``xb``) K columns."""
    if X2:
        w_even, w_odd = _dequant_tile_x2(w, s, HALF, BLOCK_N, DOT_F32)
    else:
        w_even, w_odd = _dequant_tile(w, s, HALF, BLOCK_N)
    return _dot(xb, w_odd, _dot(xa, w_even, acc, DOT_F32), DOT_F32)


@triton.jit
def _ds_offsets(offs_n, stride_wn, stride_sn, HALF: tl.constexpr, NB: tl.constexpr):
    """int32 tile offsets for ``tl.dot_scaled``: packed weights [HALF, BLOCK_N] (byte h holds K
    elements 2h, 2h+1: the e2m1 K-packing dot_scaled expects) and scale bytes [BLOCK_N, NB], to add
    to a scalar per-expert base pointer.  (Full int64 pointer tensors carried through the K loop
    cost ~100 registers per thread in gemm1 and halved the occupancy.)"""
    w = offs_n[None, :] * stride_wn + tl.arange(0, HALF)[:, None]
    s = offs_n[:, None] * stride_sn + tl.arange(0, NB)[None, :]
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
def _tile_at(pid_m, pid_n, pid_k, block_expert_ptr, sorted_pair_ptr, num_pairs, N, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr):
    """Tile ``(pid_m, pid_n, pid_k)``: (split index, expert, rows, their pair ids, row mask, columns, column mask)."""
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_pair_ptr + offs_m)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return pid_k, e, offs_m, pair, pair < num_pairs, offs_n, offs_n < N


@triton.jit
def _tile(block_expert_ptr, sorted_pair_ptr, num_pairs, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's tile, grid ``(M blocks, N tiles, splits)``: see :func:`_tile_at`."""
    return _tile_at(tl.program_id(0), tl.program_id(1), tl.program_id(2), block_expert_ptr, sorted_pair_ptr,
                    num_pairs, N, BLOCK_M, BLOCK_N)


@triton.jit
def _bf16_rn(v):
    """fp32 ``v`` rounded to the nearest bf16 value (ties to even), still fp32: for the interpreter, whose fp32 ->
    bf16 cast truncates (the cast of the result is then exact)."""
    bits = v.to(tl.int32, bitcast=True)
    bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & -65536
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _gemm1_epilogue(acc_l, acc_g, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                    out_ptr, N, stride_be, stride_om, ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr,
                    RNE_BF16: tl.constexpr = False):
    """Bias, gated activation and the bf16 store of gemm1 (in gemm1 itself, or after the split-K sum).
    ``RNE_BF16`` (interpreter only, the W4A8 kernels): round to nearest even as the GPU's cvt.rn does."""
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
    if RNE_BF16:
        act = _bf16_rn(act)
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, act.to(tl.bfloat16), mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _gemm1_store(acc_l, acc_g, pid_k, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                 out_ptr, part_ptr, N, stride_be, stride_om, stride_ps, stride_pm, ACTIVATION: tl.constexpr,
                 HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr):
    """gemm1's end: the epilogue (one split), or the fp32 (lin, gate) partials to plane ``pid_k`` of ``part``."""
    if SPLIT_K == 1:
        _gemm1_epilogue(acc_l, acc_g, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                        out_ptr, N, stride_be, stride_om, ACTIVATION, HAS_BIAS)
    else:
        p = part_ptr + pid_k * stride_ps + offs_m[:, None].to(tl.int64) * stride_pm + offs_n[None, :]
        tl.store(p, acc_l, mask=mask_n[None, :])
        tl.store(p + N, acc_g, mask=mask_n[None, :])


@triton.jit
def _moe_mxfp4_gemm1_kernel(
    x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, part_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_wn, stride_se, stride_sn, stride_be, stride_om, stride_ps, stride_pm,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    DOT_SCALED: tl.constexpr, SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr, X2: tl.constexpr,
    SWAP: tl.constexpr = False,
):
    """Grouped gate/up GEMM + gated activation. N = I (output columns), K = H.

    Program ``(pid_m, pid_n, pid_k)`` reduces K elements ``[pid_k * K_SPLIT, (pid_k + 1) * K_SPLIT)``.
    With ``SPLIT_K == 1`` it applies bias and activation and stores bf16 to ``out``; otherwise it
    stores the fp32 (lin, gate) partial sums to plane ``pid_k`` of ``part`` [SPLIT_K, rows, 2N] and
    :func:`_moe_mxfp4_gemm1_finalize_kernel` sums the planes."""
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile(block_expert_ptr, sorted_pair_ptr, num_pairs, N,
                                                           BLOCK_M, BLOCK_N)
    tok = tl.where(mask_m, pair // top_k, 0).to(tl.int64)
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    offs_b = tl.arange(0, NB)
    offs_j = tl.arange(0, 16)
    kb = pid_k * K_SPLIT  # first K element of this split

    offs_k = tl.arange(0, BLOCK_K)
    acc_l = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if DOT_SCALED:
        w_off, s_off = _ds_offsets(offs_n, stride_wn, stride_sn, HALF, NB)
        w_lin = w_ptr + e * stride_we + kb // 2  # scalar base pointers, advanced by kk below
        s_lin = ws_ptr + e * stride_se + kb // 32
        w_gate = w_lin + N * stride_wn
        s_gate = s_lin + N * stride_sn
        x_row = x_ptr + tok[:, None] * stride_xm + kb
        for kk in range(0, K_SPLIT, BLOCK_K):
            mask_x, mask_w, mask_s = _ds_masks(kb + kk, mask_m, mask_n, K, HALF, NB, BLOCK_K, EVEN_K)
            x = tl.load(x_row + kk + offs_k[None, :], mask=mask_x, other=0.0)
            acc_l = _ds_dot(x, w_lin + kk // 2 + w_off, s_lin + kk // 32 + s_off, mask_w, mask_s, acc_l)
            acc_g = _ds_dot(x, w_gate + kk // 2 + w_off, s_gate + kk // 32 + s_off, mask_w, mask_s, acc_g)
    elif SWAP:
        x_ptrs = x_ptr + tok[:, None] * stride_xm + kb + offs_k[None, :]
        w_lin, s_lin = _sw_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, kb, HALF, NB)
        w_gate = w_lin + N * stride_wn
        s_gate = s_lin + N * stride_sn
        acc_lt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        acc_gt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for kk in range(0, K_SPLIT, BLOCK_K):
            mask_x, mask_w, mask_s = _sw_masks(kb + kk, mask_m, mask_n, offs_k, K, HALF, NB, EVEN_K)
            xa, xb = _load_act(x_ptrs, mask_x, BLOCK_M, HALF)
            acc_lt = _sw_dot(xa, xb, tl.load(w_lin, mask=mask_w, other=0), tl.load(s_lin, mask=mask_s, other=0),
                             acc_lt, HALF, NB, BLOCK_N, DOT_F32)
            acc_gt = _sw_dot(xa, xb, tl.load(w_gate, mask=mask_w, other=0), tl.load(s_gate, mask=mask_s, other=0),
                             acc_gt, HALF, NB, BLOCK_N, DOT_F32)
            x_ptrs += BLOCK_K
            w_lin += HALF
            w_gate += HALF
            s_lin += NB
            s_gate += NB
        acc_l = tl.trans(acc_lt) * X2_UNSCALE
        acc_g = tl.trans(acc_gt) * X2_UNSCALE
    else:
        x_ptrs = x_ptr + tok[:, None] * stride_xm + kb + offs_k[None, :]
        w_lin = (w_ptr + e * stride_we + offs_n[None, None, :].to(tl.int64) * stride_wn + kb // 2
                 + offs_b[:, None, None] * 16 + offs_j[None, :, None])
        w_gate = w_lin + N * stride_wn
        s_lin = ws_ptr + e * stride_se + offs_n[None, :].to(tl.int64) * stride_sn + kb // 32 + offs_b[:, None]
        s_gate = s_lin + N * stride_sn
        # scale bytes are too narrow for cp.async: prefetch them one iteration ahead in registers
        mask_s = mask_n[None, :] & (kb // 32 + offs_b[:, None] < K // 32)
        sl_next = tl.load(s_lin, mask=mask_s, other=0)
        sg_next = tl.load(s_gate, mask=mask_s, other=0)
        for kk in range(0, K_SPLIT, BLOCK_K):
            mask_x, mask_w = _bits_masks(kb + kk, mask_m, mask_n, offs_k, offs_b, K, EVEN_K)
            sl = sl_next
            sg = sg_next
            mask_s = mask_n[None, :] & ((kb + kk) // 32 + NB + offs_b[:, None] < K // 32)
            sl_next = tl.load(s_lin + NB, mask=mask_s, other=0)
            sg_next = tl.load(s_gate + NB, mask=mask_s, other=0)
            xa, xb = _load_act(x_ptrs, mask_x, BLOCK_M, HALF)
            acc_l = _mx_dot(xa, xb, tl.load(w_lin, mask=mask_w, other=0), sl, acc_l, HALF, BLOCK_N, DOT_F32, X2)
            acc_g = _mx_dot(xa, xb, tl.load(w_gate, mask=mask_w, other=0), sg, acc_g, HALF, BLOCK_N, DOT_F32, X2)
            x_ptrs += BLOCK_K
            w_lin += HALF
            w_gate += HALF
            s_lin += NB
            s_gate += NB
        if X2:  # the 2**-X2_OFFSET of the x2 scale factors
            acc_l = acc_l * X2_UNSCALE
            acc_g = acc_g * X2_UNSCALE

    _gemm1_store(acc_l, acc_g, pid_k, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                 out_ptr, part_ptr, N, stride_be, stride_om, stride_ps, stride_pm, ACTIVATION, HAS_BIAS, SPLIT_K)


@triton.jit
def _moe_mxfp4_gemm1_finalize_kernel(
    part_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, sorted_pair_ptr, block_expert_ptr,
    num_pairs, N, stride_ps, stride_pm, stride_be, stride_om,
    SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr,
):
    """Sum gemm1's split-K planes in a fixed order (deterministic), then bias + activation + store."""
    _, e, offs_m, _, mask_m, offs_n, mask_n = _tile(block_expert_ptr, sorted_pair_ptr, num_pairs, N, BLOCK_M, BLOCK_N)
    p = part_ptr + offs_m[:, None].to(tl.int64) * stride_pm + offs_n[None, :]
    mask = mask_m[:, None] & mask_n[None, :]
    acc_l = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc_l += tl.load(p + s * stride_ps, mask=mask, other=0.0)
        acc_g += tl.load(p + s * stride_ps + N, mask=mask, other=0.0)
    _gemm1_epilogue(acc_l, acc_g, e, offs_m, offs_n, mask_m, mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                    out_ptr, N, stride_be, stride_om, ACTIVATION, HAS_BIAS)


@triton.jit
def _moe_mxfp4_gemm2_kernel(
    a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N,
    stride_am, stride_we, stride_wn, stride_se, stride_sn, stride_be, stride_om, stride_os,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, DOT_SCALED: tl.constexpr,
    SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr, X2: tl.constexpr, SWAP: tl.constexpr = False,
):
    """Grouped down GEMM, times the routing weight, stored per pair. N = H, K = I.  Split ``pid_k``
    stores its partial product to plane ``pid_k`` of ``out`` (plane stride ``stride_os``); the bias
    goes into plane 0 only; the planes and top-k are summed on the host side."""
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile(block_expert_ptr, sorted_pair_ptr, num_pairs, N,
                                                           BLOCK_M, BLOCK_N)
    HALF: tl.constexpr = BLOCK_K // 2
    NB: tl.constexpr = BLOCK_K // 32
    offs_b = tl.arange(0, NB)
    offs_j = tl.arange(0, 16)
    kb = pid_k * K_SPLIT

    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if DOT_SCALED:
        w_off, s_off = _ds_offsets(offs_n, stride_wn, stride_sn, HALF, NB)
        w_base = w_ptr + e * stride_we + kb // 2
        s_base = ws_ptr + e * stride_se + kb // 32
        a_row = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + kb
        for kk in range(0, K_SPLIT, BLOCK_K):
            mask_a, mask_w, mask_s = _ds_masks(kb + kk, mask_m, mask_n, K, HALF, NB, BLOCK_K, EVEN_K)
            a = tl.load(a_row + kk + offs_k[None, :], mask=mask_a, other=0.0)
            acc = _ds_dot(a, w_base + kk // 2 + w_off, s_base + kk // 32 + s_off, mask_w, mask_s, acc)
    elif SWAP:
        a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + kb + offs_k[None, :]
        w_ptrs, s_ptrs = _sw_ptrs(w_ptr, ws_ptr, e, offs_n, stride_we, stride_wn, stride_se, stride_sn, kb, HALF, NB)
        acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for kk in range(0, K_SPLIT, BLOCK_K):
            mask_a, mask_w, mask_s = _sw_masks(kb + kk, mask_m, mask_n, offs_k, K, HALF, NB, EVEN_K)
            aa, ab = _load_act(a_ptrs, mask_a, BLOCK_M, HALF)
            acc_t = _sw_dot(aa, ab, tl.load(w_ptrs, mask=mask_w, other=0), tl.load(s_ptrs, mask=mask_s, other=0),
                            acc_t, HALF, NB, BLOCK_N, DOT_F32)
            a_ptrs += BLOCK_K
            w_ptrs += HALF
            s_ptrs += NB
        acc = tl.trans(acc_t) * X2_UNSCALE
    else:
        a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + kb + offs_k[None, :]
        w_ptrs = (w_ptr + e * stride_we + offs_n[None, None, :].to(tl.int64) * stride_wn + kb // 2
                  + offs_b[:, None, None] * 16 + offs_j[None, :, None])
        s_ptrs = ws_ptr + e * stride_se + offs_n[None, :].to(tl.int64) * stride_sn + kb // 32 + offs_b[:, None]
        mask_s = mask_n[None, :] & (kb // 32 + offs_b[:, None] < K // 32)
        s_next = tl.load(s_ptrs, mask=mask_s, other=0)
        for kk in range(0, K_SPLIT, BLOCK_K):
            mask_a, mask_w = _bits_masks(kb + kk, mask_m, mask_n, offs_k, offs_b, K, EVEN_K)
            sc = s_next
            mask_s = mask_n[None, :] & ((kb + kk) // 32 + NB + offs_b[:, None] < K // 32)
            s_next = tl.load(s_ptrs + NB, mask=mask_s, other=0)
            aa, ab = _load_act(a_ptrs, mask_a, BLOCK_M, HALF)
            acc = _mx_dot(aa, ab, tl.load(w_ptrs, mask=mask_w, other=0), sc, acc, HALF, BLOCK_N, DOT_F32, X2)
            a_ptrs += BLOCK_K
            w_ptrs += HALF
            s_ptrs += NB
        if X2:  # the 2**-X2_OFFSET of the x2 scale factors
            acc = acc * X2_UNSCALE

    _gemm2_store(acc, pid_k, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr, stride_be, stride_om,
                 stride_os, HAS_BIAS)


@triton.jit
def _gemm2_store(acc, pid_k, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr, stride_be, stride_om,
                 stride_os, HAS_BIAS: tl.constexpr):
    """gemm2's epilogue: bias (plane 0 only), times the routing weight, stored to plane ``pid_k`` by pair."""
    if HAS_BIAS:
        # (A scalar in the mask, ``mask_n & (pid_k == 0)``, is rejected by Triton 3.9's interpreter: 'mask has
        # unsupported dtype'; a where on the loaded row is valid on 3.6 to 3.9.)
        bias = tl.load(b_ptr + e * stride_be + offs_n, mask=mask_n, other=0.0)
        acc += tl.where(pid_k == 0, bias, 0.0)[None, :]
    wt = tl.load(topk_w_ptr + pair, mask=mask_m, other=0.0)
    acc = acc * wt[:, None]
    out_ptrs = out_ptr + pid_k * stride_os + pair[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


#: whether the kernels above were decorated in interpreter mode (TRITON_INTERPRET=1 at import)
INTERPRETED: bool = type(_moe_mxfp4_gemm1_kernel).__name__ == "InterpretedFunction"
#: compile options of every launch of our kernels: FP contraction (FMA) on, Triton's default through 3.9 (which warns
#: that 3.10 turns it off), so that every release builds the same arithmetic and a comparison across releases is like
#: for like (the interpreter takes and ignores it)
BUILD_OPTIONS = dict(enable_fp_fusion=True)


@triton.jit
def _topk_sum_kernel(planes_ptr, out_ptr, H, stride_plane, stride_pm, stride_om,
                     TOP_K: tl.constexpr, SPLIT: tl.constexpr, BLOCK_H: tl.constexpr, PDL: tl.constexpr = 0,
                     local_ptr=None, LOCAL: tl.constexpr = False):
    """``out[t] = sum over split planes s, then top-k slots j, of planes[s, t * TOP_K + j]``, stored bf16: the
    last step of both GEMMs' output in one pass, in a fixed order (deterministic).  Stored as ``out``'s dtype (bf16:
    cvt.rn on the GPU; the interpreter's float32 -> bf16 truncates, so the launcher gives it an fp32 ``out``).
    ``PDL`` > 0 (compiled only): launched as a programmatic dependent of gemm2, it waits for gemm2 first.
    ``LOCAL`` (expert parallelism): ``local_ptr`` [T * TOP_K] int32, < 0 for a pair routed to another rank; such
    rows (zeros) are not read (a masked load reads no memory): the same sum, bit for bit, from a 1 / EP of the bytes."""
    if PDL > 0:
        gdc_wait()
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = offs < H
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        for j in tl.static_range(TOP_K):
            m = mask
            if LOCAL:
                m = mask & (tl.zeros_like(offs) + tl.load(local_ptr + t * TOP_K + j) >= 0)  # vector: interpreter
            acc += tl.load(planes_ptr + s * stride_plane + (t * TOP_K + j) * stride_pm + offs, mask=m, other=0.0)
    tl.store(out_ptr + t * stride_om + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
