"""The one check every backend's inputs pass right before launch: :func:`validate_launch_inputs`.

It covers every tensor of :class:`~fp4moe_diag.problem.inputs.MoEInputs` (what the backends hand the kernels):

* every tensor is a real tensor on the launch device (never ``meta``, never another device);
* dtypes and shapes follow the case: hidden states, ids, routing weights, FP4 weights and their block scales
  (MXFP4: ue8m0 bytes ``[L, R, K/32]``; NVFP4: float8_e4m3fn ``[L, R, K/16]`` and an fp32 global scale per
  expert ``[L]`` or a scalar), biases (``[L, 2I]`` / ``[L, H]`` iff ``case.has_bias``), the gpt-oss SwiGLU
  alpha/beta/limit (``[L]`` iff swiglu_oai), the DeepSeekV3 routing bias (``[E]``);
* values: ``topk_ids`` in ``[0, num_experts)``; routing weights, biases, SwiGLU constants and global scales
  finite (global scales and limits > 0);
* ``packed_topk_ids`` is vLLM's ``(expert_id << 16) | bf16_bits(weight)`` (:mod:`fp4moe_diag.problem.routing`): the
  decoded ids equal ``topk_ids`` (so they are in range too) and the decoded bf16 weights equal ``topk_weights``
  rounded to bf16.  The seed script's unmasked packing (a negative weight sign-extends into the id, which then
  reads 65535) is named as such.

A violation raises ``ValueError`` naming the tensor; nothing is launched.  Finiteness checks read the values
(one device sync per tensor), which is fine before a launch but not inside a timed loop.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .problem.case import GatedActivation, RoutingMethod, WeightFormat
from .problem.inputs import MoEInputs, resolve_device, same_device
from .problem.routing import unpack_topk

_FLOATS = (torch.float32, torch.bfloat16)


def launch_tensors(inputs: Any) -> dict[str, Optional[torch.Tensor]]:
    """Every tensor of ``inputs`` a backend may hand a kernel, by name (None where absent)."""
    return {
        "hidden_states": inputs.hidden_states,
        "router_logits": inputs.router_logits,
        "topk_ids": inputs.topk_ids,
        "topk_weights": inputs.topk_weights,
        "packed_topk_ids": inputs.packed_topk_ids,
        "w13.data": inputs.w13.data,
        "w13.scale": inputs.w13.scale,
        "w13.global_scale": inputs.w13.global_scale,
        "w2.data": inputs.w2.data,
        "w2.scale": inputs.w2.scale,
        "w2.global_scale": inputs.w2.global_scale,
        "w13_bias": inputs.w13_bias,
        "w2_bias": inputs.w2_bias,
        "swiglu_alpha": inputs.swiglu_alpha,
        "swiglu_beta": inputs.swiglu_beta,
        "swiglu_limit": inputs.swiglu_limit,
        "routing_bias": inputs.routing_bias,
    }


def _expect(name: str, t: Optional[torch.Tensor], dtypes: tuple, shape: tuple) -> torch.Tensor:
    if t is None:
        raise ValueError(f"{name}: required for this case, got None")
    if t.dtype not in dtypes:
        want = dtypes[0] if len(dtypes) == 1 else " or ".join(str(d) for d in dtypes)
        raise ValueError(f"{name}: expected dtype {want}, got {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    return t


def _absent(name: str, t: Optional[torch.Tensor], why: str) -> None:
    if t is not None:
        raise ValueError(f"{name}: expected None ({why}), got a tensor of shape {tuple(t.shape)}")


def _finite(name: str, t: torch.Tensor, positive: bool = False) -> None:
    if t.numel() == 0:
        return
    f = t.float()
    ok = torch.isfinite(f) & (f > 0) if positive else torch.isfinite(f)
    if not bool(ok.all()):
        bad = f[~ok].flatten()[:4].tolist()
        raise ValueError(f"{name}: expected finite values{' > 0' if positive else ''}, found {int((~ok).sum())} "
                         f"bad element(s), e.g. {bad}")


def _check_weight(prefix: str, q: Any, fmt: WeightFormat, lead: tuple[int, int], k: int) -> None:
    L, rows = lead
    _expect(f"{prefix}.data", q.data, (torch.uint8,), (L, rows, k // 2))
    if q.block_size != fmt.block_size:
        raise ValueError(f"{prefix}.block_size: expected {fmt.block_size} ({fmt.value}), got {q.block_size}")
    if fmt is WeightFormat.MXFP4:
        _expect(f"{prefix}.scale", q.scale, (torch.uint8, torch.float8_e4m3fn), (L, rows, k // 32))
        _absent(f"{prefix}.global_scale", q.global_scale, "MXFP4 has no global scale")
    else:
        _expect(f"{prefix}.scale", q.scale, (torch.float8_e4m3fn,), (L, rows, k // 16))
        gs = q.global_scale
        if gs is None:
            raise ValueError(f"{prefix}.global_scale: NVFP4 needs an fp32 global scale, got None")
        if gs.dtype != torch.float32 or tuple(gs.shape) not in ((L,), ()):
            raise ValueError(f"{prefix}.global_scale: expected float32 of shape ({L},) or (), got {gs.dtype} "
                             f"{tuple(gs.shape)}")
        _finite(f"{prefix}.global_scale", gs, positive=True)


def _check_packed(inputs: Any, num_experts: int) -> None:
    packed, ids, w = inputs.packed_topk_ids, inputs.topk_ids, inputs.topk_weights
    if packed.numel() == 0:
        return
    dec_ids, dec_w = unpack_topk(packed)
    wrong = dec_ids != ids.to(torch.int32)
    if bool(wrong.any()):
        got, want = int(dec_ids[wrong].flatten()[0]), int(ids[wrong].flatten()[0])
        hint = ""
        if got == 0xFFFF or bool((dec_ids[wrong] == 0xFFFF).any()):
            hint = (" (expert id 65535: the weight's bf16 bits were OR-ed in without the 0xFFFF mask, so a negative "
                    "weight sign-extended into the id -- the seed script's packing; use routing.pack_topk)")
        raise ValueError(f"packed_topk_ids: decoded expert ids disagree with topk_ids at {int(wrong.sum())} "
                         f"position(s), e.g. {got} vs {want}{hint}")
    if int(dec_ids.max()) >= num_experts:  # topk_ids are checked, but say it for the packed tensor too
        raise ValueError(f"packed_topk_ids: decoded expert ids must be in [0, {num_experts - 1}], got "
                         f"{int(dec_ids.max())}")
    want_w = w.to(torch.bfloat16)
    same = (dec_w.view(torch.int16) == want_w.view(torch.int16)) | ((dec_w == 0) & (want_w == 0))
    if not bool(same.all()):
        i = (~same).nonzero()[0].tolist()
        raise ValueError(f"packed_topk_ids: decoded routing weights disagree with topk_weights (as bf16) at "
                         f"{int((~same).sum())} position(s), e.g. index {i}: {float(dec_w[tuple(i)])} vs "
                         f"{float(want_w[tuple(i)])}")


def validate_launch_inputs(inputs: Any, device: Any) -> None:
    """Reject what no kernel may receive, right before launch (``ValueError`` naming the tensor); see the module
    docstring for the full list.  ``inputs`` is a :class:`~fp4moe_diag.problem.inputs.MoEInputs`."""
    if not isinstance(inputs, MoEInputs):
        raise ValueError(f"inputs: expected MoEInputs, got {type(inputs).__name__}")
    if device is None:
        raise ValueError("device: expected cpu, cuda or cuda:N (the device the kernels launch on), got None")
    dev = resolve_device(device, must_exist=False)
    tensors = launch_tensors(inputs)
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.is_meta:
            raise ValueError(f"{name}: expected a tensor on {dev} (the case's device), got one on meta (a meta "
                             "tensor has no data and cannot be handed to a kernel)")
        if not same_device(t.device, dev):
            raise ValueError(f"{name}: expected a tensor on {dev} (the case's device), got one on {t.device}")

    c = inputs.case
    T, H, I, E, K, L = (c.num_tokens, c.hidden_size, c.intermediate_size, c.num_experts, c.top_k,
                        c.local_num_experts)
    _expect("hidden_states", inputs.hidden_states, (torch.bfloat16,), (T, H))
    _expect("router_logits", inputs.router_logits, (torch.float32,), (T, E))
    _expect("topk_ids", inputs.topk_ids, (torch.int32,), (T, K))
    _expect("topk_weights", inputs.topk_weights, (torch.float32,), (T, K))
    _expect("packed_topk_ids", inputs.packed_topk_ids, (torch.int32,), (T, K))
    ids = inputs.topk_ids
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= E):
        raise ValueError(f"topk_ids: expert ids must be in [0, {E - 1}], got [{int(ids.min())}, {int(ids.max())}]")
    _finite("topk_weights", inputs.topk_weights)
    _finite("hidden_states", inputs.hidden_states)
    _check_packed(inputs, E)

    _check_weight("w13", inputs.w13, c.weight_format, (L, 2 * I), H)
    _check_weight("w2", inputs.w2, c.weight_format, (L, H), I)
    if c.has_bias:
        _finite("w13_bias", _expect("w13_bias", inputs.w13_bias, _FLOATS, (L, 2 * I)))
        _finite("w2_bias", _expect("w2_bias", inputs.w2_bias, _FLOATS, (L, H)))
    else:
        _absent("w13_bias", inputs.w13_bias, "the case has has_bias=False")
        _absent("w2_bias", inputs.w2_bias, "the case has has_bias=False")
    oai = c.activation is GatedActivation.SWIGLU_OAI
    for name in ("swiglu_alpha", "swiglu_beta", "swiglu_limit"):
        t = getattr(inputs, name)
        if oai:
            _finite(name, _expect(name, t, (torch.float32,), (L,)), positive=name == "swiglu_limit")
        else:
            _absent(name, t, "only swiglu_oai takes it")
    if c.routing_method is RoutingMethod.DeepSeekV3:
        _finite("routing_bias", _expect("routing_bias", inputs.routing_bias, (torch.bfloat16, torch.float32), (E,)))
    else:
        _absent("routing_bias", inputs.routing_bias, "only DeepSeekV3 routing takes a routing bias")
