"""The one sweep pipeline: a :class:`SweepSpec` (which shapes, backends, timing) -> a run folder.

``python -m fp4moe_diag sweep`` and the notebooks' local runs both go through :func:`run_sweep`, so a
spec gives the same cases, the same scaling and the same files wherever it runs.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd

from .case import MoECase
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
    entry does not say; ``hidden_scale`` > 1 divides H and I (see :func:`scaled_case`)."""

    models: tuple[str, ...]
    backends: tuple[str, ...] = ("reference",)
    ep_sizes: Optional[tuple[int, ...]] = None
    tokens: Optional[tuple[int, ...]] = None
    max_tokens: Optional[int] = None
    hidden_scale: int = 1
    device: Optional[str] = None
    warmup: int = 5
    repeats: int = 30
    cuda_graph: bool = False
    measure_ceilings: bool = True
    max_seconds_per_tactic: Optional[float] = 10.0
    screen: Optional[int] = None
    screen_top: int = 4
    shapes_file: Optional[str] = None
    tag: str = ""
    kernel_time: bool = False
    tactic_filters: tuple[str, ...] = ()  # "backend=REGEX": only that backend's tactics whose label matches
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
        for name, lo in (("warmup", 0), ("repeats", 1), ("hidden_scale", 1), ("screen_top", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name}: expected an int >= {lo}, got {v!r}")
        for name in ("max_tokens", "screen"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{name}: expected an int >= 1 or None, got {v!r}")
        m = self.max_seconds_per_tactic
        if m is not None and not (isinstance(m, (int, float)) and m > 0):
            raise ValueError(f"max_seconds_per_tactic: expected a number > 0 or None, got {m!r}")
        object.__setattr__(self, "tactic_filters", tuple(self.tactic_filters))
        self.filter_map()

    def filter_map(self) -> dict[str, str]:
        """``tactic_filters`` as backend -> regular expression (a ValueError names a bad entry)."""
        out: dict[str, str] = {}
        for entry in self.tactic_filters:
            name, sep, rx = str(entry).partition("=")
            if not sep or not name or not rx:
                raise ValueError(f"tactic_filters: expected 'backend=REGEX', got {entry!r}")
            if name not in self.backends:
                raise ValueError(f"tactic_filters: {entry!r} names backend {name!r}, which is not in backends "
                                 f"{list(self.backends)}")
            if name in out:
                raise ValueError(f"tactic_filters: backend {name!r} has two filters")
            try:
                re.compile(rx)
            except re.error as e:
                raise ValueError(f"tactic_filters: {entry!r} is not a valid regular expression ({e})") from None
            out[name] = rx
        return out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def row_config(self) -> dict[str, Any]:
        """What decides a case's rows (for resuming a run): not which models, EP sizes or tokens run."""
        d = self.to_dict()
        for k in ("models", "ep_sizes", "tokens", "max_tokens", "tag", "shapes_file"):
            d.pop(k)
        return d

    def cases(self) -> list[MoECase]:
        """The cases of this spec, in run order (a ValueError when none match)."""
        from .shapes import load_vllm_cases

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
        return [scaled_case(c, self.hidden_scale) for c in cases]


def default_out_dir(spec: SweepSpec, gpu_name: str) -> Path:
    """``data/runs/<date>-<gpu>[-tag]`` under the repository (not the working directory)."""
    from .results import run_dir_name

    return RUNS_ROOT / run_dir_name(gpu_name, tag=spec.tag)


def run_sweep(spec: SweepSpec, out_dir: Any = None, *, progress_bar: bool = True,
              on_case: Optional[Callable[[Any], None]] = None, log: Callable[[str], None] = print,
              mode: str = "new", shard: Optional[tuple[int, int]] = None) -> tuple[pd.DataFrame, Path]:
    """Run ``spec``: every case x backend x tactic through the device-safe tuner, one part file per case x
    backend in a locked :class:`~fp4moe_diag.run_folder.RunFolder` (a kill cannot tear it; ``mode`` "new"
    refuses an existing run, "resume" skips what is complete with the same configuration, "overwrite"
    replaces it).  ``shard=(rank, world)`` keeps every ``world``-th case x backend from ``rank`` on (a sharded
    sweep: :mod:`fp4moe_diag.distributed.shard`).  Returns ``(rows, run folder)``."""
    from .backends import get_backend
    from .inputs import default_device, resolve_device
    from .measure.ceilings import measure_ceilings
    from .environment import environment_info
    from .tune import sweep

    dev = resolve_device(spec.device or default_device())
    cases = spec.cases()  # bad specs fail here, before any kernel
    make_inputs = None
    if spec.source is not None:  # the user's log / dump: its cases, and a dump's recorded tensors
        from .capture.source import source_cases

        make_inputs = source_cases(spec.source)[1]
    backends = [get_backend(b) for b in spec.backends]
    env = environment_info(dev)
    out = Path(out_dir) if out_dir is not None else default_out_dir(spec, env["gpu_name"])
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    ceilings = None
    if dev.type == "cuda" and spec.measure_ceilings:
        ceilings = measure_ceilings(dev)
        log(f"ceilings: read {ceilings.read_bytes_per_s / 1e9:.0f} GB/s, copy {ceilings.copy_bytes_per_s / 1e9:.0f} "
            f"GB/s, bf16 {ceilings.bf16_flops_per_s / 1e12:.0f} TFLOP/s")
    from .run_folder import RunFolder

    config = {**spec.row_config(), "device": str(dev), "gpu_name": env["gpu_name"],
              "flashinfer_version": env.get("flashinfer_version", ""), "triton_version": env.get("triton_version", "")}
    t0 = time.perf_counter()
    with RunFolder(out, config, mode=mode) as rf:
        done = rf.done_cases()
        items = [(c, b) for c in cases for b in backends]
        if shard is not None:
            rank, world = shard
            items = items[rank::world]
        todo = [(c, b) for c, b in items if case_key(c, b.name) not in done]
        if done:
            log(f"resuming {out}: {len(items) - len(todo)} case x backend already complete")

        def checkpoint(res: Any) -> None:  # a killed run keeps every finished case
            rows = res.rows.copy()
            rows["run_id"] = out.name
            if spec.source is not None:
                rows["input_source"] = spec.source
            rf.append_case(case_key(res.case, res.backend), rows)
            if on_case is not None:
                on_case(res)

        for c in dict.fromkeys(c for c, _ in todo):
            sweep([c], [b for cc, b in todo if cc is c], dev, env=env, warmup=spec.warmup, repeats=spec.repeats,
                  cuda_graph=spec.cuda_graph, ceilings=ceilings, progress_bar=progress_bar,
                  max_seconds_per_tactic=spec.max_seconds_per_tactic, screen_repeats=spec.screen,
                  screen_top=spec.screen_top, kernel_time=spec.kernel_time, on_result=checkpoint,
                  tactic_filters=spec.filter_map(), make_inputs=make_inputs)
        rf.merge()
        df = rf.load()
    log(f"{len(df)} rows in {time.perf_counter() - t0:.0f} s -> {out}")
    return df, out


def case_key(case: MoECase, backend: str) -> str:
    """A run folder's key of one case x backend."""
    return f"{case.label}|seed={case.seed}|{backend}"
