"""Triton kernels of mode ``ps`` (issue #16): swap-AB MoE GEMMs on the pre-shuffled weights of :mod:`.ps_layout`.

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

Grid order (``N_FASTEST``, chosen by the launcher from BLOCK_M): prefill tiles (BLOCK_M >= 32) run on ``(N tiles,
M blocks, splits)``, so the N tiles of one M block run side by side and its activation rows come from DRAM once
(with the M blocks fastest, prefill re-read the activations per N tile: 2.58 GB of DRAM reads for gemm2 at 20b EP1
T=4096 against 0.31 GB for triton_kernels; Nsight Compute, data/runs/2026-12-03-nvidia-h200-s7-profile; 20b EP1
T=4096 went from 2262 to 2115 us).  Decode tiles (BLOCK_M = 16, about one M block per expert) keep ``(M blocks, N
tiles, splits)``: the programs in flight then stream many experts at once (5 % faster at 20b EP1 T=16..64 than
the other order, runs s7c / s7d).

Programmatic dependent launch (``PDL`` constexpr, tactic suffix ``-pdl``; the launcher sets it and Triton's
``launch_pdl`` only when compiled): gemm1, gemm2 and the top-k sum of one call are launched as programmatic
dependents; each waits at its top (``griddepcontrol.wait``: the grid before has finished, its writes are visible)
and then lets the next grid launch (``griddepcontrol.launch_dependents``), so the next kernel's programs are already
resident when this one ends: no launch gap between the three kernels.  Nothing but the weights and the routing
tables (made before the call) is touched before the wait.  H200 (data/runs/2026-12-04-nvidia-h200-s8-triton, same
tactic with and without, one run): 1.3-1.8 us less per call at decode (20b EP1 T=1 38.4 -> 37.1 us, T=16 159.2 ->
157.6, T=64 165.6 -> 163.8; 120b EP4 T=64 141.0 -> 140.1), none at T=4096 (2148 -> 2164).  The summed CUPTI kernel
time of a -pdl call exceeds its replay time (T=64: 233 against 164 us; first-start-to-last-end span 163 us): gemm2's
programs wait while gemm1's last wave runs.  ``-pdlpf`` / ``-pdlpfe`` also prefetch gemm2's first 32 KB of weights
per program into L2 before its wait (:func:`_l2_prefetch`, :func:`_l2_prefetch_slabs`).

Fused ends (``FUSED`` constexpr, tactic suffix ``-fs``; :mod:`._kernels_fused`): gemm2 also sums each token's
top-k rows (the program whose arrival completes a token's (token, N tile) counter does it, in the top-k sum's
order: the same bits) and a split gemm1's last split of a tile runs the finalize, so a decode call is two kernels
(gemm1, gemm2) instead of three or four; with ``-pdl`` the two are the programmatic chain.  H200 (s10e, s10f): correct
everywhere; faster at the smallest calls (120b EP4 T=1 4.1 -> 3.2 us), 1-7 % slower from T=16.

SASS of the gemm2 MMA loop (``python -m fp4moe_diag.profiling.sass``, sm_90a, triton 3.6.0, K = 3072):
m16n128k128w4s4-ps 3.5 instructions per weight (gemm1 m16n128k128w4s3: 3.1), no shared-memory shuffle or byte
permute of the weights (sw: 5.6, x2: 4.9, ds: 7.0).

H200 (CUDA graphs, L2 flushed, triton_kernels in the same runs; data/runs/2026-12-03-nvidia-h200-s7*): gpt-oss-20b
EP1 T=64 165 us (2.93 TB/s of weight reads; triton_kernels 172 us), T=16 158 us (163), T=1 38 us (50); 120b EP4
T=64 141 us (161); T=4096 2115 us (triton_kernels 1771: 1.19x, 56 % of the bf16 ceiling).  Nsight Compute at 20b
EP1 T=64: gemm1 / gemm2 read DRAM at 3.09 / 2.98 TB/s; at T=4096 gemm1 is register-bound (255 registers, 2
programs of 4 warps per SM, 50 % SM throughput against triton_kernels' 63 %).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ._kernels import (X2_UNSCALE, _dot, _gemm1_store, _gemm2_store, _scale_words, _tile_at, _tile_rows,
                       _word_bytes, _x2_factor)
from ._kernels_ablate import _nodeq_values, _sink_loop
from ._kernels_fused import _gemm1_fused_finalize, _gemm2_fused_topk_sum
from ._kernels_prefetch import _l2_prefetch, _l2_prefetch_slabs

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
def _pdl_enter(PDL: tl.constexpr):
    """Programmatic dependent launch (``PDL`` > 0, never under the interpreter: the launcher passes 0 there): wait
    until the grid before this one has finished and its writes are visible, then let the next grid launch (its
    programs take the SMs that this grid's last wave leaves idle and wait in this same call).  Every global read or
    write of data a kernel before may touch comes after the wait."""
    if PDL > 0:
        gdc_wait()
        gdc_launch_dependents()


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
              CT: tl.constexpr = 0):
    """The weight bytes ``[S, C, 512]`` and scale bytes ``[S, C, 32]`` of the tile at slabs ``slab0..`` and chunks
    ``chunk0..`` of one expert (``w_base`` / ``s_base``); slabs and chunks past the matrix read as zeros.
    ``TILE_MAJOR`` (``-tm``): the copy stored tile by tile in tiles of ``CT`` chunks (0: ``C``), :func:`_tm_bytes`."""
    if TILE_MAJOR:
        p, sc = _tm_bytes(w_base, s_base, slab0, chunk0, stride_ws, stride_ss, S, C, C if CT == 0 else CT,
                          SCALE_WORDS)
    else:
        row, ch, ok = _tile_rows(slab0, chunk0, n_slabs, n_chunks, S, C)
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
             TILE_MAJOR: tl.constexpr = False, CT: tl.constexpr = 0):
    """The upcast weight tile ``W [16 S, 64 C]`` of :func:`_ps_bytes`' tile (:func:`_ps_decode`)."""
    p, sc = _ps_bytes(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S, C, SCALE_WORDS,
                      TILE_MAJOR, CT)
    return _ps_decode(p, sc, S, C, INTERP, ABLATE)


@triton.jit
def _grid_ids(N_FASTEST: tl.constexpr):
    """(M block, N tile) of this program: grid ``(N tiles, M blocks, splits)`` or ``(M blocks, N tiles, splits)``."""
    if N_FASTEST:
        return tl.program_id(1), tl.program_id(0)
    else:
        return tl.program_id(0), tl.program_id(1)


@triton.jit
def _act_tile(ptrs, mask_m, k0, offs_k, K: tl.constexpr, EVEN_K: tl.constexpr):
    """The activation tile [BLOCK_M, BLOCK_K] at K ``k0`` (zeros past K)."""
    if EVEN_K:
        return tl.load(ptrs, mask=mask_m[:, None], other=0.0)
    else:
        return tl.load(ptrs, mask=mask_m[:, None] & (k0 + offs_k[None, :] < K), other=0.0)


@triton.jit
def _moe_mxfp4_gemm1_ps_kernel(
    x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, part_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, top_k, N,
    stride_xm, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om, stride_ps, stride_pm,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr, N_FASTEST: tl.constexpr, PDL: tl.constexpr = 0,
    SCALE_WORDS: tl.constexpr = False, cnt_ptr=None, FUSED: tl.constexpr = False, TILES_FIRST: tl.constexpr = False,
    ABLATE: tl.constexpr = 0, STAGES: tl.constexpr = 0, TILE_MAJOR: tl.constexpr = False,
):
    """gemm1 of :mod:`._kernels` (gate/up + activation, N = I, K = H) on the ps layout: the gate rows are slabs
    ``N / 16 ..`` of the same ``[2N / 16, K / 64, 512]`` expert matrix.  ``PDL``: see :func:`_pdl_enter`.
    ``TILES_FIRST`` (the launcher's choice, :func:`.tiling.ps_tiles_first`): per K step both weight tiles are upcast
    before the two dots, so both tiles' shared-memory reads come first (SASS: 8 wgmmas back to back, not the gate
    tile's LDS and upcast between the lin tile's wgmmas and its own).
    ``FUSED`` (``-fs``, SPLIT_K > 1): the last split of a tile finalizes it (arrival counters ``cnt_ptr``,
    :func:`._kernels_fused._gemm1_fused_finalize`); no finalize kernel.  ``ABLATE``, ``STAGES``:
    :mod:`._kernels_ablate`.  ``TILE_MAJOR`` (``-tm``): the weights are the tile-major copy (:func:`_tm_bytes`)."""
    _pdl_enter(PDL)
    pid_m, pid_n = _grid_ids(N_FASTEST)
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, tl.program_id(2), block_expert_ptr,
                                                              sorted_pair_ptr, num_pairs, N, BLOCK_M, BLOCK_N)
    tok = tl.where(mask_m, pair // top_k, 0).to(tl.int64)
    S: tl.constexpr = BLOCK_N // 16
    C: tl.constexpr = BLOCK_K // 64
    kb = pid_k * K_SPLIT
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + tok[:, None] * stride_xm + kb + offs_k[None, :]
    w_lin = w_ptr + e * stride_we
    s_lin = ws_ptr + e * stride_se
    w_gate = w_lin + (N // 16) * stride_ws
    s_gate = s_lin + (N // 16) * stride_ss
    slab0 = pid_n * S
    acc_lt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc_gt = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if ABLATE >= 2:  # ~load / ~seq (_kernels_ablate): the loop's weight and scale loads only
        acc_lt = _sink_loop(acc_lt, w_lin, s_lin, w_gate, s_gate, slab0, kb // 64, N // 16, K // 64, stride_ws,
                            stride_ss, K_SPLIT, BLOCK_K, S, C, 2, STAGES, ABLATE == 3)
    else:
        for kk in range(0, K_SPLIT, BLOCK_K):
            xt = tl.trans(_act_tile(x_ptrs, mask_m, kb + kk, offs_k, K, EVEN_K))
            c0 = (kb + kk) // 64
            w_l = _ps_tile(w_lin, s_lin, slab0, c0, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32,
                           SCALE_WORDS, ABLATE, TILE_MAJOR)
            if not TILES_FIRST:  # the lin dot before the gate tile's upcast; TILES_FIRST: after (ps_tiles_first)
                acc_lt = _dot(w_l, xt, acc_lt, DOT_F32)
            w_g = _ps_tile(w_gate, s_gate, slab0, c0, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32,
                           SCALE_WORDS, ABLATE, TILE_MAJOR)
            if TILES_FIRST:
                acc_lt = _dot(w_l, xt, acc_lt, DOT_F32)
            acc_gt = _dot(w_g, xt, acc_gt, DOT_F32)
            x_ptrs += BLOCK_K
    _gemm1_store(tl.trans(acc_lt) * X2_UNSCALE, tl.trans(acc_gt) * X2_UNSCALE, pid_k, e, offs_m, offs_n, mask_m,
                 mask_n, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, part_ptr, N, stride_be, stride_om, stride_ps,
                 stride_pm, ACTIVATION, HAS_BIAS, SPLIT_K)
    if FUSED and SPLIT_K > 1:
        _gemm1_fused_finalize(pid_m, pid_n, e, offs_m, offs_n, mask_m, mask_n, cnt_ptr, part_ptr, b_ptr, alpha_ptr,
                              beta_ptr, limit_ptr, out_ptr, N, stride_be, stride_om, stride_ps, stride_pm, ACTIVATION,
                              HAS_BIAS, SPLIT_K, BLOCK_M, BLOCK_N)


@triton.jit
def _moe_mxfp4_gemm2_ps_kernel(
    a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr,
    sorted_pair_ptr, block_expert_ptr,
    num_pairs, N,
    stride_am, stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om, stride_os,
    K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
    SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr, N_FASTEST: tl.constexpr, PDL: tl.constexpr = 0,
    SCALE_WORDS: tl.constexpr = False, y_ptr=None, cnt_ptr=None, tok_pairs_ptr=None, orph_ptr=None, stride_ym=0,
    TOP_K: tl.constexpr = 1, ORPH: tl.constexpr = 0, FUSED: tl.constexpr = False, ABLATE: tl.constexpr = 0,
    STAGES: tl.constexpr = 0, TILE_MAJOR: tl.constexpr = False, W_FIRST: tl.constexpr = False,
):
    """gemm2 of :mod:`._kernels` (down, times the routing weight, N = H, K = I) on the ps layout.  ``FUSED``
    (``-fs``): the program completing a token's rows sums them into ``y`` [T, N] (bf16) in the top-k sum's order
    (:func:`._kernels_fused._gemm2_fused_topk_sum`: arrival counters ``cnt_ptr``, local pairs per token
    ``tok_pairs_ptr``, ``ORPH`` entries of ``orph_ptr``: tokens with none); no top-k sum kernel.  ``PDL``: see
    :func:`_pdl_enter`; with ``PDL`` 2 / 3 the program first prefetches into L2 the first weight chunks of its tile
    (2: every thread a share of the 512-byte chunks; 3: one bulk prefetch per slab, evict_last)
    (weights and routing tables are made before the call: no kernel of the call writes them), so that the DRAM
    time left idle in gemm1's tail streams gemm2's weights.  ``ABLATE``, ``STAGES``: :mod:`._kernels_ablate`.
    ``TILE_MAJOR`` (``-tm``): the weights are the tile-major copy (:func:`_tm_bytes`).  ``W_FIRST`` (``-pdlw``, the
    launcher's ``pdl`` 4; also under the interpreter, without the wait): the routing tables and the first K step's
    weight and scale bytes are loaded before the wait (both are made before the call: only the activations come
    from gemm1), so that a program made resident in gemm1's tail has its first weights in registers when gemm1
    ends and starts with the activation load alone (two of its serial memory latencies taken out of the call).
    Capped at the ``-pdl`` twin's registers (launch._bound).  Measured (H100, data/runs/2026-12-05-nvidia-h100-s19a:
    the decode winners' 120 ``-pdl`` / ``-pdlw`` pairs at 20b EP1 / EP2 and 120b EP4, T = 1..64, one sweep):
    level, a median ratio of 1.004, 95 pairs within their spread, 19 slower by 1-2 %, 6 faster; by CUPTI kernel
    span the same.  gemm1's programs hold the SMs' shared memory until they exit, so gemm2's programs become
    resident only as gemm1 drains, with little of gemm1 left to overlap.  Not offered; kept for that run's labels."""
    if PDL >= 2 and PDL <= 3:
        pm, pn = _grid_ids(N_FASTEST)
        S_PF: tl.constexpr = BLOCK_N // 16
        PF_C: tl.constexpr = min(max(64 // S_PF, 1), K_SPLIT // 64)  # 32 KB of weights per program
        e_pf = tl.load(block_expert_ptr + pm).to(tl.int64)
        c_pf = (tl.program_id(2) * K_SPLIT) // 64
        if PDL == 2:
            _l2_prefetch(w_ptr + e_pf * stride_we, ws_ptr + e_pf * stride_se, pn * S_PF, c_pf, N // 16, K // 64,
                         stride_ws, stride_ss, S_PF, PF_C)
        else:
            _l2_prefetch_slabs(w_ptr + e_pf * stride_we, ws_ptr + e_pf * stride_se, pn * S_PF, c_pf, N // 16,
                               K // 64, stride_ws, stride_ss, S_PF, PF_C)
    if not W_FIRST:
        _pdl_enter(PDL)
    pid_m, pid_n = _grid_ids(N_FASTEST)
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, tl.program_id(2), block_expert_ptr,
                                                              sorted_pair_ptr, num_pairs, N, BLOCK_M, BLOCK_N)
    S: tl.constexpr = BLOCK_N // 16
    C: tl.constexpr = BLOCK_K // 64
    kb = pid_k * K_SPLIT
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + kb + offs_k[None, :]
    w_base = w_ptr + e * stride_we
    s_base = ws_ptr + e * stride_se
    slab0 = pid_n * S
    acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    k_first: tl.constexpr = BLOCK_K if W_FIRST else 0  # the K steps the loop leaves to the peeled first one
    if W_FIRST:
        p0, sc0 = _ps_bytes(w_base, s_base, slab0, kb // 64, N // 16, K // 64, stride_ws, stride_ss, S, C, SCALE_WORDS,
                            TILE_MAJOR)
        _pdl_enter(PDL)
        at0 = tl.trans(_act_tile(a_ptrs, mask_m, kb, offs_k, K, EVEN_K))
        acc_t = _dot(_ps_decode(p0, sc0, S, C, DOT_F32, ABLATE), at0, acc_t, DOT_F32)
        a_ptrs += BLOCK_K
    if ABLATE >= 2:  # ~load / ~seq (_kernels_ablate): the loop's weight and scale loads only
        acc_t = _sink_loop(acc_t, w_base, s_base, w_base, s_base, slab0, kb // 64, N // 16, K // 64, stride_ws,
                           stride_ss, K_SPLIT, BLOCK_K, S, C, 1, STAGES, ABLATE == 3)
    else:
        for kk in range(k_first, K_SPLIT, BLOCK_K):
            at = tl.trans(_act_tile(a_ptrs, mask_m, kb + kk, offs_k, K, EVEN_K))
            w = _ps_tile(w_base, s_base, slab0, (kb + kk) // 64, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32,
                         SCALE_WORDS, ABLATE, TILE_MAJOR)
            acc_t = _dot(w, at, acc_t, DOT_F32)
            a_ptrs += BLOCK_K
    _gemm2_store(tl.trans(acc_t) * X2_UNSCALE, pid_k, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, stride_os, HAS_BIAS)
    if FUSED:
        _gemm2_fused_topk_sum(pid_m, pid_n, pid_k, pair, mask_m, offs_n, mask_n, out_ptr, stride_os, stride_om, cnt_ptr,
                              tok_pairs_ptr, orph_ptr, y_ptr, stride_ym, N, TOP_K, SPLIT_K, BLOCK_M, BLOCK_N, ORPH,
                              DOT_F32)
