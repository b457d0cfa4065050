"""FP4 quantization in plain torch (CPU or GPU), in FlashInfer's byte layout.

* e2m1 codes: 4 bits ``s e e m``; magnitudes ``[0, .5, 1, 1.5, 2, 3, 4, 6]``; two codes per
  ``uint8``, element ``2i`` in the low nibble, ``2i+1`` in the high nibble.
* MXFP4: blocks of 32 along the last dim, one ue8m0 scale byte per block
  (``scale = 2**(byte - 127)``).  As in TensorRT-LLM/FlashInfer's ``cvt_warp_fp16_to_fp4``
  with ``UE8M0_SF``, the scale is ``amax / 6`` rounded *up* to a power of two.
* NVFP4: blocks of 16, one e4m3 scale per block and an fp32 global scale ``gs``
  (FlashInfer convention ``gs = 448 * 6 / amax(x)``): ``sf = e4m3(gs * amax_block / 6)``,
  ``q = rne_e2m1(x * gs / sf)``, dequantized as ``q * sf / gs``.

Scales are returned in the *linear* layout ``[..., K // block]``; swizzled/shuffled layouts
that some kernels need are made by the backends with FlashInfer's own helpers.
Elementwise rounding is round-to-nearest-even with saturation at 6, like ``cvt.rn.satfinite``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
MXFP4_BLOCK = 32
NVFP4_BLOCK = 16

# Thresholds between neighbouring magnitudes; ties go to the even code.
_TIE_DOWN = (0.25, 1.25, 2.5, 5.0)  # lower neighbour has the even code
_TIE_UP = (0.75, 1.75, 3.5)  # upper neighbour has the even code


def e2m1_lut(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The 16 e2m1 code values (code 8 is -0.0)."""
    pos = torch.tensor(E2M1_VALUES, dtype=torch.float32)
    return torch.cat([pos, -pos]).to(device=device, dtype=dtype)


def _check_finite(name: str, x: torch.Tensor) -> None:
    if not torch.is_floating_point(x):
        raise ValueError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name}: expected finite values, found {bad} NaN/Inf element(s)")


def _check_last_dim(name: str, x: torch.Tensor, block: int) -> None:
    if x.dim() < 1 or x.shape[-1] % block:
        raise ValueError(
            f"{name}: expected the last dim to be a multiple of the block size {block}, got shape {tuple(x.shape)}"
        )


def e2m1_encode(v: torch.Tensor) -> torch.Tensor:
    """Round float values (already scaled) to e2m1 codes (uint8 in [0, 15]); RNE, saturating."""
    a = v.abs().float()
    code = torch.zeros_like(a, dtype=torch.uint8)
    for t in _TIE_DOWN:
        code += (a > t).to(torch.uint8)
    for t in _TIE_UP:
        code += (a >= t).to(torch.uint8)
    sign = (torch.signbit(v)).to(torch.uint8) << 3
    return code | sign


def e2m1_decode(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return e2m1_lut(codes.device, dtype)[codes.long()]


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """``[..., K]`` codes -> ``[..., K // 2]`` uint8, element 2i in the low nibble."""
    if codes.shape[-1] % 2:
        raise ValueError(f"codes: expected an even last dim, got shape {tuple(codes.shape)}")
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """``[..., K // 2]`` uint8 -> ``[..., K]`` codes."""
    if packed.dtype != torch.uint8:
        raise ValueError(f"packed: expected dtype torch.uint8, got {packed.dtype}")
    lo = packed & 0x0F
    hi = packed >> 4
    return torch.stack([lo, hi], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


# ---------------------------------------------------------------- MXFP4
def ue8m0_from_float(v: torch.Tensor) -> torch.Tensor:
    """Round positive fp32 values *up* to a power of two and return the ue8m0 byte (bias 127)."""
    v = v.float()
    mant, exp = torch.frexp(v)  # v = mant * 2**exp, mant in [0.5, 1)
    e = torch.where(mant == 0.5, exp - 1, exp)  # exact powers of two stay
    e = torch.where(v > 0, e, torch.full_like(e, -127))
    return (e + 127).clamp(0, 254).to(torch.uint8)


def ue8m0_to_float(b: torch.Tensor) -> torch.Tensor:
    return torch.exp2(b.to(torch.float32) - 127.0)


@dataclass(frozen=True)
class FP4Tensor:
    """Packed FP4 data with its block scales (linear layout) and optional global scale."""

    data: torch.Tensor  # uint8 [..., K // 2]
    scale: torch.Tensor  # uint8 (ue8m0) or float8_e4m3fn [..., K // block]
    block_size: int
    global_scale: Optional[torch.Tensor] = None  # NVFP4: fp32 scalar, or [E] (one per expert)

    @property
    def fmt(self) -> str:
        return "mxfp4" if self.block_size == MXFP4_BLOCK else "nvfp4"

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        if self.fmt == "mxfp4":
            return dequantize_mxfp4(self.data, self.scale, dtype)
        return dequantize_nvfp4(self.data, self.scale, self.global_scale, dtype)


def quantize_mxfp4(x: torch.Tensor) -> FP4Tensor:
    """Quantize ``x [..., K]`` to MXFP4 (block 32, ue8m0 scales)."""
    _check_finite("x", x)
    _check_last_dim("x", x, MXFP4_BLOCK)
    xb = _blocks(x.float(), MXFP4_BLOCK)
    amax = xb.abs().amax(dim=-1)
    sf = ue8m0_from_float(amax * torch.tensor(1.0 / 6.0, dtype=torch.float32))
    inv = torch.where(amax > 0, 1.0 / ue8m0_to_float(sf), torch.zeros_like(amax))
    codes = e2m1_encode(xb * inv.unsqueeze(-1)).reshape(x.shape)
    return FP4Tensor(pack_e2m1(codes), sf, MXFP4_BLOCK)


def dequantize_mxfp4(data: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if scale.dtype != torch.uint8:
        scale = scale.view(torch.uint8)
    vals = e2m1_decode(unpack_e2m1(data))
    k = vals.shape[-1]
    if scale.shape[-1] * MXFP4_BLOCK != k or scale.shape[:-1] != vals.shape[:-1]:
        raise ValueError(
            f"scale: expected shape {tuple(vals.shape[:-1]) + (k // MXFP4_BLOCK,)}, got {tuple(scale.shape)}"
        )
    out = _blocks(vals, MXFP4_BLOCK) * ue8m0_to_float(scale).unsqueeze(-1)
    return out.reshape(vals.shape).to(dtype)


# ---------------------------------------------------------------- NVFP4
def nvfp4_global_scale(x: torch.Tensor) -> torch.Tensor:
    """FlashInfer's convention: ``448 * 6 / amax(x)`` as an fp32 scalar tensor."""
    amax = x.abs().max().float().clamp(min=1e-12)
    return (E4M3_MAX * E2M1_MAX) / amax


def quantize_nvfp4(x: torch.Tensor, global_scale: Optional[torch.Tensor] = None) -> FP4Tensor:
    """Quantize ``x [..., K]`` to NVFP4 (block 16, e4m3 scales, fp32 global scale)."""
    _check_finite("x", x)
    _check_last_dim("x", x, NVFP4_BLOCK)
    gs = nvfp4_global_scale(x) if global_scale is None else torch.as_tensor(global_scale, dtype=torch.float32)
    gs = gs.to(x.device)
    xb = _blocks(x.float(), NVFP4_BLOCK)
    amax = xb.abs().amax(dim=-1)
    sf_f = (gs * (amax * torch.tensor(1.0 / 6.0, dtype=torch.float32))).clamp(max=E4M3_MAX)
    sf = sf_f.to(torch.float8_e4m3fn)
    sf_back = sf.float()
    out_scale = torch.where(sf_back != 0, gs / sf_back, torch.zeros_like(sf_back))
    codes = e2m1_encode(xb * out_scale.unsqueeze(-1)).reshape(x.shape)
    return FP4Tensor(pack_e2m1(codes), sf, NVFP4_BLOCK, gs.reshape(()))


def dequantize_nvfp4(
    data: torch.Tensor, scale: torch.Tensor, global_scale: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    if scale.dtype != torch.float8_e4m3fn:
        raise ValueError(f"scale: expected dtype torch.float8_e4m3fn, got {scale.dtype}")
    vals = e2m1_decode(unpack_e2m1(data))
    gs = global_scale.float()
    if gs.numel() > 1:  # one global scale per leading index (per expert)
        gs = gs.reshape(-1, *([1] * (scale.dim() - 1)))
    out = _blocks(vals, NVFP4_BLOCK) * (scale.float() / gs).unsqueeze(-1)
    return out.reshape(vals.shape).to(dtype)


def quantize_fp4(x: torch.Tensor, fmt: str) -> FP4Tensor:
    fmt = str(getattr(fmt, "value", fmt)).lower()
    if fmt == "mxfp4":
        return quantize_mxfp4(x)
    if fmt == "nvfp4":
        return quantize_nvfp4(x)
    raise ValueError(f"fmt: expected 'mxfp4' or 'nvfp4', got {fmt!r}")
