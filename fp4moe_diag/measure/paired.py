"""Two calls timed in alternation (a paired comparison): round ``r`` replays each call once, L2 flushed before each,
in an order that alternates from round to round, so that a drift of the GPU's clocks over the timing (power, heat)
falls on both alike and each round gives one ratio ``a / b`` of two calls made a few hundred microseconds apart.

Why: at 20b EP1 T=16384 on the H100 (6.2-6.9 ms a call) the timing pass and the CUPTI pass of one tactic disagree by
-4 to +10 % (``docs/goals-h100-s17.md``), both backends and both ways, so two medians taken one after the other
cannot tell a 1 % difference.  The per-round ratio can: :func:`paired_summary` gives its median and p10 / p90 and the
verdict ``ahead`` (a is faster in at least 9 rounds of 10: p90 below 1), ``behind`` (p10 above 1) or ``level``.

:func:`round_orders` and :func:`paired_summary` are pure (tested on CPU); :func:`time_paired` needs a CUDA GPU.
:func:`replay_rounds` also times the finalists of a sweep's ``--interleave`` pass (on CPU by a clock: tested)."""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Hashable, Optional, Sequence

from .timing import TimingStats, _quantile, summarize


def round_orders(names: Sequence[Hashable], rounds: int) -> list[list[Hashable]]:
    """The order of the calls in each round: rotated by one each round (a, b / b, a / ... for two), so that each call
    goes first in as many rounds as the others (to within one)."""
    if len(set(names)) != len(names) or len(names) < 2:
        raise ValueError(f"names: expected two or more distinct calls, got {list(names)}")
    if rounds < 1:
        raise ValueError(f"rounds: expected a positive count, got {rounds}")
    n = len(names)
    return [[names[(i + r) % n] for i in range(n)] for r in range(rounds)]


@dataclass(frozen=True)
class PairedSummary:
    """``a`` against ``b`` over the same rounds: each one's timing statistics and the per-round ratio ``a / b``."""

    a: TimingStats
    b: TimingStats
    ratio_median: float
    ratio_p10: float
    ratio_p90: float
    a_faster_share: float  # the share of rounds where a's call took less time than b's
    verdict: str  # ahead | behind | level (a against b)

    def as_dict(self) -> dict[str, Any]:
        return {"a_median_us": self.a.median_us, "a_p10_us": self.a.p10_us, "a_p90_us": self.a.p90_us,
                "b_median_us": self.b.median_us, "b_p10_us": self.b.p10_us, "b_p90_us": self.b.p90_us,
                "rounds": self.a.repeats, "ratio_median": self.ratio_median, "ratio_p10": self.ratio_p10,
                "ratio_p90": self.ratio_p90, "a_faster_share": self.a_faster_share, "verdict": self.verdict}


def paired_summary(a_us: Sequence[float], b_us: Sequence[float]) -> PairedSummary:
    """The paired comparison of two series of the same rounds (``a_us[i]`` and ``b_us[i]`` from round ``i``)."""
    if len(a_us) != len(b_us) or not a_us:
        raise ValueError(f"a_us, b_us: expected two series of the same rounds, got {len(a_us)} and {len(b_us)} times")
    if min(*a_us, *b_us) <= 0:
        raise ValueError("a_us, b_us: every time must be positive")
    ratios = sorted(x / y for x, y in zip(a_us, b_us))
    p10, p90 = _quantile(ratios, 0.1), _quantile(ratios, 0.9)
    verdict = "ahead" if p90 < 1 else "behind" if p10 > 1 else "level"
    return PairedSummary(a=summarize(list(a_us), "cuda-graph"), b=summarize(list(b_us), "cuda-graph"),
                         ratio_median=statistics.median(ratios), ratio_p10=p10, ratio_p90=p90,
                         a_faster_share=sum(x < y for x, y in zip(a_us, b_us)) / len(a_us), verdict=verdict)


def capture_graph(fn: Callable[[], Any], device: Any) -> Callable[[], Any]:
    """``fn`` captured in a CUDA graph: its replay (a ValueError if it cannot be captured); on CPU ``fn`` itself,
    called once (what the capture's first call does on GPU: lazy allocations, compiles)."""
    import torch

    from .timing import _capture

    dev = torch.device(device)
    if dev.type != "cuda":
        fn()
        return fn
    g, why = _capture(fn, dev, torch.cuda.current_stream(dev))
    if g is None:
        raise ValueError(f"launch: cannot be captured in a CUDA graph ({why})")
    return g.replay


def replay_rounds(calls: dict[Hashable, Callable[[], Any]], device: Any, rounds: int, warmup: int = 0,
                  flush_l2: bool = True, max_seconds: Optional[float] = None,
                  clock: Callable[[], float] = time.perf_counter, sync_after_flush: bool = False,
                  around: Optional[Callable[[int, Hashable], ContextManager]] = None
                  ) -> tuple[dict[Hashable, list[float]], float]:
    """Per call, its time (us) in each round (:func:`round_orders`), and the SM clock (MHz, NaN on CPU) read as the
    last rounds run. Each call is made ``warmup`` times first, untimed. On GPU each call is timed by CUDA events, the
    L2 flushed before it, the calls queued back to back (the GPU never idles between a flush and its call); with
    ``sync_after_flush`` the host waits for the flush before it queues the call (the GPU idles for that round trip,
    as in the CUPTI pass of :mod:`.kernel_time`). ``around(i, name)``: a context entered around the ``i``-th timed
    call, that of ``name`` (its events inside; :mod:`.traced_rounds` names the call for the profiler). On CPU by
    ``clock``.
    ``max_seconds``: no round starts after that long (every call keeps the same number of rounds)."""
    import torch

    from .timing import L2Flusher, sm_clock_mhz

    dev = torch.device(device)
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    orders = round_orders(list(calls), rounds)
    t_begin = clock()
    if dev.type != "cuda":
        times: dict[Hashable, list[float]] = {k: [] for k in calls}
        n = 0
        for order in orders:
            for k in order:
                with around(n, k) if around is not None else contextlib.nullcontext():
                    t0 = clock()
                    calls[k]()
                    times[k].append((clock() - t0) * 1e6)
                n += 1
            if max_seconds is not None and clock() - t_begin > max_seconds:
                break
        return times, float("nan")
    stream = torch.cuda.current_stream(dev)
    torch.cuda.synchronize(dev)
    flush = L2Flusher(dev) if flush_l2 else None
    events: dict[Hashable, list] = {k: [] for k in calls}
    n = 0
    for r, order in enumerate(orders):
        for k in order:
            if flush is not None:
                flush()
            if sync_after_flush:
                torch.cuda.synchronize(dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with around(n, k) if around is not None else contextlib.nullcontext():
                start.record(stream)
                calls[k]()
                end.record(stream)
            events[k].append((start, end))
            n += 1
        if max_seconds is not None and r % 8 == 7:
            torch.cuda.synchronize(dev)
            if clock() - t_begin > max_seconds:
                break
    mhz = sm_clock_mhz(dev)  # the last rounds may still run: the clock under load
    torch.cuda.synchronize(dev)
    return {k: [s.elapsed_time(e) * 1e3 for s, e in pairs] for k, pairs in events.items()}, mhz


def time_paired(launches: dict[str, Callable[[], Any]], device: Any, rounds: int = 30,
                warmup: int = 30, flush_l2: bool = True, sync_after_flush: bool = False) -> dict[str, list[float]]:
    """Per call name, its time (us) in each round: every call captured in a CUDA graph, replayed ``warmup`` times
    untimed, then ``rounds`` rounds of one replay each (:func:`replay_rounds`), the L2 flushed before each replay
    (``flush_l2=False``: not, each call then finds the L2 as the call before left it; ``sync_after_flush``: the GPU
    idles for a host round trip between the flush and the call, :func:`replay_rounds`).
    A call that cannot be captured is a ValueError naming it (a paired time is a graph replay's)."""
    return replay_rounds(graph_replays(launches, device), device, rounds, warmup, flush_l2=flush_l2,
                         sync_after_flush=sync_after_flush)[0]


def graph_replays(launches: dict[str, Callable[[], Any]], device: Any) -> dict[str, Callable[[], Any]]:
    """Each launch captured in a CUDA graph: its replay, by name.  Not a CUDA ``device``, or a launch that cannot be
    captured: a ValueError naming it (a paired time is a graph replay's)."""
    import torch

    if torch.device(device).type != "cuda":
        raise ValueError(f"device: a paired timing needs a CUDA device, got {device}")
    graphs = {}
    for name, fn in launches.items():
        try:
            graphs[name] = capture_graph(fn, device)
        except ValueError as e:
            raise ValueError(f"launches: {name}: {e}") from None
    return graphs
