"""A dumped call's tensors -> :class:`~fp4moe_diag.problem.inputs.MoEInputs` (the recorded data, canonical layout).

Routing comes from the call: the routed entry point's packed ``topk_ids`` (or its ``(ids, weights)`` pair),
``cutlass_fused_moe``'s ``token_selected_experts``/``token_final_scales``, or the logits entry point's
``routing_logits`` routed by the case's method.  A pre-routed call has no logits: ``router_logits`` is then
zeros (no backend reads it; the routing is the recorded one) -- :data:`NO_LOGITS` says so in the case sources.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..problem.case import ActivationFormat, GatedActivation, RoutingMethod
from ..problem.inputs import MoEInputs, resolve_device
from ..problem.quant import FP4Tensor
from ..problem.routing import pack_topk, route, unpack_topk
from . import layouts
from .derive import CUTLASS, LOGITS, ROUTED
from .dump import LAYOUTS, DumpedCall

NO_LOGITS = "router_logits: a pre-routed call has no logits; zeros (no backend reads them: the routing is recorded)"


def _t(dc: DumpedCall, name: str) -> Optional[torch.Tensor]:
    a = dc.args.get(name)
    v = None if a is None else a.value
    return None if v is None else getattr(v, "values", None)


def _routing(dc: DumpedCall) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """(global expert ids int32, weights fp32, logits fp32 or None)."""
    c = dc.case
    if dc.function == ROUTED:
        v = dc.args["topk_ids"].value
        if isinstance(v, list):
            ids, w = v[0].values.to(torch.int32), v[1].values.float()
        else:
            ids, wb = unpack_topk(v.values)
            w = wb.float()
        return ids, w, None
    if dc.function == CUTLASS:
        return _t(dc, "token_selected_experts").to(torch.int32), _t(dc, "token_final_scales").float(), None
    logits = _t(dc, "routing_logits").float()
    bias = _t(dc, "routing_bias")
    ids, w = route(logits, c, None if bias is None else bias.float())
    return ids.to(torch.int32), w.to(torch.bfloat16).float(), logits


def _cutlass_weights(dc: DumpedCall, layout: str) -> tuple:
    c = dc.case
    i, h = c.intermediate_size, c.hidden_size
    w13, w2 = _t(dc, "fc1_expert_weights"), _t(dc, "fc2_expert_weights")
    q1, q2 = [a.values for a in dc.args["quant_scales"].value]
    if layout == "canonical":
        return w13, q1.view(torch.uint8).reshape(c.local_num_experts, 2 * i, h // 32), w2, \
            q2.view(torch.uint8).reshape(c.local_num_experts, h, i // 32)
    if q1.dim() == 5:  # FlashInfer >= 0.7: folded scales, interleaved weights
        return (layouts.sm90_deinterleave_weights(w13), layouts.sm90_unfold_scales(q1, 2 * i, h),
                layouts.sm90_deinterleave_weights(w2), layouts.sm90_unfold_scales(q2, h, i))
    if q1.dim() == 3 and tuple(q1.shape[1:]) == (h // 128, 2 * i) and (h // 128, 2 * i) != (2 * i, h // 128):
        return w13, layouts.vllm_sm90_unfold_scales(q1, 2 * i, h), w2, layouts.vllm_sm90_unfold_scales(q2, h, i)
    raise ValueError(f"quant_scales[0] ({dc.folder.name}): {list(q1.shape)} {q1.dtype} is neither FlashInfer's "
                     "SM90 fold [L, 2I/64, H/128, 16, 4] nor vLLM's [L, H/128, 2I] int32 layout; pass "
                     "--dump-layout canonical if the weights were not prepared")


def dumped_weights(dc: DumpedCall, layout: str = "kernel") -> tuple:
    """``(w13, s13, w2, s2, b13, b2)`` canonical (ue8m0 scale bytes, fp32 biases) from a dumped call."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {list(LAYOUTS)}, got {layout!r}")
    c = dc.case
    if dc.function == CUTLASS:
        w13, s13, w2, s2 = _cutlass_weights(dc, layout)
        b13, b2 = _t(dc, "fc1_expert_biases"), _t(dc, "fc2_expert_biases")
    else:
        w13, s13, w2, s2 = (_t(dc, n) for n in ("gemm1_weights", "gemm1_weights_scale", "gemm2_weights",
                                                "gemm2_weights_scale"))
        b13, b2 = _t(dc, "gemm1_bias"), _t(dc, "gemm2_bias")
        l, i, h, blk = c.local_num_experts, c.intermediate_size, c.hidden_size, c.block_size
        s13 = s13.contiguous().view(torch.uint8).reshape(l, 2 * i, h // blk)
        s2 = s2.contiguous().view(torch.uint8).reshape(l, h, i // blk)
        if layout == "kernel":
            try:
                w13, s13, w2, s2, b13 = layouts.trtllm_unshuffle(w13, s13, w2, s2, b13, blk)
            except ValueError as e:
                raise ValueError(f"gemm1_weights ({dc.folder.name}): trtllm-gen layout: {e}") from None
    as_f = (lambda b: None if b is None else b.float())  # noqa: E731
    return w13.view(torch.uint8), s13, w2.view(torch.uint8), s2, as_f(b13), as_f(b2)


def _swiglu(dc: DumpedCall, names: tuple) -> tuple:
    return tuple(None if _t(dc, n) is None else _t(dc, n).float() for n in names)


def inputs_from_dump(dc: DumpedCall, device: Any = "cpu", *, layout: str = "kernel") -> MoEInputs:
    """The recorded tensors of one dumped call as :class:`MoEInputs` (``recorded=True``: the correctness
    check runs them as they are; ``recorded_output`` is the call's output when the dump holds it)."""
    c = dc.case
    dev = resolve_device(device)
    if c.activation_format is not ActivationFormat.BF16:
        raise ValueError(f"hidden_states ({dc.folder.name}): {c.activation_format.value} activations: a replay "
                         "takes bf16 hidden states")
    if c.weight_format.value != "mxfp4":
        raise ValueError(f"gemm1_weights_scale ({dc.folder.name}): NVFP4 replays need the global scales; only "
                         "MXFP4 dumps are replayed")
    hidden = _t(dc, "input" if dc.function == CUTLASS else "hidden_states")
    ids, w, logits = _routing(dc)
    w13, s13, w2, s2, b13, b2 = dumped_weights(dc, layout)
    names = (("swiglu_alpha", "swiglu_beta", "swiglu_limit") if dc.function == CUTLASS
             else ("gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"))
    alpha, beta, limit = _swiglu(dc, names) if c.activation is GatedActivation.SWIGLU_OAI else (None,) * 3
    bias = _t(dc, "routing_bias") if c.routing_method is RoutingMethod.DeepSeekV3 else None
    if logits is None:
        logits = torch.zeros((c.num_tokens, c.num_experts), dtype=torch.float32)
    to = (lambda x: None if x is None else x.to(dev))  # noqa: E731
    return MoEInputs(
        case=c, hidden_states=hidden.to(dev), router_logits=logits.to(dev), topk_ids=ids.to(dev),
        topk_weights=w.to(dev), packed_topk_ids=pack_topk(ids, w, c.num_experts).to(dev),
        w13=FP4Tensor(w13.contiguous().to(dev), s13.contiguous().to(dev), c.block_size),
        w2=FP4Tensor(w2.contiguous().to(dev), s2.contiguous().to(dev), c.block_size),
        w13_bias=to(b13), w2_bias=to(b2), swiglu_alpha=to(alpha), swiglu_beta=to(beta), swiglu_limit=to(limit),
        routing_bias=to(bias), recorded=True, recorded_output=to(recorded_output(dc)),
    )


def recorded_output(dc: DumpedCall) -> Optional[torch.Tensor]:
    """The call's output ``[T, H]`` from ``outputs.pt`` (``result`` or ``result_0``), None when not recorded."""
    if not dc.outputs:
        return None
    c = dc.case
    for key in ("result", "result_0", "result__0"):  # a tensor, a tuple, a list (api_logging keys)
        t = dc.outputs.get(key)
        if isinstance(t, torch.Tensor) and tuple(t.shape) == (c.num_tokens, c.hidden_size):
            return t
    shapes = {k: tuple(v.shape) for k, v in dc.outputs.items() if isinstance(v, torch.Tensor)}
    raise ValueError(f"{dc.folder.name}/outputs: no [{c.num_tokens}, {c.hidden_size}] output tensor; it holds "
                     f"{shapes}")
