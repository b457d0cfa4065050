"""Float32 reference of the W4A8 MoE (issue #25): the routed MoE of :mod:`.reference` with the activations and
the weights quantized exactly as the ``triton_w4a8`` kernels quantize them, so that a W4A8 output is compared with
what its own arithmetic should give (up to summation order and the final bf16 rounding).

* Activations, per row: ``scale = amax(|row|) / 448`` (a zero row: 1), ``q = e4m3_rn(row * inv)`` with
  ``inv = 1 / scale`` (fp32, rounded once: one division per row, as the kernel does)
  (:func:`quantize_rows_e4m3`): the hidden states per token for gemm1, gemm2's input per (token, expert) row.
* Weights (:func:`fold_mxfp4_e4m3`): ``E[n]`` = the largest ue8m0 scale byte of row ``n`` of an expert's matrix;
  code value ``v`` in a block with scale byte ``s`` becomes ``e4m3_rn(v * 2**max(s - E[n], -126))``, and the
  matrix is applied as ``(x8 @ w8.T) * 2**(E[n] - 127)``.
* gemm1: ``(x8[tok] @ w13_8.T) * 2**(E13 - 127) * x_scale[tok] + b13`` -> gated activation -> rounded to bf16 (the
  kernel stores the intermediate in bf16) -> quantized per row; gemm2 the same with ``w2`` and the row scales, plus
  ``b2``, times the routing weight, summed over top-k.

``torch.float8_e4m3fn`` conversion rounds to nearest even; the values here never exceed 448 (they are clamped),
so its lack of saturation does not matter.
"""

from __future__ import annotations

import torch

from .inputs import MoEInputs
from .quant import E4M3_MAX, e2m1_decode, unpack_e2m1
from .reference import _swiglu_params, gated_activation

#: below this exponent 2**d the folded value rounds to 0 in e4m3 whatever the code (6 * 2**-126 << 2**-10)
_MIN_FOLD_EXP = -126


def e4m3_round(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32) rounded to the nearest e4m3 value (ties to even), clamped to +-448, as float32."""
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)


def quantize_rows_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [R, C]`` -> (e4m3 values as float32 ``[R, C]``, fp32 row scales ``[R]``): ``x ~ q * scale[:, None]``."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"x: expected a 2-d torch.Tensor, got {getattr(x, 'shape', type(x).__name__)}")
    xf = x.to(torch.float32)
    amax = xf.abs().amax(dim=1) if xf.shape[1] else torch.zeros(xf.shape[0], device=xf.device)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    inv = 1.0 / scale  # one IEEE fp32 division per row, then a rounded multiply per element (the kernel's order)
    return e4m3_round(xf * inv[:, None]), scale


def row_emax(scale: torch.Tensor) -> torch.Tensor:
    """The largest ue8m0 scale byte of each row: ``scale [..., rows, K/32]`` (uint8 or float8_e8m0fnu) -> uint8
    ``[..., rows]``."""
    s = scale.view(torch.uint8) if scale.dtype != torch.uint8 else scale
    if s.dim() < 1 or s.shape[-1] == 0:
        raise ValueError(f"scale: expected [..., rows, K/32] bytes with K/32 >= 1, got {tuple(scale.shape)}")
    return s.amax(dim=-1).contiguous()


def fold_mxfp4_e4m3(data: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One MXFP4 matrix ``data [N, K/2]`` (packed e2m1), ``scale [N, K/32]`` -> (the folded e4m3 weights as float32
    ``[N, K]``, ``E`` uint8 ``[N]``); the matrix is ``w8 * 2**(E - 127)`` per row, up to the fold's rounding."""
    if data.dim() != 2 or tuple(scale.shape) != (data.shape[0], data.shape[1] * 2 // 32):
        raise ValueError(f"scale: expected [{data.shape[0]}, {data.shape[-1] * 2 // 32}] for data "
                         f"{tuple(data.shape)}, got {tuple(scale.shape)}")
    f, emax = fold_factors(scale)
    v = e2m1_decode(unpack_e2m1(data), torch.float32)
    return e4m3_round(v * f.repeat_interleave(32, dim=1)), emax.to(torch.uint8)


def fold_factors(scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ue8m0 scale bytes ``[..., N, K/32]`` (uint8 or float8_e8m0fnu) -> (each block's fold factor
    ``2**max(s - E[n], -126)`` as float32 ``[..., N, K/32]``, ``E`` int32 ``[..., N]``: the row's largest byte).  The
    fold of :func:`fold_mxfp4_e4m3` and of the p8 layout's tables (``backends.triton.p8_layout.fold_tables``)."""
    s = (scale.view(torch.uint8) if scale.dtype != torch.uint8 else scale).to(torch.int32)
    emax = s.amax(dim=-1)
    return torch.pow(2.0, (s - emax[..., None]).clamp(min=_MIN_FOLD_EXP).to(torch.float32)), emax


def _unscale(emax: torch.Tensor) -> torch.Tensor:
    return torch.pow(2.0, emax.to(torch.float32) - 127.0)


def _folded(inputs: MoEInputs, which: str, e: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = ("w4a8", which, e)
    cache = inputs._dequant_cache
    if key not in cache:
        t = getattr(inputs, which)
        w8, emax = fold_mxfp4_e4m3(t.data[e], t.scale[e])
        cache[key] = (w8, _unscale(emax))
    return cache[key]


def reference_w4a8_moe(inputs: MoEInputs) -> torch.Tensor:
    """The W4A8 MoE of ``inputs`` (MXFP4 weights, bf16 activations) in float32 ``[T, H]``, quantized as the
    ``triton_w4a8`` kernels quantize (see the module docstring)."""
    c = inputs.case
    if c.weight_format.value != "mxfp4":
        raise ValueError(f"inputs: the W4A8 reference takes MXFP4 weights, not {c.weight_format.value}")
    x = inputs.hidden_states
    t, h = x.shape
    out = torch.zeros((t, h), dtype=torch.float32, device=x.device)
    x8, xs = quantize_rows_e4m3(x)
    flat_e = inputs.local_topk_ids.reshape(-1)
    flat_tok = torch.arange(t, device=x.device).repeat_interleave(c.top_k)
    flat_w = inputs.topk_weights.reshape(-1).to(torch.float32)
    for e in torch.unique(flat_e[flat_e >= 0]).tolist():
        sel = flat_e == e
        tok, wts = flat_tok[sel], flat_w[sel]
        w13, u13 = _folded(inputs, "w13", e)
        w2, u2 = _folded(inputs, "w2", e)
        hh = (x8[tok] @ w13.T) * u13[None, :] * xs[tok][:, None]
        if inputs.w13_bias is not None:
            hh = hh + inputs.w13_bias[e].to(torch.float32)
        a = gated_activation(hh, c.activation, *_swiglu_params(inputs, e)).to(torch.bfloat16)
        a8, a_s = quantize_rows_e4m3(a)
        y = (a8 @ w2.T) * u2[None, :] * a_s[:, None]
        if inputs.w2_bias is not None:
            y = y + inputs.w2_bias[e].to(torch.float32)
        out.index_add_(0, tok, y * wts.unsqueeze(-1))
    return out
