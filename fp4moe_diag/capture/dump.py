"""FlashInfer Flight-Recorder dumps (``FLASHINFER_LOGLEVEL=10``) -> a case and the recorded tensors.

A dump root holds ``session.jsonl`` and one folder per call, ``<ts>_pid<N>_<function>_callNNNN/`` with
``metadata.jsonl`` (its last line is the most complete record: ``inputs_saved``, then ``completed``),
``inputs.pt`` or ``inputs.safetensors`` and, when the call returned, ``outputs.pt``/``.safetensors``.
:func:`read_dump` takes the root or one call folder; :func:`inputs_from_dump` makes the suite's
:class:`~fp4moe_diag.problem.inputs.MoEInputs` from the recorded tensors, weights mapped back to the canonical layout
(:mod:`.layouts`).  Refused with a ``ValueError`` naming the file or tensor: a missing ``metadata.jsonl`` or
tensor file, a tensor the metadata lists but the file lacks, a shape or dtype other than the metadata's, a
tensor on ``meta``, a graph-capture dump never flushed, and weights in a layout that cannot be inverted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import torch

from .derive import CUTLASS, ENTRY_POINTS, Arg, EnumArg, RawArg, SourcedCase, TensorArg, case_from_args

#: --dump-layout: "kernel" = the layout the entry point's kernel takes (trtllm-gen shuffled; SM90 CUTLASS by
#: its scale shape), "canonical" = unprepared weights (what fp4moe-diag's own stub calls record)
LAYOUTS = ("kernel", "canonical")


@dataclass(frozen=True)
class DumpedCall:
    """One call folder: its case (with sources), recorded tensors and outputs."""

    folder: Path
    function: str
    sourced: SourcedCase
    tensors: dict  # name -> torch.Tensor (input arguments; list items as name[i])
    args: dict  # name -> Arg
    outputs: Optional[dict]  # key -> torch.Tensor, None when the call did not return
    status: str

    @property
    def case(self):
        return self.sourced.case


def _meta_records(folder: Path) -> dict:
    p = folder / "metadata.jsonl"
    if not p.is_file():
        raise ValueError(f"{p}: missing (every dump call folder has a metadata.jsonl)")
    lines = [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{p}: empty")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}, line {len(lines)}: not JSON ({e.msg})") from None


def _load_tensors(folder: Path, kind: str, fmt: str) -> Optional[dict]:
    pt, st = folder / f"{kind}.pt", folder / f"{kind}.safetensors"
    if fmt == "safetensors" and st.is_file():
        from safetensors.torch import load_file  # noqa: PLC0415

        return load_file(str(st))
    if pt.is_file():
        obj = torch.load(pt, map_location="cpu", weights_only=True)
        if not isinstance(obj, dict):
            raise ValueError(f"{pt}: expected a dict of tensors, got {type(obj).__name__}")
        return obj
    return None


def _check_tensor(folder: Path, key: str, t: Any, details: dict) -> torch.Tensor:
    where = f"{folder.name}/inputs[{key}]"
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{where}: expected a tensor, got {type(t).__name__}")
    if t.is_meta:
        raise ValueError(f"{where}: a meta tensor (no data): the dump holds a placeholder, not the call's tensor")
    d = details.get(key)
    if d is not None:
        if list(t.shape) != list(d.get("shape", [])) or str(t.dtype) != d.get("dtype"):
            raise ValueError(f"{where}: {list(t.shape)} {t.dtype} in the file, but metadata.jsonl says "
                             f"{d.get('shape')} {d.get('dtype')}")
    return t


def _value(meta: Any, tensors: dict, source: str) -> Any:
    """A metadata value -> Arg value (tensor references resolved against ``tensors``)."""
    if isinstance(meta, dict):
        typ = meta.get("type")
        if typ == "torch.Tensor":
            key = meta.get("tensor_key")
            if key not in tensors:
                raise ValueError(f"{source}: tensor {key!r} is not in the inputs file")
            t = tensors[key]
            return TensorArg(tuple(t.shape), str(t.dtype), tuple(t.stride()), str(t.device), values=t)
        if typ == "enum":
            return EnumArg(str(meta.get("name")), meta.get("value"))
        if typ in ("list", "tuple"):
            if meta.get("truncated"):
                raise ValueError(f"{source}: a {typ} the dump truncated")
            return [_value(m, tensors, f"{source}[{i}]") for i, m in enumerate(meta.get("items", []))]
        return RawArg(str(meta.get("repr", meta.get("value", typ))))
    return meta


def _args(folder: Path, meta: dict, tensors: dict) -> dict:
    from .flashinfer_log import _POSITIONAL  # noqa: PLC0415

    fn = meta["function_name"]
    names = _POSITIONAL.get(fn, ())
    args: dict[str, Arg] = {}
    keys = list(tensors) + list(meta.get("input_metadata", {}))
    for key in dict.fromkeys(keys):
        if "__" in key:  # an item of a list argument: resolved through the list's metadata
            continue
        if key.startswith("arg_"):
            pos = int(key[4:])
            if pos >= len(names):
                raise ValueError(f"{folder.name}/metadata.jsonl: {fn} positional argument {pos} has no known name")
            name = names[pos]
        else:
            name = key.removeprefix("kwarg_")
        if key in tensors:
            t = tensors[key]
            args[name] = Arg(TensorArg(tuple(t.shape), str(t.dtype), tuple(t.stride()), str(t.device), values=t),
                             f"{folder.name}/inputs[{key}]")
        else:
            src = f"{folder.name}/metadata.jsonl input_metadata.{key}"
            args[name] = Arg(_value(meta["input_metadata"][key], tensors, src), src)
    return args


def read_call(folder: Any, model: Optional[str] = None) -> DumpedCall:
    """One call folder -> :class:`DumpedCall` (refusals name the file or tensor)."""
    folder = Path(folder)
    meta = _meta_records(folder)
    fn = meta.get("function_name")
    if fn not in ENTRY_POINTS:
        raise ValueError(f"{folder}: a dump of {fn!r}, not of an FP4 MoE entry point {list(ENTRY_POINTS)}")
    status = str(meta.get("execution_status", ""))
    if status == "graph_capture_pending_flush":
        raise ValueError(f"{folder}: recorded inside a CUDA graph capture and never flushed (no tensors)")
    fmt = meta.get("tensor_format", "torch")
    tensors = _load_tensors(folder, "inputs", fmt)
    want = meta.get("tensor_info", {}).get("input_tensor_keys", [])
    if tensors is None:
        raise ValueError(f"{folder}: inputs.pt / inputs.safetensors missing (metadata.jsonl lists {len(want)} "
                         "input tensors)")
    for key in want:
        if key not in tensors:
            raise ValueError(f"{folder.name}/inputs[{key}]: listed in metadata.jsonl but not in the inputs file")
        _check_tensor(folder, key, tensors[key], meta.get("tensor_details", {}))
    outputs = _load_tensors(folder, "outputs", fmt)
    args = _args(folder, meta, tensors)
    version = meta.get("versions", {}).get("flashinfer")
    case, src = case_from_args(fn, args, model=model, seed_source="not used: the inputs are the dump's tensors")
    sc = SourcedCase(case, fn, version, src, f"dump {folder}", (folder.name,), (f"pid {meta.get('process_id')}",),
                     f"{folder.name}/metadata.jsonl versions.flashinfer")
    return DumpedCall(folder, fn, sc, tensors, args, outputs, status)


def call_folders(path: Any) -> list[Path]:
    """The call folders of a dump root (sorted by name: time order), or ``[path]`` for a call folder."""
    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"dump: {p} is not a directory")
    if (p / "metadata.jsonl").is_file():
        return [p]
    folders = sorted(d for d in p.iterdir() if d.is_dir() and d.name != "graph_flushes")
    if not folders:
        raise ValueError(f"dump: {p} holds no call folders (<ts>_pid<N>_<function>_callNNNN/)")
    return folders


def read_dump(path: Any, *, call: Optional[int] = None, model: Optional[str] = None) -> list[DumpedCall]:
    """The FP4 MoE calls of a dump (``call``: the 1-based index of one of them).  Folders of other
    functions are skipped; a damaged MoE call folder is an error."""
    out = []
    for f in call_folders(path):
        try:
            fn = _meta_records(f).get("function_name")
        except ValueError:
            fn = next((e for e in ENTRY_POINTS if f"_{e}_call" in f.name), None)
            if fn is None:
                continue
        if fn in ENTRY_POINTS:
            out.append(f)
    if not out:
        raise ValueError(f"dump: {path} holds no FP4 MoE call folder ({', '.join(ENTRY_POINTS)})")
    if call is not None:
        if not 1 <= call <= len(out):
            raise ValueError(f"call: expected 1..{len(out)} (the dump's MoE calls), got {call}")
        out = [out[call - 1]]
    return [read_call(f, model=model) for f in out]
