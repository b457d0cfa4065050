"""Rebuild a :class:`MoECase` from vLLM's logged ``trtllm_fp4_block_scale_routed_moe`` kwargs.

vLLM debug logs print each kwarg on its own line, e.g.::

    (EngineCore_DP0 pid=121033) topk_ids : torch.int32 torch.Size([16384, 4]) (4, 1) cuda:0
    (EngineCore_DP0 pid=121033) routing_bias : None
    (EngineCore_DP0 pid=121033) num_experts : 32

A tensor line is ``name : dtype torch.Size([...]) (strides) device``; a scalar
line is ``name : value`` with value ``None``, ``True``/``False``, an int, a
float or an enum repr ``<RoutingMethodType.Renormalize: 1>``.  The
``(EngineCore_DPn pid=N)`` prefix (any process name / DP rank / pid) and a
vLLM logger prefix (``INFO 11-01 12:49:12 [file.py:12]``) are optional.  Blank lines (also
prefix-only ones), ``#`` comments and docstring wrappers (indentation, a line that is only triple
quotes) are skipped; any other line that cannot be read raises ``ValueError``
quoting it.

One parse reads one process: lines whose prefixes name different processes (another DP/TP/EP rank or another
pid) raise ``ValueError`` listing them unless ``process=`` says which one to read (a pid, a process name such
as ``EngineCore_DP0``, or the whole tag ``EngineCore_DP0 pid=121033``); the other processes' lines are then
ignored.  Unprefixed lines name no process and are read with the one process of the parse.

Parsing is linear in the input: no line longer than :data:`MAX_LINE_CHARS` (after stripping the whitespace
around it) is read, the name/value split is a ``str.partition`` and every regular expression runs on a bounded,
stripped string without ambiguous nested quantifiers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

from .case import ActivationFormat, GatedActivation, MoECase, RoutingMethod, WeightFormat


@dataclass(frozen=True)
class TensorDesc:
    """What the log says about one tensor (no data)."""

    dtype: str  # e.g. "torch.int32"
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    device: str  # e.g. "cuda:0"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


Scalar = Union[None, bool, int, float]
LogValue = Union[TensorDesc, Scalar]

#: a longer (stripped) line is no kwarg line: vLLM's are ~100 characters
MAX_LINE_CHARS = 4096
# (EngineCore_DP0 pid=1), (VllmWorker TP0 rank=1 pid=2): process name, optional key=value words, pid
_PREFIX = re.compile(r"^\((?P<proc>[A-Za-z][\w-]*(?:[ \t]+\w+=\w+)*?)[ \t]+pid=(?P<pid>\d+)\)[ \t]*")
_LOGGER = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)[ \t]+\d\d-\d\d[ \t]+[\d:.]+[ \t]+\[[^\]]*\][ \t]*")
_NAME = re.compile(r"[A-Za-z_]\w*")
_TENSOR = re.compile(
    r"^(?P<dtype>torch\.\w+)\s+torch\.Size\(\[(?P<shape>[\d,\s]*)\]\)\s+"
    r"\((?P<stride>[\d,\s]*)\)\s+(?P<device>[A-Za-z]+(?::\d+)?)$"
)
_ENUM = re.compile(r"^<[\w.]+:\s*(?P<int>-?\d+)>$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:inf|nan)$")
NOT_PLAIN = object()  #: what plain_scalar returns for a text that is no None / bool / int / float

def plain_scalar(text: str) -> Any:
    """``None``, ``True``/``False``, an int or a float written as Python prints them; else :data:`NOT_PLAIN`."""
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return NOT_PLAIN

_PACKED_FP4 = ("torch.uint8", "torch.float4_e2m1fn_x2")

# gpt-oss SwiGLU constants, used when the log shows gemm1_alpha/beta/clamp_limit tensors
# (a tensor line carries no values).
OAI_ALPHA, OAI_BETA, OAI_LIMIT = 1.702, 1.0, 7.0


class _Unreadable(Exception):
    """A value or line the parser cannot read."""


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(",", " ").split())


def _parse_value(text: str) -> Optional[LogValue]:
    """A value string -> TensorDesc / scalar; raises ``_Unreadable`` when it is neither."""
    m = _TENSOR.match(text)
    if m:
        return TensorDesc(m["dtype"], _ints(m["shape"]), _ints(m["stride"]), m["device"])
    plain = plain_scalar(text)
    if plain is not NOT_PLAIN:
        return plain
    m = _ENUM.match(text)
    if m:
        return int(m["int"])
    raise _Unreadable


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise ValueError(f"text: expected the log's text (a str), got {text!r:.60} ({type(text).__name__})")
    return text


def _split_line(line: str) -> tuple[Optional[str], Optional[tuple[str, str]]]:
    """A stripped line -> (process tag or None, (name, value) or None when the body is not ``name : value``)."""
    m = _PREFIX.match(line)
    tag = f"{' '.join(m['proc'].split())} pid={m['pid']}" if m else None
    body = line[m.end():] if m else line
    lg = _LOGGER.match(body)
    body = body[lg.end():] if lg else body
    name, colon, value = body.partition(":")
    name = name.strip()
    if not colon or not _NAME.fullmatch(name):
        return tag, None if body.strip() else ("", "")
    return tag, (name, value.strip())


def _matches(tag: Optional[str], process: Any) -> bool:
    if tag is None:
        return False
    want = str(process).strip()
    proc, _, pid = tag.rpartition(" pid=")
    return want in (tag, pid, proc, proc.split()[0])


def log_processes(text: str) -> list[Optional[str]]:
    """The process tags (``'EngineCore_DP0 pid=121033'``; None for unprefixed lines) of a log's kwarg lines."""
    seen: dict[Optional[str], None] = {}
    for raw in _check_text(text).splitlines():
        line = raw.strip()
        if line and len(line) <= MAX_LINE_CHARS and not line.startswith("#"):
            tag, kv = _split_line(line)
            if kv and kv[0]:
                seen[tag] = None
    return list(seen)


def parse_vllm_kwargs_lines(text: str, *, process: Any = None) -> dict[str, LogValue]:
    """Parse logged kwargs into ``{name: TensorDesc | scalar}`` (file order).

    A name logged twice with different values raises ``ValueError`` (two calls mixed); so do lines of more
    than one process unless ``process`` picks one (see the module docstring), and lines longer than
    :data:`MAX_LINE_CHARS`.
    """
    out: dict[str, LogValue] = {}
    sources: dict[Optional[str], int] = {}
    for lineno, raw in enumerate(_check_text(text).splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line in ('"""', "'''"):
            continue
        if len(line) > MAX_LINE_CHARS:
            raise ValueError(f"vLLM kwargs log, line {lineno}: {len(line)} characters, longer than any kwarg line "
                             f"(limit {MAX_LINE_CHARS}): {line[:60]!r}...")
        tag, kv = _split_line(line)
        if kv == ("", ""):  # a prefix with nothing after it is a blank log line
            continue
        if process is not None and tag is not None and not _matches(tag, process):
            continue
        try:
            if kv is None:
                raise _Unreadable
            name, text_value = kv
            value = _parse_value(text_value)
        except _Unreadable:
            raise ValueError(f"vLLM kwargs log, line {lineno}: cannot read {raw[:200]!r}") from None
        if tag is not None:
            sources.setdefault(tag, lineno)
        if len(sources) > 1:
            names = ", ".join(repr(t) for t in sources)
            raise ValueError(f"vLLM kwargs log, line {lineno}: lines of more than one process ({names}); pass "
                             "process=<pid or name> (reproduce: --process) to read one of them")
        if name in out and out[name] != value:
            raise ValueError(
                f"vLLM kwargs log, line {lineno}: {name} logged twice with different values "
                f"({out[name]!r} vs {value!r}); pass one call's lines"
            )
        out[name] = value
    return out


def _tensor(kw: dict[str, LogValue], name: str) -> Optional[TensorDesc]:
    v = kw.get(name)
    if v is not None and not isinstance(v, TensorDesc):
        raise ValueError(f"{name}: expected a tensor line, got the scalar {v!r}")
    return v


def _int_field(kw: dict[str, LogValue], name: str, default: Optional[int] = None) -> Optional[int]:
    v = kw.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{name}: expected an int, got {v!r}")
    return v


def _required_counts(kw: dict[str, LogValue]) -> tuple[int, int, int]:
    """``num_experts``, ``top_k`` and ``intermediate_size`` of the log: each present and >= 1, ``top_k`` at most
    ``num_experts`` (checked before any tensor shape is compared with them, so the error names the scalar)."""
    values = []
    for name, what in (("num_experts", "global experts"), ("top_k", "experts per token"),
                       ("intermediate_size", "I")):
        v = _int_field(kw, name)
        if v is None:
            raise ValueError(f"{name}: required, but the log has no {name} value")
        if v < 1:
            raise ValueError(f"{name}: expected an int >= 1 ({what}), got {v}")
        values.append(v)
    num_experts, top_k, inter = values
    if top_k > num_experts:
        raise ValueError(f"top_k: expected <= num_experts ({num_experts}), got {top_k}")
    return num_experts, top_k, inter


def _check(name: str, got: TensorDesc, want: tuple[int, ...]) -> None:
    if got.shape != want:
        raise ValueError(f"{name}: shape {list(got.shape)} does not match the case; expected {list(want)}")


def _scale_block(name: str, scale: TensorDesc, rows: tuple[int, int], k: int) -> int:
    """Block size implied by a [local, rows, k/block] (or flattened) scale tensor."""
    if len(scale.shape) == 3 and scale.shape[:2] == rows and scale.shape[2] and k % scale.shape[2] == 0:
        block = k // scale.shape[2]
    elif scale.numel and (rows[0] * rows[1] * k) % scale.numel == 0:
        block = rows[0] * rows[1] * k // scale.numel
    else:
        block = 0
    if block not in (16, 32):
        raise ValueError(
            f"{name}: shape {list(scale.shape)} implies no FP4 block size (16 or 32) for "
            f"[{rows[0]}, {rows[1]}, {k}] weights"
        )
    if scale.dtype == "torch.uint8" and block != 32:
        raise ValueError(f"{name}: uint8 (ue8m0) scales imply MXFP4 block 32, shape says block {block}")
    return block


def _weights_format_and_bias(kw: dict[str, LogValue], local: int, inter: int,
                             hidden: int) -> tuple[WeightFormat, bool]:
    """The logged weights, scales and biases checked against the case: the weight format (from the scales' block
    size; MXFP4 when none is logged) and whether both biases are there."""
    w1, w2 = _tensor(kw, "gemm1_weights"), _tensor(kw, "gemm2_weights")
    for name, w, want in (("gemm1_weights", w1, (local, 2 * inter, hidden // 2)),
                          ("gemm2_weights", w2, (local, hidden, inter // 2))):
        if w is not None:
            if w.dtype not in _PACKED_FP4:
                raise ValueError(f"{name}: expected packed FP4 (torch.uint8), got {w.dtype}")
            _check(name, w, want)

    blocks = {}
    for name, rows, k in (("gemm1_weights_scale", (2 * inter, hidden), hidden),
                          ("gemm2_weights_scale", (hidden, inter), inter)):
        s = _tensor(kw, name)
        if s is not None:
            blocks[name] = _scale_block(name, s, (local, rows[0]), k)
    if len(set(blocks.values())) > 1:
        raise ValueError(f"gemm1_weights_scale/gemm2_weights_scale: block sizes disagree: {blocks}")
    block = next(iter(blocks.values()), 32)
    fmt = WeightFormat.MXFP4 if block == 32 else WeightFormat.NVFP4

    b1, b2 = _tensor(kw, "gemm1_bias"), _tensor(kw, "gemm2_bias")
    if b1 is not None:
        _check("gemm1_bias", b1, (local, 2 * inter))
    if b2 is not None:
        _check("gemm2_bias", b2, (local, hidden))
    if (b1 is None) != (b2 is None):
        raise ValueError(f"gemm1_bias/gemm2_bias: the log has {'gemm2_bias' if b1 is None else 'gemm1_bias'} "
                         "but not the other; the case has one has_bias for both")
    return fmt, b1 is not None


def _swiglu_oai(kw: dict[str, LogValue], local: int) -> dict[str, float]:
    """``gemm1_alpha``/``gemm1_beta``/``gemm1_clamp_limit`` that the log has (a tensor line: the gpt-oss default;
    a scalar: its value); empty for plain swiglu."""
    oai = {}
    for name, default in (("gemm1_alpha", OAI_ALPHA), ("gemm1_beta", OAI_BETA), ("gemm1_clamp_limit", OAI_LIMIT)):
        v = kw.get(name)
        if isinstance(v, TensorDesc):
            _check(name, v, (local,))
            oai[name] = default
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            oai[name] = float(v)
    return oai


def parse_vllm_kwargs_log(text: str, *, model: str = "", process: Any = None) -> MoECase:
    """Rebuild the case from a vLLM kwargs log (see the module docstring for the line format).

    num_tokens from ``topk_ids`` (else ``hidden_states``/``routing_logits``) rows; hidden size from
    ``hidden_states`` (x2 when packed FP4 uint8); ``num_experts`` is the global count and
    ``local_num_experts``/``local_expert_offset`` this rank's slice (default: gemm1_weights' expert
    dim / 0).  The weight format comes from the scale block size: 32 -> MXFP4 (vLLM logs the ue8m0
    bytes as float8_e4m3fn), 16 -> NVFP4; MXFP4 when no scale is logged.  ``has_bias`` is whether
    ``gemm1_bias`` is a tensor.  If any of ``gemm1_alpha``/``gemm1_beta``/``gemm1_clamp_limit`` is
    present the activation is swiglu_oai; tensor lines carry no values, so alpha/beta/limit are the
    gpt-oss defaults 1.702/1.0/7.0 unless a scalar value was logged.  hidden_states dtype maps to
    activation_format: float8_e4m3fn -> mxfp8, bf16 and packed fp4 -> bf16 (the case has no FP4
    activation format).  Missing required fields or inconsistent shapes raise ``ValueError``, and so does a
    ``gemm2_bias`` without ``gemm1_bias`` (the case has one ``has_bias`` for both).  ``process`` picks one
    process of a log that holds several (see :func:`parse_vllm_kwargs_lines`).
    """
    kw = parse_vllm_kwargs_lines(text, process=process)
    if process is not None and not any(_matches(t, process) for t in log_processes(text)):
        raise ValueError(f"process: no kwarg line of process {process!r}; the log has {log_processes(text)}")
    hs = _tensor(kw, "hidden_states")
    if hs is None:
        raise ValueError("hidden_states: required, but the log has no hidden_states tensor")
    if len(hs.shape) != 2:
        raise ValueError(f"hidden_states: expected 2 dims [tokens, hidden], got {list(hs.shape)}")
    num_experts, top_k, inter = _required_counts(kw)

    packed = hs.dtype in _PACKED_FP4
    hidden = hs.shape[1] * (2 if packed else 1)
    if hs.dtype == "torch.float8_e4m3fn":
        act_fmt = ActivationFormat.MXFP8
    elif hs.dtype == "torch.bfloat16" or packed:
        act_fmt = ActivationFormat.BF16
    else:
        raise ValueError(f"hidden_states: unsupported dtype {hs.dtype}")

    topk_ids = _tensor(kw, "topk_ids")
    tokens = hs.shape[0]
    if topk_ids is not None:
        _check("topk_ids", topk_ids, (tokens, top_k))
    logits = _tensor(kw, "routing_logits")
    if logits is not None:
        _check("routing_logits", logits, (tokens, num_experts))
    out = _tensor(kw, "output")
    if out is not None:
        _check("output", out, (tokens, hidden))

    w1 = _tensor(kw, "gemm1_weights")
    default_local = w1.shape[0] if w1 is not None and w1.shape else num_experts
    local = _int_field(kw, "local_num_experts", default_local)
    offset = _int_field(kw, "local_expert_offset", 0)
    assert local is not None and offset is not None
    fmt, has_bias = _weights_format_and_bias(kw, local, inter, hidden)
    oai = _swiglu_oai(kw, local)
    swiglu_oai = bool(oai)

    rsf = kw.get("routed_scaling_factor")
    if rsf is not None and (isinstance(rsf, (bool, TensorDesc)) or not isinstance(rsf, (int, float))):
        raise ValueError(f"routed_scaling_factor: expected a float or None, got {rsf!r}")
    return MoECase(
        num_tokens=tokens,
        hidden_size=hidden,
        intermediate_size=inter,
        num_experts=num_experts,
        top_k=top_k,
        local_num_experts=local,
        local_expert_offset=offset,
        routing_method=RoutingMethod.parse(_int_field(kw, "routing_method_type", int(RoutingMethod.Renormalize))),
        n_group=_int_field(kw, "n_group"),
        topk_group=_int_field(kw, "topk_group"),
        routed_scaling_factor=None if rsf is None else float(rsf),
        weight_format=fmt,
        activation_format=act_fmt,
        activation=GatedActivation.SWIGLU_OAI if swiglu_oai else GatedActivation.SWIGLU,
        has_bias=has_bias,
        swiglu_alpha=oai.get("gemm1_alpha", OAI_ALPHA) if swiglu_oai else None,
        swiglu_beta=oai.get("gemm1_beta", OAI_BETA) if swiglu_oai else None,
        swiglu_limit=oai.get("gemm1_clamp_limit", OAI_LIMIT) if swiglu_oai else None,
        model=model,
    )


def is_kwarg_line(line: str) -> bool:
    """Whether ``line`` is one of vLLM's ``(EngineCore_DP0 pid=N) name : value`` kwarg lines."""
    s = line.strip()
    if len(s) > MAX_LINE_CHARS:
        return False
    tag, kv = _split_line(s)
    if tag is None or kv is None or not kv[0]:
        return False
    try:  # "(...) ERROR ... RuntimeError: Cannot pack tensors on meta" has a name and a colon, but no value
        _parse_value(kv[1])
    except _Unreadable:
        return False
    return True


def extract_kwargs_log(text: str) -> str:
    """The vLLM ``name : value`` kwarg lines of a bug report (traceback and prose dropped)."""
    lines = [ln.strip() for ln in _check_text(text).splitlines() if is_kwarg_line(ln)]
    if not lines:
        raise ValueError("text: no vLLM kwarg lines ('(EngineCore_DP0 pid=N) name : value') found")
    return "\n".join(lines)
