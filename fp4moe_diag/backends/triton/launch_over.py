"""Launchers of :mod:`._kernels_over` (tactics ``-tNf``): one launch per GEMM over
:func:`.grouping.fused_tail_grouping`'s blocks, the first ``n_over`` of ``block_m + over_m`` entries (an expert's
last ``block_m`` pairs and its tail), the rest of ``block_m``.  As :mod:`.launch`'s ``gemm1_calls`` /
``gemm2_calls`` for one split, no ``-fs``, no persistent grid: bare callables, nothing of ours when called, each
kernel built beforehand by the ptxas :func:`.assembler.tail_fused_ptxas` names (on sm_90 where Triton's own
serialises these kernels' wgmmas, an older one)."""

from __future__ import annotations

from typing import Callable, Optional

import torch
import triton

from ._kernels import BUILD_OPTIONS, INTERPRETED
from .assembler import Assembler, bound_launch, launch_assembler
from ._kernels_over import _moe_mxfp4_gemm1_ps_gu_over_kernel, _moe_mxfp4_gemm2_ps_over_kernel
from .configs import even_k, ps_n_fastest, ps_scale_words
from .configs_gu import ps_gu_chunk_dots
from .launch import _grid, _pdl_args, _tile_major_args, _weight_dims


def _checked(block_m: int, over_m: int, n_over: int, sorted_pair_ids: torch.Tensor, block_expert_ids: torch.Tensor,
             num_warps: int, block_k: int) -> int:
    """The blocks of the launch, after checking the grouping's length and the tile."""
    for name, v in (("block_m", block_m), ("over_m", over_m)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 16 or v & (v - 1):
            raise ValueError(f"{name}: expected a power of two >= 16, got {v!r}")
    if over_m >= block_m:
        raise ValueError(f"over_m: expected fewer rows than block_m={block_m}, got {over_m}")
    if ps_gu_chunk_dots(block_k, num_warps):
        raise ValueError(f"num_warps: the -tNf kernels run one dot per K step; {num_warps} warps with block_k="
                         f"{block_k} take chunk dots (configs_gu.ps_gu_chunk_dots)")
    blocks = block_expert_ids.numel()
    if isinstance(n_over, bool) or not isinstance(n_over, int) or not 0 <= n_over <= blocks:
        raise ValueError(f"n_over: expected an int in 0..{blocks} (the blocks with a tail), got {n_over!r}")
    if sorted_pair_ids.numel() != n_over * (block_m + over_m) + (blocks - n_over) * block_m:
        raise ValueError(f"sorted_pair_ids: expected {n_over} blocks of {block_m} + {over_m} entries and "
                         f"{blocks - n_over} of {block_m}, got {sorted_pair_ids.numel()} entries")
    return blocks


def over_assembler(t: torch.Tensor) -> Assembler:
    """The ptxas that builds the ``-tNf`` kernels for the GPU of ``t`` (none under the interpreter or off a GPU)."""
    on_gpu = t.device.type == "cuda"
    return launch_assembler(torch.cuda.get_device_capability(t.device) if on_gpu else None, INTERPRETED)


def gemm1_over_calls(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor],
                     alpha: Optional[torch.Tensor], beta: Optional[torch.Tensor], limit: Optional[torch.Tensor],
                     out: torch.Tensor, sorted_pair_ids: torch.Tensor, block_expert_ids: torch.Tensor,
                     num_pairs: int, top_k: int, activation: int, block_m: int, over_m: int, n_over: int, block_n: int,
                     block_k: int, num_warps: int, num_stages: int, pdl: int = 0,
                     tile_major: bool = False) -> list[Callable[[], None]]:
    """gemm1 (``-gu``: ``w`` / ``w_scale`` the gate/up-interleaved ps copy); ``out [rows, I]`` by grouping position."""
    blocks = _checked(block_m, over_m, n_over, sorted_pair_ids, block_expert_ids, num_warps, block_k)
    inter, hidden = _weight_dims(w, True)[0] // 2, x.shape[1]
    if blocks == 0:
        return []
    dummy = w_scale
    epi = [dummy if v is None else v for v in (bias, alpha, beta, limit)]
    n_fastest = ps_n_fastest(block_m)
    grid = _grid(blocks, triton.cdiv(inter, block_n), 1, n_fastest)
    args = (x, w, w_scale, *epi, out, sorted_pair_ids, block_expert_ids, num_pairs, top_k, inter, n_over,
            x.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1),
            0 if bias is None else bias.stride(0), out.stride(0))
    return [bound_launch(_moe_mxfp4_gemm1_ps_gu_over_kernel, grid, args, dict(
        K=hidden, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, OVER_M=over_m, ACTIVATION=activation,
        HAS_BIAS=bias is not None, EVEN_K=even_k(hidden, block_k, 1), DOT_F32=INTERPRETED, N_FASTEST=n_fastest,
        SCALE_WORDS=ps_scale_words(2 * block_n, block_k, num_warps), **_pdl_args(pdl, True),
        **_tile_major_args(tile_major, True), num_warps=num_warps, num_stages=num_stages, **BUILD_OPTIONS),
        over_assembler(x))]


def gemm2_over_calls(a: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor],
                     topk_weights: torch.Tensor, out: torch.Tensor, sorted_pair_ids: torch.Tensor,
                     block_expert_ids: torch.Tensor, num_pairs: int, block_m: int, over_m: int, n_over: int,
                     block_n: int, block_k: int, num_warps: int, num_stages: int, pdl: int = 0,
                     tile_major: bool = False) -> list[Callable[[], None]]:
    """gemm2; ``out [T*k, H]`` (one plane) by pair."""
    blocks = _checked(block_m, over_m, n_over, sorted_pair_ids, block_expert_ids, num_warps, block_k)
    hidden, inter = _weight_dims(w, True)[0], a.shape[1]
    if blocks == 0:
        return []
    planes = out.unsqueeze(0) if out.dim() == 2 else out
    n_fastest = ps_n_fastest(block_m)
    grid = _grid(blocks, triton.cdiv(hidden, block_n), 1, n_fastest)
    args = (a, w, w_scale, w_scale if bias is None else bias, topk_weights, planes, sorted_pair_ids,
            block_expert_ids, num_pairs, hidden, n_over, a.stride(0), w.stride(0), w.stride(1), w_scale.stride(0),
            w_scale.stride(1), 0 if bias is None else bias.stride(0), planes.stride(1))
    return [bound_launch(_moe_mxfp4_gemm2_ps_over_kernel, grid, args, dict(
        K=inter, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, OVER_M=over_m, HAS_BIAS=bias is not None,
        EVEN_K=even_k(inter, block_k, 1), DOT_F32=INTERPRETED, N_FASTEST=n_fastest,
        SCALE_WORDS=ps_scale_words(block_n, block_k, num_warps), **_pdl_args(pdl, True),
        **_tile_major_args(tile_major, True), num_warps=num_warps, num_stages=num_stages, **BUILD_OPTIONS),
        over_assembler(a))]
