"""``"log:PATH"`` / ``"dump:DIR"``: the cases (and, for a dump, the inputs) a sweep takes from the user's evidence.

A log (FlashInfer API log or vLLM kwargs log, detected: :func:`detect_log_format`) gives cases whose inputs are
built from the seed; a dump gives cases whose inputs are the recorded tensors (:func:`.replay.inputs_from_dump`).
A source string may add ``#call=N``, ``#process=P`` and (dumps) ``#layout=canonical``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..problem.case import MoECase
from .derive import SourcedCase

#: a log longer than this is no single run's API log (the CLI reads logs up to this size)
MAX_LOG_BYTES = 256 * 2**20


@dataclass(frozen=True)
class CaptureSource:
    kind: str  # "log" | "dump"
    path: Path
    call: Optional[int] = None
    process: Optional[str] = None
    layout: str = "kernel"

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.path}"


def parse_source(text: str) -> CaptureSource:
    """``log:PATH[#call=N][#process=P]`` or ``dump:DIR[#call=N][#layout=kernel|canonical]``."""
    if not isinstance(text, str) or ":" not in text:
        raise ValueError(f"source: expected 'log:PATH' or 'dump:DIR', got {text!r}")
    kind, _, rest = text.partition(":")
    if kind not in ("log", "dump"):
        raise ValueError(f"source: expected 'log:PATH' or 'dump:DIR', got {text!r}")
    path, *opts = rest.split("#")
    kw: dict[str, Any] = {}
    for o in opts:
        k, eq, v = o.partition("=")
        if not eq or k not in ("call", "process", "layout"):
            raise ValueError(f"source: unknown option {o!r} (expected call=N, process=P or layout=...)")
        kw[k] = v
    if "call" in kw:
        if not kw["call"].isdigit() or int(kw["call"]) < 1:
            raise ValueError(f"source: call= expects an int >= 1, got {kw['call']!r}")
        kw["call"] = int(kw["call"])
    src = CaptureSource(kind, Path(path).expanduser(), **kw)
    if kind == "log" and not src.path.is_file():
        raise ValueError(f"source: log {path!r} does not exist or is not a file")
    if kind == "dump" and not src.path.is_dir():
        raise ValueError(f"source: dump {path!r} does not exist or is not a directory")
    if src.layout not in ("kernel", "canonical"):
        raise ValueError(f"source: layout= expects kernel or canonical, got {src.layout!r}")
    return src


def read_log_text(path: Path) -> str:
    if path.stat().st_size > MAX_LOG_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size} bytes, over the {MAX_LOG_BYTES} a log may have")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None


def detect_log_format(text: str, origin: str = "log") -> str:
    """``"flashinfer"`` (FlashInfer API log records) or ``"vllm"`` (vLLM kwarg lines); a text with both or
    neither is refused, naming both formats."""
    from ..problem.vllm_log import is_kwarg_line  # noqa: PLC0415
    from .flashinfer_log import is_flashinfer_log  # noqa: PLC0415

    fi = is_flashinfer_log(text)
    vl = any(is_kwarg_line(ln) for ln in text.splitlines())
    if fi and vl:
        raise ValueError(f"{origin}: holds both FlashInfer API log records and vLLM kwarg lines; pass one of them")
    if fi:
        return "flashinfer"
    if vl:
        return "vllm"
    raise ValueError(f"{origin}: neither a FlashInfer API log ('FlashInfer API Call: NAME' records, "
                     "FLASHINFER_LOGLEVEL=3 or 5) nor a vLLM kwargs log ('(EngineCore_DP0 pid=N) name : value' lines)")


def log_cases(src: CaptureSource, model: Optional[str] = None) -> list[SourcedCase]:
    text = read_log_text(src.path)
    if detect_log_format(text, str(src.path)) == "flashinfer":
        from .flashinfer_log import cases_from_log  # noqa: PLC0415

        return cases_from_log(text, str(src.path), process=src.process, call=src.call, model=model)
    if src.call is not None:
        raise ValueError("source: call= applies to FlashInfer logs; a vLLM kwargs log holds one call")
    from ..problem.vllm_log import parse_vllm_kwargs_log  # noqa: PLC0415

    case = parse_vllm_kwargs_log(text, model=model or "", process=src.process)
    import dataclasses  # noqa: PLC0415

    srcs = {f.name: "vLLM kwargs log (see fp4moe_diag.problem.vllm_log for how each field is read)"
            for f in dataclasses.fields(MoECase)}
    return [SourcedCase(case, "trtllm_fp4_block_scale_routed_moe (vLLM's kwargs)", None, srcs, str(src.path))]


@functools.lru_cache(maxsize=2)
def _dump_calls(path: str, call: Optional[int]) -> tuple:
    """A dump's MoE calls, read once per process (a sweep asks for its cases, then for their tensors)."""
    from .dump import read_dump  # noqa: PLC0415

    return tuple(read_dump(path, call=call))


def source_cases(source: Any) -> tuple[list[SourcedCase], Optional[Callable[[MoECase, Any], Any]]]:
    """The sourced cases of ``source`` and, for a dump, ``make_inputs(case, device)`` giving the recorded
    tensors of the call that case came from."""
    src = source if isinstance(source, CaptureSource) else parse_source(source)
    if src.kind == "log":
        return log_cases(src), None
    from .replay import inputs_from_dump  # noqa: PLC0415

    calls = _dump_calls(str(src.path.resolve()), src.call)
    by_case: dict[MoECase, Any] = {}
    for dc in calls:
        by_case.setdefault(dc.case, dc)  # several calls of one case: the first one is replayed

    def make_inputs(case: MoECase, device: Any) -> Any:
        if case not in by_case:
            raise ValueError(f"case: {case.label} is not a case of {src.label}")
        return inputs_from_dump(by_case[case], device, layout=src.layout)

    return [dc.sourced for dc in by_case.values()], make_inputs
