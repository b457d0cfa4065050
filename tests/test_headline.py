"""x_of_best and the headline table on a frame whose answers are known."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fp4moe_diag.analysis import x_of_best
from fp4moe_diag.analysis.headline import clock_note, headline_markdown, headline_table
from fp4moe_diag.run_folder import save_run
from fp4moe_diag.results import to_frame
from frames import _row

REPO = Path(__file__).resolve().parent.parent
#: (backend, flashinfer version, T) -> times of its tactics (us); the first tactic is the default
TIMES = {("triton_kernels", "0.5.2", 64): [100.0, 80.0], ("triton", "0.5.2", 64): [200.0, 160.0],
         ("cutlass", "0.5.2", 64): [400.0, 320.0], ("cutlass", "0.7.4", 64): [800.0, 640.0],
         ("triton_kernels", "0.5.2", 4096): [1000.0, 1200.0], ("triton", "0.5.2", 4096): [900.0, 950.0],
         ("reference", "0.5.2", 64): [10.0], ("reference", "0.5.2", 4096): [10.0]}


def frame() -> pd.DataFrame:
    rows = []
    for (backend, fi, t), times in TIMES.items():
        for i, us in enumerate(times):
            r = _row(backend, f"{backend[:3]}{i}", i, t, 1, "ok", us, is_default=i == 0, is_best=us == min(times))
            r.update(flashinfer_version=fi, frac_bw_roofline=1.0 / us, achieved_TFLOPs=1e4 / us,
                     frac_flops_roofline=12.5 / us)
            rows.append(r)
    return to_frame(rows)


def test_x_of_best_divides_each_backends_best_by_the_fastest_and_keeps_flashinfer_versions_apart():
    x = x_of_best(frame())
    got = {(r.backend, r.num_tokens): (r.best_us, round(r.x_of_best, 6), r.best_backend) for r in x.itertuples()}
    assert got == {("triton_kernels", 64): (80.0, 1.0, "triton_kernels"), ("triton", 64): (160.0, 2.0, "triton_kernels"),
                   ("cutlass@0.5.2", 64): (320.0, 4.0, "triton_kernels"),
                   ("cutlass@0.7.4", 64): (640.0, 8.0, "triton_kernels"),
                   ("triton", 4096): (900.0, 1.0, "triton"), ("triton_kernels", 4096): (1000.0, round(1000 / 900, 6), "triton")}
    assert "reference" not in set(x["backend"])  # the float32 check is not a kernel


def test_headline_table_is_one_row_per_shape_with_a_column_group_per_backend():
    t = headline_table(frame(), backends=["triton_kernels", "triton", "cutlass@0.5.2", "cutlass@0.7.4"])
    assert t["num_tokens"].tolist() == [64, 4096]
    r64, r4k = t.iloc[0], t.iloc[1]
    assert (r64["best_backend"], r64["best_us"]) == ("triton_kernels", 80.0)
    assert r64["cutlass@0.7.4:x_of_best"] == 8.0 and r64["triton:tactic"] == "tri1"
    assert r64["triton:frac_read"] == pytest.approx(1 / 160)
    assert r64["best_TFLOPs"] == pytest.approx(1e4 / 80) and r64["best_frac_bf16"] == pytest.approx(12.5 / 80)
    assert pd.isna(r4k["cutlass@0.5.2:us"]) and r4k["best_backend"] == "triton"  # not measured at that T: NaN
    md = headline_markdown(t).splitlines()
    assert md[0].startswith("| model | EP | T | triton_kernels us") and len(md) == 4
    assert "| **80.0** (1.00x, 1 %) | 160 (2.00x, 1 %) | 320 (4.00x, 0 %) | 640 (8.00x, 0 %) | 125 (16 %) |" in md[2]
    assert "| 1,000 (1.11x, 0 %) | **900** (1.00x, 0 %) | - | - |" in md[3]


def test_two_gpus_are_two_lines_a_shape_each_named_in_a_gpu_column():
    """The same shapes measured on an H200 and an H100: each GPU's own best and x of best, and a GPU column (one GPU:
    none, as above)."""
    h100 = frame()
    h100["gpu_name"] = "NVIDIA H100 80GB HBM3"
    h100["time_median_us"] = h100["time_median_us"] * 2
    h100.loc[h100["backend"] == "triton", "time_median_us"] /= 4  # triton the fastest on the H100
    both = pd.concat([frame().assign(gpu_name="NVIDIA H200"), h100], ignore_index=True)
    t = headline_table(both, backends=["triton_kernels", "triton"])
    got = {(r.gpu_name, r.num_tokens): (r.best_backend, r.best_us) for r in t.itertuples()}
    assert got == {("NVIDIA H100 80GB HBM3", 64): ("triton", 80.0), ("NVIDIA H100 80GB HBM3", 4096): ("triton", 450.0),
                   ("NVIDIA H200", 64): ("triton_kernels", 80.0), ("NVIDIA H200", 4096): ("triton", 900.0)}
    md = headline_markdown(t).splitlines()
    assert md[0].startswith("| GPU | model | EP | T | triton_kernels us") and len(md) == 6
    assert md[2].startswith("| H100 80GB HBM3 | gpt-oss-20b | 1 | 64 | 160 (2.00x, 1 %) | **80.0** (1.00x,")
    assert md[4].startswith("| H200 | gpt-oss-20b | 1 | 64 | **80.0** (1.00x, 1 %) | 160 (2.00x")


def test_headline_refuses_a_backend_that_is_not_there():
    with pytest.raises(ValueError, match=r"backends: \['trtllm'\] not measured.*'triton_kernels'"):
        headline_table(frame(), backends=["trtllm"])
    with pytest.raises(ValueError, match="table"):
        headline_markdown(pd.DataFrame())


def test_headline_cli_prints_the_table_and_exits_2_on_bad_input(tmp_path):
    run = tmp_path / "2026-12-01-nvidia-h200"
    save_run(frame(), run)
    env_run = lambda *a: subprocess.run([sys.executable, "-m", "fp4moe_diag", "headline", *a], cwd=REPO,  # noqa: E731
                                        capture_output=True, text=True, timeout=120)
    cp = env_run(str(run), "--csv", str(tmp_path / "h.csv"))
    assert cp.returncode == 0, cp.stderr
    assert "**80.0**" in cp.stdout and len(pd.read_csv(tmp_path / "h.csv")) == 2
    bad = env_run(str(run), "--backends", "nope")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "backends" in bad.stderr


def test_x_of_best_figure_plots_each_backends_ratio_and_read_share():
    import matplotlib

    matplotlib.use("Agg")
    from fp4moe_diag.plotting import x_of_best_figure

    fig = x_of_best_figure(frame())
    top, bottom = fig.axes[0], fig.axes[1]
    lines = {ln.get_label(): (list(ln.get_xdata()), [round(float(y), 6) for y in ln.get_ydata()])
             for ln in top.get_lines() if not ln.get_label().startswith("_")}
    assert lines["triton"] == ([64, 4096], [2.0, 1.0]) and lines["cutlass@0.7.4"] == ([64], [8.0])
    assert lines["triton_kernels"] == ([64, 4096], [1.0, round(1000 / 900, 6)])
    reads = {ln.get_label(): [float(y) for y in ln.get_ydata()] for ln in bottom.get_lines()}
    assert reads["cutlass@0.5.2"] == pytest.approx([1 / 320])


def test_the_report_shows_the_headline_table():
    from fp4moe_diag.report.nb05 import comparison_tables

    cmp = comparison_tables(frame())
    h = cmp["headline"]
    assert h["best_backend"].tolist() == ["triton_kernels", "triton"] and "cutlass@0.7.4:x_of_best" in h
    empty = comparison_tables(frame()[lambda d: d["backend"] == "reference"])
    assert empty["headline"].empty and any(n.startswith("headline: df:") for n in empty["notes"]["note"])


def test_a_w4a8_backend_is_measured_against_the_best_bf16_kernel_and_never_is_the_best():
    """Like for like: a W4A8 row faster than every bf16-activation kernel still has the bf16 best as its yardstick
    (x < 1 says "faster, at another precision"), is not bold, and its column header says it is another precision."""
    df = frame()
    w8 = []
    for i, us in enumerate((50.0, 60.0)):  # faster than triton_kernels' 80 us at T=64
        r = _row("triton_w4a8", f"f8{i}", i, 64, 1, "ok", us, is_default=i == 0, is_best=i == 0)
        r.update(flashinfer_version="0.5.2", frac_bw_roofline=1.0 / us, kernel_precision="w4a8")
        w8.append(r)
    df = pd.concat([df, to_frame(w8)], ignore_index=True)
    x = x_of_best(df).set_index(["backend", "num_tokens"])
    assert x.loc[("triton_w4a8", 64), "x_of_best"] == pytest.approx(50.0 / 80.0)
    assert x.loc[("triton_w4a8", 64), "kernel_precision"] == "w4a8"
    assert x.loc[("triton_kernels", 64), "best_backend"] == "triton_kernels"  # not the faster W4A8 row
    assert x.loc[("triton_kernels", 64), "x_of_best"] == 1.0 and x.loc[("triton", 64), "kernel_precision"] == "w4a16"
    md = headline_markdown(headline_table(df, ["triton_kernels", "triton_w4a8"]), ["triton_kernels", "triton_w4a8"])
    assert "triton_w4a8 us (x best bf16: other precision, % read)" in md.splitlines()[0]
    row64 = next(ln for ln in md.splitlines() if ln.startswith("| gpt-oss") and "| 64 |" in ln)
    assert "**80.0**" in row64 and "50.0 (0.62x" in row64 and "**50" not in row64


def test_a_shape_none_of_the_chosen_backends_measured_has_no_line():
    import pandas as pd

    from fp4moe_diag.analysis.headline import headline_table

    d = pd.read_parquet(REPO / "data" / "runs" / "2026-12-04-nvidia-h200-s10f" / "results.parquet")
    t = headline_table(d, ["triton", "triton_kernels"])
    # the run's W4A8 sweep also measured 120b EP4 T=16384 (triton_w4a8 only): not a line of this table
    assert not ((t["model"] == "gpt-oss-120b") & (t["num_tokens"] == 16384)).any()
    assert len(t) == 23 and t["triton:us"].notna().all()
    assert "gpt-oss-120b" in set(headline_table(d, ["triton_w4a8"])["model"])


def test_a_shape_only_w4a8_kernels_measured_renders():
    from fp4moe_diag.analysis.headline import headline_markdown, headline_table

    d = pd.read_parquet(REPO / "data" / "runs" / "2026-12-04-nvidia-h200-s10f" / "results.parquet")
    t = headline_table(d, ["triton", "triton_w4a8"])
    line = [ln for ln in headline_markdown(t, ["triton", "triton_w4a8"]).splitlines()
            if ln.startswith("| gpt-oss-120b | 4 | 16384 |")]
    # only triton_w4a8 ran there (best 2596 us): no bold, no x of best (W4A8 is never the best), no fastest column
    assert line == ["| gpt-oss-120b | 4 | 16384 | - | 2,596 (-, 6 %) | - |"]  # 6 %: its share of the read ceiling


def test_triton_releases_in_one_frame_are_kernels_of_their_own_and_one_release_keeps_plain_names():
    rows = []
    for backend, release, us in (("triton", "3.6.0", 100.0), ("triton", "3.7.1", 110.0), ("triton_kernels", "3.6.0",
                                 120.0), ("triton_kernels", "3.7.1", 105.0), ("cutlass", "3.7.1", 200.0)):
        r = _row(backend, f"{backend[:3]}0", 0, 64, 1, "ok", us, is_best=True)
        r.update(triton_version=release, flashinfer_version="0.7.4", frac_bw_roofline=1.0 / us)
        rows.append(r)
    df = to_frame(rows)
    x = x_of_best(df)
    got = {r.backend: round(r.x_of_best, 6) for r in x.itertuples()}
    assert got == {"triton@3.6.0": 1.0, "triton@3.7.1": 1.1, "triton_kernels@3.6.0": 1.2, "triton_kernels@3.7.1": 1.05,
                   "cutlass@0.7.4": 2.0}  # cutlass: FlashInfer's kernel, told apart by FlashInfer's version only
    t = headline_table(df, backends=["triton@3.6.0", "triton@3.7.1", "triton_kernels@3.7.1"])
    assert t.iloc[0]["triton@3.7.1:us"] == 110.0 and t.iloc[0]["best_backend"] == "triton@3.6.0"
    one = x_of_best(df[df["triton_version"] == "3.6.0"])  # a single release: names as before
    assert set(one["backend"]) == {"triton", "triton_kernels"}


def test_a_release_built_with_another_ptxas_is_a_column_of_its_own():
    """Session 37: Triton 3.9.0 pointed at the image Triton's ptxas (rows read 3.9.0+ptxas12.8,
    environment.triton_build) is a build of its own beside 3.9.0 as shipped and 3.6.0."""
    rows = []
    for release, ptxas, us in (("3.9.0", "13.4", 125.0), ("3.9.0+ptxas12.8", "12.8", 101.0), ("3.6.0", "12.8", 100.0)):
        r = _row("triton", "tri0", 0, 1024, 1, "ok", us, is_best=True)
        r.update(triton_version=release, triton_ptxas=ptxas, frac_bw_roofline=1.0 / us)
        rows.append(r)
    t = headline_table(to_frame(rows), backends=["triton@3.9.0", "triton@3.9.0+ptxas12.8", "triton@3.6.0"])
    assert t.iloc[0]["triton@3.9.0:x_of_best"] == 1.25 and t.iloc[0]["triton@3.9.0+ptxas12.8:x_of_best"] == 1.01
    assert t.iloc[0]["best_backend"] == "triton@3.6.0"


def test_triton_releases_given_different_tactics_are_said_and_can_be_compared_on_the_common_ones(tmp_path):
    """Session 15: triton@3.6.0 also ran the 16-warp tiles (another sweep of the same run), 3.7.1 did not; its
    headline compared tactic sets as well as releases without saying so."""
    from fp4moe_diag.analysis.builds import common_release_tactics, release_tactic_mismatches
    from fp4moe_diag.analysis.headline import release_note

    rows = []
    for release, times in (("3.6.0", {"a": 100.0, "w16": 90.0}), ("3.7.1", {"a": 105.0})):
        for i, (label, us) in enumerate(times.items()):
            r = _row("triton", label, i, 4096, 1, "ok", us, is_best=us == min(times.values()))
            r.update(triton_version=release)
            rows.append(r)
    r = _row("triton", "a", 0, 64, 1, "ok", 50.0, is_best=True)  # a shape under one release only: kept
    r.update(triton_version="3.6.0")
    df = to_frame(rows + [r])
    m = release_tactic_mismatches(df)
    assert len(m) == 1 and (m.iloc[0]["num_tokens"], m.iloc[0]["tactics"], m.iloc[0]["common"]) == (
        4096, "3.6.0: 2, 3.7.1: 1", 1)
    assert "Not like for like" in release_note(df) and "triton (1 shapes, 3.6.0: 2, 3.7.1: 1" in release_note(df)
    same = common_release_tactics(df)
    assert sorted(zip(same["num_tokens"], same["tactic_label"], same["triton_version"])) == [
        (64, "a", "3.6.0"), (4096, "a", "3.6.0"), (4096, "a", "3.7.1")]
    assert release_note(same) == ""
    t = headline_table(same).set_index("num_tokens")
    assert t.loc[4096, "triton@3.6.0:us"] == 100.0 and t.loc[4096, "triton@3.7.1:us"] == 105.0
    assert headline_table(df).set_index("num_tokens").loc[4096, "triton@3.6.0:us"] == 90.0
    assert common_release_tactics(frame()).equals(frame())  # no Triton release split: unchanged
    run = tmp_path / "run"
    save_run(df, run)
    cp = subprocess.run([sys.executable, "-m", "fp4moe_diag", "headline", str(run), "--common-tactics"], cwd=REPO,
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and "| 100 (1.00x" in cp.stdout.replace("**", "") and "Not like" not in cp.stdout


def test_the_report_says_when_triton_releases_were_given_different_tactics():
    from fp4moe_diag.report.nb05 import comparison_tables

    rows = []
    for release, labels in (("3.6.0", ("a", "w16")), ("3.7.1", ("a",))):
        for i, label in enumerate(labels):
            r = _row("triton", label, i, 4096, 1, "ok", 100.0 + i, is_best=i == 0)
            r.update(triton_version=release)
            rows.append(r)
    notes = list(comparison_tables(to_frame(rows))["notes"]["note"])
    assert any(n.startswith("headline: Not like for like") for n in notes), notes
    assert not any("like for like" in n for n in comparison_tables(frame())["notes"]["note"])


def test_the_headline_says_where_the_best_rows_ran_at_clocks_more_than_5_percent_apart(tmp_path):
    df = frame()
    mhz = {("triton_kernels", 64): 1935.0, ("triton", 64): 1845.0, ("triton_kernels", 4096): 1935.0,
           ("triton", 4096): 1560.0}  # T=64: 4.9 % apart; T=4096: 24 %
    df["time_sm_clock_mhz"] = [mhz.get((b, t), float("nan")) for b, t in zip(df["backend"], df["num_tokens"])]
    t = headline_table(df, backends=["triton_kernels", "triton"])
    assert t["triton:clock_mhz"].tolist() == [1845.0, 1560.0]
    assert clock_note(t) == ("Not like for like in clocks at 1 shape(s): the best rows were timed at SM clocks more "
                             "than 5 % apart: gpt-oss-20b EP1 T=4096 (triton_kernels 1,935, triton 1,560 MHz). A duel "
                             "compares them at the same clocks.")
    assert clock_note(headline_table(frame())) == ""  # no clock read: nothing said
    run = tmp_path / "2026-12-01-nvidia-h100"
    save_run(df, run)
    cp = subprocess.run([sys.executable, "-m", "fp4moe_diag", "headline", str(run)], cwd=REPO, capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0 and cp.stdout.rstrip().endswith("compares them at the same clocks."), cp.stderr
    from fp4moe_diag.report.nb05 import comparison_tables

    notes = list(comparison_tables(df)["notes"]["note"])
    assert any(n.startswith("headline: Not like for like in clocks at 1 shape(s)") for n in notes), notes


def test_the_headline_names_the_bf16_ceiling_from_cold_and_sustained_where_measured(tmp_path):
    """Session 25: the % bf16 column is of the GEMM timed from a cold start; where the run also timed it after 3 s of
    GEMMs, a line under the headline gives both, per GPU (medians over its rows), in the CLI and in notebook 05."""
    from fp4moe_diag.analysis.headline import ceiling_note
    from fp4moe_diag.report.nb05 import comparison_tables

    df = frame()
    assert ceiling_note(df) == ""  # measured once (or not at all): nothing to say
    df = df.assign(ceiling_bf16_TFLOPs=780.0, ceiling_bf16_sm_clock_mhz=1980.0, ceiling_bf16_sustained_TFLOPs=629.0,
                   ceiling_bf16_sustained_sm_clock_mhz=1230.0, gpu_name="NVIDIA H100 80GB HBM3")
    want = ("% bf16 is of the bf16 GEMM timed from a cold start; after seconds of GEMMs (a long prefill call's load) it "
            "sustains less: H100 80GB HBM3: 780 TFLOP/s at 1,980 MHz from cold, 629 at 1,230 MHz after 3 s (81 %).")
    assert ceiling_note(df) == want
    assert "headline: " + want in list(comparison_tables(df)["notes"]["note"])
    run = tmp_path / "2026-12-01-nvidia-h100"
    save_run(df, run)
    cp = subprocess.run([sys.executable, "-m", "fp4moe_diag", "headline", str(run)], cwd=REPO, capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.rstrip().endswith(want)
