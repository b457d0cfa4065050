"""Launchers of the W4A8 kernels of :mod:`._kernels_p8` (mode ``p8``): argument checks, grids, strides.

As :mod:`.launch_f8`: each ``*_calls`` checks its arguments and returns bare ``functools.partial`` launches of
``kernel[grid]``; :func:`decode_p8` runs the kernels' weight decode alone (tests).  The activation quantizer is
:func:`.launch_f8.quant_rows_calls`."""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch
import triton

from . import p8_layout
from ._kernels_p8 import _moe_w4a8_gemm1_p8_kernel, _moe_w4a8_gemm2_p8_kernel, _p8_decode_test_kernel
from ._kernels import BUILD_OPTIONS
from ._kernels_f8 import INTERPRETED
from .launch_f8 import FP8, check_e4m3_rows, check_pair_out
from .configs import even_k, ps_n_fastest
from .launch import _grid


def _check_weights(w: torch.Tensor, w_tables: torch.Tensor, w_emax: torch.Tensor) -> tuple[int, int]:
    """(rows, K) of the p8 codes ``w [L, rows/16, K/64, 512]`` with their tables ``[L, rows/16, K/32, 128]`` and E
    bytes ``[L, rows]``."""
    if w.dim() != 4 or w.dtype != torch.uint8 or w.shape[3] != p8_layout.CHUNK_BYTES or not w.is_contiguous():
        raise ValueError(f"w: expected contiguous uint8 p8 codes [L, rows/16, K/64, 512], got {w.dtype} "
                         f"{tuple(w.shape)}")
    nl, slabs, chunks = w.shape[:3]
    rows, k = slabs * p8_layout.ROWS, chunks * p8_layout.KCHUNK
    if tuple(w_tables.shape) != (nl, slabs, k // 32, p8_layout.TABLE_BYTES) or w_tables.dtype != torch.uint8 \
            or not w_tables.is_contiguous():
        raise ValueError(f"w_tables: expected contiguous uint8 [{nl}, {slabs}, {k // 32}, {p8_layout.TABLE_BYTES}], "
                         f"got {w_tables.dtype} {tuple(w_tables.shape)}")
    if tuple(w_emax.shape) != (nl, rows) or w_emax.dtype != torch.uint8 or w_emax.stride(1) != 1:
        raise ValueError(f"w_emax: expected contiguous uint8 [{nl}, {rows}] (the rows' largest scale bytes), "
                         f"got {w_emax.dtype} {tuple(w_emax.shape)}")
    return rows, k


def _check_tiles(block_m: int, block_n: int, block_k: int) -> None:
    if block_n % 16 or block_k % 64 or block_m < 16:
        raise ValueError(f"block_n: mode p8 needs block_n a multiple of 16, block_k of 64 and block_m >= 16, got "
                         f"block_m={block_m}, block_n={block_n}, block_k={block_k}")


def gemm1_calls(
    x8: torch.Tensor, x_scale: torch.Tensor, w: torch.Tensor, w_tables: torch.Tensor, w_emax: torch.Tensor,
    bias: Optional[torch.Tensor], alpha: Optional[torch.Tensor], beta: Optional[torch.Tensor],
    limit: Optional[torch.Tensor], out: torch.Tensor, sorted_pair_ids: torch.Tensor, block_expert_ids: torch.Tensor,
    num_pairs: int, top_k: int, activation: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int,
) -> list[Callable[[], None]]:
    """The launch of the p8 gemm1: ``x8 [T, H]`` e4m3 with ``x_scale [T]``, p8 w13 -> bf16 ``out [P, I]``."""
    rows, hidden = _check_weights(w, w_tables, w_emax)
    inter = rows // 2
    if inter % 16:
        raise ValueError(f"w: gemm1's rows [lin I; gate I] need I divisible by 16 (slabs), got I={inter}")
    check_e4m3_rows("x8", x8, "x_scale", x_scale, hidden)
    _check_tiles(block_m, block_n, block_k)
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return []
    epi = [x_scale if v is None else v for v in (bias, alpha, beta, limit)]  # never read when switched off
    nf = ps_n_fastest(block_m)
    return [functools.partial(
        _moe_w4a8_gemm1_p8_kernel[_grid(num_blocks, triton.cdiv(inter, block_n), 1, nf)],
        x8, x_scale, w, w_tables, w_emax, *epi, out, sorted_pair_ids, block_expert_ids,
        num_pairs, top_k, inter,
        x8.stride(0), w.stride(0), w.stride(1), w_tables.stride(0), w_tables.stride(1), w_emax.stride(0),
        0 if bias is None else bias.stride(0), out.stride(0),
        K=hidden, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, ACTIVATION=activation,
        HAS_BIAS=bias is not None, EVEN_K=even_k(hidden, block_k, 1), DOT_F32=INTERPRETED, N_FASTEST=nf,
        num_warps=num_warps, num_stages=num_stages, **BUILD_OPTIONS,
    )]


def gemm2_calls(
    a8: torch.Tensor, a_scale: torch.Tensor, w: torch.Tensor, w_tables: torch.Tensor, w_emax: torch.Tensor,
    bias: Optional[torch.Tensor], topk_weights: torch.Tensor, out: torch.Tensor, sorted_pair_ids: torch.Tensor,
    block_expert_ids: torch.Tensor, num_pairs: int,
    block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int,
) -> list[Callable[[], None]]:
    """The launch of the p8 gemm2: ``a8 [P, I]`` e4m3 with ``a_scale [P]``, p8 w2 -> fp32 or bf16 ``out [T*k, H]`` by pair
    (times the routing weight)."""
    hidden, inter = _check_weights(w, w_tables, w_emax)
    check_e4m3_rows("a8", a8, "a_scale", a_scale, inter)
    check_pair_out(out, hidden)
    _check_tiles(block_m, block_n, block_k)
    num_blocks = block_expert_ids.numel()
    if num_blocks == 0:
        return []
    nf = ps_n_fastest(block_m)
    return [functools.partial(
        _moe_w4a8_gemm2_p8_kernel[_grid(num_blocks, triton.cdiv(hidden, block_n), 1, nf)],
        a8, a_scale, w, w_tables, w_emax, a_scale if bias is None else bias, topk_weights, out,
        sorted_pair_ids, block_expert_ids, num_pairs, hidden,
        a8.stride(0), w.stride(0), w.stride(1), w_tables.stride(0), w_tables.stride(1), w_emax.stride(0),
        0 if bias is None else bias.stride(0), out.stride(0),
        K=inter, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, HAS_BIAS=bias is not None,
        EVEN_K=even_k(inter, block_k, 1), DOT_F32=INTERPRETED, N_FASTEST=nf, num_warps=num_warps,
        num_stages=num_stages, **BUILD_OPTIONS,
    )]


def decode_p8(codes: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """The kernels' decode of one expert's p8 matrix: ``codes [rows/16, K/64, 512]``, ``tables [rows/16, K/32, 128]``
    -> e4m3 ``[rows, K]``.  For tests."""
    if codes.dim() != 3 or codes.dtype != torch.uint8 or codes.shape[2] != p8_layout.CHUNK_BYTES:
        raise ValueError(f"codes: expected uint8 [rows/16, K/64, 512], got {codes.dtype} {tuple(codes.shape)}")
    slabs, chunks = codes.shape[:2]
    if tuple(tables.shape) != (slabs, 2 * chunks, p8_layout.TABLE_BYTES) or tables.dtype != torch.uint8:
        raise ValueError(f"tables: expected uint8 [{slabs}, {2 * chunks}, 128], got {tables.dtype} "
                         f"{tuple(tables.shape)}")
    s, c = triton.next_power_of_2(slabs), triton.next_power_of_2(chunks)
    out = torch.empty((16 * s, 64 * c), dtype=FP8, device=codes.device)
    _p8_decode_test_kernel[(1,)](codes.contiguous(), tables.contiguous(), out, slabs, chunks, S=s, C=c,
                                 INTERP=INTERPRETED)
    return out[: 16 * slabs, : 64 * chunks]
