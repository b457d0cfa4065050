"""FlashInfer's API log (``FLASHINFER_LOGLEVEL=3`` or ``5``, ``flashinfer/api_logging.py``) -> cases.

A log holds a system-information header per process that imported FlashInfer (``FlashInfer version: 0.7.4``)
and one record per ``@flashinfer_api`` call::

    ================================================================================
    [2026-12-04 09:11:03] FlashInfer API Call: trtllm_fp4_block_scale_routed_moe
    --------------------------------------------------------------------------------
    Keyword input arguments:
      topk_ids=
        Tensor(
          shape=(4, 2)
          ...
        )
    Default parameters (not explicitly provided):
      activation_type= [DEFAULT]
        3

Level 5 adds ``min=``/``max=``/``mean=``/``nan_count=``/``inf_count=`` inside each ``Tensor(``.  Lines a vLLM
worker prefixes (``(EngineCore_DP0 pid=N) ``) are read with that prefix as their process; other lines outside
records (program output, level-10 ``Inputs dumped to:`` lines) are skipped.  Inside a record parsing is strict:
a line that cannot be read, or a record cut short (the file ends, or a new record starts, inside a value) is a
``ValueError`` naming its line.  A level-1 record (a name, no arguments) is refused: it holds no shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ..problem.vllm_log import NOT_PLAIN, plain_scalar
from .derive import ENTRY_POINTS, UNIFIED, Arg, EnumArg, RawArg, SourcedCase, TensorArg, case_from_args

#: the longest line read (a tensor field line is ~60 characters)
MAX_LINE_CHARS = 4096
_RULE_EQ, _RULE_DASH = "=" * 80, "-" * 80
_CALL = re.compile(r"^\[(?P<ts>[\d\- :]+)\] FlashInfer API Call: (?P<name>[\w.]+)$")
_SYSINFO = re.compile(r"^\[[\d\- :]+\] FlashInfer API Logging - System Information$")
_VERSION = re.compile(r"^FlashInfer version: (?P<v>\S+)$")
_VLLM_PREFIX = re.compile(r"^\((?P<proc>[A-Za-z][\w-]*(?: \w+=\w+)*?) pid=(?P<pid>\d+)\) ?")
_SECTIONS = ("Positional input arguments:", "Keyword input arguments:",
             "Default parameters (not explicitly provided):", "(No explicit arguments)")
_ARG = re.compile(r"^  (?:arg\[(?P<pos>\d+)\]:|(?P<kw>[A-Za-z_]\w*)=(?P<dflt> \[DEFAULT\])?)$")
_ENUM = re.compile(r"^(?P<name>[A-Za-z_][\w]*\.[A-Za-z_]\w*) \(value=(?P<v>-?\d+)\)$")
_TUPLE = re.compile(r"^\(([\d, ]*)\)$")
_STAT_KEYS = ("min", "max", "mean", "nan_count", "inf_count")
#: positional parameter names of the entry points (FlashInfer 0.5 - 0.7 keep the leading order)
_POSITIONAL = {
    "cutlass_fused_moe": ("input", "token_selected_experts", "token_final_scales", "fc1_expert_weights",
                          "fc2_expert_weights", "output_dtype", "quant_scales", "fc1_expert_biases",
                          "fc2_expert_biases", "input_sf", "swiglu_alpha", "swiglu_beta", "swiglu_limit",
                          "tp_size", "tp_rank", "ep_size", "ep_rank"),
    "trtllm_fp4_block_scale_moe": (
        "routing_logits", "routing_bias", "hidden_states", "hidden_states_scale", "gemm1_weights",
        "gemm1_weights_scale", "gemm1_bias", "gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit", "gemm2_weights",
        "gemm2_weights_scale", "gemm2_bias", "output1_scale_scalar", "output1_scale_gate_scalar",
        "output2_scale_scalar", "num_experts", "top_k", "n_group", "topk_group", "intermediate_size",
        "local_expert_offset", "local_num_experts", "routed_scaling_factor", "routing_method_type"),
}
_POSITIONAL["trtllm_fp4_block_scale_routed_moe"] = ("topk_ids",) + _POSITIONAL["trtllm_fp4_block_scale_moe"][1:]


@dataclass(frozen=True)
class LoggedCall:
    """One record: the function, where it starts, its process and FlashInfer version, its arguments."""

    function: str
    line: int
    timestamp: str
    process: Optional[str]
    flashinfer_version: Optional[str]
    version_line: Optional[int]
    level: int  # 3 or 5
    args: dict = field(default_factory=dict)  # name -> Arg

    @property
    def label(self) -> str:
        return f"{self.function} at line {self.line}" + (f" ({self.process})" if self.process else "")


class _Lines:
    """The log's lines with vLLM prefixes removed; ``proc[i]`` is line i's process tag (or None)."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise ValueError(f"text: expected the log's text (a str), got {type(text).__name__}")
        self.body: list[str] = []
        self.proc: list[Optional[str]] = []
        for raw in text.splitlines():
            line = raw.rstrip()
            m = _VLLM_PREFIX.match(line)
            self.proc.append(f"{m['proc']} pid={m['pid']}" if m else None)
            self.body.append(line[m.end():] if m else line)


def _err(lineno: int, what: str) -> ValueError:
    return ValueError(f"FlashInfer log, line {lineno}: {what}")


def _scalar(text: str) -> Any:
    """A one-line value; a repr the parser does not know is kept as :class:`RawArg`."""
    plain = plain_scalar(text)
    if plain is not NOT_PLAIN:
        return plain
    m = _ENUM.match(text)
    if m:
        return EnumArg(m["name"], int(m["v"]))
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return RawArg(text)


def _ints(text: str, lineno: int, key: str) -> tuple[int, ...]:
    m = _TUPLE.match(text)
    if not m:
        raise _err(lineno, f"tensor {key}: expected a tuple of ints, got {text!r:.80}")
    return tuple(int(x) for x in m.group(1).replace(",", " ").split())


def _tensor(lines: list[tuple[int, str]], indent: int) -> TensorArg:
    """The lines inside ``Tensor(`` ... ``)`` (without them) -> TensorArg."""
    kv: dict[str, str] = {}
    for lineno, line in lines:
        text = line.strip()
        if text.startswith("[") and text.endswith("]"):  # "[statistics skipped: ...]"
            continue
        key, eq, val = text.partition("=")
        if not eq or not key.isidentifier() or len(line) - len(line.lstrip(" ")) != indent + 2:
            raise _err(lineno, f"cannot read this tensor field: {line.strip()!r:.120}")
        kv[key] = val
    first = lines[0][0] if lines else 0
    for key in ("shape", "stride", "dtype", "device"):
        if key not in kv:
            raise _err(first - 1, f"Tensor( without {key}=")
    stats = {}
    for key in _STAT_KEYS:
        if key in kv:
            try:
                stats[key] = float(kv[key])
            except ValueError:
                raise _err(first, f"tensor {key}: expected a number, got {kv[key]!r:.60}") from None
    return TensorArg(shape=_ints(kv["shape"], first, "shape"), dtype=kv["dtype"],
                     stride=_ints(kv["stride"], first, "stride"), device=kv["device"], stats=stats)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _value(block: list[tuple[int, str]], indent: int) -> Any:
    """A value's lines (the first one at ``indent``) -> TensorArg / list / scalar."""
    lineno, first = block[0]
    head = first.strip()
    if head in ("Tensor(", "FP4Tensor(", "[", "(", "{"):
        close = {"Tensor(": ")", "FP4Tensor(": ")", "[": "]", "(": ")", "{": "}"}[head]
        last_no, last = block[-1]
        if last.strip() != close or _indent(last) != indent or len(block) < 2:
            raise _err(lineno, f"{head} is not closed by {close!r} at the same indentation (the record is cut short "
                               f"before line {last_no + 1})")
        inner = block[1:-1]
        if head == "Tensor(":
            return _tensor(inner, indent)
        if head in ("[", "("):
            return _items(inner, indent + 2)
        return RawArg(" ".join(t.strip() for _, t in block))
    if len(block) > 1:
        return RawArg(" ".join(t.strip() for _, t in block))  # a multi-line repr
    return _scalar(head)


_ITEM = re.compile(r"^(?P<pre> *)\[(?P<i>\d+)\]: (?P<rest>.*)$")


def _items(lines: list[tuple[int, str]], indent: int) -> list:
    """List/tuple items: ``[i]: <value>`` at ``indent`` (the item's own indentation, FlashInfer writes the value's
    first line after the marker); a value's further lines keep their indentation."""
    groups: list[list[tuple[int, str]]] = []
    for lineno, line in lines:
        m = _ITEM.match(line)
        if m and len(m["pre"]) == indent:
            groups.append([(lineno, " " * indent + m["rest"].strip())])
        elif groups and _indent(line) >= indent:
            groups[-1].append((lineno, line))
        else:
            raise _err(lineno, f"cannot read this list item: {line.strip()!r:.120}")
    return [_value(g, indent) for g in groups]


def _record(lines: _Lines, start: int, end: int) -> tuple[dict, int]:
    """Arguments of the record body ``lines[start:end]`` (0-based) -> ({name: Arg}, level)."""
    args: dict[str, Arg] = {}
    level = 3
    pending: Optional[tuple[str, int, bool]] = None
    block: list[tuple[int, str]] = []

    def flush() -> None:
        nonlocal level
        if pending is None:
            return
        name, lineno, dflt = pending
        if not block:
            raise _err(lineno, f"argument {name} has no value (the record is cut short)")
        v = _value(block, 4)
        if isinstance(v, TensorArg) and v.stats:
            level = 5
        args[name] = Arg(v, f"line {lineno}" + (" (default)" if dflt else ""))

    for i in range(start, end):
        line, lineno = lines.body[i], i + 1
        if len(line) > MAX_LINE_CHARS:
            raise _err(lineno, f"{len(line)} characters, longer than any record line (limit {MAX_LINE_CHARS})")
        if not line.strip():
            continue
        if line in _SECTIONS:
            flush()
            pending, block = None, []
            continue
        m = _ARG.match(line)
        if m:
            flush()
            name = m["kw"] or f"arg[{m['pos']}]"
            pending, block = (name, lineno, bool(m["dflt"])), []
            continue
        if pending is None or _indent(line) < 4:
            raise _err(lineno, f"cannot read {line.strip()!r:.120} (expected an argument name or its value)")
        block.append((lineno, line))
    flush()
    return args, level


def _record_end(lines: _Lines, start: int) -> int:
    """Index after the record body starting at ``start``: the next rule, a column-0 line that is no section
    header, or the end of the file."""
    i = start
    while i < len(lines.body):
        line = lines.body[i]
        if line.startswith("=" * 20) or _CALL.match(line):
            break
        if line and not line.startswith(" ") and line not in _SECTIONS:
            break
        i += 1
    return i


def _name_positional(function: str, args: dict, line: int) -> dict:
    if function not in _POSITIONAL:
        return args
    names = _POSITIONAL[function]
    out = {}
    for k, v in args.items():
        if k.startswith("arg["):
            pos = int(k[4:-1])
            if pos >= len(names):
                raise _err(line, f"{function}: positional argument {pos} has no known name")
            k = names[pos]
        out[k] = v
    return out


def parse_flashinfer_log(text: str) -> list[LoggedCall]:
    """Every call record of a FlashInfer API log, in file order (see the module docstring)."""
    lines = _Lines(text)
    calls: list[LoggedCall] = []
    version: dict[Optional[str], tuple[str, int]] = {}
    i = 0
    while i < len(lines.body):
        line, proc = lines.body[i], lines.proc[i]
        m = _VERSION.match(line)
        if m:
            version[proc] = (m["v"], i + 1)
        m = _CALL.match(line)
        if not m:
            i += 1
            continue
        if i + 1 >= len(lines.body) or lines.body[i + 1] != _RULE_DASH:
            if m["name"] not in ENTRY_POINTS + (UNIFIED,):
                i += 1  # another function's level-1 record: nothing to read
                continue
            raise _err(i + 1, f"the record of {m['name']} has no arguments: a level-1 log (or a cut record); "
                              "log with FLASHINFER_LOGLEVEL=3 or 5")
        end = _record_end(lines, i + 2)
        args, level = _record(lines, i + 2, end)
        if not args:
            raise _err(i + 1, f"the record of {m['name']} is cut short: no arguments follow")
        v = version.get(proc)
        calls.append(LoggedCall(m["name"], i + 1, m["ts"], proc, v[0] if v else None, v[1] if v else None, level,
                                _name_positional(m["name"], args, i + 1)))
        i = end
    return calls


def is_flashinfer_log(text: str) -> bool:
    """Whether ``text`` holds FlashInfer API log records or its system-information header."""
    return any(_CALL.match(ln) or _SYSINFO.match(ln) for ln in _Lines(text).body)


def cases_from_calls(calls: list[LoggedCall], origin: str, *, process: Any = None, call: Optional[int] = None,
                     model: Optional[str] = None) -> list[SourcedCase]:
    """One :class:`SourcedCase` per distinct case among ``calls`` (``call``: the 1-based index of one call
    of :func:`list_calls`; ``process``: only that process's calls).  Non-MoE calls are skipped; no MoE call
    left is a ValueError listing what the log holds."""
    moe = [c for c in calls if c.function in ENTRY_POINTS + (UNIFIED,)]
    if process is not None:
        want = str(process).strip()
        moe = [c for c in moe if c.process and (want == c.process or want in c.process.split(" pid=")
                                                 or c.process.endswith(f"pid={want}"))]
        if not moe:
            raise ValueError(f"process: no MoE call of process {process!r}; the log has "
                             f"{sorted({str(c.process) for c in calls})}")
    if call is not None:
        if not 1 <= call <= len(moe):
            raise ValueError(f"call: expected 1..{len(moe)} (the log's MoE calls), got {call}")
        moe = [moe[call - 1]]
    if not moe:
        funcs = sorted({c.function for c in calls})
        raise ValueError(f"{origin}: no FP4 MoE call record (trtllm_fp4_block_scale_routed_moe, "
                         f"trtllm_fp4_block_scale_moe, cutlass_fused_moe); the log has {funcs or 'no records'}")
    out: dict[Any, SourcedCase] = {}
    index = {id(c): i for i, c in enumerate(c for c in calls if c.function in ENTRY_POINTS + (UNIFIED,))}
    for c in moe:
        try:
            case, src = case_from_args(c.function, c.args, model=model)
        except ValueError as e:
            raise ValueError(f"{origin}: {c.label}: {e}") from None
        version = c.flashinfer_version
        label = f"call {index[id(c)] + 1}: {c.label}"  # the number --call takes
        key = (case, c.function, version)
        if key in out:
            prev = out[key]
            out[key] = SourcedCase(case, c.function, version, prev.sources, origin, prev.calls + (label,),
                                   tuple(dict.fromkeys(prev.processes + (c.process,))), prev.version_source)
        else:
            out[key] = SourcedCase(case, c.function, version, src, origin, (label,), (c.process,),
                                   version_source(c))
    return list(out.values())


def cases_from_log(text: str, origin: str = "log", **kwargs: Any) -> list[SourcedCase]:
    """:func:`parse_flashinfer_log` then :func:`cases_from_calls`."""
    return cases_from_calls(parse_flashinfer_log(text), origin, **kwargs)


def version_source(c: LoggedCall) -> str:
    if c.flashinfer_version is None:
        return "no 'FlashInfer version:' header before the record"
    return f"line {c.version_line}: FlashInfer version: {c.flashinfer_version}"
