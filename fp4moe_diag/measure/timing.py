"""Timing harness: CUDA events or graph replays, warm-up, L2 flush, medians and spread.

Each timed launch is preceded (outside the timed region) by a write of a buffer twice the size
of L2 (H200: 60 MB) so weights come from HBM, as they do in a real decode step where the other
layers have evicted them.  Optionally the launch is captured once in a CUDA graph and replayed,
which hides Python/launch gaps for tiny decode shapes.
"""

from __future__ import annotations

import math
import statistics
import time
import dataclasses
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

import torch


#: what ``time_method`` may say
TIME_METHODS = ("cuda-events", "cuda-graph", "wall-clock")


@dataclass(frozen=True)
class TimingStats:
    median_us: float
    p10_us: float
    p90_us: float
    mean_us: float
    std_us: float
    min_us: float
    max_us: float
    repeats: int
    method: str  # one of TIME_METHODS
    #: why a requested CUDA-graph capture failed (the row was then timed with events), else ""
    capture_error: str = ""
    #: the SM clock (MHz) as the timed repeats finish (:func:`sm_clock_mhz`); NaN on CPU or without NVML
    sm_clock_mhz: float = float("nan")

    @property
    def spread(self) -> float:
        """(p90 - p10) / median."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us > 0 else float("nan")

    def as_dict(self, prefix: str = "time_") -> dict[str, Any]:
        d = {f"{prefix}{k}": v for k, v in asdict(self).items()}
        d[f"{prefix}spread"] = self.spread
        return d


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(times_us: list[float], method: str) -> TimingStats:
    if not times_us:
        raise ValueError("times_us: expected at least one timing")
    return TimingStats(
        median_us=statistics.median(times_us),
        p10_us=_quantile(times_us, 0.1),
        p90_us=_quantile(times_us, 0.9),
        mean_us=statistics.fmean(times_us),
        std_us=statistics.pstdev(times_us) if len(times_us) > 1 else 0.0,
        min_us=min(times_us),
        max_us=max(times_us),
        repeats=len(times_us),
        method=method,
    )


def sm_clock_mhz(dev: torch.device) -> float:
    """The SM clock of ``dev`` now (NVML, through ``torch.cuda.clock_rate``), NaN where NVML is not there.  Taken
    after the timed repeats are queued and before the host waits for them, so that it reads the clock under that load
    (a GPU's clocks fall within milliseconds of going idle): two samples of one shape that differ by several per
    cent can then say whether the clocks differed (session 20's 20b EP1 T=16384 could not)."""
    try:
        return float(torch.cuda.clock_rate(dev))
    except Exception:  # noqa: BLE001 -- no pynvml / no NVML / a device NVML does not see: the column stays empty
        return float("nan")


def l2_cache_bytes(device: Any) -> int:
    dev = torch.device(device)
    if dev.type != "cuda":
        return 0
    props = torch.cuda.get_device_properties(dev)
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


class L2Flusher:
    """Writes a buffer of ``factor x L2`` bytes; call before each timed launch."""

    def __init__(self, device: Any, factor: float = 2.0):
        self.device = torch.device(device)
        n = int(l2_cache_bytes(self.device) * factor)
        self.buf = torch.empty(max(n, 1), dtype=torch.uint8, device=self.device) if n else None

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.zero_()


def _capture(fn: Callable[[], Any], dev: torch.device, stream: Any) -> tuple[Optional[Any], str]:
    """Capture one call of ``fn`` in a CUDA graph: (graph, "") or (None, reason)."""
    fn()  # lazy initialisation (allocations, JIT) outside the capture
    torch.cuda.synchronize(dev)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream(dev)
    s.wait_stream(stream)
    try:
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                fn()
    except Exception as e:  # noqa: BLE001 -- any capture failure falls back to eager timing
        torch.cuda.synchronize(dev)
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    stream.wait_stream(s)
    return g, ""


def time_fn(
    fn: Callable[[], Any],
    device: Any,
    warmup: int = 5,
    repeats: int = 30,
    flush_l2: bool = True,
    cuda_graph: bool = False,
    max_seconds: Optional[float] = None,
    clock: Callable[[], float] = time.perf_counter,
) -> TimingStats:
    """Median-of-repeats timing of ``fn`` on ``device`` (CUDA events on GPU, ``clock`` on CPU).

    ``clock`` (seconds) times the CPU path and bounds ``max_seconds``; tests pass a fake clock so
    their verdicts never depend on the machine's load."""
    if repeats < 1:
        raise ValueError(f"repeats: expected >= 1, got {repeats}")
    dev = torch.device(device)
    if dev.type != "cuda":
        for _ in range(warmup):
            fn()
        ts = []
        for _ in range(repeats):
            t0 = clock()
            fn()
            ts.append((clock() - t0) * 1e6)
        return summarize(ts, "wall-clock")

    stream = torch.cuda.current_stream(dev)
    launch = fn
    method = "cuda-events"
    capture_error = ""
    if cuda_graph:
        graph, why = _capture(fn, dev, stream)
        if graph is not None:
            launch, method = graph.replay, "cuda-graph"
        else:  # not capturable (e.g. a host sync inside): time eagerly and say so in the method
            capture_error = why
    flusher = L2Flusher(dev) if flush_l2 else None
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize(dev)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    t_begin = clock()
    done = 0
    for i in range(repeats):
        if flusher is not None:
            flusher()
        starts[i].record(stream)
        launch()
        ends[i].record(stream)
        done += 1
        if max_seconds is not None and i % 8 == 7:
            torch.cuda.synchronize(dev)
            if clock() - t_begin > max_seconds:
                break
    clock_mhz = sm_clock_mhz(dev)  # the last repeats may still run: the clock under load
    torch.cuda.synchronize(dev)
    ts = [starts[i].elapsed_time(ends[i]) * 1e3 for i in range(done)]
    return dataclasses.replace(summarize(ts, method), capture_error=capture_error, sm_clock_mhz=clock_mhz)
