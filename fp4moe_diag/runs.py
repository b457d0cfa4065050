"""The one sweep pipeline: a :class:`SweepSpec` (which shapes, backends, timing) -> a run folder.

``python -m fp4moe_diag sweep``, the notebooks' local runs, torchrun ranks (:mod:`.distributed.shard`) and
``compare-versions`` children (:mod:`.versions`) all go through :func:`run_sweep`, so a spec gives the same cases,
the same scaling, the same measuring options and the same files wherever it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pandas as pd

from .problem.case import MoECase
from .measure.options import MeasureOptions
from .paths import RUNS_ROOT, SHAPES_CSV, repo_path

#: ``hidden_scale`` divides H and I and rounds down to a multiple of this (at least this): the MXFP4 block (32)
#: and FlashInfer's CUTLASS alignment (128) both divide it.
SCALE_MULTIPLE = 128


def scaled_case(case: MoECase, scale: int, multiple: int = SCALE_MULTIPLE) -> MoECase:
    """``case`` with H and I divided by ``scale``, kept a multiple of ``multiple`` (and at least ``multiple``)."""
    if not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
        raise ValueError(f"hidden_scale: expected an int >= 1, got {scale!r}")
    if scale == 1:
        return case

    def s(v: int) -> int:
        return max(multiple, (v // scale) // multiple * multiple)

    return case.replace(hidden_size=s(case.hidden_size), intermediate_size=s(case.intermediate_size))


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep measures.  ``models`` entries are ``"model"``, ``"model:ep"`` or ``"model:ep:max_tokens"``
    (in the order given: earlier entries run first); ``ep_sizes``/``tokens``/``max_tokens`` apply where an
    entry does not say; ``hidden_scale`` > 1 divides H and I (see :func:`scaled_case`).  ``options`` is how each
    tactic is measured: it reaches the timing code as it is (:class:`~fp4moe_diag.measure.options.MeasureOptions`)."""

    models: tuple[str, ...]
    backends: tuple[str, ...] = ("reference",)
    ep_sizes: Optional[tuple[int, ...]] = None
    tokens: Optional[tuple[int, ...]] = None
    max_tokens: Optional[int] = None
    hidden_scale: int = 1
    device: Optional[str] = None
    measure_ceilings: bool = True
    shapes_file: Optional[str] = None
    tag: str = ""
    options: MeasureOptions = field(default_factory=MeasureOptions)
    #: "log:PATH" / "dump:DIR" (fp4moe_diag.capture.source): the cases come from the user's log or dump (a dump's
    #: inputs are its recorded tensors); then ``models`` may be empty and tokens/EP/scale are not applied
    source: Optional[str] = None

    def __post_init__(self) -> None:
        if self.source is not None:
            from .capture.source import parse_source

            parse_source(self.source)  # a ValueError naming the bad source, before anything runs
            if self.tokens or self.ep_sizes or self.max_tokens or self.hidden_scale != 1:
                raise ValueError("source: the cases of a log or dump are taken as they are; tokens, ep_sizes, "
                                 "max_tokens and hidden_scale do not apply")
            if not self.models:
                object.__setattr__(self, "models", ("from-source",))
        for name in ("models", "backends"):
            v = getattr(self, name)
            if isinstance(v, str) or not v or not all(isinstance(x, str) and x for x in v):
                raise ValueError(f"{name}: expected a non-empty sequence of names, got {v!r}")
            object.__setattr__(self, name, tuple(v))
        for name in ("ep_sizes", "tokens"):
            v = getattr(self, name)
            if v is not None:
                if isinstance(v, (str, int)) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                                       for x in v) or not v:
                    raise ValueError(f"{name}: expected a non-empty sequence of ints >= 1, got {v!r}")
                object.__setattr__(self, name, tuple(v))
        if not isinstance(self.hidden_scale, int) or isinstance(self.hidden_scale, bool) or self.hidden_scale < 1:
            raise ValueError(f"hidden_scale: expected an int >= 1, got {self.hidden_scale!r}")
        v = self.max_tokens
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ValueError(f"max_tokens: expected an int >= 1 or None, got {v!r}")
        if not isinstance(self.options, MeasureOptions):
            raise ValueError(f"options: expected a MeasureOptions, got {type(self.options).__name__}")
        for name in self.options.filters:
            if name not in self.backends:
                raise ValueError(f"tactic_filters: the filter of backend {name!r} names no backend of backends "
                                 f"{list(self.backends)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, ``options`` as a dict (:meth:`from_dict` reads it back)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        return {**d, "options": self.options.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SweepSpec":
        kw = dict(d)
        kw["options"] = MeasureOptions.from_dict(kw.get("options", {}))
        for name in ("models", "backends", "ep_sizes", "tokens"):
            if kw.get(name) is not None:
                kw[name] = tuple(kw[name])
        return cls(**kw)

    def row_config(self) -> dict[str, Any]:
        """What decides a case's rows (for resuming a run): not which models, EP sizes or tokens run.  The options
        are recorded flat, as before they had an object of their own; the library-only ones (which no flag sets)
        only where they differ from the default, so a run folder made before keeps its configuration hash."""
        d = self.to_dict()
        for k in ("models", "ep_sizes", "tokens", "max_tokens", "tag", "shapes_file", "options"):
            d.pop(k)
        default = MeasureOptions()
        for k, v in self.options.to_dict().items():
            if k not in LIBRARY_ONLY_OPTIONS or v != getattr(default, k):
                d[k] = v
        return d

    def cases(self) -> list[MoECase]:
        """The cases of this spec, in run order (a ValueError when none match, or when a case's inputs would not
        fit: :func:`check_input_sizes`)."""
        from .problem.shapes import load_vllm_cases

        if self.source is not None:
            from .capture.source import source_cases

            return [sc.case for sc in source_cases(self.source)[0]]

        path = repo_path(self.shapes_file) if self.shapes_file else SHAPES_CSV
        cases: list[MoECase] = []
        for entry in self.models:
            parts = entry.split(":")
            if len(parts) > 3 or not parts[0]:
                raise ValueError(f"models: expected 'model', 'model:ep' or 'model:ep:max_tokens', got {entry!r}")
            try:
                eps = [int(parts[1])] if len(parts) > 1 and parts[1] else self.ep_sizes
                mx = int(parts[2]) if len(parts) > 2 else self.max_tokens
            except ValueError:
                raise ValueError(f"models: the ep and max_tokens of {entry!r} must be integers") from None
            cases += load_vllm_cases(path, models=[parts[0]], ep_sizes=list(eps) if eps else None,
                                     token_counts=list(self.tokens) if self.tokens else None, max_tokens=mx)
        if not cases:
            raise ValueError(f"models: no cases in {path} match models={list(self.models)} ep_sizes={self.ep_sizes} "
                             f"tokens={self.tokens} max_tokens={self.max_tokens}")
        cases = [scaled_case(c, self.hidden_scale) for c in cases]
        check_input_sizes(cases)
        return cases


#: MeasureOptions fields no CLI flag sets (recorded in a run's configuration only when not the default)
LIBRARY_ONLY_OPTIONS = ("flush_l2", "check_correctness", "repeat_best", "commit_best")


def check_input_sizes(cases: list[MoECase]) -> None:
    """Refuse, before any run folder or tensor exists, a case whose inputs would not fit the allocation limit of
    :func:`~fp4moe_diag.problem.inputs.build_inputs`: the ValueError names ``tokens`` (or ``models``/``hidden_scale``
    when even one token would not fit)."""
    from .problem.inputs import MAX_INPUT_BYTES_ENV, estimate_input_bytes, max_input_bytes

    limit = max_input_bytes()
    for c in cases:
        need = estimate_input_bytes(c)
        if need <= limit:
            continue
        gib = f"about {need / 2**30:.1f} GiB of inputs, over the limit of {limit / 2**30:.1f} GiB ({MAX_INPUT_BYTES_ENV})"
        if estimate_input_bytes(c.with_tokens(1)) > limit:
            raise ValueError(f"models: {c.label} (hidden_size={c.hidden_size}, intermediate_size="
                             f"{c.intermediate_size}, local_num_experts={c.local_num_experts}) needs {gib} even for one "
                             "token; raise hidden_scale or the limit")
        raise ValueError(f"tokens: {c.num_tokens} tokens of {c.label} need {gib}; give fewer tokens")


def default_out_dir(spec: SweepSpec, gpu_name: str) -> Path:
    """``data/runs/<date>-<gpu>[-tag]`` under the repository (not the working directory)."""
    from .run_folder import run_dir_name

    return RUNS_ROOT / run_dir_name(gpu_name, tag=spec.tag)


def run_sweep(spec: SweepSpec, out_dir: Any = None, *, progress_bar: bool = True,
              on_case: Optional[Callable[[Any], None]] = None, log: Callable[[str], None] = print,
              mode: str = "new", shard: Optional[tuple[int, int]] = None, run_id: Optional[str] = None,
              clock: Optional[Callable[[], float]] = None) -> tuple[pd.DataFrame, Path]:
    """Run ``spec``: every case x backend x tactic through the device-safe tuner (:func:`fp4moe_diag.tune.tune_case`
    with ``spec.options`` as they are), one part file per case x backend written as it finishes, in a locked
    :class:`~fp4moe_diag.run_folder.RunFolder` (a kill cannot tear it; ``mode`` "new" refuses an existing run,
    "resume" skips what is complete with the same configuration, "overwrite" replaces it).  Everything is checked
    (device, cases, input sizes, the folder) before the folder is made, and a sweep that fails before its first
    part removes the folder it made.  ``shard=(rank, world)`` keeps every ``world``-th case x backend from ``rank``
    on (:mod:`fp4moe_diag.distributed.shard`); ``run_id`` (default: the folder's name) goes into every row;
    ``clock`` times the CPU path (tests).  Returns ``(rows, run folder)``."""
    from .backends import get_backend
    from .backends.triton.assembler import check_setting as check_tnf_setting
    from .problem.inputs import resolve_device
    from .environment import environment_info
    from .tune import SweepContext

    dev = resolve_device(spec.device)
    cases = spec.cases()  # bad specs and oversized inputs fail here, before any folder or kernel
    make_inputs = None
    if spec.source is not None:  # the user's log / dump: its cases, and a dump's recorded tensors
        from .capture.source import source_cases

        make_inputs = source_cases(spec.source)[1]
    backends = [get_backend(b) for b in spec.backends]
    check_tnf_setting()
    env = environment_info(dev)
    out = Path(out_dir) if out_dir is not None else default_out_dir(spec, env["gpu_name"])
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    config = {**spec.row_config(), "device": str(dev), "gpu_name": env["gpu_name"],
              "flashinfer_version": env.get("flashinfer_version", ""), "triton_version": env.get("triton_version", "")}
    items = [(c, b) for c in cases for b in backends]
    if shard is not None:
        items = items[shard[0]::shard[1]]
    t0 = time.perf_counter()
    with _new_run_folder(out, config, mode) as rf:
        ctx = SweepContext(dev, env, _ceilings(spec, dev, log), run_id or out.name, clock)
        done = rf.done_cases()
        todo = [(c, b) for c, b in items if case_key(c, b.name) not in done]
        if len(todo) < len(items):
            log(f"resuming {out}: {len(items) - len(todo)} case x backend already complete")
        _sweep_items(todo, ctx, spec.options, rf, progress_bar, on_case, make_inputs, spec.source)
        rf.merge()
        df = rf.load()
    log(f"{len(df)} rows in {time.perf_counter() - t0:.0f} s -> {out}")
    return df, out


def _ceilings(spec: SweepSpec, dev: Any, log: Callable[[str], None]) -> Any:
    if dev.type != "cuda" or not spec.measure_ceilings:
        return None
    from .measure.ceilings import measure_ceilings

    c = measure_ceilings(dev)
    log(f"ceilings: read {c.read_bytes_per_s / 1e9:.0f} GB/s, copy {c.copy_bytes_per_s / 1e9:.0f} "
        f"GB/s, bf16 {c.bf16_flops_per_s / 1e12:.0f} TFLOP/s")
    return c


def _sweep_items(todo: list, ctx: Any, options: MeasureOptions, rf: Any, progress_bar: bool,
                 on_case: Optional[Callable[[Any], None]], make_inputs: Optional[Callable] = None,
                 source: Optional[str] = None) -> None:
    """The one loop: per case, inputs and reference built once (on first use) and shared by its backends; each
    case x backend's rows written as its part file as soon as it finishes (a killed run keeps them).
    ``make_inputs(case, device)``: a dump's recorded tensors instead of built ones; ``source`` goes into the
    rows' ``input_source``."""
    import torch
    from tqdm.auto import tqdm

    from .tune import CaseInputs, tune_case

    bar = tqdm(total=len(todo), disable=not progress_bar, desc="sweep")
    for case in dict.fromkeys(c for c, _ in todo):
        data = CaseInputs(case, ctx.device, options.check_correctness, make_inputs=make_inputs)
        for b in [b for c, b in todo if c is case]:
            bar.set_postfix_str(f"{case.label} {b.name}")
            res = tune_case(case, b, data, ctx, options)
            if source is not None:
                res.rows["input_source"] = source
            rf.append_case(case_key(case, b.name), res.rows)
            if on_case is not None:
                on_case(res)
            bar.update(1)
        del data
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    bar.close()


@contextlib.contextmanager
def _new_run_folder(out: Path, config: dict, mode: str) -> Iterator[Any]:
    """The :class:`~fp4moe_diag.run_folder.RunFolder` at ``out``; if this call made the folder and the sweep fails
    before its first part, the folder goes again (a refused command leaves nothing behind)."""
    from .run_folder import PARTS_DIR
    from .run_folder import RunFolder

    fresh = not out.exists()
    try:
        with RunFolder(out, config, mode=mode) as rf:
            yield rf
    except BaseException:
        if fresh and out.is_dir() and not any((out / PARTS_DIR).glob("*.parquet")):
            shutil.rmtree(out, ignore_errors=True)
        raise


def case_key(case: MoECase, backend: str) -> str:
    """A run folder's key of one case x backend."""
    return f"{case.label}|seed={case.seed}|{backend}"
