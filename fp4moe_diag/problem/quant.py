"""FP4 quantization in plain torch (CPU or GPU), in FlashInfer's byte layout.

* e2m1 codes: 4 bits ``s e e m``; magnitudes ``[0, .5, 1, 1.5, 2, 3, 4, 6]``; two codes per
  ``uint8``, element ``2i`` in the low nibble, ``2i+1`` in the high nibble.
* MXFP4: blocks of 32 along the last dim, one ue8m0 scale byte per block
  (``scale = 2**(byte - 127)``; byte 0xFF is NaN, as in the OCP MX spec v1.0, and makes its whole block NaN).
  As in TensorRT-LLM/FlashInfer's ``cvt_warp_fp16_to_fp4`` with ``UE8M0_SF``, the scale is ``amax / 6``
  rounded *up* to a power of two, at most ``2**125`` (:data:`MXFP4_MAX_SCALE_EXP`): a block with
  ``amax > 6 * 2**125`` (float32 values near their maximum) would round up to ``2**126``, where codes 4 and 6
  dequantize past the float32 range (``inf``); it gets ``2**125``, the OCP spec's own shared exponent for it
  (``floor(log2(amax)) - 2``), and its elements saturate at 6, so finite inputs stay finite.
* NVFP4: blocks of 16, one e4m3 scale per block and an fp32 global scale ``gs``
  (FlashInfer convention ``gs = 448 * 6 / amax(x)``): ``sf = e4m3(gs * amax_block / 6)``,
  ``q = rne_e2m1(x * gs / sf)``, dequantized as ``q * sf / gs``.

Scales are returned in the *linear* layout ``[..., K // block]``; swizzled/shuffled layouts
that some kernels need are made by the backends with FlashInfer's own helpers.
Elementwise rounding is round-to-nearest-even with saturation at 6, like ``cvt.rn.satfinite``.

Every public function raises a ``ValueError`` naming the argument for an input it cannot handle: not a
``torch.Tensor`` (numpy arrays included), a meta tensor, an empty tensor, an unsupported dtype (fp8 or integer
values to quantize, a float32 "scale" for the byte scales), non-finite values, a global scale that is NaN, inf,
0 or negative, and mismatched shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
MXFP4_BLOCK = 32
#: the largest MXFP4 scale exponent the quantizer writes: 6 * 2**125 is finite in float32, 6 * 2**126 is not
MXFP4_MAX_SCALE_EXP = 125
#: the ue8m0 byte that encodes NaN (OCP MX spec); 0..254 are 2**(byte - 127)
UE8M0_NAN = 0xFF
NVFP4_BLOCK = 16

# Thresholds between neighbouring magnitudes; ties go to the even code.
_TIE_DOWN = (0.25, 1.25, 2.5, 5.0)  # lower neighbour has the even code
_TIE_UP = (0.75, 1.75, 3.5)  # upper neighbour has the even code


def e2m1_lut(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The 16 e2m1 code values (code 8 is -0.0)."""
    pos = torch.tensor(E2M1_VALUES, dtype=torch.float32)
    return torch.cat([pos, -pos]).to(device=device, dtype=dtype)


#: dtypes the quantizers take as values (fp8 and fp4 inputs are already quantized)
VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_tensor(name: str, x: object, non_empty: bool = True) -> torch.Tensor:
    """``x`` must be a torch.Tensor with data (not meta), non-empty unless told otherwise."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__module__}.{type(x).__name__}")
    if x.is_meta:
        raise ValueError(f"{name}: a meta tensor has no data to quantize; expected a cpu or cuda tensor")
    if non_empty and x.numel() == 0:
        raise ValueError(f"{name}: expected a non-empty tensor, got shape {tuple(x.shape)}")
    return x


def _check_finite(name: str, x: torch.Tensor) -> None:
    _check_tensor(name, x)
    if x.dtype not in VALUE_DTYPES:
        raise ValueError(f"{name}: expected a floating-point (float32/float16/bfloat16/float64) tensor, got dtype {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name}: expected finite values, found {bad} NaN/Inf element(s)")
    if x.dtype == torch.float64 and float(x.abs().max()) > torch.finfo(torch.float32).max:
        raise ValueError(f"{name}: values beyond the float32 range ({float(x.abs().max()):.3g}) cannot be quantized")


def _check_last_dim(name: str, x: torch.Tensor, block: int) -> None:
    if x.dim() < 1 or x.shape[-1] % block:
        raise ValueError(
            f"{name}: expected the last dim to be a multiple of the block size {block}, got shape {tuple(x.shape)}"
        )


def _check_global_scale(name: str, gs: object, allow_vector: bool) -> torch.Tensor:
    """A NVFP4 global scale: a number or a float tensor (scalar, or [E] when ``allow_vector``), finite and > 0."""
    if isinstance(gs, (int, float)) and not isinstance(gs, bool):
        gs = torch.tensor(float(gs), dtype=torch.float32)
    _check_tensor(name, gs)
    assert isinstance(gs, torch.Tensor)
    if not torch.is_floating_point(gs) or gs.dtype not in VALUE_DTYPES:
        raise ValueError(f"{name}: expected a float32 tensor, got dtype {gs.dtype}")
    if gs.numel() != 1 and not (allow_vector and gs.dim() == 1):
        raise ValueError(f"{name}: expected a scalar{' or one per expert [E]' if allow_vector else ''}, "
                         f"got shape {tuple(gs.shape)}")
    g = gs.float()
    if not bool((torch.isfinite(g) & (g > 0)).all()):
        raise ValueError(f"{name}: expected finite values > 0 (FlashInfer's 448 * 6 / amax), got "
                         f"{g.flatten()[:4].tolist()}")
    return g


def e2m1_encode(v: torch.Tensor) -> torch.Tensor:
    """Round float values (already scaled) to e2m1 codes (uint8 in [0, 15]); RNE, saturating."""
    _check_tensor("v", v, non_empty=False)
    if not torch.is_floating_point(v):
        raise ValueError(f"v: expected a floating-point tensor, got dtype {v.dtype}")
    a = v.abs().float()
    code = torch.zeros_like(a, dtype=torch.uint8)
    for t in _TIE_DOWN:
        code += (a > t).to(torch.uint8)
    for t in _TIE_UP:
        code += (a >= t).to(torch.uint8)
    sign = (torch.signbit(v)).to(torch.uint8) << 3
    return code | sign


def e2m1_decode(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    _check_tensor("codes", codes, non_empty=False)
    if codes.dtype != torch.uint8 or (codes.numel() and int(codes.max()) > 15):
        raise ValueError(f"codes: expected uint8 e2m1 codes in [0, 15], got dtype {codes.dtype}")
    return e2m1_lut(codes.device, dtype)[codes.long()]


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """``[..., K]`` codes -> ``[..., K // 2]`` uint8, element 2i in the low nibble."""
    _check_tensor("codes", codes, non_empty=False)
    if codes.dtype != torch.uint8 or (codes.numel() and int(codes.max()) > 15):
        raise ValueError(f"codes: expected uint8 e2m1 codes in [0, 15], got dtype {codes.dtype}")
    if codes.dim() < 1 or codes.shape[-1] % 2:
        raise ValueError(f"codes: expected an even last dim, got shape {tuple(codes.shape)}")
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """``[..., K // 2]`` uint8 -> ``[..., K]`` codes."""
    _check_tensor("packed", packed, non_empty=False)
    if packed.dim() < 1:
        raise ValueError("packed: expected at least one dim, got a 0-d tensor")
    if packed.dtype != torch.uint8:
        raise ValueError(f"packed: expected dtype torch.uint8, got {packed.dtype}")
    lo = packed & 0x0F
    hi = packed >> 4
    return torch.stack([lo, hi], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


# ---------------------------------------------------------------- MXFP4
def ue8m0_from_float(v: torch.Tensor) -> torch.Tensor:
    """Round fp32 values >= 0 *up* to a power of two and return the ue8m0 byte (bias 127).

    0 (and values below 2**-127) give byte 0; NaN, inf, negative values and values above 2**127 (no ue8m0
    byte holds them) raise ``ValueError``."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = torch.tensor(float(v), dtype=torch.float32)
    _check_tensor("v", v, non_empty=False)
    if not torch.is_floating_point(v):
        raise ValueError(f"v: expected a floating-point tensor, got dtype {v.dtype}")
    v = v.float()
    if v.numel():
        bad = ~torch.isfinite(v) | (v < 0) | (v > 2.0**127)
        if bool(bad.any()):
            raise ValueError(f"v: expected finite values in [0, 2**127] (a ue8m0 scale), got "
                             f"{v[bad].flatten()[:4].tolist()}")
    mant, exp = torch.frexp(v)  # v = mant * 2**exp, mant in [0.5, 1)
    e = torch.where(mant == 0.5, exp - 1, exp)  # exact powers of two stay
    e = torch.where(v > 0, e, torch.full_like(e, -127))
    return (e + 127).clamp(0, 254).to(torch.uint8)


def ue8m0_to_float(b: torch.Tensor) -> torch.Tensor:
    """ue8m0 bytes -> float32 ``2**(byte - 127)``; byte 0xFF -> NaN (OCP MX spec)."""
    f = torch.exp2(b.to(torch.float32) - 127.0)
    return torch.where(b == UE8M0_NAN, torch.full_like(f, float("nan")), f)


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
        if self.global_scale is None:
            raise ValueError("global_scale: an NVFP4 tensor needs its global scale to be dequantized, got None")
        return dequantize_nvfp4(self.data, self.scale, self.global_scale, dtype)


def quantize_mxfp4(x: torch.Tensor) -> FP4Tensor:
    """Quantize ``x [..., K]`` to MXFP4 (block 32, ue8m0 scales); every finite input dequantizes finite (the
    scale stops at ``2**125`` and codes saturate at 6, see the module docstring)."""
    _check_finite("x", x)
    _check_last_dim("x", x, MXFP4_BLOCK)
    xb = _blocks(x.float(), MXFP4_BLOCK)
    amax = xb.abs().amax(dim=-1)
    sf = ue8m0_from_float(amax * torch.tensor(1.0 / 6.0, dtype=torch.float32)).clamp(max=127 + MXFP4_MAX_SCALE_EXP)
    inv = torch.where(amax > 0, 1.0 / ue8m0_to_float(sf), torch.zeros_like(amax))
    codes = e2m1_encode(xb * inv.unsqueeze(-1)).reshape(x.shape)
    return FP4Tensor(pack_e2m1(codes), sf, MXFP4_BLOCK)


#: byte dtypes an MXFP4 scale may have: ue8m0 bytes, or vLLM's float8_e4m3fn view of them
_UE8M0_DTYPES = tuple(d for d in (torch.uint8, torch.float8_e4m3fn, getattr(torch, "float8_e8m0fnu", None)) if d)


def dequantize_mxfp4(data: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    _check_tensor("data", data)
    _check_tensor("scale", scale)
    if scale.dtype not in _UE8M0_DTYPES:
        raise ValueError(f"scale: expected ue8m0 bytes (uint8, or a float8_e4m3fn view of them), got dtype "
                         f"{scale.dtype}; a float scale is not reinterpreted")
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
    _check_finite("x", x)
    amax = x.abs().max().float().clamp(min=1e-12)
    return (E4M3_MAX * E2M1_MAX) / amax


def quantize_nvfp4(x: torch.Tensor, global_scale: Optional[torch.Tensor] = None) -> FP4Tensor:
    """Quantize ``x [..., K]`` to NVFP4 (block 16, e4m3 scales, fp32 global scale)."""
    _check_finite("x", x)
    _check_last_dim("x", x, NVFP4_BLOCK)
    gs = nvfp4_global_scale(x) if global_scale is None else _check_global_scale("global_scale", global_scale, False)
    gs = gs.to(x.device).reshape(())
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
    _check_tensor("data", data)
    _check_tensor("scale", scale)
    if scale.dtype != torch.float8_e4m3fn:
        raise ValueError(f"scale: expected dtype torch.float8_e4m3fn, got {scale.dtype}")
    gs = _check_global_scale("global_scale", global_scale, True).to(scale.device)
    vals = e2m1_decode(unpack_e2m1(data))
    k = vals.shape[-1]
    if scale.shape[-1] * NVFP4_BLOCK != k or scale.shape[:-1] != vals.shape[:-1]:
        raise ValueError(
            f"scale: expected shape {tuple(vals.shape[:-1]) + (k // NVFP4_BLOCK,)}, got {tuple(scale.shape)}"
        )
    if gs.numel() > 1:  # one global scale per leading index (per expert)
        if scale.dim() < 2 or gs.numel() != scale.shape[0]:
            raise ValueError(f"global_scale: expected a scalar or one per expert [{scale.shape[0]}], "
                             f"got shape {tuple(gs.shape)}")
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
