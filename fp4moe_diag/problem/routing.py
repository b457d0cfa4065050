"""Routing (logits -> top-k experts and weights) and vLLM's packed ``topk_ids`` format.

vLLM's DeepEP high-throughput path hands FlashInfer's routed MoE one int32 per (token, k):
``(expert_id << 16) | bf16_bits(weight)`` -- FlashInfer's ``PackedScoreIdx {bf16 score; int16 idx}``
in little-endian memory.  The weight's 16 bits must be masked before the OR: an int16 view of a
negative bf16 sign-extends to 32 bits and overwrites the expert id (``0xFFFF....``), which is what
the seed's own repro script does with ``torch.randn`` weights.
"""

from __future__ import annotations

import torch

from .case import MoECase, RoutingMethod


def _check_ids(name: str, ids: torch.Tensor, num_experts: int | None) -> None:
    if ids.dtype not in (torch.int32, torch.int64, torch.int16, torch.uint8):
        raise ValueError(f"{name}: expected an integer tensor, got dtype {ids.dtype}")
    if ids.numel() == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    limit = 65535 if num_experts is None else num_experts - 1
    if lo < 0 or hi > limit:
        raise ValueError(f"{name}: expert ids must be in [0, {limit}], got range [{lo}, {hi}]")


def pack_topk(expert_ids: torch.Tensor, weights: torch.Tensor, num_experts: int | None = None) -> torch.Tensor:
    """Pack ids and weights into int32 ``(id << 16) | bf16_bits(weight)``, masking the low half."""
    if expert_ids.shape != weights.shape:
        raise ValueError(
            f"weights: expected the shape of expert_ids {tuple(expert_ids.shape)}, got {tuple(weights.shape)}"
        )
    _check_ids("expert_ids", expert_ids, num_experts)
    if not torch.is_floating_point(weights):
        raise ValueError(f"weights: expected a floating-point tensor, got dtype {weights.dtype}")
    if weights.numel() and not bool(torch.isfinite(weights).all()):
        raise ValueError("weights: expected finite routing weights, found NaN/Inf")
    low = weights.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF
    return (expert_ids.to(torch.int32) << 16) | low


def unpack_topk(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_topk`: ``(expert_ids int32, weights bf16)``."""
    if packed.dtype != torch.int32:
        raise ValueError(f"packed: expected dtype torch.int32, got {packed.dtype}")
    ids = (packed >> 16) & 0xFFFF
    low = (packed & 0xFFFF).to(torch.int32)
    low16 = torch.where(low >= 0x8000, low - 0x10000, low).to(torch.int16)
    return ids.to(torch.int32), low16.view(torch.bfloat16)


def naive_pack_topk(expert_ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The seed script's packing, without the mask: kept to show the sign-extension bug."""
    return (expert_ids.to(torch.int32) << 16) | weights.to(torch.bfloat16).view(torch.int16)


def route(logits: torch.Tensor, case: MoECase, bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Route ``logits [T, num_experts]`` by ``case.routing_method``.

    Returns ``(ids int32 [T, top_k], weights float32 [T, top_k])``; weights are what the kernel
    multiplies each expert's output by.  Semantics follow FlashInfer's routing references
    (tests/moe/test_trtllm_gen_fused_moe.py).
    """
    if logits.dim() != 2 or logits.shape[1] != case.num_experts:
        raise ValueError(
            f"logits: expected shape [num_tokens, {case.num_experts}], got {tuple(logits.shape)}"
        )
    x = logits.float()
    k = case.top_k
    rm = case.routing_method
    if rm is RoutingMethod.Default:
        w, ids = torch.topk(torch.softmax(x, dim=-1), k, dim=-1)
    elif rm is RoutingMethod.Renormalize:
        v, ids = torch.topk(x, k, dim=-1)
        w = torch.softmax(v, dim=-1)
    elif rm is RoutingMethod.RenormalizeNaive:
        w, ids = torch.topk(torch.softmax(x, dim=-1), k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
    elif rm is RoutingMethod.TopK:
        w, ids = torch.topk(x, k, dim=-1)
    elif rm is RoutingMethod.Llama4:
        v, ids = torch.topk(x, 1, dim=-1)
        w = torch.sigmoid(v)
    elif rm is RoutingMethod.DeepSeekV3:
        if bias is None:
            bias = torch.zeros(case.num_experts, dtype=torch.float32, device=x.device)
        s = torch.sigmoid(x)
        sb = s + bias.float()
        t, e = x.shape
        g = case.n_group
        grouped = sb.view(t, g, e // g)
        group_scores = torch.topk(grouped, min(2, e // g), dim=-1).values.sum(-1)
        gidx = torch.topk(group_scores, case.topk_group, dim=-1).indices
        gmask = torch.zeros_like(group_scores).scatter_(-1, gidx, 1.0)
        emask = gmask.unsqueeze(-1).expand(t, g, e // g).reshape(t, e)
        masked = sb.masked_fill(emask == 0, float("-inf"))
        ids = torch.topk(masked, k, dim=-1).indices
        w = torch.gather(s, 1, ids)
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20) * float(case.routed_scaling_factor or 1.0)
    else:  # pragma: no cover - RoutingMethod.parse rejects anything else
        raise ValueError(f"routing_method: unsupported {rm!r}")
    return ids.to(torch.int32), w.float()
