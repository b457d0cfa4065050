"""Triton kernels of mode ``ps`` (issue #16): swap-AB MoE GEMMs on the pre-shuffled weights of :mod:`.ps_layout`.

The weight tile of a program (its loads and upcast): :mod:`._kernels_ps_tile`.

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

from ._kernels import X2_UNSCALE, _dot, _gemm1_store, _gemm2_store, _tile_at
from ._kernels_ablate import _sink_loop
from ._kernels_fused import _gemm1_fused_finalize, _gemm2_fused_topk_sum
from ._kernels_persist import _tile_ids
from ._kernels_prefetch import _l2_prefetch, _l2_prefetch_slabs
from ._kernels_ps_tile import _ps_bytes, _ps_decode, _ps_tile

@triton.jit
def _pdl_enter(PDL: tl.constexpr, TAIL_EARLY: tl.constexpr = False):
    """Programmatic dependent launch (``PDL`` > 0, never under the interpreter: the launcher passes 0 there): wait
    until the grid before this one has finished and its writes are visible, then let the next grid launch (its
    programs take the SMs that this grid's last wave leaves idle and wait in this same call).  Every global read or
    write of data a kernel before may touch comes after the wait.  ``TAIL_EARLY`` (a gemm1 or gemm2 kernel) with
    ``PDL`` 5 (the launcher's choice for the ``-tN`` tail launch of gemm1 under ``-pdlt`` and ``-pdltt``, of gemm2
    under ``-pdltt``: :func:`.configs_tail.launch_pdl`): no wait here, :func:`_pdl_exit`."""
    if PDL > 0:
        if not (TAIL_EARLY and PDL == 5):
            gdc_wait()
        gdc_launch_dependents()


@triton.jit
def _pdl_exit(PDL: tl.constexpr):
    """The end of a gemm1 or gemm2 kernel: with ``PDL`` 5 (a tail launch, :mod:`.configs_tail`) the wait that
    :func:`_pdl_enter` left out.  gemm1's tail launch reads only the call's inputs (activations, weights, routing
    tables) and writes intermediate rows no other launch of the call writes, so its work runs while the main gemm1
    launch drains (its programs become resident in that launch's last wave); waiting before it exits, it ends after
    the main launch, so gemm2, which waits for it, finds both launches' rows.  gemm2's tail launch (``-pdltt``) reads
    the rows of gemm1's tail launch, which ended before gemm2's main launch let it launch (past L1: ``CG`` of
    :func:`_act_tile`), and writes pair rows no other launch writes; it ends after gemm2's main launch, so the top-k
    sum, which waits for it, finds both."""
    if PDL == 5:
        gdc_wait()


@triton.jit
def _grid_ids(N_FASTEST: tl.constexpr):
    """(M block, N tile) of this program: grid ``(N tiles, M blocks, splits)`` or ``(M blocks, N tiles, splits)``."""
    if N_FASTEST:
        return tl.program_id(1), tl.program_id(0)
    else:
        return tl.program_id(0), tl.program_id(1)


@triton.jit
def _act_tile(ptrs, mask_m, k0, offs_k, K: tl.constexpr, EVEN_K: tl.constexpr, CG: tl.constexpr = False):
    """The activation tile [BLOCK_M, BLOCK_K] at K ``k0`` (zeros past K); ``CG``: read from L2, past L1 (``.cg``: rows
    a grid still running wrote, read before this grid's wait: gemm2's ``-pdltt`` tail launch)."""
    mask = mask_m[:, None] if EVEN_K else mask_m[:, None] & (k0 + offs_k[None, :] < K)
    if CG:
        return tl.load(ptrs, mask=mask, other=0.0, cache_modifier=".cg")
    else:
        return tl.load(ptrs, mask=mask, other=0.0)


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
    PERSIST: tl.constexpr = 0, m_blocks=0, TILES: tl.constexpr = 0,
    PROGRAMS: tl.constexpr = 0, PEEL: tl.constexpr = False, K_MAIN: tl.constexpr = 0,
):
    """gemm1 of :mod:`._kernels` (gate/up + activation, N = I, K = H) on the ps layout: the gate rows are slabs
    ``N / 16 ..`` of the same ``[2N / 16, K / 64, 512]`` expert matrix.  ``PDL``: see :func:`_pdl_enter`.
    ``TILES_FIRST`` (the launcher's choice, :func:`.tiling.ps_tiles_first`): per K step both weight tiles are upcast
    before the two dots, so both tiles' shared-memory reads come first (SASS: 8 wgmmas back to back, not the gate
    tile's LDS and upcast between the lin tile's wgmmas and its own).
    ``FUSED`` (``-fs``, SPLIT_K > 1): the last split of a tile finalizes it (arrival counters ``cnt_ptr``,
    :func:`._kernels_fused._gemm1_fused_finalize`); no finalize kernel.  ``ABLATE``, ``STAGES``:
    :mod:`._kernels_ablate`.  ``TILE_MAJOR`` (``-tm``): the weights are the tile-major copy (:func:`_tm_bytes`).
    ``PERSIST`` (1 ``-pt``, 2 ``-ptf``: flattened): each program loops over the ``m_blocks`` x N tiles x splits tiles
    (:mod:`._kernels_persist`; under the interpreter ``TILES`` of them over ``PROGRAMS`` programs, both constexpr).
    ``PEEL`` (``-pk``, :mod:`.configs_peel`): the first ``K_MAIN`` of a split's K (inside K in every split) without K
    masks (:func:`_gemm1_step`), then the rest masked."""
    _pdl_enter(PDL, True)
    if PERSIST and DOT_F32:  # the interpreter (DOT_F32): its Triton 3.6 takes no run-time loop bounds
        for i in range(0, TILES, PROGRAMS):
            t = i + tl.program_id(0)
            if t < TILES:
                pid_m, pid_n, pid_k = _tile_ids(t, m_blocks, tl.cdiv(N, BLOCK_N), N_FASTEST)
                _gemm1_ps_tile(pid_m, pid_n, pid_k, x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                               out_ptr, part_ptr, sorted_pair_ptr, block_expert_ptr, num_pairs, top_k, N, stride_xm,
                               stride_we, stride_ws, stride_se, stride_ss, stride_be, stride_om, stride_ps, stride_pm,
                               K, BLOCK_M, BLOCK_N, BLOCK_K, ACTIVATION, HAS_BIAS, EVEN_K, DOT_F32, SPLIT_K, K_SPLIT,
                               SCALE_WORDS, cnt_ptr, FUSED, TILES_FIRST, ABLATE, STAGES, TILE_MAJOR)
    elif PERSIST:
        n_tiles = tl.cdiv(N, BLOCK_N)
        for t in tl.range(tl.program_id(0), m_blocks * n_tiles * SPLIT_K, tl.num_programs(0),
                          flatten=PERSIST == 2):
            pid_m, pid_n, pid_k = _tile_ids(t, m_blocks, n_tiles, N_FASTEST)
            _gemm1_ps_tile(pid_m, pid_n, pid_k, x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr,
                           part_ptr, sorted_pair_ptr, block_expert_ptr, num_pairs, top_k, N, stride_xm, stride_we,
                           stride_ws, stride_se, stride_ss, stride_be, stride_om, stride_ps, stride_pm, K, BLOCK_M,
                           BLOCK_N, BLOCK_K, ACTIVATION, HAS_BIAS, EVEN_K, DOT_F32, SPLIT_K, K_SPLIT, SCALE_WORDS,
                           cnt_ptr, FUSED, TILES_FIRST, ABLATE, STAGES, TILE_MAJOR)
    else:
        pid_m, pid_n = _grid_ids(N_FASTEST)
        _gemm1_ps_tile(pid_m, pid_n, tl.program_id(2), x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr,
                       out_ptr, part_ptr, sorted_pair_ptr, block_expert_ptr, num_pairs, top_k, N, stride_xm, stride_we,
                       stride_ws, stride_se, stride_ss, stride_be, stride_om, stride_ps, stride_pm, K, BLOCK_M, BLOCK_N,
                       BLOCK_K, ACTIVATION, HAS_BIAS, EVEN_K, DOT_F32, SPLIT_K, K_SPLIT, SCALE_WORDS, cnt_ptr, FUSED,
                       TILES_FIRST, ABLATE, STAGES, TILE_MAJOR, PEEL, K_MAIN)
    _pdl_exit(PDL)


@triton.jit
def _gemm1_ps_tile(pid_m, pid_n, pid_k, x_ptr, w_ptr, ws_ptr, b_ptr, alpha_ptr, beta_ptr, limit_ptr, out_ptr, part_ptr,
                   sorted_pair_ptr, block_expert_ptr, num_pairs, top_k, N, stride_xm, stride_we, stride_ws, stride_se,
                   stride_ss, stride_be, stride_om, stride_ps, stride_pm, K: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACTIVATION: tl.constexpr, HAS_BIAS: tl.constexpr,
                   EVEN_K: tl.constexpr, DOT_F32: tl.constexpr, SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr,
                   SCALE_WORDS: tl.constexpr, cnt_ptr, FUSED: tl.constexpr, TILES_FIRST: tl.constexpr,
                   ABLATE: tl.constexpr, STAGES: tl.constexpr, TILE_MAJOR: tl.constexpr, PEEL: tl.constexpr = False,
                   K_MAIN: tl.constexpr = 0):
    """Tile ``(pid_m, pid_n, pid_k)`` of :func:`_moe_mxfp4_gemm1_ps_kernel`: its K loop and its store."""
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, pid_k, block_expert_ptr, sorted_pair_ptr,
                                                              num_pairs, N, BLOCK_M, BLOCK_N)
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
        if PEEL:  # -pk: every split's whole K steps without K masks, then the rest masked (K_MAIN: tiling.k_main)
            for kk in range(0, K_MAIN, BLOCK_K):
                acc_lt, acc_gt = _gemm1_step(acc_lt, acc_gt, x_ptrs, mask_m, kb + kk, offs_k, w_lin, s_lin, w_gate,
                                             s_gate, slab0, N, stride_ws, stride_ss, K, S, C, DOT_F32, SCALE_WORDS,
                                             ABLATE, TILE_MAJOR, TILES_FIRST, True, False)
                x_ptrs += BLOCK_K
        k_rest: tl.constexpr = K_MAIN if PEEL else 0  # the plain loop: every step, K masks on the weights
        x_even: tl.constexpr = EVEN_K and not PEEL
        for kk in range(k_rest, K_SPLIT, BLOCK_K):
            acc_lt, acc_gt = _gemm1_step(acc_lt, acc_gt, x_ptrs, mask_m, kb + kk, offs_k, w_lin, s_lin, w_gate, s_gate,
                                         slab0, N, stride_ws, stride_ss, K, S, C, DOT_F32, SCALE_WORDS, ABLATE,
                                         TILE_MAJOR, TILES_FIRST, x_even, True)
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
    PERSIST: tl.constexpr = 0, m_blocks=0, TILES: tl.constexpr = 0,
    PROGRAMS: tl.constexpr = 0, PEEL: tl.constexpr = False, K_MAIN: tl.constexpr = 0, UNROLL: tl.constexpr = 1,
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
    Capped at the ``-pdl`` twin's registers (launch_bind._bound).  Measured (H100,
    data/runs/2026-12-05-nvidia-h100-s19a: the decode winners' 120 ``-pdl`` / ``-pdlw`` pairs at 20b EP1 / EP2 and 120b EP4, T = 1..64, one sweep):
    level, a median ratio of 1.004, 95 pairs within their spread, 19 slower by 1-2 %, 6 faster; by CUPTI kernel
    span the same.  gemm1's programs hold the SMs' shared memory until they exit, so gemm2's programs become
    resident only as gemm1 drains, with little of gemm1 left to overlap.  Not offered; kept for that run's labels.
    ``PERSIST`` (``-pt`` / ``-ptf``), ``PEEL`` / ``K_MAIN`` (``-pk``): as gemm1's.  ``UNROLL`` (``-uN``, with the
    ``-gu`` gemm1: :mod:`.configs_unroll`): the K loop unrolled so many times."""
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
        _pdl_enter(PDL, True)  # PDL 5: gemm2's tail launch under -pdltt, its wait at the end (_pdl_exit)
    if PERSIST and DOT_F32:  # the interpreter (DOT_F32): its Triton 3.6 takes no run-time loop bounds
        for i in range(0, TILES, PROGRAMS):
            t = i + tl.program_id(0)
            if t < TILES:
                pid_m, pid_n, pid_k = _tile_ids(t, m_blocks, tl.cdiv(N, BLOCK_N), N_FASTEST)
                _gemm2_ps_tile(pid_m, pid_n, pid_k, a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr, sorted_pair_ptr,
                               block_expert_ptr, num_pairs, N, stride_am, stride_we, stride_ws, stride_se, stride_ss,
                               stride_be, stride_om, stride_os, K, BLOCK_M, BLOCK_N, BLOCK_K, HAS_BIAS, EVEN_K, DOT_F32,
                               SPLIT_K, K_SPLIT, PDL, SCALE_WORDS, y_ptr, cnt_ptr, tok_pairs_ptr, orph_ptr, stride_ym,
                               TOP_K, ORPH, FUSED, ABLATE, STAGES, TILE_MAJOR, W_FIRST)
    elif PERSIST:
        n_tiles = tl.cdiv(N, BLOCK_N)
        for t in tl.range(tl.program_id(0), m_blocks * n_tiles * SPLIT_K, tl.num_programs(0),
                          flatten=PERSIST == 2):
            pid_m, pid_n, pid_k = _tile_ids(t, m_blocks, n_tiles, N_FASTEST)
            _gemm2_ps_tile(pid_m, pid_n, pid_k, a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr, sorted_pair_ptr,
                           block_expert_ptr, num_pairs, N, stride_am, stride_we, stride_ws, stride_se, stride_ss,
                           stride_be, stride_om, stride_os, K, BLOCK_M, BLOCK_N, BLOCK_K, HAS_BIAS, EVEN_K, DOT_F32,
                           SPLIT_K, K_SPLIT, PDL, SCALE_WORDS, y_ptr, cnt_ptr, tok_pairs_ptr, orph_ptr, stride_ym,
                           TOP_K, ORPH, FUSED, ABLATE, STAGES, TILE_MAJOR, W_FIRST)
    else:
        pid_m, pid_n = _grid_ids(N_FASTEST)
        _gemm2_ps_tile(pid_m, pid_n, tl.program_id(2), a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr,
                       sorted_pair_ptr, block_expert_ptr, num_pairs, N, stride_am, stride_we, stride_ws, stride_se,
                       stride_ss, stride_be, stride_om, stride_os, K, BLOCK_M, BLOCK_N, BLOCK_K, HAS_BIAS, EVEN_K,
                       DOT_F32, SPLIT_K, K_SPLIT, PDL, SCALE_WORDS, y_ptr, cnt_ptr, tok_pairs_ptr, orph_ptr, stride_ym,
                       TOP_K, ORPH, FUSED, ABLATE, STAGES, TILE_MAJOR, W_FIRST, PEEL, K_MAIN, UNROLL)
    _pdl_exit(PDL)  # PDL 5 (-pdltt's tail launch): its wait, last


@triton.jit
def _gemm2_ps_tile(pid_m, pid_n, pid_k, a_ptr, w_ptr, ws_ptr, b_ptr, topk_w_ptr, out_ptr, sorted_pair_ptr,
                   block_expert_ptr, num_pairs, N, stride_am, stride_we, stride_ws, stride_se, stride_ss, stride_be,
                   stride_om, stride_os, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
                   SPLIT_K: tl.constexpr, K_SPLIT: tl.constexpr, PDL: tl.constexpr, SCALE_WORDS: tl.constexpr, y_ptr,
                   cnt_ptr, tok_pairs_ptr, orph_ptr, stride_ym, TOP_K: tl.constexpr, ORPH: tl.constexpr,
                   FUSED: tl.constexpr, ABLATE: tl.constexpr, STAGES: tl.constexpr, TILE_MAJOR: tl.constexpr,
                   W_FIRST: tl.constexpr, PEEL: tl.constexpr = False, K_MAIN: tl.constexpr = 0,
                   UNROLL: tl.constexpr = 1):
    """Tile ``(pid_m, pid_n, pid_k)`` of :func:`_moe_mxfp4_gemm2_ps_kernel`: its K loop, its store and (``-fs``) the
    top-k sum its arrival completes."""
    pid_k, e, offs_m, pair, mask_m, offs_n, mask_n = _tile_at(pid_m, pid_n, pid_k, block_expert_ptr, sorted_pair_ptr,
                                                              num_pairs, N, BLOCK_M, BLOCK_N)
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
        if PEEL:  # -pk: every split's whole K steps without K masks, then the rest masked (K_MAIN: tiling.k_main)
            for kk in range(0, K_MAIN, BLOCK_K):
                acc_t = _gemm2_step(acc_t, a_ptrs, mask_m, kb + kk, offs_k, w_base, s_base, slab0, N, stride_ws,
                                    stride_ss, K, S, C, DOT_F32, SCALE_WORDS, ABLATE, TILE_MAJOR, True, False,
                                    PDL == 5)
                a_ptrs += BLOCK_K
        k_rest: tl.constexpr = K_MAIN if PEEL else k_first  # the plain loop: every step, K masks on the weights
        a_even: tl.constexpr = EVEN_K and not PEEL
        for kk in tl.range(k_rest, K_SPLIT, BLOCK_K, loop_unroll_factor=UNROLL):  # -uN (configs_unroll)
            acc_t = _gemm2_step(acc_t, a_ptrs, mask_m, kb + kk, offs_k, w_base, s_base, slab0, N, stride_ws,
                                stride_ss, K, S, C, DOT_F32, SCALE_WORDS, ABLATE, TILE_MAJOR, a_even, True, PDL == 5)
            a_ptrs += BLOCK_K
    _gemm2_store(tl.trans(acc_t) * X2_UNSCALE, pid_k, e, pair, mask_m, offs_n, mask_n, b_ptr, topk_w_ptr, out_ptr,
                 stride_be, stride_om, stride_os, HAS_BIAS)
    if FUSED:
        _gemm2_fused_topk_sum(pid_m, pid_n, pid_k, pair, mask_m, offs_n, mask_n, out_ptr, stride_os, stride_om, cnt_ptr,
                              tok_pairs_ptr, orph_ptr, y_ptr, stride_ym, N, TOP_K, SPLIT_K, BLOCK_M, BLOCK_N, ORPH,
                              DOT_F32)


@triton.jit
def _gemm2_step(acc_t, a_ptrs, mask_m, k0, offs_k, w_base, s_base, slab0, N, stride_ws, stride_ss, K: tl.constexpr,
                S: tl.constexpr, C: tl.constexpr, DOT_F32: tl.constexpr, SCALE_WORDS: tl.constexpr,
                ABLATE: tl.constexpr, TILE_MAJOR: tl.constexpr, A_EVEN: tl.constexpr, MASK_K: tl.constexpr,
                A_CG: tl.constexpr = False):
    """One K step of gemm2 at ``k0``: the activation tile with no K mask when ``A_EVEN`` (:func:`_act_tile`'s
    ``EVEN_K``; ``A_CG`` its ``CG``), the weight tile with its chunks masked past K when ``MASK_K`` (``-pk``'s whole
    steps: neither)."""
    at = tl.trans(_act_tile(a_ptrs, mask_m, k0, offs_k, K, A_EVEN, A_CG))
    w = _ps_tile(w_base, s_base, slab0, k0 // 64, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32, SCALE_WORDS,
                 ABLATE, TILE_MAJOR, 0, MASK_K)
    return _dot(w, at, acc_t, DOT_F32)


@triton.jit
def _gemm1_step(acc_lt, acc_gt, x_ptrs, mask_m, k0, offs_k, w_lin, s_lin, w_gate, s_gate, slab0, N, stride_ws,
                stride_ss, K: tl.constexpr, S: tl.constexpr, C: tl.constexpr, DOT_F32: tl.constexpr,
                SCALE_WORDS: tl.constexpr, ABLATE: tl.constexpr, TILE_MAJOR: tl.constexpr, TILES_FIRST: tl.constexpr,
                X_EVEN: tl.constexpr, MASK_K: tl.constexpr):
    """One K step of gemm1 at ``k0``: ``X_EVEN`` and ``MASK_K`` as :func:`_gemm2_step`'s.  ``TILES_FIRST`` (the
    launcher's choice, :func:`.tiling.ps_tiles_first`): the lin dot after the gate tile's upcast, not before."""
    xt = tl.trans(_act_tile(x_ptrs, mask_m, k0, offs_k, K, X_EVEN))
    c0 = k0 // 64
    w_l = _ps_tile(w_lin, s_lin, slab0, c0, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32, SCALE_WORDS, ABLATE,
                   TILE_MAJOR, 0, MASK_K)
    if not TILES_FIRST:
        acc_lt = _dot(w_l, xt, acc_lt, DOT_F32)
    w_g = _ps_tile(w_gate, s_gate, slab0, c0, N // 16, K // 64, stride_ws, stride_ss, S, C, DOT_F32, SCALE_WORDS,
                   ABLATE, TILE_MAJOR, 0, MASK_K)
    if TILES_FIRST:
        acc_lt = _dot(w_l, xt, acc_lt, DOT_F32)
    acc_gt = _dot(w_g, xt, acc_gt, DOT_F32)
    return acc_lt, acc_gt
