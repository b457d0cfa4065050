"""Build the tensors of a routed FP4 MoE call from a :class:`MoECase`, as vLLM does.

Everything is real random data from the case's seed (never ``torch.empty``, never zeros):
hidden states, router logits routed by the case's routing method, then packed
``topk_ids = (expert_id << 16) | bf16_bits(weight)``; FP4 weights quantized from random
normal weights (local experts only, like an EP rank holds them), biases, and the gpt-oss
SwiGLU alpha/beta/limit per expert.

Weight layout (canonical, FlashInfer's for both CUTLASS and trtllm-gen before shuffling):
``w13 [local_experts, 2 * I, H]`` with rows ``[0, I)`` = linear ("up", w3) and
``[I, 2I)`` = gate (w1); ``w2 [local_experts, H, I]``; FP4 packed along the last dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import torch

from .case import ActivationFormat, GatedActivation, MoECase, RoutingMethod
from .quant import FP4Tensor, quantize_fp4
from .routing import pack_topk, route


@dataclass
class MoEInputs:
    """All tensors of one case, on one device."""

    case: MoECase
    hidden_states: torch.Tensor  # bf16 [T, H]
    router_logits: torch.Tensor  # fp32 [T, E]
    topk_ids: torch.Tensor  # int32 [T, k] global expert ids
    topk_weights: torch.Tensor  # fp32 [T, k]
    packed_topk_ids: torch.Tensor  # int32 [T, k] vLLM packing
    w13: FP4Tensor  # [L, 2I, H]
    w2: FP4Tensor  # [L, H, I]
    w13_bias: Optional[torch.Tensor] = None  # fp32 [L, 2I]
    w2_bias: Optional[torch.Tensor] = None  # fp32 [L, H]
    swiglu_alpha: Optional[torch.Tensor] = None  # fp32 [L]
    swiglu_beta: Optional[torch.Tensor] = None  # fp32 [L]
    swiglu_limit: Optional[torch.Tensor] = None  # fp32 [L]
    routing_bias: Optional[torch.Tensor] = None  # bf16 [E] (DeepSeekV3)
    _dequant_cache: dict = field(default_factory=dict, repr=False)

    @property
    def device(self) -> torch.device:
        return self.hidden_states.device

    @property
    def local_topk_ids(self) -> torch.Tensor:
        """Expert ids relative to this rank (-1 where the expert lives on another rank)."""
        c = self.case
        rel = self.topk_ids.long() - c.local_expert_offset
        return torch.where((rel >= 0) & (rel < c.local_num_experts), rel, torch.full_like(rel, -1))

    def dequantized(self, which: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dequantized ``w13`` or ``w2`` (cached per dtype)."""
        key = (which, dtype)
        if key not in self._dequant_cache:
            t = {"w13": self.w13, "w2": self.w2}[which]
            self._dequant_cache[key] = t.dequantize(dtype)
        return self._dequant_cache[key]

    def with_tokens_from(self, other_hidden: torch.Tensor) -> "MoEInputs":
        return replace(self, hidden_states=other_hidden, _dequant_cache=self._dequant_cache)

    def trtllm_kwargs(self, output: Optional[torch.Tensor] = None, tune_max_num_tokens: int = 8192) -> dict[str, Any]:
        """Keyword arguments for ``flashinfer.trtllm_fp4_block_scale_routed_moe``.

        Names and shapes are the seed's (vLLM's) call.  Weights here are in the canonical,
        *unshuffled* layout; the trtllm backend shuffles them with FlashInfer's helpers before
        a real launch on SM100.  MXFP4 ue8m0 scale bytes are viewed as float8_e4m3fn as vLLM does.
        """
        c = self.case
        scale_view = (lambda s: s.view(torch.float8_e4m3fn)) if c.weight_format.value == "mxfp4" else (lambda s: s)
        per_expert = lambda v: None if v is None else v  # noqa: E731
        return {
            "topk_ids": self.packed_topk_ids,
            "routing_bias": self.routing_bias,
            "hidden_states": self.hidden_states,
            "hidden_states_scale": None,
            "gemm1_weights": self.w13.data,
            "gemm1_weights_scale": scale_view(self.w13.scale),
            "gemm1_bias": self.w13_bias,
            "gemm1_alpha": per_expert(self.swiglu_alpha),
            "gemm1_beta": per_expert(self.swiglu_beta),
            "gemm1_clamp_limit": per_expert(self.swiglu_limit),
            "gemm2_weights": self.w2.data,
            "gemm2_weights_scale": scale_view(self.w2.scale),
            "gemm2_bias": self.w2_bias,
            "output1_scale_scalar": None,
            "output1_scale_gate_scalar": None,
            "output2_scale_scalar": None,
            "num_experts": c.num_experts,
            "top_k": c.top_k,
            "n_group": c.n_group,
            "topk_group": c.topk_group,
            "intermediate_size": c.intermediate_size,
            "local_expert_offset": c.local_expert_offset,
            "local_num_experts": c.local_num_experts,
            "routed_scaling_factor": c.routed_scaling_factor,
            "tile_tokens_dim": None,
            "routing_method_type": int(c.routing_method),
            "do_finalize": True,
            "output": output,
            "tune_max_num_tokens": tune_max_num_tokens,
        }


def default_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``: what every entry point takes when no device is given."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(device: Any) -> torch.device:
    """Validate a device argument; a CUDA device must exist."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device: expected a torch device such as 'cpu' or 'cuda:0', got {device!r}") from e
    if dev.type == "meta":
        raise ValueError("device: 'meta' tensors have no data; expected 'cpu' or 'cuda'")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} requested but no CUDA device is available")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or 'cuda', got {device!r}")
    return dev


def _quantize_experts(gen: torch.Generator, shape: tuple[int, int, int], std: float, fmt: str, device) -> FP4Tensor:
    """Random normal expert weights quantized one expert at a time (bounded memory)."""
    datas, scales, gss = [], [], []
    for _ in range(shape[0]):
        w = torch.randn(shape[1:], generator=gen, device=device) * std
        q = quantize_fp4(w, fmt)
        datas.append(q.data)
        scales.append(q.scale)
        if q.global_scale is not None:
            gss.append(q.global_scale)
    gs = torch.stack(gss) if gss else None  # NVFP4: one global scale per expert, shape [L]
    return FP4Tensor(torch.stack(datas), torch.stack(scales), q.block_size, gs)


def build_inputs(case: MoECase, device: Any = "cpu") -> MoEInputs:
    """Make every tensor of ``case`` on ``device`` from ``case.seed``."""
    if not isinstance(case, MoECase):
        raise ValueError(f"case: expected a MoECase, got {type(case).__name__}")
    dev = resolve_device(device)
    if case.activation_format is not ActivationFormat.BF16:
        raise ValueError(
            f"activation_format: build_inputs makes bf16 hidden states; got {case.activation_format.value}"
        )
    gen = torch.Generator(device=dev)
    gen.manual_seed(case.seed)
    t, h, i, e, l = case.num_tokens, case.hidden_size, case.intermediate_size, case.num_experts, case.local_num_experts
    hidden = torch.randn((t, h), generator=gen, device=dev).to(torch.bfloat16)
    logits = torch.randn((t, e), generator=gen, device=dev)
    routing_bias = None
    if case.routing_method is RoutingMethod.DeepSeekV3:
        routing_bias = (torch.randn((e,), generator=gen, device=dev) * 0.1).to(torch.bfloat16)
    ids, weights = route(logits, case, None if routing_bias is None else routing_bias.float())
    # the routed path carries bf16 weights; keep exactly what the kernel will see
    weights = weights.to(torch.bfloat16).float()
    packed = pack_topk(ids, weights, e)
    fmt = case.weight_format.value
    w13 = _quantize_experts(gen, (l, 2 * i, h), 1.0 / math.sqrt(h), fmt, dev)
    w2 = _quantize_experts(gen, (l, h, i), 1.0 / math.sqrt(i), fmt, dev)
    b13 = b2 = None
    if case.has_bias:
        # bf16-representable: kernels take bf16 biases (CUTLASS checks bias dtype == output dtype)
        b13 = (torch.randn((l, 2 * i), generator=gen, device=dev) * 0.1).to(torch.bfloat16).float()
        b2 = (torch.randn((l, h), generator=gen, device=dev) * 0.1).to(torch.bfloat16).float()
    alpha = beta = limit = None
    if case.activation is GatedActivation.SWIGLU_OAI:
        alpha = torch.full((l,), float(case.swiglu_alpha), device=dev)
        beta = torch.full((l,), float(case.swiglu_beta), device=dev)
        limit = torch.full((l,), float(case.swiglu_limit), device=dev)
    return MoEInputs(
        case=case,
        hidden_states=hidden,
        router_logits=logits,
        topk_ids=ids,
        topk_weights=weights,
        packed_topk_ids=packed,
        w13=w13,
        w2=w2,
        w13_bias=b13,
        w2_bias=b2,
        swiglu_alpha=alpha,
        swiglu_beta=beta,
        swiglu_limit=limit,
        routing_bias=routing_bias,
    )


def fresh_activations(inputs: MoEInputs, seed: int) -> MoEInputs:
    """Same weights and routing, new random hidden states (for correctness checks)."""
    gen = torch.Generator(device=inputs.device)
    gen.manual_seed(seed)
    h = torch.randn(inputs.hidden_states.shape, generator=gen, device=inputs.device).to(torch.bfloat16)
    return replace(inputs, hidden_states=h, _dequant_cache=inputs._dequant_cache)
