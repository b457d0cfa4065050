"""Build the tensors of a routed FP4 MoE call from a :class:`MoECase`, as vLLM does.

Everything is real random data from the case's seed (never ``torch.empty``, never zeros):
hidden states, router logits routed by the case's routing method, then packed
``topk_ids = (expert_id << 16) | bf16_bits(weight)``; FP4 weights quantized from random
normal weights (local experts only, like an EP rank holds them), biases, and the gpt-oss
SwiGLU alpha/beta/limit per expert.

Weight layout (canonical, FlashInfer's for both CUTLASS and trtllm-gen before shuffling):
``w13 [local_experts, 2 * I, H]`` with rows ``[0, I)`` = linear ("up", w3) and
``[I, 2I)`` = gate (w1); ``w2 [local_experts, H, I]``; FP4 packed along the last dim.

Memory: :func:`build_inputs` first estimates what it would allocate (:func:`estimate_input_bytes`, peak
including the quantizer's temporaries) and refuses a case past :data:`DEFAULT_MAX_INPUT_BYTES` (64 GiB) with a
``ValueError`` saying how much; raise the limit with ``build_inputs(..., max_bytes=N)`` or the environment
variable ``FP4MOE_MAX_INPUT_BYTES`` (bytes, or with a K/M/G/T suffix, powers of 1024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import torch

from .case import ActivationFormat, GatedActivation, MoECase, RoutingMethod
from .quant import FP4Tensor, quantize_fp4
from .routing import pack_topk, route
from .. import settings


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
    #: the user's recorded tensors (a Flight-Recorder dump, fp4moe_diag.capture.replay): the correctness check
    #: runs them as they are (no fresh activations), and compares with ``recorded_output`` when there is one
    recorded: bool = False
    recorded_output: Optional[torch.Tensor] = None  # bf16 [T, H]: what the user's call returned
    _dequant_cache: dict = field(default_factory=dict, repr=False)

    @property
    def device(self) -> torch.device:
        return self.hidden_states.device

    @property
    def local_topk_ids(self) -> torch.Tensor:
        """Expert ids relative to this rank (-1 where the expert lives on another rank)."""
        return local_expert_ids(self.topk_ids, self.case)

    def dequantized(self, which: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dequantized ``w13`` or ``w2`` (cached per dtype)."""
        key = (which, dtype)
        if key not in self._dequant_cache:
            t = {"w13": self.w13, "w2": self.w2}[which]
            self._dequant_cache[key] = t.dequantize(dtype)
        return self._dequant_cache[key]

    def trtllm_kwargs(self, output: Optional[torch.Tensor] = None, tune_max_num_tokens: int = 8192) -> dict[str, Any]:
        """Keyword arguments for ``flashinfer.trtllm_fp4_block_scale_routed_moe``.

        Names and shapes are the seed's (vLLM's) call.  Weights here are in the canonical,
        *unshuffled* layout; the trtllm backend shuffles them with FlashInfer's helpers before
        a real launch on SM100.  MXFP4 ue8m0 scale bytes are viewed as float8_e4m3fn as vLLM does.
        """
        c = self.case
        scale_view = (lambda s: s.view(torch.float8_e4m3fn)) if c.weight_format.value == "mxfp4" else (lambda s: s)
        return {
            "topk_ids": self.packed_topk_ids,
            "routing_bias": self.routing_bias,
            "hidden_states": self.hidden_states,
            "hidden_states_scale": None,
            "gemm1_weights": self.w13.data,
            "gemm1_weights_scale": scale_view(self.w13.scale),
            "gemm1_bias": self.w13_bias,
            "gemm1_alpha": self.swiglu_alpha,
            "gemm1_beta": self.swiglu_beta,
            "gemm1_clamp_limit": self.swiglu_limit,
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


def same_device(a: Any, b: Any) -> bool:
    """Whether two devices (``torch.device``, strings, or None for "none") are the same one; a CUDA device without
    an index is the current one."""
    if a is None or b is None:
        return False
    da, db = torch.device(a), torch.device(b)
    if da.type != db.type:
        return False
    if da.type == "cuda":
        cur = torch.cuda.current_device()
        return (da.index if da.index is not None else cur) == (db.index if db.index is not None else cur)
    return True


def resolve_device(device: Any = None, must_exist: bool = True) -> torch.device:
    """The one device check of the suite: ``None`` (or ``""``/``"auto"``) -> :func:`default_device`; otherwise
    ``cpu``, ``cuda`` or ``cuda:N`` of a GPU this machine has (a ValueError naming ``device`` otherwise).
    ``must_exist=False`` only parses (what tensors are compared against, e.g. by the launch-input validation)."""
    if device is None or (isinstance(device, str) and device.strip() in ("", "auto", "None")):
        device = default_device()
    try:
        dev = torch.device(device.strip() if isinstance(device, str) else device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"device: expected cpu, cuda or cuda:N, got {device!r}") from e
    if dev.type == "meta":
        raise ValueError("device: 'meta' tensors have no data and no kernel launches on them; expected cpu, cuda or "
                         "cuda:N")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected cpu, cuda or cuda:N, got {device!r}")
    if dev.type == "cuda" and must_exist:
        if not torch.cuda.is_available():
            raise ValueError(f"device: {device!r} requested but this machine has no CUDA device; use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device: {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


#: what build_inputs refuses past unless told otherwise (bytes)
DEFAULT_MAX_INPUT_BYTES = 64 * 2**30
MAX_INPUT_BYTES_ENV = settings.MAX_INPUT_BYTES
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_bytes(text: Any, name: str = MAX_INPUT_BYTES_ENV) -> int:
    """``"1000"``, ``"64G"``, ``"1.5T"`` (powers of 1024) -> bytes; ValueError naming ``name``."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = float(text)
    else:
        t = str(text).strip().upper().removesuffix("B").removesuffix("I")
        unit = t[-1:] if t[-1:] in _SUFFIX and t[-1:] else ""
        try:
            value = float(t[: len(t) - len(unit)]) * _SUFFIX[unit]
        except ValueError:
            raise ValueError(f"{name}: expected a byte count such as 68719476736 or 64G, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a byte count > 0, got {text!r}")
    return int(value)


def max_input_bytes(max_bytes: Any = None) -> int:
    """The allocation limit: ``max_bytes``, else ``$FP4MOE_MAX_INPUT_BYTES``, else 64 GiB."""
    if max_bytes is not None:
        return parse_bytes(max_bytes, "max_bytes")
    env = settings.read(MAX_INPUT_BYTES_ENV)
    return parse_bytes(env) if env else DEFAULT_MAX_INPUT_BYTES


def estimate_input_bytes(case: MoECase) -> int:
    """Peak bytes :func:`build_inputs` allocates for ``case`` (tensors kept + the largest temporaries)."""
    t, h, i, e, k = case.num_tokens, case.hidden_size, case.intermediate_size, case.num_experts, case.top_k
    L, blk = case.local_num_experts, case.block_size
    acts = t * h * (4 + 2) + t * e * 4 * 3 + t * k * 4 * 4  # randn fp32 -> bf16; logits + routing; ids/weights
    weights = L * (2 * i * h + h * i) * (1 / 2 + 1 / blk) + (L * 4 if blk == 16 else 0)
    per_expert_tmp = max(2 * i * h, h * i) * (4 * 3 + 1)  # randn fp32, blocks, scaled copy, codes
    bias = L * (2 * i + h) * (4 + 2 + 4) if case.has_bias else 0
    return int(acts + 2 * weights + per_expert_tmp + bias + L * 12 + e * 2)


def _check_budget(case: MoECase, max_bytes: Any) -> None:
    need, limit = estimate_input_bytes(case), max_input_bytes(max_bytes)
    if need > limit:
        raise ValueError(
            f"case: build_inputs would allocate about {need / 2**30:.1f} GiB for {case.label} (num_tokens="
            f"{case.num_tokens}, hidden_size={case.hidden_size}, intermediate_size={case.intermediate_size}, "
            f"local_num_experts={case.local_num_experts}), over the limit of {limit / 2**30:.1f} GiB; raise it with "
            f"build_inputs(..., max_bytes=N) or {MAX_INPUT_BYTES_ENV}=N (bytes, or e.g. 200G)"
        )


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


def local_expert_ids(topk_ids: torch.Tensor, case: MoECase) -> torch.Tensor:
    """``topk_ids`` relative to ``case``'s rank (-1 where the expert lives on another rank)."""
    rel = topk_ids.long() - case.local_expert_offset
    return torch.where((rel >= 0) & (rel < case.local_num_experts), rel, torch.full_like(rel, -1))


def _draw_routing(case: MoECase, gen: torch.Generator, dev: Any) -> tuple:
    """The first draws of ``case``'s generator: hidden states, router logits (and DeepSeekV3's routing bias), then
    the routing: ``(hidden, logits, routing_bias or None, topk_ids, topk_weights)``."""
    t, h, e = case.num_tokens, case.hidden_size, case.num_experts
    hidden = torch.randn((t, h), generator=gen, device=dev).to(torch.bfloat16)
    logits = torch.randn((t, e), generator=gen, device=dev)
    routing_bias = None
    if case.routing_method is RoutingMethod.DeepSeekV3:
        routing_bias = (torch.randn((e,), generator=gen, device=dev) * 0.1).to(torch.bfloat16)
    ids, weights = route(logits, case, None if routing_bias is None else routing_bias.float())
    # the routed path carries bf16 weights; keep exactly what the kernel will see
    return hidden, logits, routing_bias, ids, weights.to(torch.bfloat16).float()


def case_routing(case: MoECase, device: Any = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(topk_ids, topk_weights)`` of ``case`` as :func:`build_inputs` draws them on ``device``, without making
    weights.  The generator is the device's: a GPU draws other numbers from the same seed than the CPU does (20b EP2
    T=1, seed 0: one local expert on the H200, none on CPU), so pass the device of the run to be matched."""
    if not isinstance(case, MoECase):
        raise ValueError(f"case: expected a MoECase, got {type(case).__name__}")
    dev = resolve_device(device)
    gen = torch.Generator(device=dev)
    gen.manual_seed(case.seed)
    return _draw_routing(case, gen, dev)[3:]


def build_inputs(case: MoECase, device: Any = "cpu", *, max_bytes: Any = None) -> MoEInputs:
    """Make every tensor of ``case`` on ``device`` from ``case.seed``.

    Refuses (``ValueError``, before allocating anything) a case whose tensors would take more than
    ``max_bytes`` / ``$FP4MOE_MAX_INPUT_BYTES`` / 64 GiB (see :func:`estimate_input_bytes`)."""
    if not isinstance(case, MoECase):
        raise ValueError(f"case: expected a MoECase, got {type(case).__name__}")
    dev = resolve_device(device)
    _check_budget(case, max_bytes)
    if case.activation_format is not ActivationFormat.BF16:
        raise ValueError(
            f"activation_format: build_inputs makes bf16 hidden states; got {case.activation_format.value}"
        )
    gen = torch.Generator(device=dev)
    gen.manual_seed(case.seed)
    h, i, e, l = case.hidden_size, case.intermediate_size, case.num_experts, case.local_num_experts
    hidden, logits, routing_bias, ids, weights = _draw_routing(case, gen, dev)
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
