"""Is FlashInfer importable here, which version, which MoE entry points (:func:`flashinfer_status`)."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class FlashInferStatus:
    importable: bool
    version: Optional[str]
    reason: str = ""
    has_routed_moe: bool = False
    has_cutlass_fused_moe: bool = False
    has_sm90_interleave: bool = False
    routed_signature: Optional[str] = None


def flashinfer_status() -> FlashInferStatus:
    """Import flashinfer lazily and describe what it offers; never raises."""
    try:
        fi = importlib.import_module("flashinfer")
    except Exception as e:  # ImportError, or a CUDA/torch mismatch at import
        return FlashInferStatus(False, None, f"flashinfer not importable: {type(e).__name__}: {e}")
    version = getattr(fi, "__version__", None)
    try:
        fm = importlib.import_module("flashinfer.fused_moe")
    except Exception as e:
        return FlashInferStatus(True, version, f"flashinfer.fused_moe not importable: {e}")
    routed = getattr(fm, "trtllm_fp4_block_scale_routed_moe", None) or getattr(
        fi, "trtllm_fp4_block_scale_routed_moe", None
    )
    sig = None
    if routed is not None:
        try:
            sig = str(inspect.signature(routed))
        except (TypeError, ValueError):
            sig = None
    return FlashInferStatus(
        True,
        version,
        "",
        has_routed_moe=routed is not None,
        has_cutlass_fused_moe=hasattr(fm, "cutlass_fused_moe"),
        has_sm90_interleave=hasattr(fm, "interleave_moe_weights_for_sm90_mixed_gemm"),
        routed_signature=sig,
    )

