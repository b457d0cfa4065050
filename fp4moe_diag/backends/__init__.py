"""Kernel backends, looked up by name in a lazy registry (importing this package imports no backend, no
flashinfer and no triton).

========================  ==================================================  ===========================
name                      what                                                module
========================  ==================================================  ===========================
``reference``             float32 torch reference of the same quantized MoE   :mod:`.torch_reference`
``cutlass``               FlashInfer ``cutlass_fused_moe`` (SM90 / SM100)     :mod:`.flashinfer.cutlass`
``cutlass_autotune``      the tactic FlashInfer's own AutoTuner picks there   :mod:`.flashinfer.autotuned`
``cutlass_w4a16``         FlashInfer 0.7 unified ``CutlassW4A16Runner`` (SM90) :mod:`.flashinfer.unified`
``cutlass_humming``       ... ``CutlassHummingRunner`` (MXFP4 x FP8, SM90)    :mod:`.flashinfer.unified`
``cutile_mxfp4``          ... ``CuTileMxfp4Bf16Runner`` (cuTile)              :mod:`.flashinfer.unified`
``frost_low_latency``     ... ``FrostLowLatencyRunner`` (T <= 8)              :mod:`.flashinfer.unified`
``trtllm``                FlashInfer trtllm-gen routed MoE (SM100 / SM103)    :mod:`.flashinfer.trtllm`
``triton``                our own Triton MXFP4 MoE kernels                    :mod:`.triton`
``triton_w4a8``           the same with FP8 activations and FP8 MMAs (W4A8)   :mod:`.triton.backend_w4a8`
``triton_kernels``        OpenAI triton_kernels matmul_ogs, as vLLM on SM90   :mod:`.oai_triton_kernels`
========================  ==================================================  ===========================
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Backend, Support, Tactic

#: backend name -> "module:Class" (relative to this package)
REGISTRY: dict[str, str] = {
    "reference": ".torch_reference:ReferenceBackend",
    "cutlass": ".flashinfer.cutlass:CutlassBackend",
    "cutlass_autotune": ".flashinfer.autotuned:CutlassAutotuneBackend",
    "cutlass_w4a16": ".flashinfer.unified:CutlassW4A16Backend",
    "cutlass_humming": ".flashinfer.unified:CutlassHummingBackend",
    "cutile_mxfp4": ".flashinfer.unified:CuTileMxfp4Backend",
    "frost_low_latency": ".flashinfer.unified:FrostLowLatencyBackend",
    "trtllm": ".flashinfer.trtllm:TrtllmGenBackend",
    "triton": ".triton.backend:TritonMXFP4Backend",
    "triton_w4a8": ".triton.backend_w4a8:TritonW4A8Backend",
    "triton_kernels": ".oai_triton_kernels.backend:TritonKernelsBackend",
}


def backend_class(name: str) -> type[Backend]:
    if name not in REGISTRY:
        raise ValueError(f"backend: unknown backend {name!r}; expected one of {sorted(REGISTRY)}")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module, __name__), cls)


def get_backend(name: str, **kwargs: Any) -> Backend:
    """A new instance of the backend registered as ``name`` (its module is imported now)."""
    return backend_class(name)(**kwargs)


def available_backends() -> list[str]:
    """Every registered backend name (whether it supports this machine is :meth:`Backend.supports`)."""
    return sorted(REGISTRY)


__all__ = ["REGISTRY", "Backend", "Support", "Tactic", "available_backends", "backend_class", "get_backend"]
