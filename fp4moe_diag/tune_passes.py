"""The tuner's passes after the first (:func:`fp4moe_diag.tune.tune_case` runs them when ``screen`` is set): with
``interleave`` the screen taken again in the reverse order (:func:`reverse_screen`), then the finalists timed in
full (:func:`second_pass`), with ``interleave`` in alternating rounds (:func:`interleaved_pass`), their CUPTI kernel
time too (:func:`interleaved_kernel_time`).

Why both: the SM clock falls as tactics are timed one after another (the H100 at 20b EP1 T=16384: 1935 to 1560 MHz
over 5 s, session 21; the H200's screen rows at 1950-1980 MHz, its finalists at 1815, session 23's ``-s23b``).  The
alternating rounds take that drift out of the finalists' times; the reverse screen takes it out of the choice of
finalists: a tactic screened early and one screened late each get the mean of an early and a late median."""

from __future__ import annotations

import dataclasses

from .measure.timing import TimingStats, summarize
from .tune_steps import KERNEL_TIME_COLUMNS, TuneState, add_kernel_time, retime, timed, timing_fields


def merged_screens(a: TimingStats, b: TimingStats) -> TimingStats:
    """Two screens of one tactic as one: the mean of their medians (a clock that drifts linearly over the forward and
    the reverse pass falls on every tactic alike), their outer p10 / p90 / min / max, all repeats, the mean clock."""
    mean = lambda x, y: (x + y) / 2  # noqa: E731
    return dataclasses.replace(a, median_us=mean(a.median_us, b.median_us), p10_us=min(a.p10_us, b.p10_us),
                               p90_us=max(a.p90_us, b.p90_us), mean_us=mean(a.mean_us, b.mean_us),
                               std_us=max(a.std_us, b.std_us), min_us=min(a.min_us, b.min_us),
                               max_us=max(a.max_us, b.max_us), repeats=a.repeats + b.repeats,
                               sm_clock_mhz=mean(a.sm_clock_mhz, b.sm_clock_mhz))


def _row_stats(row: dict) -> TimingStats:
    return TimingStats(**{f.name: row[f"time_{f.name}"] for f in dataclasses.fields(TimingStats)})


def reverse_screen(st: TuneState) -> None:
    """Every screened tactic timed again with the ``screen`` repeats, last-screened first; its row then holds
    :func:`merged_screens` of both (``time_repeats``: both passes').  A tactic that fails now keeps its first
    screen (the notes say why)."""
    for t, row in reversed([(t, r) for t, r in st.ok if r["timing_pass"] == "screen"]):
        try:
            again = timed(st, st.backend.launcher(st.prepared, t, st.out), True)
        except Exception as e:  # noqa: BLE001 - the row keeps its first screen
            st.result.notes.append(f"reverse screen of {t.label} failed, its first screen stands: {e}")
            continue
        finally:
            st.backend.end_launches(st.prepared)
        row.update(timing_fields(st, merged_screens(_row_stats(row), again), True))


def second_pass(st: TuneState) -> None:
    """After ``screen``: the ``screen_top`` fastest screened tactics and the default, timed in full; with
    ``interleave`` in alternating rounds, beside the tactics already timed in full (the combined one)."""
    screened = sorted((r["time_median_us"], i) for i, (t, r) in enumerate(st.ok) if r["timing_pass"] == "screen")
    pick = {i for _, i in screened[: st.options.screen_top]}
    pick |= {i for i, (t, r) in enumerate(st.ok) if t.is_default and r["timing_pass"] == "screen"}
    if st.options.interleave:  # beside the tactics already timed in full, which the sequential pass leaves alone
        together = pick | {i for i, (t, r) in enumerate(st.ok) if r["timing_pass"] == "full"}
        if len(together) > 1:
            return interleaved_pass(st, sorted(together))
    for i in sorted(pick):
        t, row = st.ok[i]
        try:
            retime(st, t, row)
        except Exception as e:  # noqa: BLE001 - the row keeps its screen timing
            st.result.notes.append(f"full timing of {t.label} failed after its screen: {e}")


def interleaved_pass(st: TuneState, picks: list[int]) -> None:
    """``picks`` (indices of ``st.ok``) timed in ``repeats`` alternating rounds (:func:`.measure.paired.replay_rounds`:
    each round replays every one's graph once, L2 flushed, the order rotated a round), so that a clock that drifts
    over the pass falls on all of them alike: on the H100 at 20b EP1 T=16384 the SM clock fell from 1935 to 1560 MHz
    over 5 s of tactics timed one after another, and each backend's first-timed tactic won (session 21, ``-s21a``);
    a tactic that cannot be captured keeps its earlier timing (the notes say why)."""
    from .measure.paired import capture_graph, replay_rounds

    o, dev = st.options, st.ctx.device
    calls = {}
    for i in picks:
        t = st.ok[i][0]
        try:
            calls[i] = capture_graph(st.backend.launcher(st.prepared, t, st.out), dev)
        except Exception as e:  # noqa: BLE001 - the row keeps its earlier timing
            st.result.notes.append(f"interleaved timing of {t.label} failed at its capture: {e}")
        finally:
            st.backend.end_launches(st.prepared)
    if len(calls) < 2:
        st.result.notes.append("interleaved timing: fewer than two tactics captured, none re-timed")
        return
    clock_kw = {} if st.ctx.clock is None else {"clock": st.ctx.clock}  # tests: a fake clock
    max_s = None if o.max_seconds_per_tactic is None else o.max_seconds_per_tactic * len(calls)
    try:
        times, mhz = replay_rounds(calls, dev, o.repeats, o.warmup, o.flush_l2, max_s, **clock_kw)
    except Exception as e:  # noqa: BLE001 - the rows keep their earlier timings
        st.result.notes.append(f"interleaved timing failed, rows keep their earlier timing: {type(e).__name__}: {e}")
        return
    method = "cuda-graph" if dev.type == "cuda" else "wall-clock"
    for i, us in times.items():
        stats = dataclasses.replace(summarize(us, method), sm_clock_mhz=mhz)
        st.ok[i][1].update(timing_fields(st, stats, False), timing_pass="interleaved")
    interleaved_kernel_time(st, {i: calls[i] for i in times})


def interleaved_kernel_time(st: TuneState, calls: dict) -> None:
    """With ``kernel_time`` on CUDA: the CUPTI kernel time of the interleaved tactics (``calls``: index of ``st.ok``
    -> its captured graph) in the same alternating rounds (:func:`.measure.kernel_time.time_kernels_rounds`), not
    one tactic after another; should that fail, one after another as before (the notes say why)."""
    o = st.options
    if not o.kernel_time or st.ctx.device.type != "cuda":
        return
    from .measure.kernel_time import time_kernels_rounds

    try:
        stats = time_kernels_rounds(calls, st.ctx.device, o.repeats, warmup=1, flush_l2=o.flush_l2)
    except Exception as e:  # noqa: BLE001 - fall back to the sequential kernel time
        st.result.notes.append(f"interleaved kernel time failed, timed one after another: {type(e).__name__}: {e}")
        for i in calls:
            t, row = st.ok[i]
            try:
                add_kernel_time(st, st.backend.launcher(st.prepared, t, st.out), row)
            finally:
                st.backend.end_launches(st.prepared)
        return
    for i, kt in stats.items():
        st.ok[i][1].update({k: v for k, v in kt.as_dict().items() if k in KERNEL_TIME_COLUMNS})


