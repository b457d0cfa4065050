"""Nsight Compute tables (fp4moe_diag.profiling) from recorded exports; no GPU needed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fp4moe_diag.profiling import ncu, session  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _ncu_csv(calls: pd.DataFrame, runs: int, rename=None) -> str:
    seq = [(a, ks.split("|")) for a, ks in calls.drop_duplicates("Annotation")[["Annotation", "Kernel"]].values]
    lines = ['"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"', '"","","nsecond","Mbyte"']
    i = 0
    for r in range(runs):
        for a, ks in seq:
            for j, kname in enumerate(ks):
                shown = (rename or {}).get(kname, kname)
                lines.append(f'"{i}","{shown}(int, float*)","{1000 * (j + 1) + r}","{10 * (j + 1)}"')
                i += 1
    return "\n".join(["==PROF== Disconnected", *lines])


def test_kernels_table_groups_launches_per_annotation():
    raw = pd.DataFrame({
        "annotation": ["best: g1:0"] * 6 + ["default: default(-1,-1)"] * 4,
        "kernel": ["route", "gemm1", "gemm2"] * 2 + ["route", "gemm"] * 2,
        "gpu__time_duration.sum": [1000, 5000, 3000, 1200, 5200, 3200, 1000, 9000, 1000, 11000],
        "gpu__time_duration.sum.unit": ["nsecond"] * 10,
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": [10, 80, 70, 10, 82, 72, 10, 50, 10, 52],
        "dram__bytes_read.sum": [1, 10, 6, 1, 10.8, 6, 1, 9, 1, 11],
        "dram__bytes_read.sum.unit": ["Mbyte"] * 10,
    })
    k = ncu.kernels_table(raw)
    g1 = k[(k["role"] == "best") & (k["kernel"] == "gemm1")].iloc[0]
    assert g1["dram_read_bytes"] == pytest.approx(10.4e6) and g1["dram_read_GBps"] == pytest.approx((10e6 / 5e3 + 10.8e6 / 5.2e3) / 2)  # mean of per-launch rates
    assert len(k) == 5 and k["runs"].tolist() == [2] * 5
    g1 = k[(k["role"] == "best") & (k["kernel"] == "gemm1")].iloc[0]
    assert g1["duration_us"] == pytest.approx(5.1) and g1["dram_throughput_pct"] == pytest.approx(81)
    assert k["tactic_label"].tolist()[-1] == "default(-1,-1)"
    tune_rows = pd.DataFrame({"tactic_label": ["g1:0", "default(-1,-1)"], "time_median_us": [9.5, 11.0],
                              "time_p10_us": [9.0, 10.5], "time_p90_us": [10.0, 11.5], "frac_bw_roofline": [0.6, 0.5]})
    s = session.profile_vs_events(k, tune_rows).set_index("role")
    assert s.loc["best", "ncu_sum_us"] == pytest.approx(9.3) and s.loc["best", "event_median_us"] == 9.5


def test_nsight_status_on_cpu_is_a_clear_no():
    ok, why = session.nsight_status("cpu")
    assert not ok and "GPU" in why


# ------------------------------------------------------------------ Nsight Compute tables without ncu_report
CALLS_CSV = REPO / "tests" / "data" / "nsight_calls_triton_t64.csv"  # nsight-python's table, H200 run


def test_kernels_from_calls_on_the_h200_table():
    k = ncu.kernels_from_calls(pd.read_csv(CALLS_CSV)).set_index("tactic_label")
    assert list(k.index) == ["m16n64k128w4s3-ds-sk2", "m16n64k128w4s3"]
    best = k.loc["m16n64k128w4s3-ds-sk2"]
    assert best["duration_us"] == pytest.approx(358.272) and best["runs"] == 3 and best["role"] == "t0"
    assert best["dram_read_GBps"] == pytest.approx(533428309.3333333 / 358272.0)  # bytes / ns = GB/s
    assert "issue_slots_busy_pct" not in k  # percentages summed over kernels are not reported


def test_per_kernel_rows_from_the_ncu_csv_export():
    calls = pd.read_csv(CALLS_CSV)
    raw = ncu.raw_from_ncu_csv(_ncu_csv(calls, runs=3), calls)
    assert len(raw) == 3 * (5 + 4) and set(raw["annotation"]) == set(calls["Annotation"])
    k = ncu.kernels_table(raw)
    g1 = k[(k["tactic_label"] == "m16n64k128w4s3-ds-sk2") & (k["kernel"] == "_moe_mxfp4_gemm1_kernel")].iloc[0]
    assert g1["runs"] == 3 and g1["duration_us"] == pytest.approx(1.001)  # (1000 + 1001 + 1002) ns / 3
    assert g1["dram_read_bytes"] == pytest.approx(10e6) and g1["dram_read_GBps"] == pytest.approx(10e6 / 1001)
    # launches that do not follow the annotated sequence: no guessing
    assert ncu.raw_from_ncu_csv(_ncu_csv(calls, runs=3, rename={"_moe_mxfp4_gemm2_kernel": "other"}), calls).empty
    assert ncu.raw_from_ncu_csv(_ncu_csv(calls, runs=3) + '\n"99","x","1","1"', calls).empty
    assert ncu.raw_from_ncu_csv("", calls).empty


def test_driver_runs_as_a_script(tmp_path):
    """nsight-python re-runs the profiled script by its file path under ncu (``python .../driver.py SPEC``), not
    with ``-m``: the driver's imports must resolve that way too (they did not: 'attempted relative import with no
    known parent package', seen on the H200 in session 7).  Without a spec it prints its usage and exits 2."""
    import subprocess
    import sys
    from pathlib import Path

    driver = Path(__file__).resolve().parents[1] / "fp4moe_diag" / "profiling" / "driver.py"
    r = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "ImportError" not in r.stderr and r.stderr.startswith("usage: python -m fp4moe_diag.profiling.driver")


def test_stall_metrics_reach_the_per_kernel_table_under_their_names():
    """``profile --stalls``: the extra ncu metrics are exported, parsed and renamed like the core ones; without
    ``stalls`` the metric list is the core one (notebook 04's)."""
    calls = pd.read_csv(CALLS_CSV)
    metrics = list(ncu.metric_names(stalls=True))
    assert list(ncu.metric_names()) == list(ncu.NCU_METRICS) and len(metrics) == len(ncu.NCU_METRICS) + 7
    gmma, wait = "smsp__warp_issue_stalled_barrier_per_warp_active.pct", \
        "smsp__warp_issue_stalled_wait_per_warp_active.pct"
    text = _ncu_csv(calls, runs=1).splitlines()
    text[1] = text[1] + f',"{gmma}","{wait}"'
    text[2] = text[2] + ',"%","%"'
    text[3:] = [ln + f',"{40 + i}","{12.5 + i}"' for i, ln in enumerate(text[3:])]
    raw = ncu.raw_from_ncu_csv("\n".join(text), calls, metrics)
    k = ncu.kernels_table(raw)
    g1 = k[(k["tactic_label"] == "m16n64k128w4s3-ds-sk2") & (k["kernel"] == "_moe_mxfp4_gemm1_kernel")].iloc[0]
    assert g1["stall_barrier_pct"] == 40 and g1["stall_wait_pct"] == 12.5  # the first launch of the run
    assert gmma not in k and "stall_long_scoreboard_pct" not in k  # renamed; absent metrics add no column


def test_profile_kernels_refuses_a_non_bool_stalls(tmp_path):
    with pytest.raises(ValueError, match="stalls"):
        session.profile_kernels(None, "triton", "cpu", tmp_path, {"t0": "x"}, stalls="yes")
