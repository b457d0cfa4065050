"""How every tactic is measured: one frozen :class:`MeasureOptions`, from the entry point (CLI flags, a notebook, a
``compare-versions`` child, a torchrun rank) to the code that times a launch, unchanged.

It is checked once, when made (a ``ValueError`` names the field); ``tactic_filters`` is parsed then too and kept as
:attr:`MeasureOptions.filters`.  :meth:`MeasureOptions.to_dict` / :meth:`MeasureOptions.from_dict` carry it across a
process boundary as JSON.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


def _int(name: str, v: Any, lo: int, optional: bool = False) -> None:
    if optional and v is None:
        return
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ValueError(f"{name}: expected an int >= {lo}{' or None' if optional else ''}, got {v!r}")


def parse_tactic_filters(entries: Any) -> dict[str, str]:
    """``("backend=REGEX", ...)`` -> ``{backend: REGEX}`` (a ValueError names a bad entry or a backend given twice)."""
    if isinstance(entries, str):
        raise ValueError(f"tactic_filters: expected a sequence of 'backend=REGEX' entries, got the string {entries!r}")
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, rx = str(entry).partition("=")
        if not sep or not name or not rx:
            raise ValueError(f"tactic_filters: expected 'backend=REGEX', got {entry!r}")
        if name in out:
            raise ValueError(f"tactic_filters: backend {name!r} has two filters")
        try:
            re.compile(rx)
        except re.error as e:
            raise ValueError(f"tactic_filters: {entry!r} is not a valid regular expression ({e})") from None
        out[name] = rx
    return out


@dataclass(frozen=True)
class MeasureOptions:
    """The measuring knobs of a sweep (CLI flag in parentheses).

    ``warmup`` / ``repeats`` (``--warmup`` / ``--repeats``): untimed and timed launches of a fully timed tactic;
    ``cuda_graph`` (``--cuda-graph``): time graph replays; ``max_seconds_per_tactic`` (``--max-seconds-per-tactic``):
    stop timing a tactic after this long; ``screen`` / ``screen_top`` (``--screen`` / ``--screen-top``): two-pass
    timing, every tactic ``screen`` runs, then the ``screen_top`` fastest, the default and the combined tactic in
    full; ``kernel_time`` (``--kernel-time``): also the summed GPU kernel time per call (CUDA only);
    ``tactic_filters`` (``--tactics``): ``"backend=REGEX"`` entries, only that backend's tactics whose label matches;
    ``interleave`` (``--interleave``): the screen taken again in the reverse order (each screen row the mean of both
    passes' medians) before the finalists are picked, and the second pass times its tactics in ``repeats``
    alternating rounds, one graph replay each a round, instead of one tactic after another (a clock that drifts over
    a pass falls on all alike).
    Library-only: ``flush_l2`` (write 2x L2 before each timed launch), ``check_correctness`` (every tactic against the
    float32 reference), ``repeat_best`` (re-time the best tactic at the end: ``noise_ratio``), ``commit_best`` (hand
    the best tactic to the library's own tuner)."""

    warmup: int = 5
    repeats: int = 30
    cuda_graph: bool = False
    max_seconds_per_tactic: Optional[float] = 10.0
    screen: Optional[int] = None
    screen_top: int = 4
    kernel_time: bool = False
    tactic_filters: tuple[str, ...] = ()
    flush_l2: bool = True
    check_correctness: bool = True
    repeat_best: bool = True
    commit_best: bool = False
    interleave: bool = False
    #: ``tactic_filters`` parsed: backend -> regular expression (made once, in ``__post_init__``)
    filters: Mapping[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        _int("warmup", self.warmup, 0)
        _int("repeats", self.repeats, 1)
        _int("screen", self.screen, 1, optional=True)
        _int("screen_top", self.screen_top, 1)
        m = self.max_seconds_per_tactic
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m)
                              or m <= 0):
            raise ValueError(f"max_seconds_per_tactic: expected a finite number > 0 or None, got {m!r}")
        for name in ("cuda_graph", "kernel_time", "flush_l2", "check_correctness", "repeat_best", "commit_best",
                     "interleave"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        if self.interleave and (self.screen is None or not self.cuda_graph):
            raise ValueError(f"interleave: needs screen (its finalists are the ones interleaved) and cuda_graph (a "
                             f"round replays each one's graph), got screen={self.screen}, cuda_graph={self.cuda_graph}")
        filters = parse_tactic_filters(self.tactic_filters)
        object.__setattr__(self, "tactic_filters", tuple(self.tactic_filters))
        object.__setattr__(self, "filters", filters)

    def tactic_filter(self, backend: str) -> Optional[str]:
        """The regular expression for ``backend``'s tactic labels, or None (every tactic)."""
        return self.filters.get(backend)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MeasureOptions":
        """The inverse of :meth:`to_dict` (lists from JSON become tuples; an unknown key is a ValueError)."""
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"options: unknown field(s) {unknown}; expected some of {sorted(names)}")
        kw = dict(d)
        if "tactic_filters" in kw:
            kw["tactic_filters"] = tuple(kw["tactic_filters"])
        return cls(**kw)


__all__ = ["MeasureOptions", "parse_tactic_filters"]
