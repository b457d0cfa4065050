"""Event and kernel times of the same replays (measure.traced_rounds): the join of a round's event times with its
traced kernels (synthetic records), the duel row's kernel columns, the rounds' ranges and idle gap on CPU, and a GPU
duel traced both ways (marked ``gpu``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from fp4moe_diag.measure.kernel_time import MARK, Activity, assign_to_calls
from fp4moe_diag.measure.paired import replay_rounds
from fp4moe_diag.measure.traced_rounds import TracedReplay, assign_in_stream_order, join_replays, pair_columns


def _trace(spans: list[list[tuple[str, int, int]]], runtime: bool = False) -> list[Activity]:
    """Call ``i``'s range and its graph replay's kernels (name, start ns, end ns): the first linked to the replay's
    host op inside the range, the others to nothing (``runtime``: each carrying its cudaGraphLaunch's id, CUPTI's
    numbering); a flush kernel before each, of an op and a launch outside every range; the calls queued back to
    back: every kernel starts after its range ended (the host runs ahead); the GPU-side copy of each range too."""
    acts = []
    for i, kernels in enumerate(spans):
        base = 100_000 * i
        acts += [Activity("aten::fill_", False, base, base + 10, correlation_id=1000 + i),
                 Activity("flush_kernel", True, base + 50_000, base + 60_000, linked_correlation_id=1000 + i),
                 Activity(f"{MARK}{i}", False, base + 20, base + 40, correlation_id=2000 + i),
                 Activity("CUDAGraph::replay", False, base + 22, base + 38, correlation_id=3000 + i),
                 Activity(f"{MARK}{i}", True, base + 61_000, base + 62_000, is_annotation=True),
                 Activity("cudaGraphLaunch", False, base + 25, base + 30, correlation_id=1000 + i, is_runtime=True),
                 Activity("cudaLaunchKernel", False, base + 2, base + 5, correlation_id=4000 + i, is_runtime=True)]
        if runtime:  # CUPTI's numbering: every kernel of the launch carries the cudaGraphLaunch's id, the flush its own
            acts[-6] = dataclasses.replace(acts[-6], correlation_id=4000 + i)
            acts += [Activity(n, True, base + s, base + e, correlation_id=1000 + i) for n, s, e in kernels]
        else:
            acts += [Activity(n, True, base + s, base + e, linked_correlation_id=3000 + i if j == 0 else 0)
                     for j, (n, s, e) in enumerate(kernels)]
    return acts


def test_each_replay_is_joined_with_its_own_kernels_by_position():
    # round 0: a then b; round 1: b then a (round_orders); a's kernels 10 + 5 us, b's 12 + 4 us, 1 us apart
    a_k = [("gemm1", 61_000, 71_000), ("gemm2", 72_000, 77_000)]
    b_k = [("tk_gemm1", 61_000, 73_000), ("tk_gemm2", 74_000, 78_000)]
    owner = ["a", "b", "b", "a"]
    trace = _trace([a_k, b_k, b_k, a_k])
    lost, _ = assign_to_calls(trace)  # by start time: the second kernel of each replay starts after its range
    assert [len(c.records) for c in lost] == [1, 1, 1, 1]
    calls = assign_in_stream_order(trace)
    a_n, b_n = ("gemm1", "gemm2"), ("tk_gemm1", "tk_gemm2")
    assert [c.names for c in calls] == [a_n, b_n, b_n, a_n]  # and no flush in any
    assert [c.names for c in assign_in_stream_order(_trace([a_k, b_k, b_k, a_k], runtime=True))] == [a_n, b_n, b_n,
                                                                                                      a_n]
    times = {"a": [17.0, 16.5], "b": [16.0, 18.0]}
    out = join_replays(times, owner, calls)
    assert [r.event_us for r in out["a"]] == [17.0, 16.5] and [r.event_us for r in out["b"]] == [16.0, 18.0]
    assert out["a"][0] == TracedReplay(17.0, 16.0, 15.0, (("gemm1", 10.0), ("gemm2", 5.0)))
    assert out["b"][1].span_us == pytest.approx(17.0) and out["b"][1].sum_us == pytest.approx(16.0)


def test_a_trace_that_lost_a_replay_is_refused():
    a_k = [("gemm1", 61_000, 71_000)]
    calls = assign_in_stream_order(_trace([a_k, []]))
    with pytest.raises(ValueError, match="replay 1 .b. has no kernel records"):
        join_replays({"a": [1.0], "b": [1.0]}, ["a", "b"], calls)
    with pytest.raises(ValueError, match="owner: expected one entry per timed replay"):
        join_replays({"a": [1.0, 2.0], "b": [1.0]}, ["a", "b"], calls)


def test_the_kernel_columns_of_a_duel_row():
    def rep(event, kernels):
        return TracedReplay(event, sum(us for _, us in kernels) + 1.0, sum(us for _, us in kernels), tuple(kernels))

    a = [rep(903.0, [("g1", 570.0), ("g2", 304.0), ("s", 24.0)]), rep(905.0, [("g1", 572.0), ("g2", 306.0),
                                                                            ("s", 24.0)])]
    b = [rep(897.0, [("t1", 580.0), ("t2", 312.0), ("r", 23.0)]), rep(899.0, [("t1", 582.0), ("t2", 312.0),
                                                                            ("r", 23.0)])]
    c = pair_columns(a, b)
    assert c["a_span_median_us"] == pytest.approx(901.0) and c["b_span_median_us"] == pytest.approx(917.0)
    assert c["a_sum_median_us"] == pytest.approx(900.0) and c["b_sum_median_us"] == pytest.approx(916.0)
    # b's replays ended 19 us before its own kernels' span: the sign a sweep's two passes disagree in
    assert c["a_event_minus_span_us"] == pytest.approx(3.0) and c["b_event_minus_span_us"] == pytest.approx(-19.0)
    assert c["span_ratio_median"] == pytest.approx((899 / 916 + 903 / 918) / 2)
    assert json.loads(c["a_kernels"]) == {"g1": 571.0, "g2": 305.0, "s": 24.0}
    assert list(json.loads(c["b_kernels"])) == ["t1", "t2", "r"]
    with pytest.raises(ValueError, match="the same rounds"):
        pair_columns(a, b[:1])


def test_the_rounds_name_each_timed_call_in_order_and_the_cpu_path_keeps_its_times():
    entered = []

    class Range:
        def __init__(self, i, name):
            self.i, self.name = i, name

        def __enter__(self):
            entered.append((self.i, self.name))

        def __exit__(self, *exc):
            return False

    ticks = iter(range(100))
    times, mhz = replay_rounds({"a": lambda: None, "b": lambda: None}, "cpu", rounds=3, around=Range,
                               clock=lambda: next(ticks) * 1e-6)
    assert entered == [(0, "a"), (1, "b"), (2, "b"), (3, "a"), (4, "a"), (5, "b")]  # each round's order
    assert times["a"] == pytest.approx([1.0] * 3) and times["b"] == pytest.approx([1.0] * 3) and mhz != mhz


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("sync", [False, True])
def test_a_traced_duel_on_the_gpu_gives_each_replay_its_kernels(sync):
    """Two graph replays (two matmuls and an add; one matmul) traced both ways: every replay has all its kernels,
    the event time is at least the kernels' span less a microsecond, and the larger call's span is the larger."""
    from fp4moe_diag.measure.paired import graph_replays
    from fp4moe_diag.measure.traced_rounds import traced_rounds

    x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    replays = graph_replays({"a": lambda: (x @ x) @ x + x, "b": lambda: y @ y}, "cuda")
    out = traced_rounds(replays, "cuda", rounds=6, warmup=2, sync_after_flush=sync)
    assert [len(out["a"]), len(out["b"])] == [6, 6]
    assert {len(r.kernels) for r in out["a"]} == {3} and {len(r.kernels) for r in out["b"]} == {1}
    for r in out["a"] + out["b"]:
        assert r.event_us >= r.span_us - 1.0
    c = pair_columns(out["a"], out["b"])
    assert c["a_span_median_us"] > c["b_span_median_us"]
