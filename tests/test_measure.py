"""Timing (CPU path, fake clock) and the roofline against the read ceiling (fp4moe_diag.measure)."""

from __future__ import annotations

import math

import pytest
import torch

from fp4moe_diag import MoECase
from fp4moe_diag.measure.ceilings import Ceilings, datasheet_bandwidth, moe_work, roofline_fields
from fp4moe_diag.measure.timing import TimingStats, summarize, time_fn


def test_time_fn_on_cpu_uses_the_given_clock():
    now = [0.0]
    steps = iter([1e-3, 3e-3, 2e-3])

    def fn():
        now[0] += next(steps)

    st = time_fn(fn, "cpu", warmup=0, repeats=3, clock=lambda: now[0])
    assert st.method == "wall-clock" and st.median_us == pytest.approx(2000.0)
    with pytest.raises(ValueError, match="repeats"):
        time_fn(fn, "cpu", repeats=0)


def test_roofline_uses_the_read_ceiling_for_weight_streaming():
    case = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2,
                   local_num_experts=4, local_expert_offset=0)
    ids = torch.tensor([[0, 1], [0, 2], [1, 3], [2, 3]])
    work = moe_work(case, ids)
    assert work.active_experts == 4 and work.routed_pairs == 8
    # 4 experts x (2*256*256/2 + 256*256/2 packed bytes + one scale byte per 32) + biases
    per = (2 * 256 * 256) // 2 + (256 * 256) // 2 + (2 * 256 * 256) // 32 + (256 * 256) // 32 + 4 * (2 * 256 + 256)
    assert work.weight_bytes == 4 * per
    stats = summarize([10.0, 10.0, 10.0], "cuda-graph")
    bw = work.total_bytes / 10e-6
    both = Ceilings(copy_bytes_per_s=2 * bw, bf16_flops_per_s=1e15, method="t", read_bytes_per_s=4 * bw)
    assert roofline_fields(work, stats, both)["frac_bw_roofline"] == pytest.approx(0.25)
    copy_only = Ceilings(copy_bytes_per_s=2 * bw, bf16_flops_per_s=1e15, method="t")
    assert roofline_fields(work, stats, copy_only)["frac_bw_roofline"] == pytest.approx(0.5)
    assert math.isnan(roofline_fields(work, stats, None)["frac_bw_roofline"])
    d = both.as_dict()
    assert d["ceiling_read_GBps"] == pytest.approx(4 * bw / 1e9) and math.isnan(d["ceiling_datasheet_GBps"])
    assert isinstance(stats, TimingStats)


def test_an_implausible_read_ceiling_is_refused():
    from fp4moe_diag.measure.ceilings import plausible_read

    assert plausible_read(4233e9, 4270e9) == 4270e9
    assert math.isnan(plausible_read(4233e9, 769e9))  # the int32-sum measurement of the first s4 run


def test_datasheet_bandwidth_by_name():
    assert datasheet_bandwidth("NVIDIA H200") == 4.8e12
    assert datasheet_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12 and datasheet_bandwidth("NVIDIA H100 PCIe") == 2.0e12
    assert math.isnan(datasheet_bandwidth("cpu"))


def test_time_method_is_a_category():
    from fp4moe_diag.measure.timing import TIME_METHODS
    from fp4moe_diag.results import SCHEMA

    st = time_fn(lambda: None, "cpu", warmup=0, repeats=1)
    assert st.method in TIME_METHODS and st.capture_error == "" and "time_capture_error" in st.as_dict()
    assert "time_capture_error" in [c for c, _, _ in SCHEMA]


def test_the_sm_clock_is_read_through_nvml_and_left_empty_where_there_is_none(monkeypatch):
    """``time_sm_clock_mhz``: NVML's SM clock (torch.cuda.clock_rate) as the repeats finish; NaN on CPU and where
    NVML fails (no pynvml, a device it does not see), never an error that loses the row."""
    import torch

    from fp4moe_diag.measure import timing
    from fp4moe_diag.results import SCHEMA, to_frame

    st = time_fn(lambda: None, "cpu", warmup=0, repeats=2)
    assert math.isnan(st.sm_clock_mhz) and math.isnan(st.as_dict()["time_sm_clock_mhz"])
    assert ("time_sm_clock_mhz", "float64") in [(c, d) for c, d, _ in SCHEMA]
    monkeypatch.setattr(torch.cuda, "clock_rate", lambda dev=None: 1980)
    assert timing.sm_clock_mhz(torch.device("cuda", 0)) == 1980.0
    def no_nvml(dev=None):
        raise ModuleNotFoundError("pynvml does not seem to be installed or it can't be imported.")
    monkeypatch.setattr(torch.cuda, "clock_rate", no_nvml)
    assert math.isnan(timing.sm_clock_mhz(torch.device("cuda", 0)))
    row = {"model": "m", "backend": "reference", "status": "ok",
           **timing.TimingStats(10.0, 9.0, 11.0, 10.0, 0.5, 9.0, 11.0, 5, "cuda-graph", sm_clock_mhz=1755.0).as_dict()}
    assert to_frame([row])["time_sm_clock_mhz"].tolist() == [1755.0]


def test_the_sustained_bf16_figure_is_timed_only_after_its_seconds_of_load():
    """measure.ceilings.sustained: batches of the GEMM run (each waited for) until the fake clock has passed the
    seconds, then the timing; the clock a row of the first figure and of the sustained one ran at travel as columns."""
    from fp4moe_diag.measure.ceilings import sustained

    now, calls, log = [0.0], [0], []

    def gemm():
        calls[0] += 1
        now[0] += 0.01  # 10 ms a GEMM on the fake clock

    def timed():
        log.append(("timed", calls[0]))
        return summarize([5.0], "cuda-events")

    st = sustained(gemm, 1.0, lambda: log.append(("sync", calls[0])), timed, clock=lambda: now[0], batch=20)
    assert st.median_us == 5.0 and calls[0] == 100  # 5 batches of 20 reach 1.0 s; none after
    assert log == [("sync", 20), ("sync", 40), ("sync", 60), ("sync", 80), ("sync", 100), ("timed", 100)]
    calls[0] = 0
    assert sustained(gemm, 0.0, lambda: None, timed, clock=lambda: now[0]).median_us == 5.0 and calls[0] == 0
    for bad, what in (({"seconds": -1.0}, "seconds"), ({"seconds": float("nan")}, "seconds"),
                      ({"seconds": 1.0, "batch": 0}, "batch")):
        with pytest.raises(ValueError, match=what):
            sustained(gemm, **bad, sync=lambda: None, timed=timed)
    assert calls[0] == 0  # refused before any GEMM
    c = Ceilings(copy_bytes_per_s=4e12, bf16_flops_per_s=8.0e14, method="t", bf16_sm_clock_mhz=1980.0,
                 bf16_sustained_flops_per_s=7.4e14, bf16_sustained_sm_clock_mhz=1830.0).as_dict()
    assert (c["ceiling_bf16_TFLOPs"], c["ceiling_bf16_sm_clock_mhz"]) == (800.0, 1980.0)
    assert (c["ceiling_bf16_sustained_TFLOPs"], c["ceiling_bf16_sustained_sm_clock_mhz"]) == (740.0, 1830.0)
    old = Ceilings(copy_bytes_per_s=4e12, bf16_flops_per_s=8.0e14, method="t").as_dict()
    assert math.isnan(old["ceiling_bf16_sustained_TFLOPs"]) and math.isnan(old["ceiling_bf16_sm_clock_mhz"])


def test_measure_ceilings_refuses_a_cpu_device_and_a_negative_sustain_before_any_work():
    from fp4moe_diag.measure.ceilings import measure_ceilings

    with pytest.raises(ValueError, match="device"):
        measure_ceilings("cpu")
    with pytest.raises(ValueError, match="sustain_s"):  # checked first: no CUDA device needed to refuse it
        measure_ceilings("cuda", sustain_s=-1.0)
