"""Our quantized weights -> vLLM's gpt-oss layout for triton_kernels on Hopper (pure torch).

Our canonical ``w13 [L, 2I, H/2]`` (packed e2m1, element 2i in the low nibble) has rows ``[0, I)``
linear ("up") and ``[I, 2I)`` gate (:mod:`fp4moe_diag.problem.inputs`, :func:`fp4moe_diag.problem.reference.gated_activation`).
vLLM's gpt-oss checkpoint interleaves them (row ``2j`` gate ``j``, row ``2j + 1`` linear ``j``), which
is what triton_kernels' ``swiglu_fn`` reads (``gelu, linear = split(reshape(x, (M, N // 2, 2)))``).
So gemm1's rows, ue8m0 scales and bias are interleaved; the packed bytes are *moved*, never
requantized, so the float32 reference of our weights stays the truth.

Then, as vLLM's ``_swizzle_mxfp4`` on SM90 (vllm/model_executor/layers/quantization/utils/mxfp4_utils.py):
the scale's K dim (groups of 32) is zero-padded to a multiple of 4 (vLLM "Patches #47303"); data
and scales are transposed to ``[L, K, N]`` so the MX axis is dim 1; the data is wrapped as FP4 and
converted to ``HopperMXValueLayout(mx_axis=1)``, the scales to ``HopperMXScaleLayout(mx_axis=1,
num_warps=W)``.  vLLM uses ``W = 8``; the kernel's ``num_warps`` must equal the scale layout's
(``compute_num_warps``), so every ``W`` a tactic uses gets its own scale tensor.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

#: vLLM pads the number of 32-element scale groups along K to a multiple of this on SM90
SCALE_K_MULTIPLE = 4


def interleave_gate_linear(t: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """``[..., 2I, ...]`` with halves ``[linear; gate]`` along ``dim`` -> rows ``gate0, lin0, gate1, lin1, ...``."""
    if t.shape[dim] % 2:
        raise ValueError(f"t: expected an even size along dim {dim}, got shape {tuple(t.shape)}")
    lin, gate = t.chunk(2, dim=dim)
    return torch.stack((gate, lin), dim=dim + 1).flatten(dim, dim + 1).contiguous()


def deinterleave_gate_linear(t: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Inverse of :func:`interleave_gate_linear` (for tests)."""
    pairs = t.unflatten(dim, (t.shape[dim] // 2, 2))
    g, lin = pairs.select(dim + 1, 0), pairs.select(dim + 1, 1)
    return torch.cat((lin, g), dim=dim).contiguous()


def pad_scale_k(scale: torch.Tensor, multiple: int = SCALE_K_MULTIPLE) -> torch.Tensor:
    """Zero-pad the last (K-group) dim of ``scale [..., N, K/32]`` to a multiple of ``multiple``."""
    pad = -scale.shape[-1] % multiple
    return torch.nn.functional.pad(scale, (0, pad)) if pad else scale


def hopper_value(tk: Any, data: torch.Tensor) -> Any:
    """``data [L, N, K/2]`` uint8 -> a triton_kernels FP4 ``Tensor`` ``[L, K, N]`` in ``HopperMXValueLayout``."""
    t = tk.tensor.wrap_torch_tensor(data.transpose(-2, -1), dtype=tk.tensor.FP4)
    return tk.tensor.convert_layout(t, tk.layout.HopperMXValueLayout, mx_axis=1)


def hopper_scale(tk: Any, scale: torch.Tensor, num_warps: int) -> Any:
    """``scale [L, N, K/32]`` ue8m0 bytes -> K-padded, transposed, ``HopperMXScaleLayout(num_warps)`` ``Tensor``."""
    s = pad_scale_k(scale.view(torch.uint8)).transpose(-2, -1)
    return tk.tensor.convert_layout(tk.tensor.wrap_torch_tensor(s), tk.layout.HopperMXScaleLayout,
                                    mx_axis=1, num_warps=num_warps)


def gemm1_rows(inputs: Any) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """(data, scale bytes, fp32 bias) of our w13 with gate/linear rows interleaved as vLLM's gpt-oss weights."""
    data = interleave_gate_linear(inputs.w13.data)
    scale = interleave_gate_linear(inputs.w13.scale.view(torch.uint8))
    bias = None if inputs.w13_bias is None else interleave_gate_linear(inputs.w13_bias.to(torch.float32), dim=1)
    return data, scale, bias


def to_hopper(tk: Any, data: torch.Tensor, scale: torch.Tensor, num_warps: tuple[int, ...]) -> tuple[Any, dict]:
    """(value Tensor, {num_warps: scale Tensor}) for one GEMM's weights."""
    return hopper_value(tk, data), {w: hopper_scale(tk, scale, w) for w in num_warps}
