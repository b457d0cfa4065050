"""One FlashInfer MoE call's arguments -> a :class:`~fp4moe_diag.problem.case.MoECase`, with where each field came from.

Shared by the log parser (:mod:`.flashinfer_log`: an argument's source is its log line) and the dump reader
(:mod:`.dump`: its source is ``metadata.jsonl`` or ``inputs.pt[key]``).  Entry points:

* ``trtllm_fp4_block_scale_routed_moe`` (pre-routed ``topk_ids``) and ``trtllm_fp4_block_scale_moe``
  (``routing_logits``): sizes from the tensors and the ``num_experts``/``top_k``/... scalars, as vLLM passes them;
* ``cutlass_fused_moe`` with ``use_w4_group_scaling=True`` (MXFP4 weights x BF16, the SM90 path):
  ``num_experts = fc1_expert_weights.shape[0] * ep_size``, ``local_expert_offset = ep_rank * local``.

Anything the case cannot hold is refused with a ``ValueError`` naming the argument (packed FP4 activations,
another activation than SwiGLU, ``do_finalize=False``, tensor parallelism, per-expert SwiGLU constants that
differ).  What a call does not say is filled in *and said so* in the sources (a level-3 log carries no tensor
values: the gpt-oss SwiGLU constants are assumed there and the source says it; a level-5 log's min/max give them).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from ..problem.case import ActivationFormat, GatedActivation, MoECase, RoutingMethod, WeightFormat

ROUTED = "trtllm_fp4_block_scale_routed_moe"
LOGITS = "trtllm_fp4_block_scale_moe"
CUTLASS = "cutlass_fused_moe"
UNIFIED = "MoELayer.__call__"
ENTRY_POINTS = (ROUTED, LOGITS, CUTLASS)
#: FlashInfer's ActivationType.Swiglu (flashinfer/tllm_enums.py, stable since 0.5)
SWIGLU = 3
OAI = {"alpha": 1.702, "beta": 1.0, "limit": 7.0}
_PACKED = ("torch.uint8", "torch.float4_e2m1fn_x2")


@dataclass(frozen=True)
class TensorArg:
    """What is known of one tensor argument: metadata, level-5 statistics, and in a dump its values."""

    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] = ()
    device: str = ""
    stats: dict = field(default_factory=dict)  # min/max/mean/nan_count/inf_count (level 5)
    values: Any = None  # torch.Tensor (dumps)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def constant(self) -> Optional[float]:
        """The one value every element has (from the values, else level-5 min == max); None when unknown."""
        if self.values is not None:
            v = self.values.float()
            lo, hi = float(v.min()), float(v.max())
        elif "min" in self.stats and "max" in self.stats:
            lo, hi = float(self.stats["min"]), float(self.stats["max"])
        else:
            return None
        if lo != hi:
            raise ValueError(f"values differ per element (min {lo}, max {hi}); a case holds one value")
        if self.dtype == "torch.float32":  # the shortest decimal of the fp32 value (1.702, not 1.7020000219...)
            import numpy as np  # noqa: PLC0415

            return float(str(np.float32(lo)))
        return lo


@dataclass(frozen=True)
class EnumArg:
    """An enum argument as logged: ``RoutingMethodType.Renormalize (value=1)``."""

    name: str
    value: Any


@dataclass(frozen=True)
class RawArg:
    """A value the log shows only as its ``repr`` (an object, a dtype)."""

    text: str


@dataclass(frozen=True)
class Arg:
    value: Any  # TensorArg | EnumArg | RawArg | None | bool | int | float | str | list
    source: str


@dataclass(frozen=True)
class SourcedCase:
    """A case and, for every :class:`MoECase` field, where it came from."""

    case: MoECase
    entry_point: str
    flashinfer_version: Optional[str]
    sources: dict
    origin: str
    calls: tuple = ()
    processes: tuple = ()
    version_source: str = ""

    def to_dict(self) -> dict:
        return {"case": self.case.to_record(), "label": self.case.label, "entry_point": self.entry_point,
                "flashinfer_version": self.flashinfer_version,
                "flashinfer_version_source": self.version_source, "origin": self.origin, "calls": list(self.calls),
                "processes": [p for p in self.processes], "sources": dict(self.sources)}


class _Args:
    """Typed access to one call's arguments; every error names the argument and its source."""

    def __init__(self, entry: str, args: dict):
        self.entry, self.args = entry, args

    def src(self, name: str) -> str:
        return self.args[name].source if name in self.args else f"not in the {self.entry} call"

    def src_v(self, name: str) -> str:
        """The source of a scalar argument with its value: ``line 12: num_experts=32``."""
        v = self.value(name)
        v = v.value if isinstance(v, EnumArg) else v
        return f"{self.src(name)}: {name}={v}" if name in self.args else f"{name} not in the {self.entry} call"

    def err(self, name: str, what: str) -> ValueError:
        return ValueError(f"{name} ({self.src(name)}): {what}")

    def tensor(self, name: str, required: bool = False) -> Optional[TensorArg]:
        v = self.args.get(name)
        if v is None or v.value is None:
            if required:
                raise ValueError(f"{name}: required, but the {self.entry} call has no {name} tensor")
            return None
        if not isinstance(v.value, TensorArg):
            raise self.err(name, f"expected a tensor, got {v.value!r:.80}")
        return v.value

    def int(self, name: str, default: Optional[int] = None, required: bool = False) -> Optional[int]:
        v = self.args.get(name)
        val = None if v is None else v.value
        if isinstance(val, EnumArg):
            val = val.value
        if val is None:
            if required:
                raise ValueError(f"{name}: required, but the {self.entry} call has no {name} value")
            return default
        if isinstance(val, bool) or not isinstance(val, int):
            raise self.err(name, f"expected an int, got {val!r:.80}")
        return val

    def value(self, name: str) -> Any:
        v = self.args.get(name)
        return None if v is None else v.value

    def shape(self, name: str, t: TensorArg, want: tuple) -> None:
        if tuple(t.shape) != tuple(want):
            raise self.err(name, f"shape {list(t.shape)} does not match the call; expected {list(want)}")


def _activation_format(a: _Args, name: str, t: TensorArg) -> ActivationFormat:
    if t.dtype == "torch.bfloat16":
        return ActivationFormat.BF16
    if t.dtype == "torch.float8_e4m3fn":
        return ActivationFormat.MXFP8
    if t.dtype in _PACKED:
        raise a.err(name, "packed FP4 activations (NVFP4 x NVFP4): not a case this suite builds "
                          "(bf16 or mxfp8 hidden states)")
    raise a.err(name, f"unsupported dtype {t.dtype}; expected torch.bfloat16 or torch.float8_e4m3fn")


def _check_activation(a: _Args) -> None:
    act = a.value("activation_type")
    val = act.value if isinstance(act, EnumArg) else act
    if val is not None and val != SWIGLU and not (isinstance(act, EnumArg) and act.name.endswith(".Swiglu")):
        raise a.err("activation_type", f"{act!r}; the suite's cases are SwiGLU MoE (ActivationType.Swiglu = 3)")


def _swiglu(a: _Args, names: tuple, local: int, src: dict) -> tuple[GatedActivation, dict]:
    """gpt-oss SwiGLU constants from the alpha/beta/limit tensors (values, level-5 stats, else the constants)."""
    vals: dict = {}
    for key, name in zip(("alpha", "beta", "limit"), names):
        t = a.tensor(name)
        if t is None:
            src[f"swiglu_{key}"] = f"{name} not passed"
            continue
        a.shape(name, t, (local,))
        try:
            c = t.constant()
        except ValueError as e:
            raise a.err(name, str(e)) from None
        if c is None:
            vals[key] = OAI[key]
            src[f"swiglu_{key}"] = (f"{a.src(name)}: {name} is a tensor whose values this record does not hold "
                                    f"(level 3); the gpt-oss constant {OAI[key]} is assumed (a level-5 log or a "
                                    "dump gives the value)")
        else:
            vals[key] = c
            src[f"swiglu_{key}"] = f"{a.src(name)}: every {name} value is {c}"
    if not vals:
        src["activation"] = f"{', '.join(names)} not passed: plain SwiGLU"
        return GatedActivation.SWIGLU, {"alpha": None, "beta": None, "limit": None}
    missing = [n for k, n in zip(("alpha", "beta", "limit"), names) if k not in vals]
    if missing:
        raise ValueError(f"{', '.join(missing)}: not passed, but {names[0]} is; the gpt-oss SwiGLU takes all three")
    src["activation"] = f"{a.src(names[0])}: {names[0]}/{names[1]}/{names[2]} passed: gpt-oss SwiGLU (swiglu_oai)"
    return GatedActivation.SWIGLU_OAI, vals


def _bias(a: _Args, names: tuple, shapes: tuple, src: dict) -> bool:
    b1, b2 = a.tensor(names[0]), a.tensor(names[1])
    for n, t, s in zip(names, (b1, b2), shapes):
        if t is not None:
            a.shape(n, t, s)
    if (b1 is None) != (b2 is None):
        raise ValueError(f"{names[0]}/{names[1]}: only one is passed; the case has one has_bias for both")
    src["has_bias"] = f"{a.src(names[0])}: {names[0]} is {'a tensor' if b1 is not None else 'None'}"
    return b1 is not None


def _activations(a: _Args, name: str, src: dict) -> tuple[int, int, Any]:
    """``(tokens, hidden, activation format)`` of the ``[tokens, hidden]`` activation argument ``name``, with the
    sources of ``num_tokens``, ``hidden_size`` and ``activation_format`` written into ``src``."""
    x = a.tensor(name, required=True)
    if len(x.shape) != 2:
        raise a.err(name, f"expected [tokens, hidden], got {list(x.shape)}")
    act_fmt = _activation_format(a, name, x)
    src["num_tokens"] = src["hidden_size"] = f"{a.src(name)}: {name} shape {list(x.shape)}"
    src["activation_format"] = f"{a.src(name)}: {name} dtype {x.dtype}"
    return x.shape[0], x.shape[1], act_fmt


def _trtllm(a: _Args) -> tuple[dict, dict]:
    src: dict = {}
    tokens, hidden, act_fmt = _activations(a, "hidden_states", src)
    e = a.int("num_experts", required=True)
    k = a.int("top_k", required=True)
    inter = a.int("intermediate_size", required=True)
    src.update(num_experts=a.src_v("num_experts"), top_k=a.src_v("top_k"),
               intermediate_size=a.src_v("intermediate_size"))
    if a.entry == ROUTED:
        ids = a.value("topk_ids")
        if isinstance(ids, list):  # the unpacked (ids, weights) form
            if len(ids) != 2 or not all(isinstance(x, TensorArg) for x in ids):
                raise a.err("topk_ids", "expected a tensor or a (ids, weights) pair of tensors")
            ids = ids[0]
        if not isinstance(ids, TensorArg):
            raise ValueError(f"topk_ids: required, but the {a.entry} call has no topk_ids tensor")
        a.shape("topk_ids", ids, (tokens, k))
    else:
        logits = a.tensor("routing_logits", required=True)
        a.shape("routing_logits", logits, (tokens, e))
    w1, w2 = a.tensor("gemm1_weights", required=True), a.tensor("gemm2_weights", required=True)
    local = a.int("local_num_experts", default=w1.shape[0] if w1.shape else e)
    offset = a.int("local_expert_offset", default=0)
    src["local_num_experts"] = a.src_v("local_num_experts")
    src["local_expert_offset"] = a.src_v("local_expert_offset")
    for n, w, want in (("gemm1_weights", w1, (local, 2 * inter, hidden // 2)),
                       ("gemm2_weights", w2, (local, hidden, inter // 2))):
        if w.dtype not in _PACKED:
            raise a.err(n, f"expected packed FP4 (torch.uint8), got {w.dtype}")
        a.shape(n, w, want)
    block = _block(a, "gemm1_weights_scale", local * 2 * inter * hidden)
    if _block(a, "gemm2_weights_scale", local * hidden * inter) != block:
        raise ValueError("gemm1_weights_scale/gemm2_weights_scale: their block sizes disagree")
    src["weight_format"] = f"{a.src('gemm1_weights_scale')}: one scale per {block} weights"
    rm = a.int("routing_method_type", default=0)
    src["routing_method"] = a.src_v("routing_method_type")
    for n in ("n_group", "topk_group", "routed_scaling_factor"):
        src[n] = a.src_v(n)
    rsf = a.value("routed_scaling_factor")
    if rsf is not None and (isinstance(rsf, bool) or not isinstance(rsf, (int, float))):
        raise a.err("routed_scaling_factor", f"expected a float or None, got {rsf!r:.60}")
    _check_activation(a)
    if a.value("do_finalize") is False:
        raise a.err("do_finalize", "False: the call returns unreduced intermediates; the suite's rows are the "
                                   "finalized output")
    for n in ("valid_hidden_size", "valid_intermediate_size", "num_fused_shared_experts"):
        if a.value(n) not in (None, 0):
            raise a.err(n, f"{a.value(n)!r}: not modelled by a case (expected None)")
    act, sw = _swiglu(a, ("gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"), local, src)
    has_bias = _bias(a, ("gemm1_bias", "gemm2_bias"), ((local, 2 * inter), (local, hidden)), src)
    fields = dict(num_tokens=tokens, hidden_size=hidden, intermediate_size=inter, num_experts=e, top_k=k,
                  local_num_experts=local, local_expert_offset=offset, routing_method=RoutingMethod.parse(rm),
                  n_group=a.int("n_group"), topk_group=a.int("topk_group"),
                  routed_scaling_factor=None if rsf is None else float(rsf),
                  weight_format=WeightFormat.MXFP4 if block == 32 else WeightFormat.NVFP4,
                  activation_format=act_fmt, activation=act, has_bias=has_bias, swiglu_alpha=sw["alpha"],
                  swiglu_beta=sw["beta"], swiglu_limit=sw["limit"])
    return fields, src


def _block(a: _Args, name: str, weights: int) -> int:
    """FP4 block size implied by a scale tensor's element count (16 or 32)."""
    s = a.tensor(name, required=True)
    block = weights // s.numel if s.numel and weights % s.numel == 0 else 0
    if block not in (16, 32):
        raise a.err(name, f"shape {list(s.shape)} implies no FP4 block size (16 or 32) for {weights} weights")
    if block == 16 and s.dtype == "torch.uint8":
        raise a.err(name, "uint8 (ue8m0) scales imply MXFP4 block 32, the shape says block 16")
    return block


def _cutlass(a: _Args) -> tuple[dict, dict]:
    src: dict = {}
    if a.value("use_w4_group_scaling") is not True:
        raise a.err("use_w4_group_scaling", f"{a.value('use_w4_group_scaling')!r}: only the MXFP4 x BF16 call "
                                            "(use_w4_group_scaling=True, SM90) is a case here")
    for n in ("tp_size", "cluster_size"):
        if a.int(n, default=1) != 1:
            raise a.err(n, f"{a.int(n)}: tensor/cluster parallelism is not modelled by a case (expected 1)")
    tokens, hidden, act_fmt = _activations(a, "input", src)
    ids = a.tensor("token_selected_experts", required=True)
    if len(ids.shape) != 2 or ids.shape[0] != tokens:
        raise a.err("token_selected_experts", f"expected [{tokens}, top_k], got {list(ids.shape)}")
    k = ids.shape[1]
    src["top_k"] = f"{a.src('token_selected_experts')}: token_selected_experts shape {list(ids.shape)}"
    a.shape("token_final_scales", a.tensor("token_final_scales", required=True), (tokens, k))
    w1, w2 = a.tensor("fc1_expert_weights", required=True), a.tensor("fc2_expert_weights", required=True)
    if len(w2.shape) != 3:
        raise a.err("fc2_expert_weights", f"expected [local_experts, hidden, intermediate/2], got {list(w2.shape)}")
    local, inter = w2.shape[0], w2.shape[2] * 2
    for n, w, want in (("fc1_expert_weights", w1, (local, 2 * inter, hidden // 2)),
                       ("fc2_expert_weights", w2, (local, hidden, inter // 2))):
        if w.dtype not in _PACKED:
            raise a.err(n, f"expected packed FP4 (torch.uint8), got {w.dtype}")
        a.shape(n, w, want)
    src["intermediate_size"] = f"{a.src('fc2_expert_weights')}: fc2_expert_weights shape {list(w2.shape)}"
    src["local_num_experts"] = f"{a.src('fc1_expert_weights')}: fc1_expert_weights shape {list(w1.shape)}"
    ep, rank = a.int("ep_size", default=1), a.int("ep_rank", default=0)
    if not 0 <= rank < ep:
        raise a.err("ep_rank", f"{rank}: expected 0 <= ep_rank < ep_size ({ep})")
    src["num_experts"] = f"{src['local_num_experts']} x ep_size {ep} ({a.src('ep_size')})"
    src["local_expert_offset"] = f"ep_rank {rank} ({a.src('ep_rank')}) x {local} local experts"
    qs = a.value("quant_scales")
    if not isinstance(qs, list) or len(qs) != 2 or not all(isinstance(q, TensorArg) for q in qs):
        raise a.err("quant_scales", "expected a list of two scale tensors (fc1, fc2)")
    for i, (q, n_w) in enumerate(zip(qs, (local * 2 * inter * hidden, local * hidden * inter))):
        nbytes = q.numel * (4 if q.dtype == "torch.int32" else 1)
        if nbytes * 32 != n_w:
            raise a.err("quant_scales", f"[{i}]: {list(q.shape)} {q.dtype} holds {nbytes} scale bytes; MXFP4 "
                                        f"block 32 needs {n_w // 32}")
    src["weight_format"] = f"{a.src('use_w4_group_scaling')}: use_w4_group_scaling=True (MXFP4, block 32)"
    src["routing_method"] = ("not in a cutlass_fused_moe call (routing is precomputed by the caller): "
                             "Renormalize, the case default, routes the inputs a case builds")
    for n in ("n_group", "topk_group", "routed_scaling_factor"):
        src[n] = "not in a cutlass_fused_moe call: None"
    _check_activation(a)
    act, sw = _swiglu(a, ("swiglu_alpha", "swiglu_beta", "swiglu_limit"), local, src)
    has_bias = _bias(a, ("fc1_expert_biases", "fc2_expert_biases"), ((local, 2 * inter), (local, hidden)), src)
    fields = dict(num_tokens=tokens, hidden_size=hidden, intermediate_size=inter, num_experts=local * ep, top_k=k,
                  local_num_experts=local, local_expert_offset=rank * local, routing_method=RoutingMethod.Renormalize,
                  weight_format=WeightFormat.MXFP4, activation_format=act_fmt, activation=act, has_bias=has_bias,
                  swiglu_alpha=sw["alpha"], swiglu_beta=sw["beta"], swiglu_limit=sw["limit"])
    return fields, src


def model_of(fields: dict) -> tuple[str, str]:
    """The model of data/vllm_shapes.csv with these sizes (H, I, E, top_k, format), or '' (and why)."""
    from ..problem.shapes import load_shape_table  # noqa: PLC0415

    t = load_shape_table()
    m = t[(t["hidden_size"] == fields["hidden_size"]) & (t["intermediate_size"] == fields["intermediate_size"])
          & (t["num_experts"] == fields["num_experts"]) & (t["top_k"] == fields["top_k"])
          & (t["weight_format"] == fields["weight_format"].value)]
    names = sorted(set(m["model"]))
    if len(names) == 1:
        return names[0], f"data/vllm_shapes.csv: the one model with these H, I, E, top_k and format"
    return "", f"data/vllm_shapes.csv: {'several models' if names else 'no model'} with these sizes"


def case_from_args(entry: str, args: dict, *, model: Optional[str] = None, seed: int = 0,
                   seed_source: str = "not in the call: the inputs a case builds come from seed 0"
                   ) -> tuple[MoECase, dict]:
    """``(case, sources)`` of one call of ``entry`` (``args``: name -> :class:`Arg`)."""
    if entry == UNIFIED:
        raise ValueError(f"entry point {UNIFIED}: the unified MoE API logs its packs as a repr without the layer's "
                         "sizes; log the backend call (trtllm_fp4_block_scale_*_moe, cutlass_fused_moe) instead")
    if entry not in ENTRY_POINTS:
        raise ValueError(f"entry point {entry!r}: not an FP4 MoE entry point this suite reads; expected one of "
                         f"{list(ENTRY_POINTS)}")
    a = _Args(entry, args)
    fields, src = _trtllm(a) if entry in (ROUTED, LOGITS) else _cutlass(a)
    if model is None:
        model, src["model"] = model_of(fields)
    else:
        src["model"] = "given"
    fields["seed"], src["seed"] = seed, seed_source
    case = MoECase(model=model, **fields)
    missing = [f.name for f in dataclasses.fields(MoECase) if f.name not in src]
    assert not missing, missing
    return case, {f.name: src[f.name] for f in dataclasses.fields(MoECase)}
