"""Kernel-time measure: attribution of profiler records to calls and the per-call statistics
(synthetic records), the Kineto adapter on a CPU-only profile, and a GPU run (marked ``gpu``)."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag.measure.kernel_time import MARK, Activity, CallKernels, assign_to_calls, kineto_activities, \
    summarize_calls, time_kernels


def _ann(i, s, e, corr):
    return Activity(f"{MARK}{i}", False, s, e, correlation_id=corr)


def _op(name, s, e, corr):
    return Activity(name, False, s, e, correlation_id=corr)


def _k(name, s, e, linked=0):
    return Activity(name, True, s, e, linked_correlation_id=linked)


def synthetic_trace():
    """Two calls; each: a Triton kernel linked to the call range itself, an aten op's kernel, and one kernel
    linked to nothing (attributed by time).  A flush kernel (linked to an op outside the ranges) before each
    call, a GPU-side copy of each range, and a runtime record whose CUPTI id collides with an op id."""
    acts = []
    for i, base in enumerate((0, 10_000)):
        c = 100 * (i + 1)
        acts += [
            _op("aten::zero_", base, base + 50, c + 1), _k("fill_flush", base + 60, base + 400, linked=c + 1),
            _ann(i, base + 1000, base + 9000, c + 2),
            _k("_matmul_ogs_gemm1", base + 1500, base + 2500, linked=c + 2),
            _op("aten::copy_", base + 1200, base + 1300, c + 3),
            _k("copy_kernel", base + 2600, base + 2700, linked=c + 3),
            _k("_reduce_grouped", base + 3000, base + 3300, linked=0),
            Activity(f"{MARK}{i}", True, base + 1500, base + 3300, is_annotation=True),
            Activity("cudaLaunchKernel", False, base + 1100, base + 1110, correlation_id=c + 1, is_runtime=True),
        ]
    return acts


def test_assign_to_calls_excludes_flush_and_annotations():
    calls, counts = assign_to_calls(synthetic_trace())
    assert [c.index for c in calls] == [0, 1]
    for c in calls:
        assert c.names == ("_matmul_ogs_gemm1", "copy_kernel", "_reduce_grouped")
        assert c.sum_us == pytest.approx((1000 + 100 + 300) / 1e3)
        assert c.span_us == pytest.approx((3300 - 1500) / 1e3)
    assert counts == {"linked": 4, "by_time": 2, "outside": 2}


def test_summarize_calls_stats_and_consistency():
    calls, _ = assign_to_calls(synthetic_trace())
    st = summarize_calls(calls, "kernel-sum (torch.profiler, eager)")
    assert st.sum.median_us == pytest.approx(1.4) and st.span.median_us == pytest.approx(1.8)
    assert st.kernels_per_call == 3 and st.consistent
    assert st.per_kernel_us["_matmul_ogs_gemm1"] == pytest.approx(1.0)
    d = st.as_dict()
    assert d["time_kernel_median_us"] == pytest.approx(1.4) and d["time_kernel_count"] == 3
    assert d["time_kernel_method"].startswith("kernel-sum") and st.span.method.startswith("kernel-span")
    odd = calls + [CallKernels(2, (_k("other", 0, 5000),))]
    st2 = summarize_calls(odd, "kernel-sum")
    assert not st2.consistent and st2.sum.repeats == 3 and st2.sum.max_us == pytest.approx(5.0)


def test_summarize_calls_without_records_raises():
    with pytest.raises(ValueError, match="no device records"):
        summarize_calls([CallKernels(0, ())], "kernel-sum")


def test_repeated_kernel_names_are_summed_per_call():
    recs = (_k("k", 0, 1000), _k("k", 2000, 2500))
    st = summarize_calls([CallKernels(0, recs), CallKernels(1, recs)], "kernel-sum")
    assert st.per_kernel_us["k"] == pytest.approx(1.5) and st.sum.median_us == pytest.approx(1.5)


def test_kineto_adapter_on_cpu_profile():
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(2):
            with record_function(f"{MARK}{i}"):
                torch.ones(8).add_(1)
    acts = kineto_activities(prof)
    names = [a.name for a in acts]
    assert f"{MARK}0" in names and f"{MARK}1" in names
    assert all(not a.on_device for a in acts) and all(a.end_ns >= a.start_ns for a in acts)
    calls, counts = assign_to_calls(acts)
    assert [c.index for c in calls] == [0, 1] and all(not c.records for c in calls)


def test_time_kernels_needs_cuda():
    with pytest.raises(ValueError, match="CUDA"):
        time_kernels(lambda: None, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("graph", [False, True])
def test_gpu_time_kernels_counts_only_the_call(graph):
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    c = torch.empty_like(a)

    def fn():
        torch.mm(a, b, out=c)
        c.mul_(2.0)

    st = time_kernels(fn, "cuda", warmup=2, repeats=10, cuda_graph=graph)
    assert st.kernels_per_call == 2 and st.consistent, st
    assert st.attribution["outside"] >= 10  # the flushes
    assert 0 < st.sum.median_us <= st.span.median_us * 1.001
    assert ("cuda-graph" in st.method) == graph


def test_stats_by_owner_splits_one_session_of_alternating_calls_by_callable():
    """time_kernels_rounds' attribution: calls 0..5 of one profiler session made for a, b, b, a, a, b (rotated
    rounds); each callable's statistics over its own calls only."""
    from fp4moe_diag.measure.kernel_time import stats_by_owner

    us = {"a": 10_000, "b": 12_000}
    owner = ["a", "b", "b", "a", "a", "b"]
    calls = [CallKernels(i, (_k(f"gemm_{o}", 0, us[o] + 100 * i), _k("sum", 0, 500))) for i, o in enumerate(owner)]
    st = stats_by_owner(calls, owner, "kernel-sum (torch.profiler, cuda-graph, alternating rounds)", {"linked": 12})
    assert list(st) == ["a", "b"]
    assert st["a"].sum.median_us == pytest.approx((10_000 + 300 + 500) / 1e3)  # calls 0, 3, 4: 10.0, 10.3, 10.4
    assert st["b"].sum.median_us == pytest.approx((12_000 + 200 + 500) / 1e3)  # calls 1, 2, 5
    assert st["a"].sum.repeats == 3 and st["b"].per_kernel_us["sum"] == pytest.approx(0.5)
    assert st["a"].method.endswith("alternating rounds)") and st["a"].attribution == {"linked": 12}


def test_time_kernels_rounds_needs_cuda_and_two_calls():
    from fp4moe_diag.measure.kernel_time import time_kernels_rounds

    with pytest.raises(ValueError, match="^device: kernel time needs a CUDA device"):
        time_kernels_rounds({"a": lambda: None, "b": lambda: None}, "cpu", 3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_time_kernels_rounds_attributes_each_graph_its_own_kernels():
    from fp4moe_diag.measure.kernel_time import time_kernels_rounds
    from fp4moe_diag.measure.paired import capture_graph

    a = torch.randn(2048, 2048, device="cuda")
    c = torch.empty_like(a)
    one = capture_graph(lambda: torch.mm(a, a, out=c), "cuda")
    two = capture_graph(lambda: (torch.mm(a, a, out=c), c.mul_(2.0)), "cuda")
    st = time_kernels_rounds({"one": one, "two": two}, "cuda", 6)
    assert (st["one"].kernels_per_call, st["two"].kernels_per_call) == (1, 2)
    assert st["one"].sum.repeats == st["two"].sum.repeats == 6 and st["two"].consistent
    assert st["one"].sum.median_us < st["two"].sum.median_us
