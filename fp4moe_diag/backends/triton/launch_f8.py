"""Launchers of the W4A8 kernels of :mod:`._kernels_f8` (mode ``f8``): argument checks, grids, strides.

As :mod:`.launch`: each ``*_calls`` checks its arguments and returns bare ``functools.partial`` launches of
``kernel[grid]``; :func:`fold_e4m3` runs the weight fold alone (tests)."""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch
import triton

from ._kernels import BUILD_OPTIONS
from ._kernels_f8 import (INTERPRETED, _fold_test_kernel, _moe_w4a8_gemm1_kernel, _moe_w4a8_gemm2_kernel,
                          _quant_rows_e4m3_kernel)
from .configs import even_k, ps_n_fastest
from .launch import _grid

#: the widest row the quantizer takes in one tile (its program holds the whole row in registers)
MAX_QUANT_ROW = 32768
FP8 = torch.float8_e4m3fn


def quant_rows_calls(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> list[Callable[[], None]]:
    """The launch of the per-row e4m3 quantizer: ``x [R, C]`` (bf16 / fp32) -> ``q [>= R, C]`` e4m3 and ``scale
    [>= R]`` fp32 (``amax / 448`` per row, 1 for a zero row)."""
    if x.dim() != 2 or x.dtype not in (torch.bfloat16, torch.float32) or x.stride(1) != 1:
        raise ValueError(f"x: expected a bf16/fp32 [R, C] tensor with unit column stride, got {x.dtype} "
                         f"{tuple(x.shape)}")
    rows, cols = x.shape
    if q.dtype != FP8 or q.dim() != 2 or q.shape[0] < rows or q.shape[1] != cols or q.stride(1) != 1:
        raise ValueError(f"q: expected a float8_e4m3fn [>= {rows}, {cols}] tensor, got {q.dtype} {tuple(q.shape)}")
    if scale.dtype != torch.float32 or scale.dim() != 1 or scale.shape[0] < rows:
        raise ValueError(f"scale: expected an fp32 [>= {rows}] tensor, got {scale.dtype} {tuple(scale.shape)}")
    if cols > MAX_QUANT_ROW:
        raise ValueError(f"x: rows of {cols} elements; the quantizer takes at most {MAX_QUANT_ROW}")
    if rows == 0:
        return []
    block = triton.next_power_of_2(cols)
    return [functools.partial(
        _quant_rows_e4m3_kernel[(rows,)], x, q, scale, x.stride(0), q.stride(0),
        C=cols, BLOCK_C=block, INTERP=INTERPRETED, num_warps=max(1, min(16, block // 512)), **BUILD_OPTIONS,
    )]


def check_e4m3_rows(name: str, q: torch.Tensor, sname: str, scale: torch.Tensor, cols: int) -> None:
    """A GEMM's e4m3 input ``q [R, cols]`` (unit column stride) and its fp32 row scales ``[>= R]``; a ValueError naming
    ``name`` or ``sname`` otherwise.  Shared by the f8 and p8 launchers."""
    if q.dtype != FP8 or q.dim() != 2 or q.shape[1] != cols or q.stride(1) != 1:
        raise ValueError(f"{name}: expected a float8_e4m3fn [R, {cols}] tensor, got {q.dtype} {tuple(q.shape)}")
    if scale.dtype != torch.float32 or scale.shape[0] < q.shape[0]:
        raise ValueError(f"{sname}: expected fp32 [>= {q.shape[0]}], got {scale.dtype} {tuple(scale.shape)}")


def check_pair_out(out: torch.Tensor, hidden: int) -> None:
    """gemm2's per-pair output plane ``out [T*k, hidden]``, fp32 or bf16, unit column stride."""
    if out.dim() != 2 or out.dtype not in (torch.float32, torch.bfloat16) or out.shape[1] != hidden or out.stride(1) != 1:
        raise ValueError(f"out: expected an fp32 or bf16 [T*k, {hidden}] tensor, got {out.dtype} {tuple(out.shape)}")


def _check_weights(w: torch.Tensor, w_scale: torch.Tensor, w_emax: torch.Tensor) -> tuple[int, int]:
    """(rows, K) of ``w [L, rows, K/2]`` with its scale bytes ``[L, rows, K/32]`` and E bytes ``[L, rows]``."""
    if w.dim() != 3 or w.dtype != torch.uint8:
        raise ValueError(f"w: expected uint8 packed e2m1 [L, rows, K/2], got {w.dtype} {tuple(w.shape)}")
    rows, k = w.shape[1], 2 * w.shape[2]
    if tuple(w_scale.shape) != (w.shape[0], rows, k // 32) or w_scale.dtype != torch.uint8:
        raise ValueError(f"w_scale: expected uint8 [{w.shape[0]}, {rows}, {k // 32}], got {w_scale.dtype} "
                         f"{tuple(w_scale.shape)}")
    if tuple(w_emax.shape) != (w.shape[0], rows) or w_emax.dtype != torch.uint8 or w_emax.stride(1) != 1:
        raise ValueError(f"w_emax: expected contiguous uint8 [{w.shape[0]}, {rows}] (the rows' largest scale bytes), "
                         f"got {w_emax.dtype} {tuple(w_emax.shape)}")
    if w.stride(2) != 1 or w_scale.stride(2) != 1:
        raise ValueError("w: expected K contiguous in the weights and their scale bytes")
    return rows, k


def _check_tiles(block_n: int, block_k: int, k: int) -> None:
    if block_k % 32 or k % 32:
        raise ValueError(f"block_k: expected block_k and K multiples of 32 (MX blocks), got {block_k} and {k}")


def gemm1_calls(
    x8: torch.Tensor, x_scale: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, w_emax: torch.Tensor,
    bias: Optional[torch.Tensor], alpha: Optional[torch.Tensor], beta: Optional[torch.Tensor],
    limit: Optional[torch.Tensor], out: torch.Tensor, sorted_pair_ids: torch.Tensor, block_expert_ids: torch.Tensor,
    num_pairs: int, top_k: int, activation: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int,
) -> list[Callable[[], None]]:
    """The launch of the W4A8 gemm1: ``x8 [T, H]`` e4m3 with ``x_scale [T]``, ``w [L, 2I, H/2]`` -> bf16 ``out [P, I]``."""
    rows, hidden = _check_weights(w, w_scale, w_emax)
    inter = rows // 2
    check_e4m3_rows("x8", x8, "x_scale", x_scale, hidden)
    _check_tiles(block_n, block_k, hidden)
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return []
    dummy = x_scale  # never read when the constexpr switch is off
    epi = [dummy if v is None else v for v in (bias, alpha, beta, limit)]
    return [functools.partial(
        _moe_w4a8_gemm1_kernel[(num_blocks, triton.cdiv(inter, block_n), 1)],
        x8, x_scale, w, w_scale, w_emax, *epi, out, sorted_pair_ids, block_expert_ids,
        num_pairs, top_k, inter,
        x8.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1), w_emax.stride(0),
        0 if bias is None else bias.stride(0), out.stride(0),
        K=hidden, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, ACTIVATION=activation,
        HAS_BIAS=bias is not None, EVEN_K=even_k(hidden, block_k, 1), DOT_F32=INTERPRETED,
        num_warps=num_warps, num_stages=num_stages, **BUILD_OPTIONS,
    )]


def gemm2_calls(
    a8: torch.Tensor, a_scale: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, w_emax: torch.Tensor,
    bias: Optional[torch.Tensor], topk_weights: torch.Tensor, out: torch.Tensor, sorted_pair_ids: torch.Tensor,
    block_expert_ids: torch.Tensor, num_pairs: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int,
) -> list[Callable[[], None]]:
    """The launch of the W4A8 gemm2: ``a8 [P, I]`` e4m3 with ``a_scale [P]``, ``w [L, H, I/2]`` -> fp32 or bf16 ``out
    [T*k, H]`` by pair (times the routing weight).  Grid order as the ps kernels' (:func:`.configs.ps_n_fastest`): with
    the M blocks fastest, prefill re-read the intermediate once per N tile (H200, s9 run of record, 20b EP1 T=4096:
    1.37 GB of DRAM reads in gemm2 against 0.28 GB for the bf16 ps gemm2; Nsight Compute).  gemm1's activations (T x H,
    12 MB there) stay in L2 either way (0.41 GB read, as bf16's)."""
    hidden, inter = _check_weights(w, w_scale, w_emax)
    check_e4m3_rows("a8", a8, "a_scale", a_scale, inter)
    check_pair_out(out, hidden)
    _check_tiles(block_n, block_k, inter)
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return []
    return [functools.partial(
        _moe_w4a8_gemm2_kernel[_grid(num_blocks, triton.cdiv(hidden, block_n), 1, ps_n_fastest(block_m))],
        a8, a_scale, w, w_scale, w_emax, a_scale if bias is None else bias, topk_weights, out,
        sorted_pair_ids, block_expert_ids, num_pairs, hidden,
        a8.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1), w_emax.stride(0),
        0 if bias is None else bias.stride(0), out.stride(0),
        K=inter, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, HAS_BIAS=bias is not None,
        EVEN_K=even_k(inter, block_k, 1), DOT_F32=INTERPRETED, N_FASTEST=ps_n_fastest(block_m), num_warps=num_warps,
        num_stages=num_stages, **BUILD_OPTIONS,
    )]


def fold_e4m3(packed: torch.Tensor, scale: torch.Tensor, emax: torch.Tensor) -> torch.Tensor:
    """The kernels' weight fold on one tile: ``packed [N, K/2]`` uint8, ``scale [N, K/32]`` uint8, ``emax [N]`` uint8
    -> e4m3 ``[N, K]`` (N and K powers of two, K >= 32).  For tests."""
    n, k = packed.shape[0], 2 * packed.shape[1]
    if n & (n - 1) or k & (k - 1) or k < 32 or n < 1:
        raise ValueError(f"packed: expected [N, K/2] with N and K powers of two, K >= 32, got {tuple(packed.shape)}")
    if tuple(scale.shape) != (n, k // 32) or tuple(emax.shape) != (n,):
        raise ValueError(f"scale, emax: expected [{n}, {k // 32}] and [{n}], got {tuple(scale.shape)}, "
                         f"{tuple(emax.shape)}")
    out = torch.empty((n, k), dtype=FP8, device=packed.device)
    _fold_test_kernel[(1,)](packed.contiguous(), scale.contiguous(), emax.contiguous(), out, BLOCK_N=n, BLOCK_K=k,
                            INTERP=INTERPRETED)
    return out
