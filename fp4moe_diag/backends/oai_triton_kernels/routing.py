"""Routing data for ``matmul_ogs`` from our top-k ids and weights (expert parallel: local experts only).

vLLM's EP path (``OAITritonExperts.apply`` -> ``make_routing_data`` in
vllm/model_executor/layers/fused_moe/experts/gpt_oss_triton_kernels_moe.py, 3.5.1 API): local ids
(``-1`` = expert on another rank) as int16, weights as bf16 with ``-1`` where the id is ``-1``, a
``[T, ceil(L/32)]`` uint32 bitmatrix of the local experts of every token, then
``triton_kernels.routing.routing_from_bitmatrix(bitmatrix, weights, ids, L, k)``.  Pairs routed to
another rank get no row: gemm2's grouped top-k reduction skips them, and a token with no local
expert gets an all-zero output row.

:func:`pack_bitmatrix` is vLLM's ``pack_bitmatrix`` Triton kernel in plain torch (same bits);
:func:`routing_tensors` is what ``routing_from_bitmatrix`` computes, in plain torch (a stable sort
of the flattened pairs by local expert), used on CPU, in tests, and where the Triton routing kernel
cannot run (top_k not a power of two: vLLM patches the kernel for that, the result is the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def pack_bitmatrix(local_ids: torch.Tensor, num_local: int) -> torch.Tensor:
    """``local_ids [T, k]`` (-1 = not local) -> int64 ``[T, ceil(L/32)]`` words, bit ``e % 32`` of word
    ``e // 32`` set when the token routes to local expert ``e`` (values in [0, 2**32))."""
    t, _ = local_ids.shape
    cols = -(-num_local // 32)
    ids = local_ids.long()
    valid = ids >= 0
    e = torch.where(valid, ids, torch.zeros_like(ids))
    bit = torch.where(valid, torch.ones_like(e) << (e % 32), torch.zeros_like(e))
    words = torch.zeros((t, cols), dtype=torch.int64, device=local_ids.device)
    words.scatter_add_(1, e // 32, bit)  # a token's top-k experts are distinct: add == or
    return words


def as_uint32(words: torch.Tensor) -> torch.Tensor:
    """int64 values in [0, 2**32) -> a torch.uint32 tensor with the same bits."""
    signed = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    return signed.view(torch.uint32)


@dataclass
class RoutingTensors:
    """The index tensors ``routing_from_bitmatrix`` produces (names as in triton_kernels.routing)."""

    hist: torch.Tensor  # int32 [L] pairs per local expert
    topk_indx: torch.Tensor  # int32 [T*k] sorted position -> flat pair index; -1 past the local pairs
    gate_indx: torch.Tensor  # int32 [T*k] flat pair index -> sorted position; -1 for non-local pairs
    gate_scal: torch.Tensor  # [T*k] routing weight of the pair at each sorted position (0 past the end)

    @property
    def num_local_pairs(self) -> int:
        return int(self.hist.sum())


def routing_tensors(local_ids: torch.Tensor, weights: torch.Tensor, num_local: int) -> RoutingTensors:
    """Plain-torch ``sort_tokens``: pairs sorted by local expert, stable in the flat ``t * k + j`` order."""
    flat = local_ids.reshape(-1).long()
    n = flat.numel()
    valid = flat >= 0
    key = torch.where(valid, flat, torch.full_like(flat, num_local))  # non-local pairs sort last
    order = torch.argsort(key, stable=True)
    nv = int(valid.sum())
    dev = flat.device
    topk_indx = torch.full((n,), -1, dtype=torch.int32, device=dev)
    topk_indx[:nv] = order[:nv].to(torch.int32)
    gate_indx = torch.full((n,), -1, dtype=torch.int32, device=dev)
    gate_indx[order[:nv]] = torch.arange(nv, dtype=torch.int32, device=dev)
    gate_scal = torch.zeros((n,), dtype=weights.dtype, device=dev)
    gate_scal[:nv] = weights.reshape(-1)[order[:nv]]
    hist = torch.bincount(flat[valid], minlength=num_local)[:num_local].to(torch.int32)
    return RoutingTensors(hist, topk_indx, gate_indx, gate_scal)


def vllm_routing_inputs(local_ids: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int16 ids, bf16 weights with -1 where the id is -1), as vLLM's ``make_routing_data`` hands them on."""
    ids = local_ids.to(torch.int16)
    w = torch.where(ids == -1, torch.full_like(weights, -1.0, dtype=torch.float32), weights.float())
    return ids, w.to(torch.bfloat16)


def routing_torch(tk: Any, local_ids: torch.Tensor, weights: torch.Tensor, num_local: int, top_k: int):
    """(RoutingData, GatherIndx, ScatterIndx) built in torch (``compute_expt_data_torch`` for the tiles)."""
    r = tk.routing
    _, w = vllm_routing_inputs(local_ids, weights)
    rt = routing_tensors(local_ids, w, num_local)
    expt_data = r.compute_expt_data_torch(rt.hist, num_local, local_ids.numel())
    gather = r.GatherIndx(src_indx=rt.topk_indx, dst_indx=rt.gate_indx)
    scatter = r.ScatterIndx(src_indx=rt.gate_indx, dst_indx=rt.topk_indx)
    return r.RoutingData(rt.gate_scal, rt.hist, num_local, top_k, expt_data), gather, scatter


def routing_triton(tk: Any, local_ids: torch.Tensor, weights: torch.Tensor, num_local: int, top_k: int):
    """(RoutingData, GatherIndx, ScatterIndx) from ``routing_from_bitmatrix`` (vLLM's way; CUDA only)."""
    ids, w = vllm_routing_inputs(local_ids, weights)
    n_rows = ids.shape[0]
    words = as_uint32(pack_bitmatrix(local_ids, num_local))
    bm = tk.tensor.Bitmatrix(words, shape=[n_rows, words.shape[1] * 32], shape_max=[n_rows, None], scratchpad=None)
    return tk.routing.routing_from_bitmatrix(bm, w, ids, num_local, top_k)


def build_routing(tk: Any, local_ids: torch.Tensor, weights: torch.Tensor, num_local: int, top_k: int):
    """(routing_data, gather_indx, scatter_indx, source): triton_kernels' own routing kernels on CUDA when
    ``top_k`` is a power of two (as vLLM runs it), the torch construction otherwise."""
    pow2 = top_k & (top_k - 1) == 0
    if local_ids.device.type == "cuda" and pow2:
        return (*routing_triton(tk, local_ids, weights, num_local, top_k), "triton_kernels.routing_from_bitmatrix")
    return (*routing_torch(tk, local_ids, weights, num_local, top_k), "torch")
