"""Event times and CUPTI kernel times of the *same* graph replays, in alternating rounds: what the two ways of timing
see when they watch one replay, not two passes made one after the other.

Why: a sweep times each finalist twice.  Its timing pass queues flush, call, flush, call ... back to back and times
each call by CUDA events (:func:`.paired.replay_rounds`); its CUPTI pass (:mod:`.kernel_time`) waits for each flush
before it launches the call, so the GPU idles for a host round trip before every call.  At 20b EP2 T=4096 the two
passes disagreed in sign about ours and triton_kernels: on the H200 (s23b) ours' replay took 883 us against a kernel
span of 884, triton_kernels' 879 against 888; on the H100 (s25c) ours 903 against 898, triton_kernels' 898 against
916.  A replay cannot end before its own kernels do.  Here every replay is timed both ways at once, with the calls
queued back to back or with the idle gap (``sync_after_flush``), so that what differs is the condition, not the
method, and each kernel's share shows.  Session 26 (``docs/conditions-s26.md``): in the same replays the events
exceed the span by 4-5 us back to back, 13-15 us idle, alike for both backends; the idle gap moves the ratio by at
most 0.002; the two passes' absolute times differ because the clocks drift by up to 5 % from one pass to the next.

:func:`assign_in_stream_order`, :func:`join_replays` and :func:`pair_columns` are pure (tested on CPU with synthetic
records); :func:`traced_rounds` needs a CUDA GPU."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from .kernel_time import (MARK, Activity, CallKernels, call_ranges, kernel_medians, kineto_activities,
                          short_kernel_name)


@dataclass(frozen=True)
class TracedReplay:
    """One replay seen both ways: its CUDA-event time and its kernels (CUPTI), in microseconds."""

    event_us: float
    span_us: float  # first kernel start to last kernel end
    sum_us: float  # the kernels' busy time
    kernels: tuple[tuple[str, float], ...]  # (kernel name, us) in start order


def assign_in_stream_order(activities: Sequence[Activity], mark: str = MARK) -> list[CallKernels]:
    """The device records of each call range (CPU annotations ``mark + str(i)``) when the calls are queued back to
    back on one stream and no range waits for its kernels.  The kernels of a graph replay are linked to no host op
    (torch 2.11, H100: they carry their ``cudaGraphLaunch``'s CUPTI correlation id only) and start after the range
    that launched them ended, so :func:`.kernel_time.assign_to_calls`, which places such records by their start
    time, loses them.  Here the records are walked in start order: a record whose launch (runtime call) or host op
    started in a range opens that call; one with neither belongs to the call open before it; one whose launch or op
    lies outside every range (the L2 flush) closes it."""
    ranges, call_of = call_ranges(activities, mark)
    # host records -> the range they started in (None: outside every range); CUPTI numbers a launch's device
    # records with its runtime call's id (every kernel of a graph launch with the cudaGraphLaunch's), the profiler
    # links a device record to a host op in its own id space
    runtime = {a.correlation_id: call_of(a.start_ns) for a in activities if a.is_runtime and a.correlation_id}
    op = {a.correlation_id: call_of(a.start_ns) for a in activities
          if not a.on_device and not a.is_runtime and a.correlation_id}
    groups: dict[int, list[Activity]] = {i: [] for i in ranges}
    current = None
    for a in sorted((a for a in activities if a.on_device and not a.is_annotation), key=lambda a: a.start_ns):
        if a.correlation_id in runtime:
            current = runtime[a.correlation_id]
        elif a.linked_correlation_id in op:
            current = op[a.linked_correlation_id]
        if current is not None:
            groups[current].append(a)
    return [CallKernels(i, tuple(groups[i])) for i in sorted(groups)]


def join_replays(times: dict[Hashable, list[float]], owner: Sequence[Hashable],
                 calls: Sequence[CallKernels]) -> dict[Hashable, list[TracedReplay]]:
    """The event times of :func:`.paired.replay_rounds` (per call, in round order) joined with the kernel records of
    the same replays: ``owner[i]`` is the call whose replay was the ``i``-th timed one (the profiler's range ``i``,
    ``calls`` from :func:`assign_in_stream_order`).  A replay with no kernel attributed to it, or counts that
    do not match, is a ValueError: a trace that lost replays cannot be joined by position."""
    by_index = {c.index: c for c in calls}
    want = {k: sum(1 for o in owner if o == k) for k in times}
    if any(len(times[k]) != want[k] for k in times) or set(owner) - set(times):
        raise ValueError(f"owner: expected one entry per timed replay of {list(times)}, got {len(owner)}")
    seen = {k: 0 for k in times}
    out: dict[Hashable, list[TracedReplay]] = {k: [] for k in times}
    for i, k in enumerate(owner):
        c = by_index.get(i)
        if c is None or not c.records:
            raise ValueError(f"calls: replay {i} ({k}) has no kernel records (the profiler lost it)")
        recs = sorted(c.records, key=lambda r: r.start_ns)
        out[k].append(TracedReplay(event_us=float(times[k][seen[k]]), span_us=c.span_us, sum_us=c.sum_us,
                                   kernels=tuple((short_kernel_name(r.name), r.duration_ns / 1e3) for r in recs)))
        seen[k] += 1
    return out


def pair_columns(a: Sequence[TracedReplay], b: Sequence[TracedReplay]) -> dict[str, Any]:
    """The kernel columns of a duel row from the same rounds of ``a`` and ``b`` (``a[i]``, ``b[i]``: round ``i``):
    each side's median kernel span and sum, the median per-round ratio of the spans, the median of each replay's
    event time less its span (what the replay took beyond its kernels: launch, gaps), and each side's kernels'
    medians (JSON, in the order of the first replay)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"a, b: expected the replays of the same rounds, got {len(a)} and {len(b)}")
    med = statistics.median
    out: dict[str, Any] = {}
    for side, reps in (("a", a), ("b", b)):
        out[f"{side}_span_median_us"] = med(r.span_us for r in reps)
        out[f"{side}_sum_median_us"] = med(r.sum_us for r in reps)
        out[f"{side}_event_minus_span_us"] = med(r.event_us - r.span_us for r in reps)
        medians = kernel_medians(r.kernels for r in reps)  # same-named kernels of a replay summed
        out[f"{side}_kernels"] = json.dumps({k: round(v, 3) for k, v in medians.items()})
    out["span_ratio_median"] = med(x.span_us / y.span_us for x, y in zip(a, b))
    return out


def traced_rounds(calls: dict[Hashable, Callable[[], Any]], device: Any, rounds: int, warmup: int = 0,
                  flush_l2: bool = True, sync_after_flush: bool = False) -> dict[Hashable, list[TracedReplay]]:
    """:func:`.paired.replay_rounds` of ``calls`` (graph replays) under one torch.profiler session, each timed call in
    a range of its own (:data:`.kernel_time.MARK` and its index): per call, each round's :class:`TracedReplay`.  The
    flushes run outside the ranges and are not counted; the warm-up replays are in no range."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from .paired import replay_rounds

    if torch.device(device).type != "cuda":
        raise ValueError(f"device: a traced timing needs a CUDA device, got {device}")
    owner: list[Hashable] = []  # the call of each range, as the rounds make them

    def around(i: int, name: Hashable) -> Any:
        owner.append(name)
        return record_function(f"{MARK}{i}")

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        times, _ = replay_rounds(calls, device, rounds, warmup, flush_l2=flush_l2, sync_after_flush=sync_after_flush,
                                 around=around)
    return join_replays(times, owner, assign_in_stream_order(kineto_activities(prof)))
