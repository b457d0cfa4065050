"""Float32 (or float64) reference of the routed FP4 MoE, on the *same* quantized weights.

Per token: for each of its top-k experts that lives on this rank,
``h = x @ w13[e].T + b13[e]`` -> gated activation -> ``y = a @ w2[e].T + b2[e]``,
output ``= sum_k weight_k * y_k``.  Experts outside ``[offset, offset + local)`` contribute
nothing (expert parallelism: another rank adds them).  Gate/linear order of ``w13`` rows and
the gpt-oss clamped SwiGLU follow FlashInfer's tests (``compute_with_experts``):
rows ``[0, I)`` linear, ``[I, 2I)`` gate;
``g = min(gate, limit); out = g * sigmoid(alpha * g) * (clamp(lin, -limit, limit) + beta)``.
"""

from __future__ import annotations

from typing import Optional

import torch

from .case import GatedActivation
from .inputs import MoEInputs


def gated_activation(
    h: torch.Tensor,
    activation: GatedActivation,
    alpha: Optional[float] = None,
    beta: Optional[float] = None,
    limit: Optional[float] = None,
) -> torch.Tensor:
    """``h [..., 2I]`` (linear | gate) -> ``[..., I]``."""
    inter = h.shape[-1] // 2
    lin, gate = h[..., :inter], h[..., inter:]
    if activation is GatedActivation.SWIGLU:
        return torch.nn.functional.silu(gate) * lin
    g = gate.clamp(max=limit)
    return g * torch.sigmoid(alpha * g) * (lin.clamp(min=-limit, max=limit) + beta)


def reference_moe(inputs: MoEInputs, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Vectorised reference: groups (token, k) pairs by local expert. Returns ``[T, H]`` in ``dtype``."""
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
    c = inputs.case
    x = inputs.hidden_states.to(dtype)
    t, h = x.shape
    out = torch.zeros((t, h), dtype=dtype, device=x.device)
    local = inputs.local_topk_ids  # [T, k], -1 = not on this rank
    flat_e = local.reshape(-1)
    flat_tok = torch.arange(t, device=x.device).repeat_interleave(c.top_k)
    flat_w = inputs.topk_weights.reshape(-1).to(dtype)
    valid = flat_e >= 0
    if not bool(valid.any()):
        return out
    flat_e, flat_tok, flat_w = flat_e[valid], flat_tok[valid], flat_w[valid]
    order = torch.argsort(flat_e, stable=True)
    flat_e, flat_tok, flat_w = flat_e[order], flat_tok[order], flat_w[order]
    experts, counts = torch.unique_consecutive(flat_e, return_counts=True)
    start = 0
    for e, n in zip(experts.tolist(), counts.tolist()):
        tok = flat_tok[start : start + n]
        wts = flat_w[start : start + n]
        start += n
        w13 = _expert(inputs, "w13", e, dtype)
        w2 = _expert(inputs, "w2", e, dtype)
        hh = x[tok] @ w13.T
        if inputs.w13_bias is not None:
            hh = hh + inputs.w13_bias[e].to(dtype)
        a = gated_activation(hh, c.activation, *_swiglu_params(inputs, e))
        y = a @ w2.T
        if inputs.w2_bias is not None:
            y = y + inputs.w2_bias[e].to(dtype)
        out.index_add_(0, tok, y * wts.unsqueeze(-1))
    return out


def _swiglu_params(inputs: MoEInputs, e: int) -> tuple[Optional[float], Optional[float], Optional[float]]:
    if inputs.swiglu_alpha is None:
        return None, None, None
    return float(inputs.swiglu_alpha[e]), float(inputs.swiglu_beta[e]), float(inputs.swiglu_limit[e])


def _expert(inputs: MoEInputs, which: str, e: int, dtype: torch.dtype) -> torch.Tensor:
    """Dequantize one expert's weights (cached), so unrouted experts cost nothing."""
    key = (which, e, dtype)
    cache = inputs._dequant_cache
    if key not in cache:
        t = getattr(inputs, which)
        gs = None
        if t.global_scale is not None:
            gs = t.global_scale[e] if t.global_scale.dim() > 0 and t.global_scale.numel() > 1 else t.global_scale
        from .quant import FP4Tensor

        cache[key] = FP4Tensor(t.data[e], t.scale[e], t.block_size, gs).dequantize(dtype)
    return cache[key]


def naive_reference_moe(inputs: MoEInputs) -> torch.Tensor:
    """Per-token, per-k loop in float64: slow, obviously right; used to test :func:`reference_moe`."""
    c = inputs.case
    x = inputs.hidden_states.double()
    out = torch.zeros_like(x)
    w13_all = inputs.dequantized("w13", torch.float64)
    w2_all = inputs.dequantized("w2", torch.float64)
    for ti in range(x.shape[0]):
        for kk in range(c.top_k):
            g = int(inputs.topk_ids[ti, kk])
            e = g - c.local_expert_offset
            if not (0 <= e < c.local_num_experts):
                continue
            hh = w13_all[e] @ x[ti]
            if inputs.w13_bias is not None:
                hh = hh + inputs.w13_bias[e].double()
            i = c.intermediate_size
            lin, gate = hh[:i], hh[i:]
            if c.activation is GatedActivation.SWIGLU:
                a = gate / (1 + torch.exp(-gate)) * lin
            else:
                al, be, li = _swiglu_params(inputs, e)
                gg = torch.minimum(gate, torch.tensor(li, dtype=torch.float64))
                a = gg / (1 + torch.exp(-al * gg)) * (torch.clamp(lin, -li, li) + be)
            y = w2_all[e] @ a
            if inputs.w2_bias is not None:
                y = y + inputs.w2_bias[e].double()
            out[ti] += float(inputs.topk_weights[ti, kk]) * y
    return out
