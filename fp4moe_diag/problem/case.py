"""The case model: one frozen dataclass that describes a routed FP4 MoE call.

A :class:`MoECase` holds everything `flashinfer.trtllm_fp4_block_scale_routed_moe`
and `flashinfer.fused_moe.cutlass_fused_moe` need to know about the problem
(sizes, routing, expert parallelism, quantization formats, SwiGLU variant),
but no tensors.  Tensors are made from a case by :mod:`fp4moe_diag.problem.inputs`.
Every field is validated in ``__post_init__``; a bad field raises a
``ValueError`` that names it and says what was expected.  Types are strict: int fields take ints
(``numbers.Integral``, not bools), float fields finite real numbers (not bools, not strings), bool
fields only ``True``/``False``; :meth:`MoECase.from_record` additionally reads the strings of a CSV
(``'true'``/``'false'``, ``'2'``, ``'1.5'``).  Sizes are bounded by what the kernels can index
(:data:`MAX_DIM`); how much memory a case's tensors take is checked by
:func:`fp4moe_diag.problem.inputs.build_inputs` (``FP4MOE_MAX_INPUT_BYTES``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any, Optional


class RoutingMethod(IntEnum):
    """FlashInfer's ``RoutingMethodType`` values (flashinfer/fused_moe/core.py)."""

    Default = 0  # Softmax -> TopK
    Renormalize = 1  # TopK -> Softmax
    DeepSeekV3 = 2  # Sigmoid -> bias -> top2 per group -> topk groups -> topk experts
    Llama4 = 3  # Top1 -> Sigmoid
    RenormalizeNaive = 4  # Softmax -> TopK -> Renormalize
    TopK = 5  # TopK only, no softmax

    @classmethod
    def parse(cls, value: Any) -> "RoutingMethod":
        """Accept an enum, an int or a (case-insensitive) name."""
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            raise ValueError(f"routing_method: expected one of {cls.names()}, got {value!r}")
        if isinstance(value, int):
            try:
                return cls(value)
            except ValueError:
                raise ValueError(
                    f"routing_method: unknown routing method {value!r}; expected one of "
                    f"{[int(m) for m in cls]} ({cls.names()})"
                ) from None
        if isinstance(value, str):
            key = value.strip()
            if key.lstrip("-").isdigit():
                return cls.parse(int(key))
            for m in cls:
                if m.name.lower() == key.lower():
                    return m
        raise ValueError(f"routing_method: unknown routing method {value!r}; expected one of {cls.names()}")

    @classmethod
    def names(cls) -> list[str]:
        return [m.name for m in cls]


def _parse_str_enum(cls: Any, value: Any, field: str) -> Any:
    """``cls(value)`` for a str-valued Enum, case-insensitive; ValueError naming ``field`` otherwise."""
    if isinstance(value, cls):
        return value
    try:
        return cls(str(value).lower())
    except ValueError:
        raise ValueError(f"{field}: expected one of {[f.value for f in cls]}, got {value!r}") from None


class WeightFormat(str, Enum):
    """FP4 weight formats: MXFP4 (block 32, ue8m0 scales) and NVFP4 (block 16, e4m3 scales + fp32 global)."""

    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"

    @property
    def block_size(self) -> int:
        return 32 if self is WeightFormat.MXFP4 else 16

    @classmethod
    def parse(cls, value: Any) -> "WeightFormat":
        return _parse_str_enum(cls, value, "weight_format")


class ActivationFormat(str, Enum):
    """Activation (hidden-state) formats the backends take."""

    BF16 = "bf16"
    MXFP8 = "mxfp8"

    @classmethod
    def parse(cls, value: Any) -> "ActivationFormat":
        return _parse_str_enum(cls, value, "activation_format")


class GatedActivation(str, Enum):
    """SwiGLU variants.

    ``swiglu``: ``silu(gate) * up``.
    ``swiglu_oai`` (gpt-oss, FlashInfer's ``SwigluBias``):
    ``g = min(gate, limit); (g * sigmoid(alpha * g)) * (clamp(up, -limit, limit) + beta)``.
    """

    SWIGLU = "swiglu"
    SWIGLU_OAI = "swiglu_oai"

    @classmethod
    def parse(cls, value: Any) -> "GatedActivation":
        return _parse_str_enum(cls, value, "activation")


#: largest size of one dimension (kernels take int32 sizes)
MAX_DIM = 2**31 - 1
#: seeds are stored in an Int64 column and handed to torch.Generator.manual_seed
MAX_SEED = 2**63 - 1


def _require_int(name: str, value: Any, minimum: int, maximum: int = MAX_DIM) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r} ({type(value).__name__})")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{name}: expected an int <= {maximum}, got {value}")
    return value


def _require_float(name: str, value: Any) -> float:
    """A finite real number (int or float, not bool, not str) -> float; ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a finite float, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name}: expected a finite float, got {v}")
    return v


def _require_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r} ({type(value).__name__})")
    return value


_INT_FIELDS = ("num_tokens", "hidden_size", "intermediate_size", "num_experts", "top_k", "local_num_experts",
               "local_expert_offset", "n_group", "topk_group", "seed")
_FLOAT_FIELDS = ("routed_scaling_factor", "swiglu_alpha", "swiglu_beta", "swiglu_limit")
_BOOL_FIELDS = ("has_bias",)


def _record_int(name: str, v: Any) -> Any:
    """A record value for an int field: ints, integral floats (pandas) and integer strings; else ValueError."""
    if isinstance(v, str):
        t = v.strip()
        if t.lstrip("+-").isdigit():
            return int(t)
        raise ValueError(f"{name}: expected an integer, got {v!r}")
    if isinstance(v, numbers.Real) and not isinstance(v, (bool, numbers.Integral)):
        f = float(v)
        if not (math.isfinite(f) and f.is_integer()):
            raise ValueError(f"{name}: expected an integer, got {v!r}")
        return int(f)
    return v  # ints pass, anything else is refused by __post_init__ with the field's name


def _record_float(name: str, v: Any) -> Any:
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise ValueError(f"{name}: expected a float, got {v!r}") from None
    return v


def _record_bool(name: str, v: Any) -> Any:
    if isinstance(v, str):
        t = v.strip().lower()
        if t in ("true", "false"):
            return t == "true"
        raise ValueError(f"{name}: expected True/False or the strings 'true'/'false', got {v!r}")
    import numpy as np  # noqa: PLC0415

    if isinstance(v, np.bool_):  # from a DataFrame
        return bool(v)
    return v


@dataclass(frozen=True)
class MoECase:
    """One routed FP4 MoE problem.

    Sizes follow FlashInfer's naming: ``hidden_size`` (K of gemm1, N of gemm2),
    ``intermediate_size`` (I; gemm1 produces 2*I rows: [0, I) linear/up, [I, 2I) gate),
    ``num_experts`` (global), ``local_num_experts`` experts starting at
    ``local_expert_offset`` live on this rank (expert parallelism).
    """

    num_tokens: int
    hidden_size: int
    intermediate_size: int
    num_experts: int
    top_k: int
    local_num_experts: Optional[int] = None
    local_expert_offset: int = 0
    routing_method: RoutingMethod = RoutingMethod.Renormalize
    n_group: Optional[int] = None
    topk_group: Optional[int] = None
    routed_scaling_factor: Optional[float] = None
    weight_format: WeightFormat = WeightFormat.MXFP4
    activation_format: ActivationFormat = ActivationFormat.BF16
    activation: GatedActivation = GatedActivation.SWIGLU_OAI
    has_bias: bool = True
    swiglu_alpha: Optional[float] = 1.702
    swiglu_beta: Optional[float] = 1.0
    swiglu_limit: Optional[float] = 7.0
    seed: int = 0
    model: str = ""

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen dataclass)
        for name in ("num_tokens", "hidden_size", "intermediate_size", "num_experts", "top_k"):
            set_(name, _require_int(name, getattr(self, name), 1))
        if self.local_num_experts is None:
            set_("local_num_experts", self.num_experts)
        set_("local_num_experts", _require_int("local_num_experts", self.local_num_experts, 1))
        set_("local_expert_offset", _require_int("local_expert_offset", self.local_expert_offset, 0))
        set_("seed", _require_int("seed", self.seed, 0, MAX_SEED))
        for name in _BOOL_FIELDS:
            _require_bool(name, getattr(self, name))
        for name in _FLOAT_FIELDS:
            if getattr(self, name) is not None:
                set_(name, _require_float(name, getattr(self, name)))
        if not isinstance(self.model, str):
            raise ValueError(f"model: expected a str, got {self.model!r} ({type(self.model).__name__})")
        set_("routing_method", RoutingMethod.parse(self.routing_method))
        set_("weight_format", WeightFormat.parse(self.weight_format))
        set_("activation_format", ActivationFormat.parse(self.activation_format))
        set_("activation", GatedActivation.parse(self.activation))

        if self.num_experts > 65536:
            raise ValueError(
                f"num_experts: expected <= 65536 (expert ids are packed into 16 bits), got {self.num_experts}"
            )
        if self.local_expert_offset + self.local_num_experts > self.num_experts:
            raise ValueError(
                "local_expert_offset + local_num_experts: expected <= num_experts "
                f"({self.num_experts}), got {self.local_expert_offset} + {self.local_num_experts}"
            )
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k: expected <= num_experts ({self.num_experts}), got {self.top_k}")
        block = self.weight_format.block_size
        if self.hidden_size % block:
            raise ValueError(
                f"hidden_size: expected a multiple of the {self.weight_format.value} block size {block}, "
                f"got {self.hidden_size}"
            )
        if self.intermediate_size % block:
            raise ValueError(
                f"intermediate_size: expected a multiple of the {self.weight_format.value} block size "
                f"{block}, got {self.intermediate_size}"
            )
        rm = self.routing_method
        if rm is RoutingMethod.Llama4 and self.top_k != 1:
            raise ValueError(f"top_k: Llama4 routing expects top_k == 1, got {self.top_k}")
        if rm is RoutingMethod.DeepSeekV3:
            if self.n_group is None or self.topk_group is None:
                raise ValueError("n_group/topk_group: DeepSeekV3 routing expects both to be set")
            set_("n_group", _require_int("n_group", self.n_group, 1))
            set_("topk_group", _require_int("topk_group", self.topk_group, 1))
            if self.num_experts % self.n_group:
                raise ValueError(
                    f"n_group: expected a divisor of num_experts ({self.num_experts}), got {self.n_group}"
                )
            if self.topk_group > self.n_group:
                raise ValueError(f"topk_group: expected <= n_group ({self.n_group}), got {self.topk_group}")
            if self.top_k > self.topk_group * (self.num_experts // self.n_group):
                raise ValueError(
                    "top_k: expected <= topk_group * experts per group "
                    f"({self.topk_group * (self.num_experts // self.n_group)}), got {self.top_k}"
                )
            if self.routed_scaling_factor is None:
                set_("routed_scaling_factor", 1.0)
        elif self.n_group is not None or self.topk_group is not None:
            raise ValueError(
                f"n_group/topk_group: only DeepSeekV3 routing uses expert groups, got routing_method={rm.name}"
            )
        if self.routed_scaling_factor is not None and not (self.routed_scaling_factor > 0):
            raise ValueError(f"routed_scaling_factor: expected > 0, got {self.routed_scaling_factor}")
        if self.activation is GatedActivation.SWIGLU_OAI:
            for name in ("swiglu_alpha", "swiglu_beta", "swiglu_limit"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name}: the swiglu_oai activation expects a float, got None")
            if not self.swiglu_limit > 0:
                raise ValueError(f"swiglu_limit: expected > 0, got {self.swiglu_limit}")
        else:
            for name in ("swiglu_alpha", "swiglu_beta", "swiglu_limit"):
                set_(name, None)

    # ---- derived properties -------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.weight_format.block_size

    @property
    def ep_size(self) -> int:
        """Expert-parallel world size implied by local/global experts (1 when not evenly split)."""
        return self.num_experts // self.local_num_experts if self.num_experts % self.local_num_experts == 0 else 1

    @property
    def ep_rank(self) -> int:
        return self.local_expert_offset // self.local_num_experts

    @property
    def is_even_ep(self) -> bool:
        return (
            self.num_experts % self.local_num_experts == 0
            and self.local_expert_offset % self.local_num_experts == 0
        )

    @property
    def label(self) -> str:
        name = self.model or "moe"
        ep = f"ep{self.ep_size}r{self.ep_rank}" if self.local_num_experts != self.num_experts else "ep1"
        return (
            f"{name}/{ep}/T{self.num_tokens}/H{self.hidden_size}/I{self.intermediate_size}/"
            f"E{self.num_experts}/k{self.top_k}/{self.weight_format.value}"
        )

    def replace(self, **changes: Any) -> "MoECase":
        return dataclasses.replace(self, **changes)

    def with_tokens(self, num_tokens: int) -> "MoECase":
        return self.replace(num_tokens=num_tokens)

    def to_record(self) -> dict[str, Any]:
        """Flat dict of plain values (enum values as strings/ints), for DataFrames."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, RoutingMethod):
                v = v.name
            elif isinstance(v, Enum):
                v = v.value
            out[f.name] = v
        out["ep_size"] = self.ep_size
        out["ep_rank"] = self.ep_rank
        return out

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "MoECase":
        """A case from :meth:`to_record`'s dict or a DataFrame row: NaN/NA mean "not set" (the field's default for
        required-with-default fields, None for optional ones); CSV strings are read ('true'/'false', '2', '1.5');
        anything else keeps its type and is checked by ``__post_init__`` (a ValueError naming the field)."""
        if not isinstance(record, dict):
            raise ValueError(f"record: expected a dict, got {type(record).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for k, v in record.items():
            if k not in names:
                continue
            if v is not None and not isinstance(v, str) and _is_na(v):  # NaN / pd.NA from pandas
                v = None
            if v is None and k in _INT_FIELDS + _BOOL_FIELDS and k not in ("local_num_experts", "n_group",
                                                                           "topk_group"):
                continue  # a missing value: the dataclass default (or its own error when required)
            if v is not None:
                if k in _INT_FIELDS:
                    v = _record_int(k, v)
                elif k in _FLOAT_FIELDS:
                    v = _record_float(k, v)
                elif k in _BOOL_FIELDS:
                    v = _record_bool(k, v)
            kwargs[k] = v
        return cls(**kwargs)


def _is_na(v: Any) -> bool:
    try:
        return bool(v != v) or type(v).__name__ == "NAType"
    except (TypeError, ValueError):
        return type(v).__name__ == "NAType"
