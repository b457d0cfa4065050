"""fp4moe-diag: profiling and diagnostics for FlashInfer's FP4 fused-MoE kernels."""

from .problem.case import ActivationFormat, GatedActivation, MoECase, RoutingMethod, WeightFormat
from .problem.inputs import MoEInputs, build_inputs
from .problem.routing import pack_topk, route, unpack_topk

__version__ = "0.1.0"

__all__ = [
    "ActivationFormat",
    "GatedActivation",
    "MoECase",
    "MoEInputs",
    "RoutingMethod",
    "WeightFormat",
    "build_inputs",
    "pack_topk",
    "route",
    "unpack_topk",
]
