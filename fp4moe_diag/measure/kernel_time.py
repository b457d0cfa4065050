"""GPU kernel time per call, without host gaps: the sum of the durations of the kernels (and
memcpy/memset) one call puts on the GPU, from ``torch.profiler`` (Kineto's CUPTI activity records).

FlashInfer's ``bench_gpu_time_with_cupti`` (flashinfer/testing/utils.py, 0.7.4) does this with
cupti-python: runtime/driver launch records between two host timestamps of an iteration ->
their correlation ids -> the kernel records with those ids; it reports the span (first kernel
start to last kernel end).  Here the same attribution comes from torch.profiler, which every
machine with torch has: each call runs inside ``record_function("fp4moe::kcall#i")`` and ends
with a device synchronize; a device record belongs to call ``i`` when the CPU op it is linked to
(``linked_correlation_id``: the op that was innermost at launch, the call's own range for a bare
Triton launch or a CUDA-graph replay) started inside that range, or, for a record linked to nothing,
when it *started* inside the range (the synchronize keeps every kernel of the call inside it).
The L2 flush runs before the range, so it is never counted.

Two numbers per call: ``sum`` (the kernels' busy time: what the GPU would need with zero launch
gaps; it over-counts if kernels of one call overlap on several streams) and ``span`` (FlashInfer's:
first start to last end, gaps between kernels included).  :func:`summarize_calls` and
:func:`assign_to_calls` are pure (tested with synthetic records); :func:`time_kernels` profiles.
:func:`time_kernels_rounds` profiles several callables in alternating rounds in one session (the tuner's
``--interleave`` finalists), :func:`stats_by_owner` (pure) splits its calls by callable.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

import torch

from .timing import L2Flusher, TimingStats, _capture, summarize

MARK = "fp4moe::kcall#"


@dataclass(frozen=True)
class Activity:
    """One profiler record, reduced to what the attribution needs (times in ns, one clock)."""

    name: str
    on_device: bool  # a GPU record (kernel, memcpy, memset); False: a CPU op / runtime call / annotation
    start_ns: int
    end_ns: int
    correlation_id: int = 0
    linked_correlation_id: int = 0
    is_annotation: bool = False  # a GPU-side copy of a record_function range (not GPU work)
    is_runtime: bool = False  # a CUDA runtime/driver call: its correlation id is CUPTI's, not an op's

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class CallKernels:
    """The device records of one call."""

    index: int
    records: tuple[Activity, ...]

    @property
    def sum_us(self) -> float:
        return sum(r.duration_ns for r in self.records) / 1e3

    @property
    def span_us(self) -> float:
        if not self.records:
            return 0.0
        return (max(r.end_ns for r in self.records) - min(r.start_ns for r in self.records)) / 1e3

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in sorted(self.records, key=lambda r: r.start_ns))


def call_ranges(acts: Sequence[Activity], mark: str = MARK) -> tuple[dict[int, Activity],
                                                                      Callable[[int], Optional[int]]]:
    """The call ranges (CPU annotations ``mark + str(i)``) by index, and a function from a host time (ns) to the
    index of the range around it (None outside every range)."""
    ranges: dict[int, Activity] = {}
    for a in acts:
        if not a.on_device and a.name.startswith(mark) and a.name[len(mark):].isdigit():
            ranges[int(a.name[len(mark):])] = a
    order = sorted(ranges, key=lambda i: ranges[i].start_ns)
    starts = [ranges[i].start_ns for i in order]

    def call_of(t_ns: int) -> Optional[int]:
        j = bisect.bisect_right(starts, t_ns) - 1
        if j < 0:
            return None
        r = ranges[order[j]]
        return order[j] if r.start_ns <= t_ns <= r.end_ns else None

    return ranges, call_of


def assign_to_calls(activities: Iterable[Activity], mark: str = MARK) -> tuple[list[CallKernels], dict[str, int]]:
    """Group the device records by call range (CPU annotations named ``mark + str(i)``).

    Returns (calls in index order, counts: ``linked``/``by_time`` records attributed each way and
    ``outside`` device records of no call, e.g. the L2 flush)."""
    acts = list(activities)
    ranges, call_of = call_ranges(acts, mark)
    # ops and annotations only: runtime calls number their records in another id space (CUPTI's)
    cpu_by_corr = {a.correlation_id: a for a in acts if not a.on_device and not a.is_runtime and a.correlation_id}
    groups: dict[int, list[Activity]] = {i: [] for i in ranges}
    counts = {"linked": 0, "by_time": 0, "outside": 0}
    for a in acts:
        if not a.on_device or a.is_annotation or a.name.startswith(mark):
            continue
        owner = None
        cpu = cpu_by_corr.get(a.linked_correlation_id) if a.linked_correlation_id else None
        if cpu is not None:
            owner = call_of(cpu.start_ns)
            kind = "linked"
        else:
            owner = call_of(a.start_ns)
            kind = "by_time"
        if owner is None:
            counts["outside"] += 1
            continue
        groups[owner].append(a)
        counts[kind] += 1
    return [CallKernels(i, tuple(groups[i])) for i in sorted(groups)], counts


@dataclass(frozen=True)
class KernelTimeStats:
    """Per-call kernel time over the profiled calls."""

    sum: TimingStats  # kernel busy time per call (the measure)
    span: TimingStats  # first kernel start -> last kernel end (FlashInfer's CUPTI definition)
    kernels_per_call: int  # median number of device records per call
    consistent: bool  # every call ran the same kernel names in the same order
    per_kernel_us: dict = field(default_factory=dict)  # kernel name -> median us per call (summed if repeated)
    attribution: dict = field(default_factory=dict)  # counts from assign_to_calls

    @property
    def method(self) -> str:
        return self.sum.method

    def as_dict(self, prefix: str = "time_kernel_") -> dict[str, Any]:
        d = {f"{prefix}{k}": v for k, v in
             (("median_us", self.sum.median_us), ("p10_us", self.sum.p10_us), ("p90_us", self.sum.p90_us),
              ("min_us", self.sum.min_us), ("max_us", self.sum.max_us), ("spread", self.sum.spread),
              ("repeats", self.sum.repeats), ("span_median_us", self.span.median_us),
              ("count", self.kernels_per_call), ("consistent", self.consistent), ("method", self.sum.method))}
        d[f"{prefix}breakdown"] = breakdown_json(self.per_kernel_us)
        return d


def short_kernel_name(name: str, limit: int = 160) -> str:
    """A kernel's name without its template arguments' tail: at most ``limit`` characters."""
    return name if len(name) <= limit else name[: limit - 3] + "..."


def breakdown_json(per_kernel_us: dict) -> str:
    """``{kernel name: median us per call}`` as JSON, slowest first (names shortened, same-named summed)."""
    import json

    acc: dict[str, float] = {}
    for k, v in per_kernel_us.items():
        acc[short_kernel_name(k)] = acc.get(short_kernel_name(k), 0.0) + float(v)
    return json.dumps({k: round(v, 3) for k, v in sorted(acc.items(), key=lambda kv: -kv[1])})


def kernel_medians(calls: Iterable[Iterable[tuple[str, float]]]) -> dict[str, float]:
    """Per kernel name, the median over the calls of its time (us) in one call, same-named kernels of a call summed;
    ``calls``: each call's (name, us) records."""
    per: dict[str, list[float]] = {}
    for records in calls:
        acc: dict[str, float] = {}
        for name, us in records:
            acc[name] = acc.get(name, 0.0) + us
        for name, us in acc.items():
            per.setdefault(name, []).append(us)
    return {k: statistics.median(v) for k, v in per.items()}


def summarize_calls(calls: Sequence[CallKernels], method: str) -> KernelTimeStats:
    """Median and spread of the per-call sums and spans; raises when no call recorded a kernel."""
    calls = [c for c in calls if c.records]
    if not calls:
        raise ValueError("calls: no device records were attributed to any call (profiler saw no kernels)")
    first = calls[0].names
    return KernelTimeStats(
        sum=summarize([c.sum_us for c in calls], method),
        span=summarize([c.span_us for c in calls], method.replace("kernel-sum", "kernel-span")),
        kernels_per_call=int(statistics.median(len(c.records) for c in calls)),
        consistent=all(c.names == first for c in calls),
        per_kernel_us=kernel_medians([(r.name, r.duration_ns / 1e3) for r in c.records] for c in calls),
    )


def kineto_activities(prof: Any) -> list[Activity]:
    """``torch.profiler.profile`` results -> :class:`Activity` records."""
    from torch.autograd import DeviceType

    out = []
    for e in prof.profiler.kineto_results.events():
        start = int(e.start_ns()) if hasattr(e, "start_ns") else int(e.start_us() * 1000)
        dur = int(e.duration_ns()) if hasattr(e, "duration_ns") else int(e.duration_us() * 1000)
        ann = bool(e.is_user_annotation()) if hasattr(e, "is_user_annotation") else False
        on_dev = e.device_type() != DeviceType.CPU
        name = e.name()
        out.append(Activity(name=name, on_device=on_dev, start_ns=start, end_ns=start + dur,
                            correlation_id=int(e.correlation_id()),
                            linked_correlation_id=int(e.linked_correlation_id()),
                            is_annotation=ann and on_dev,
                            is_runtime=not on_dev and name.startswith("cu") and not name.startswith(MARK)))
    return out


def time_kernels(
    fn: Callable[[], Any],
    device: Any,
    warmup: int = 3,
    repeats: int = 30,
    flush_l2: bool = True,
    cuda_graph: bool = False,
) -> KernelTimeStats:
    """Kernel time of ``fn`` per call on a CUDA ``device``: ``repeats`` calls under torch.profiler, each
    after an L2 flush (not counted) and a synchronize.  With ``cuda_graph`` one call is captured and
    replayed (falls back to eager calls when the capture fails; the method says which)."""
    if repeats < 1:
        raise ValueError(f"repeats: expected >= 1, got {repeats}")
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: kernel time needs a CUDA device, got {dev}")
    stream = torch.cuda.current_stream(dev)
    launch, method = fn, "kernel-sum (torch.profiler, eager)"
    if cuda_graph:
        graph, why = _capture(fn, dev, stream)
        if graph is not None:
            launch, method = graph.replay, "kernel-sum (torch.profiler, cuda-graph)"
        else:
            method = f"kernel-sum (torch.profiler, eager; graph capture failed: {why})"
    flusher = L2Flusher(dev) if flush_l2 else None
    for _ in range(warmup):
        if flusher is not None:
            flusher()
        launch()
    torch.cuda.synchronize(dev)
    calls, counts = _profiled_calls([launch] * repeats, dev, flusher)
    stats = summarize_calls(calls, method)
    return KernelTimeStats(stats.sum, stats.span, stats.kernels_per_call, stats.consistent, stats.per_kernel_us,
                           counts)


def _profiled_calls(fns: Sequence[Callable[[], Any]], dev: torch.device,
                    flusher: Optional[L2Flusher]) -> tuple[list[CallKernels], dict[str, int]]:
    """``fns`` called in order under one torch.profiler session, each after an L2 flush (not counted) and a
    synchronize, in a range of its own (:data:`MARK` and its index): :func:`assign_to_calls` of the records."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, fn in enumerate(fns):
            if flusher is not None:
                flusher()
            torch.cuda.synchronize(dev)
            with record_function(f"{MARK}{i}"):
                fn()
                torch.cuda.synchronize(dev)
    return assign_to_calls(kineto_activities(prof))


def stats_by_owner(calls: Sequence[CallKernels], owner: Sequence[Any], method: str,
                   counts: Optional[dict] = None) -> dict[Any, KernelTimeStats]:
    """Calls made for several callables in one profiler session (call ``i`` made for ``owner[i]``) -> each
    callable's :class:`KernelTimeStats` over its own calls (pure: tested with synthetic records)."""
    out = {}
    for name in dict.fromkeys(owner):
        s = summarize_calls([c for c in calls if 0 <= c.index < len(owner) and owner[c.index] == name], method)
        out[name] = KernelTimeStats(s.sum, s.span, s.kernels_per_call, s.consistent, s.per_kernel_us,
                                    dict(counts or {}))
    return out


def time_kernels_rounds(calls: dict[Any, Callable[[], Any]], device: Any, rounds: int, warmup: int = 1,
                        flush_l2: bool = True) -> dict[Any, KernelTimeStats]:
    """Kernel time of several callables (graph replays) in ``rounds`` alternating rounds under one torch.profiler
    session, the order rotated each round (:func:`.paired.round_orders`) as :func:`.paired.replay_rounds` times
    them: a clock that drifts over the rounds falls on all alike (one after another, session 23's H200 kernel sums
    at 20b EP1 T=16384 put ours 7 % ahead of triton_kernels where the alternating replays said 1.5 %).  Each call is a
    range of its own (:data:`MARK` and a running index), after an L2 flush and a synchronize, as in
    :func:`time_kernels` (:func:`_profiled_calls`)."""
    from .paired import round_orders

    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: kernel time needs a CUDA device, got {dev}")
    orders = round_orders(list(calls), rounds)  # ValueError for fewer than two calls or rounds < 1
    flusher = L2Flusher(dev) if flush_l2 else None
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize(dev)
    owner = [name for order in orders for name in order]
    per_call, counts = _profiled_calls([calls[name] for name in owner], dev, flusher)
    return stats_by_owner(per_call, owner, "kernel-sum (torch.profiler, cuda-graph, alternating rounds)", counts)
