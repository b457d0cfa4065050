"""Launchers of the kernels in :mod:`._kernels`: argument checks, grids, strides, constexpr switches.

``gemm1_calls`` / ``gemm2_calls`` / ``topk_sum_calls`` check the arguments and return the kernel launches as bare
callables (``functools.partial`` of ``kernel[grid]``: no Python of ours when called);
``launch_gemm1`` / ``launch_gemm2`` / ``launch_topk_sum`` make them and call them at once."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import triton

from ._kernels import (BUILD_OPTIONS, INTERPRETED, _moe_mxfp4_gemm1_finalize_kernel, _moe_mxfp4_gemm1_kernel,
                       _moe_mxfp4_gemm2_kernel, _topk_sum_kernel)
from ._kernels_ps import _moe_mxfp4_gemm1_ps_kernel, _moe_mxfp4_gemm2_ps_kernel
from ._kernels_ps_gu import _moe_mxfp4_gemm1_ps_gu_kernel
from .configs import PDL_LABELS, even_k, k_split, ps_n_fastest, ps_scale_words, ps_tiles_first, split_k_fits
from .launch_bind import _persist_check, _persistent
from .tiling import k_main
from .configs_gu import ps_gu_chunk_dots


#: from this many tokens the top-k sum runs wide programs (1024 columns, 4 warps) instead of 256 columns and 1 warp
TOPK_WIDE_TOKENS = 1024


@dataclass(frozen=True)
class FusedSum:
    """gemm2's fused top-k sum (tactic suffix ``-fs``; :func:`._kernels_fused._gemm2_fused_topk_sum`): ``out``
    bf16 ``[T, H]``; ``counters`` int32, at least ``T x H tiles``, all zero (reset by the kernel); ``token_pairs``
    int32 ``[T]``: each token's pairs routed to local experts; ``orphans`` int32 ``[16 n]``: the tokens with none
    (their rows get zeros), then -1; ``top_k``."""

    out: torch.Tensor
    counters: torch.Tensor
    token_pairs: torch.Tensor
    orphans: torch.Tensor
    top_k: int


def _counters(counters: torch.Tensor, n: int, name: str) -> torch.Tensor:
    if counters.dtype != torch.int32 or counters.numel() < n or not counters.is_contiguous():
        raise ValueError(f"{name}: expected contiguous int32 arrival counters, at least {n}, got {counters.dtype} "
                         f"{tuple(counters.shape)}")
    return counters


def _fused_args(fused: FusedSum, planes: torch.Tensor, n_tiles: int) -> dict:
    """The kernel arguments of gemm2's fused top-k sum, checked (``planes [S, T * top_k, H]``)."""
    out, t = fused.out, fused.token_pairs.numel()
    if out.dtype != torch.bfloat16 or tuple(out.shape) != (t, planes.shape[2]) or out.stride(1) != 1:
        raise ValueError(f"fused: out expected a bf16 [{t}, {planes.shape[2]}] tensor with unit column stride, got "
                         f"{out.dtype} {tuple(out.shape)}")
    if planes.shape[1] != t * fused.top_k or fused.token_pairs.dtype != torch.int32:
        raise ValueError(f"fused: expected planes of {t} x top_k={fused.top_k} rows and int32 token_pairs, got "
                         f"{tuple(planes.shape)} and {fused.token_pairs.dtype}")
    orph = fused.orphans
    if orph.dtype != torch.int32 or orph.dim() != 1 or orph.numel() % 16:
        raise ValueError(f"fused: orphans expected int32 [16 n], got {orph.dtype} {tuple(orph.shape)}")
    return dict(y_ptr=out, cnt_ptr=_counters(fused.counters, t * n_tiles, "fused"), tok_pairs_ptr=fused.token_pairs,
                orph_ptr=orph if orph.numel() else fused.token_pairs, stride_ym=out.stride(0), TOP_K=fused.top_k,
                ORPH=orph.numel(), FUSED=True)


def _dot_scaled(requested: bool) -> bool:
    if requested and INTERPRETED:
        raise ValueError("dot_scaled: tl.dot_scaled has no interpreter implementation in Triton 3.6; "
                         "use the bit-arithmetic dequant tactics under TRITON_INTERPRET=1")
    return bool(requested)


def _swap(requested: bool, x2: bool) -> bool:
    if requested and not x2:
        raise ValueError("swap: the swap-AB kernels (mode sw) use the packed bf16x2 upcast; pass x2=True with swap")
    return bool(requested)


def _mode_args(dot_scaled: bool, x2: bool, swap: bool, ps: bool, tile: tuple[int, int, int, int]) -> dict:
    """The kernel's mode constexprs; ``ps`` (the pre-shuffled kernels of :mod:`._kernels_ps`) takes the grid order and
    how the scale bytes are loaded from the tile ``(block_m, block_n, block_k, num_warps)``."""
    if ps:
        if dot_scaled or x2 or swap:
            raise ValueError("ps: the pre-shuffled kernels have their own upcast; pass none of dot_scaled, x2, swap")
        block_m, block_n, block_k, num_warps = tile
        return dict(N_FASTEST=ps_n_fastest(block_m), SCALE_WORDS=ps_scale_words(block_n, block_k, num_warps))
    return dict(DOT_SCALED=_dot_scaled(dot_scaled), X2=_x2(x2, dot_scaled), SWAP=_swap(swap, x2))


def _grid(m_blocks: int, n_tiles: int, split_k: int, n_fastest: bool) -> tuple[int, int, int]:
    """``(N tiles, M blocks, splits)`` (an M block's N tiles side by side) or ``(M blocks, N tiles, splits)``."""
    axis1, knob = (m_blocks, "block_m") if n_fastest else (n_tiles, "block_n")
    if axis1 > 65535:
        raise ValueError(f"grid: {axis1} programs on CUDA grid axis 1 (at most 65535); use a larger {knob}")
    return (n_tiles, m_blocks, split_k) if n_fastest else (m_blocks, n_tiles, split_k)


def _weight_dims(w: torch.Tensor, ps: bool) -> tuple[int, int]:
    """(rows, K) of the weights ``w``: ``[L, rows, K/2]`` as stored, or the ps layout ``[L, rows/16, K/64, 512]``."""
    if ps:
        if w.dim() != 4 or w.shape[3] != 512:
            raise ValueError(f"w: expected the ps layout [L, rows/16, K/64, 512], got {tuple(w.shape)}")
        return 16 * w.shape[1], 64 * w.shape[2]
    return w.shape[1], 2 * w.shape[2]


def _pdl_args(pdl: int, ps: bool) -> dict:
    """The launch switches of programmatic dependent launch: the kernel's ``PDL`` constexpr and Triton's
    ``launch_pdl``; nothing under the interpreter (no grid dependencies there: the same kernels, run one by one)."""
    if pdl not in PDL_LABELS or pdl == 6 or isinstance(pdl, bool):  # 6: a tactic's, its launches get 1 / 5
        raise ValueError(f"pdl: expected 0 (off), 1 (programmatic dependent launch), 2 or 3 (and gemm2's L2 prefetch), "
                         f"4 (and gemm2's first weights loaded before its wait), 5 (a -pdlt / -pdltt tail launch: its "
                         f"wait last, configs_tail.launch_pdl), got {pdl!r}")
    if pdl and not ps:
        raise ValueError("pdl: only the pre-shuffled kernels (ps=True) take programmatic dependent launch")
    return dict(PDL=pdl, launch_pdl=True) if pdl and not INTERPRETED else {}


def _w_first_args(pdl: int) -> dict:
    """gemm2's ``W_FIRST`` constexpr (``pdl`` 4, ``-pdlw``): on under the interpreter too, where there is no wait."""
    return dict(W_FIRST=True) if pdl == 4 else {}


def _ablate_args(ablate: int, ps: bool, num_stages: int) -> dict:
    """The ABLATE (and ~load's STAGES) constexprs of the ps kernels (:mod:`._kernels_ablate`): none when 0."""
    if ablate not in (0, 1, 2, 3) or isinstance(ablate, bool) or (ablate and not ps):
        raise ValueError(f"ablate: expected 0, 1 (~nodeq), 2 (~load) or 3 (~seq), the last three for the pre-shuffled "
                         f"kernels (ps=True) only; got {ablate!r} with ps={ps}")
    return dict(ABLATE=ablate, STAGES=num_stages) if ablate else {}


def _peel_args(peel: bool, ps: bool, gate_up: bool, k: int, block_k: int, split_k: int) -> dict:
    """The PEEL / K_MAIN constexprs of the plain ps kernels (``-pk``: :func:`.tiling.k_main`): none when off."""
    if not isinstance(peel, bool) or (peel and (not ps or gate_up)):
        raise ValueError(f"peel: a bool, True for the plain pre-shuffled kernels only (ps=True, not gate_up); got "
                         f"{peel!r} with ps={ps}, gate_up={gate_up}")
    return dict(PEEL=True, K_MAIN=k_main(k, block_k, split_k)) if peel else {}


def _unroll_args(unroll: int, ps: bool, gate_up: bool = True) -> dict:
    """The UNROLL constexpr (``-uN``, :mod:`.configs_unroll`): the K loop unrolled so many times; none when 0.  The
    pre-shuffled kernels only, and of gemm1 only the ``-gu`` one (``gate_up``)."""
    if isinstance(unroll, bool) or not isinstance(unroll, int) or (unroll and (not 2 <= unroll <= 8 or not ps
                                                                               or not gate_up)):
        raise ValueError(f"unroll: 0 or an int from 2 to 8, for the pre-shuffled kernels (of gemm1 the -gu one); got "
                         f"{unroll!r} with ps={ps}, gate_up={gate_up}")
    return dict(UNROLL=unroll) if unroll else {}


def _tile_major_args(tile_major: bool, ps: bool) -> dict:
    """The TILE_MAJOR constexpr of the ps kernels (``-tm``): none when off."""
    if tile_major and not ps:
        raise ValueError("tile_major: only the pre-shuffled kernels (ps=True) read the tile-major copy")
    return dict(TILE_MAJOR=True) if tile_major else {}


def _x2(requested: bool, dot_scaled: bool) -> bool:
    if requested and dot_scaled:
        raise ValueError("x2: the packed bf16x2 upcast replaces the bit-arithmetic dequant; it cannot be combined "
                         "with dot_scaled")
    return bool(requested)


def launch_gemm1(*args, **kwargs) -> None:
    """:func:`gemm1_calls`, called now."""
    for call in gemm1_calls(*args, **kwargs):
        call()


def gemm1_calls(
    x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor],
    alpha: Optional[torch.Tensor], beta: Optional[torch.Tensor], limit: Optional[torch.Tensor],
    out: torch.Tensor, sorted_pair_ids: torch.Tensor, block_expert_ids: torch.Tensor,
    num_pairs: int, top_k: int, activation: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, dot_scaled: bool = False,
    split_k: int = 1, part: Optional[torch.Tensor] = None, x2: bool = False, swap: bool = False, ps: bool = False,
    pdl: int = 0, counters: Optional[torch.Tensor] = None, gate_up: bool = False, ablate: int = 0,
    tile_major: bool = False, persist: int = 0, peel: bool = False, reg_cap: int = 0, unroll: int = 0,
) -> list[Callable[[], None]]:
    """The launches of gemm1 on ``block_expert_ids.numel()`` M-blocks. ``w [L, 2I, H/2]`` (``ps``: the layout of
    :mod:`.ps_layout`, ``[L, 2I/16, H/64, 512]``), ``out [P, I]``.
    ``split_k > 1`` needs ``part``: fp32 ``[split_k, >= P, 2I]`` (then a finalize kernel runs, launched plainly;
    with ``counters`` (ps only, tactic ``-fs``: int32, >= M blocks x N tiles, all zero) gemm1 finalizes itself).
    ``pdl`` (ps only): 1 launches it as a programmatic dependent (:func:`._kernels_ps._pdl_enter`), 2 the same.
    ``gate_up`` (ps only): ``w`` / ``w_scale`` are the gate/up-interleaved copy (``ps_layout.shuffle_gate_up``), run
    by :mod:`._kernels_ps_gu` (one tile of ``2 block_n`` weight rows per K step: SCALE_WORDS is decided for it;
    CHUNK_DOTS by ``configs_gu.ps_gu_chunk_dots``).  ``ablate`` (ps only): the kernels' ABLATE, :mod:`._kernels_ablate`.
    ``tile_major`` (ps only, ``-tm``): ``w`` / ``w_scale`` are the tile-major copy (``ps_layout.tile_major``).
    ``persist`` (ps only: 1 ``-pt``, 2 ``-ptf``; not with ``gate_up``): a persistent grid (:func:`_persistent`).
    ``peel`` (ps only, not ``gate_up``; ``-pk``): the K steps inside K without K masks (:func:`_peel_args`).
    ``reg_cap`` (ps only, ``-rN``): built with at most that many registers a thread (:func:`_reg_cap_args`).
    ``unroll`` (``gate_up`` only, ``-uN``): the K loop unrolled so many times (:func:`_unroll_args`)."""
    inter, hidden = _weight_dims(w, ps)[0] // 2, x.shape[1]
    _persist_check(persist, ps, gate_up=gate_up, counters=counters is not None, ablate=ablate, pdl_over_1=pdl > 1)
    tile_rows = _gate_up_rows(gate_up, ps, block_n)
    modes = (_mode_args(dot_scaled, x2, swap, ps, (block_m, tile_rows, block_k, num_warps)) | _pdl_args(pdl, ps)
             | _ablate_args(ablate, ps, num_stages) | _tile_major_args(tile_major, ps)
             | _peel_args(peel, ps, gate_up, hidden, block_k, split_k) | _reg_cap_args(reg_cap, ps)
             | _unroll_args(unroll, ps, gate_up))
    if gate_up:
        modes["CHUNK_DOTS"] = ps_gu_chunk_dots(block_k, num_warps)
    elif ps:
        modes["TILES_FIRST"] = ps_tiles_first(block_m, block_n, block_k, num_warps)
    if counters is not None and not ps:
        raise ValueError("counters: only the pre-shuffled kernels (ps=True) have the fused split-K finalize")
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return []
    ks = _check_split(hidden, block_k, split_k)
    fused = counters is not None and split_k > 1
    if fused:
        modes |= dict(cnt_ptr=_counters(counters, num_blocks * triton.cdiv(inter, block_n), "counters"), FUSED=True)
    if split_k > 1 and (part is None or part.dtype != torch.float32 or part.shape[0] < split_k
                        or part.shape[1] < num_blocks * block_m or part.shape[2] != 2 * inter):
        raise ValueError(f"part: expected fp32 [{split_k}, >={num_blocks * block_m}, {2 * inter}] for split_k="
                         f"{split_k}, got {None if part is None else (part.dtype, tuple(part.shape))}")
    dummy = w_scale  # never read when the constexpr switch is off
    epi = [dummy if v is None else v for v in (bias, alpha, beta, limit)]  # epilogue operands
    part_arg = dummy if split_k == 1 else part
    grid = _grid(num_blocks, triton.cdiv(inter, block_n), split_k, modes.get("N_FASTEST", False))
    calls = [_persistent(
        (_moe_mxfp4_gemm1_ps_gu_kernel if gate_up else _moe_mxfp4_gemm1_ps_kernel if ps else
         _moe_mxfp4_gemm1_kernel), grid, persist,
        x, w, w_scale, *epi, out, part_arg, sorted_pair_ids, block_expert_ids,
        num_pairs, top_k, inter,
        x.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1),
        0 if bias is None else bias.stride(0), out.stride(0),
        0 if split_k == 1 else part.stride(0), 0 if split_k == 1 else part.stride(1),
        K=hidden, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        ACTIVATION=activation, HAS_BIAS=bias is not None, EVEN_K=even_k(hidden, block_k, split_k),
        DOT_F32=INTERPRETED, SPLIT_K=split_k, K_SPLIT=ks, **modes, num_warps=num_warps, num_stages=num_stages,
        **BUILD_OPTIONS,
    )]
    if split_k > 1 and not fused:
        fin_n = 64
        calls.append(functools.partial(
            _moe_mxfp4_gemm1_finalize_kernel[(num_blocks, triton.cdiv(inter, fin_n))],
            part, *epi, out, sorted_pair_ids, block_expert_ids,
            num_pairs, inter, part.stride(0), part.stride(1), 0 if bias is None else bias.stride(0), out.stride(0),
            SPLIT_K=split_k, BLOCK_M=block_m, BLOCK_N=fin_n, ACTIVATION=activation, HAS_BIAS=bias is not None,
            num_warps=4, **BUILD_OPTIONS,
        ))
    return calls


def _gate_up_rows(gate_up: bool, ps: bool, block_n: int) -> int:
    """Weight rows of gemm1's one tile per K step: ``2 block_n`` with ``gate_up`` (mode ps only), else ``block_n``."""
    if gate_up and not ps:
        raise ValueError("gate_up: only the pre-shuffled kernels (ps=True) have the gate/up-interleaved gemm1")
    return 2 * block_n if gate_up else block_n


def _check_split(k: int, block_k: int, split_k: int) -> int:
    if not split_k_fits(k, block_k, split_k):
        raise ValueError(f"split_k: {split_k} splits of K={k} in steps of block_k={block_k} leave a split empty")
    return k_split(k, block_k, split_k)


def launch_gemm2(*args, **kwargs) -> None:
    """:func:`gemm2_calls`, called now."""
    for call in gemm2_calls(*args, **kwargs):
        call()


def _reg_cap_args(reg_cap: int, ps: bool) -> dict:
    """``-rN`` (:mod:`.configs_regcap`): Triton's ``maxnreg`` launch option, compiled only (the interpreter has no
    registers); none when 0."""
    if isinstance(reg_cap, bool) or not isinstance(reg_cap, int) or (reg_cap and (not ps or not 24 <= reg_cap <= 256)):
        raise ValueError(f"reg_cap: an int, 0 (off) or 24..256 registers a thread for the pre-shuffled kernels "
                         f"(ps=True); got {reg_cap!r} with ps={ps}")
    return {"maxnreg": reg_cap} if reg_cap and not INTERPRETED else {}


def gemm2_calls(
    a: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor],
    topk_weights: torch.Tensor, out: torch.Tensor, sorted_pair_ids: torch.Tensor,
    block_expert_ids: torch.Tensor, num_pairs: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, dot_scaled: bool = False,
    split_k: int = 1, x2: bool = False, swap: bool = False, ps: bool = False, pdl: int = 0,
    fused: Optional[FusedSum] = None, ablate: int = 0, tile_major: bool = False, persist: int = 0,
    peel: bool = False, unroll: int = 0,
) -> list[Callable[[], None]]:
    """The launch of gemm2. ``a [P, I]`` bf16, ``w [L, H, I/2]`` (``ps``: ``[L, H/16, I/64, 512]``), ``out [T*k, H]``
    (rows by pair index), or ``out [>= split_k, T*k, H]`` (one plane per split; the caller sums them, or with
    ``fused`` (ps only, tactic ``-fs``) gemm2 sums them into ``fused.out``: :class:`FusedSum`).
    ``pdl`` (ps only): 1 programmatic dependent launch, 2 that and the L2 prefetch of its first weight chunks, 4
    that and its first K step's weights loaded before its wait (``W_FIRST``, set under the interpreter too: the
    same peeled first step, run without the wait).
    ``ablate`` (ps only): the kernel's ABLATE, :mod:`._kernels_ablate`; ``tile_major``, ``persist``, ``peel``,
    ``unroll``: as :func:`gemm1_calls`.  No register cap: ``-rN`` caps gemm1 only (:mod:`.configs_regcap`)."""
    _persist_check(persist, ps, fused=fused is not None, ablate=ablate, pdl_over_1=pdl > 1)
    hidden, inter = _weight_dims(w, ps)[0], a.shape[1]
    modes = (_mode_args(dot_scaled, x2, swap, ps, (block_m, block_n, block_k, num_warps)) | _pdl_args(pdl, ps)
             | _ablate_args(ablate, ps, num_stages) | _tile_major_args(tile_major, ps) | _w_first_args(pdl)
             | _peel_args(peel, ps, False, inter, block_k, split_k) | _unroll_args(unroll, ps))
    if fused is not None and not ps:
        raise ValueError("fused: only the pre-shuffled kernels (ps=True) have the fused top-k sum")
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:  # no pair on this rank: the top-k sum of zero rows
        return [] if fused is None else [functools.partial(fused.out.zero_)]
    ks = _check_split(inter, block_k, split_k)
    planes = out.unsqueeze(0) if out.dim() == 2 else out
    if planes.dim() != 3 or planes.shape[0] < split_k:
        raise ValueError(f"out: expected [T*k, H] or [>= {split_k}, T*k, H] (one plane per split), got {tuple(out.shape)}")
    if fused is not None:
        modes |= _fused_args(fused, planes[:split_k], triton.cdiv(hidden, block_n))
    grid = _grid(num_blocks, triton.cdiv(hidden, block_n), split_k, modes.get("N_FASTEST", False))
    return [_persistent(
        (_moe_mxfp4_gemm2_ps_kernel if ps else _moe_mxfp4_gemm2_kernel), grid, persist,
        a, w, w_scale, w_scale if bias is None else bias, topk_weights, planes,
        sorted_pair_ids, block_expert_ids,
        num_pairs, hidden,
        a.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1),
        0 if bias is None else bias.stride(0), planes.stride(1), planes.stride(0),
        K=inter, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        HAS_BIAS=bias is not None, EVEN_K=even_k(inter, block_k, split_k), DOT_F32=INTERPRETED,
        SPLIT_K=split_k, K_SPLIT=ks, **modes, num_warps=num_warps, num_stages=num_stages, **BUILD_OPTIONS,
    )]


def launch_topk_sum(planes: torch.Tensor, out: torch.Tensor, top_k: int, pdl: bool = False,
                    local: Optional[torch.Tensor] = None) -> None:
    """:func:`topk_sum_calls`, called now."""
    for call in topk_sum_calls(planes, out, top_k, pdl, local):
        call()


def _local_pairs(local: Optional[torch.Tensor], rows: int, device: torch.device) -> dict:
    """The kernel arguments of the top-k sum's local-pair mask (none without ``local``), checked."""
    if local is None:
        return {}
    if local.dtype != torch.int32 or local.dim() != 1 or local.numel() != rows or local.device != device:
        raise ValueError(f"local: expected an int32 [{rows}] tensor on {device} (< 0: pair on another rank), got "
                         f"{local.dtype} {tuple(local.shape)} on {local.device}")
    return dict(local_ptr=local, LOCAL=True)


def topk_sum_calls(planes: torch.Tensor, out: torch.Tensor, top_k: int, pdl: bool = False,
                   local: Optional[torch.Tensor] = None) -> list[Callable[[], None]]:
    """The launches of ``out [T, H]`` (bf16) = the sum of ``planes [S, T * top_k, H]`` (bf16 or fp32) over planes and top-k
    slots; ``pdl``: launched as a programmatic dependent of the kernel before (gemm2), which it waits for; ``local``
    (expert parallelism, int32 ``[T * top_k]``): rows whose entry is < 0 (pairs on other ranks, zeros) are not read."""
    splits, rows, hidden = planes.shape
    t = out.shape[0]
    if out.dtype != torch.bfloat16 or out.dim() != 2 or out.shape[1] != hidden or out.stride(1) != 1:
        raise ValueError(f"out: expected a bf16 [T, {hidden}] tensor with unit column stride, got {out.dtype} "
                         f"{tuple(out.shape)} strides {tuple(out.stride())}")
    if rows != t * top_k or planes.stride(2) != 1:
        raise ValueError(f"planes: expected [S, {t} * {top_k}, {hidden}] with unit column stride, got {tuple(planes.shape)}")
    loc = _local_pairs(local, rows, planes.device)
    if t == 0:
        return []
    # decode (T < 1024): 256 columns, one warp (8 bytes per thread and row), many small programs in flight; prefill:
    # 1024 columns, four warps (16 bytes per thread and row).  One-warp programs at T >= 1024 were bound by how many
    # programs an SM holds (32), not by DRAM: 20b EP2 T=16384 took 120 us whether it read every row or only the local
    # half (s10f against s11b; triton_kernels' reduce: 70 us)
    block_h, warps = (1024, 4) if t >= TOPK_WIDE_TOKENS else (256, 1)
    dst = torch.empty(out.shape, dtype=torch.float32, device=out.device) if INTERPRETED else out
    calls = [functools.partial(
        _topk_sum_kernel[(t, triton.cdiv(hidden, block_h))],
        planes, dst, hidden, planes.stride(0), planes.stride(1), dst.stride(0),
        TOP_K=top_k, SPLIT=splits, BLOCK_H=block_h, num_warps=warps, **(_pdl_args(1, True) if pdl else {}), **loc,
        **BUILD_OPTIONS,
    )]
    if dst is not out:  # round to nearest even, as cvt.rn does on the GPU
        calls.append(functools.partial(out.copy_, dst))
    return calls
