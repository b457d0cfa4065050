"""analysis.samples / ``samples``: two backends over repeated runs, ahead / level / behind per shape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fp4moe_diag.analysis.samples import sample_ratios, samples_markdown
from fp4moe_diag.results import to_frame
from fp4moe_diag.run_folder import save_run
from frames import _row

REPO = Path(__file__).resolve().parent.parent
#: run -> T -> (ours us, peer us); ours' second tactic is 10 % slower (the best one counts)
TIMES = {"r1": {1: (50.0, 60.0), 64: (99.0, 100.0), 4096: (1010.0, 1000.0)},
         "r2": {1: (51.0, 60.0), 64: (102.0, 100.0), 4096: (1020.0, 1000.0)},
         "r3": {1: (49.0, 61.0), 64: (100.0, 100.0), 4096: (1015.0, 1000.0)}}


def frame(times=TIMES) -> pd.DataFrame:
    rows = []
    for rid, per_t in times.items():
        for t, (ours, peer) in per_t.items():
            for i, us in enumerate((ours, ours * 1.1)):
                rows.append({**_row("triton", f"a{i}", i, t, 1, t_us=us, is_best=i == 0), "run_id": rid})
            rows.append({**_row("triton_kernels", "k", 0, t, 1, t_us=peer, is_best=True), "run_id": rid})
    return to_frame(rows)


def test_each_shape_gets_its_medians_its_ratio_spread_and_a_verdict():
    t = sample_ratios(frame(), "triton", "triton_kernels").set_index("num_tokens")
    assert list(t.index) == [1, 64, 4096] and (t["runs"] == 3).all()
    assert t.loc[1, "a_us"] == 50.0 and t.loc[1, "b_us"] == 60.0
    assert t.loc[1, "ratio_max"] == pytest.approx(51 / 60) and t.loc[1, "verdict"] == "ahead"
    assert (t.loc[64, "ratio_min"], t.loc[64, "ratio_max"]) == (pytest.approx(0.99), pytest.approx(1.02))
    assert t.loc[64, "verdict"] == "level"  # the runs straddle 1
    assert t.loc[4096, "ratio_median"] == pytest.approx(1.015) and t.loc[4096, "verdict"] == "behind"
    md = samples_markdown(t.reset_index(), "triton", "triton_kernels")
    assert "| gpt-oss-20b | 1 | 4096 | 3 | 1,015.0 | 1,000.0 | 1.015 | 1.010 | 1.020 | **behind** |" in md
    assert md.endswith("ahead at 1, level at 1, behind at 1 of 3 shapes (level: the runs straddle 1).")


def test_the_kernel_time_verdict_stands_beside_the_replay_one_and_their_differences_are_named():
    """CUPTI spans per run: T=4096 behind by replay but level by kernel time (named under the table); T=1 ahead both
    ways, its fastest tactic by span (a1) not its fastest by replay (a0); T=64 has no span in one run: no verdict."""
    d = frame()
    span = {("r1", 4096): 990.0, ("r2", 4096): 1005.0, ("r3", 4096): 1001.0}  # ours' a0; the peer's span = its time
    def s(r):
        if r["backend"] == "triton_kernels":
            return r["time_median_us"]
        if r["num_tokens"] == 1:  # a1 (10 % slower by replay) is the faster by span
            return 40.0 if r["tactic_label"] == "a1" else 45.0
        if r["num_tokens"] == 64:
            return None if r["run_id"] == "r2" else r["time_median_us"]
        return span[(r["run_id"], 4096)] if r["tactic_label"] == "a0" else 2000.0
    d["time_kernel_span_median_us"] = [s(r) for _, r in d.iterrows()]
    t = sample_ratios(d, "triton", "triton_kernels").set_index("num_tokens")
    assert (t.loc[4096, "verdict"], t.loc[4096, "kernel_verdict"]) == ("behind", "level")
    assert (t.loc[4096, "kratio_min"], t.loc[4096, "kratio_max"]) == (pytest.approx(0.99), pytest.approx(1.005))
    assert t.loc[1, "kratio_max"] == pytest.approx(40 / 60) and t.loc[1, "kernel_verdict"] == "ahead"
    assert t.loc[64, "kernel_verdict"] == "" and pd.isna(t.loc[64, "kratio_min"])
    md = samples_markdown(t.reset_index(), "triton", "triton_kernels").splitlines()
    assert md[0].endswith("| triton is | by kernel time (CUPTI) |")
    assert md[4].endswith("| **behind** | level (0.990-1.005) |") and md[3].endswith("| level | - |")
    assert md[-1] == "By kernel time the verdict differs at 1: gpt-oss-20b EP1 T=4096 (behind / level)."
    assert (sample_ratios(frame(), "triton", "triton_kernels")["kernel_verdict"] == "").all()  # no spans at all


def test_runs_of_two_gpus_are_compared_per_gpu_with_a_gpu_column():
    """H200 runs r1-r3 and H100 runs h1-h2 (ours 20 % slower there): each GPU's shapes on their own lines, named."""
    h100 = frame({"h1": {64: (120.0, 100.0)}, "h2": {64: (118.0, 100.0)}}).assign(gpu_name="NVIDIA H100 80GB HBM3")
    t = sample_ratios(pd.concat([frame(), h100], ignore_index=True), "triton", "triton_kernels")
    got = {(g, n): (r, v) for g, n, r, v in zip(t["gpu_name"], t["num_tokens"], t["runs"], t["verdict"])}
    assert got[("NVIDIA H100 80GB HBM3", 64)] == (2, "behind") and got[("NVIDIA H200", 64)] == (3, "level")
    md = samples_markdown(t, "triton", "triton_kernels")
    assert md.startswith("| GPU | model | EP | T | runs |")
    assert "| H100 80GB HBM3 | gpt-oss-20b | 1 | 64 | 2 | 119.0 | 100.0 | 1.190 | 1.180 | 1.200 | **behind** |" in md
    assert "| H200 | gpt-oss-20b | 1 | 4096 | 3 |" in md and "of 4 shapes" in md


def test_a_shape_in_one_run_only_has_no_line_and_bad_input_is_refused():
    partial = {**TIMES, "r4": {16: (10.0, 20.0)}}
    assert 16 not in set(sample_ratios(frame(partial), "triton", "triton_kernels")["num_tokens"])
    with pytest.raises(ValueError, match=r"^b: .*must differ"):
        sample_ratios(frame(), "triton", "triton")
    with pytest.raises(ValueError, match=r"^runs: .*at least two runs.*got 1"):
        sample_ratios(frame({"r1": TIMES["r1"]}), "triton", "triton_kernels")
    with pytest.raises(ValueError, match=r"^b: backend 'cutlass' is in none of these runs; they have \['triton', "):
        sample_ratios(frame(), "triton", "cutlass")


def test_the_cli_takes_each_folder_as_one_sample_and_exits_2_on_bad_input(tmp_path):
    f = frame()
    dirs = []
    for rid in TIMES:
        save_run(f[f["run_id"] == rid].assign(run_id="same-id"), tmp_path / rid)  # one run id in all: folders count
        dirs.append(str(tmp_path / rid))
    run = lambda *a: subprocess.run([sys.executable, "-m", "fp4moe_diag", "samples", *a], cwd=REPO,  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    cp = run(*dirs, "--csv", str(tmp_path / "s.csv"))
    assert cp.returncode == 0, cp.stderr
    assert "behind at 1 of 3 shapes" in cp.stdout and len(pd.read_csv(tmp_path / "s.csv")) == 3
    assert "SM clock" not in cp.stdout  # these runs carry no clock: no line
    clocked = tmp_path / "r3-clocked"  # r3 again, timed at a lower clock
    save_run(f[f["run_id"] == "r3"].assign(time_sm_clock_mhz=1755.0), clocked)
    cp = run(dirs[0], str(clocked))
    assert cp.returncode == 0 and cp.stdout.strip().splitlines()[-1] == (
        f"SM clock while timing (NVML, median and range over the rows): {clocked} 1,755 MHz (1,755-1,755).")
    for bad, msg in (((dirs[0],), "at least two run folders"), ((dirs[0], str(tmp_path / "nope")), "not a run folder"),
                     ((*dirs, "--b", "trtllm"), "backend 'trtllm' is in none")):
        cp = run(*bad)
        assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and msg in cp.stderr, cp.stderr


def test_run_clocks_give_each_run_its_median_and_range_and_skip_runs_without():
    from fp4moe_diag.analysis.samples import clocks_line, run_clocks

    f = frame()
    f["time_sm_clock_mhz"] = f["run_id"].map({"r1": 1980.0, "r2": float("nan")})
    f.loc[f.index[0], "time_sm_clock_mhz"] = 1830.0  # one row of r1 read lower
    clocks = run_clocks(f)
    assert clocks == {"r1": (1980.0, 1830.0, 1980.0)}  # r2 (NaN) and r3 (none) have no entry
    assert clocks_line(clocks) == ("SM clock while timing (NVML, median and range over the rows): "
                                   "r1 1,980 MHz (1,830-1,980).")
    assert run_clocks(f.drop(columns=["time_sm_clock_mhz"])) == {} and clocks_line({}) == ""
