"""Issue #25's goal table (analysis.goals, goals_markdown, ``goals`` CLI) on frames whose answers are known, and on
the committed H200 runs of session 9; with Nsight Compute profiles: ``test_goal_profiles.py``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fp4moe_diag.analysis.goal_profiles import read_profiles
from fp4moe_diag.analysis.goals import LAUNCH_US, goal_report, goal_rows
from fp4moe_diag.analysis.goals_markdown import goals_markdown
from fp4moe_diag.analysis.headline import headline_table
from fp4moe_diag.results import to_frame
from fp4moe_diag.run_folder import save_run
from frames import _row

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "data" / "runs"
S9 = [RUNS / f"2026-12-04-nvidia-h200-s9{x}" for x in "dfac"]
READ, BF16 = 4000.0, 800.0  # the synthetic run's ceilings: GB/s, TFLOP/s


def row(backend, label, t, us, ep=1, precision="w4a16", status="ok", wb=None, frac=None, rel=1e-3, **kw):
    r = _row(backend, label, 0, t, ep, status, us, rel=rel, is_best=False)
    r.update(kernel_precision=precision, ceiling_read_GBps=READ, ceiling_bf16_TFLOPs=BF16, rel_l2_bf16_ref=rel,
             weight_bytes=wb, frac_flops_roofline=frac, achieved_TFLOPs=None if frac is None else frac * BF16, **kw)
    return r


def frame(humming: str = "ok") -> pd.DataFrame:
    """20b EP1: T=1 (goal 3), T=64 (goals 1, 2), T=4096 (goals 1, 4, 5)."""
    rows = [row("triton", "a", 1, 15.0, wb=40_000_000), row("triton_kernels", "k", 1, 30.0),
            row("triton", "a", 64, 100.0, wb=300_000_000), row("triton", "b", 64, 110.0, wb=300_000_000),
            row("triton_kernels", "k1", 64, 120.0), row("triton_kernels", "k2", 64, 150.0),
            row("cutlass", "g1:1", 64, 90.0),
            row("triton", "p", 4096, 1000.0, frac=0.63, rel=3e-3), row("triton_kernels", "k", 4096, 1100.0),
            row("triton_w4a8", "f8", 4096, 900.0, precision="w4a8", rel=4e-2)]
    if humming == "ok":
        rows.append(row("cutlass_humming", "h", 4096, 990.0, precision="w4a8"))
    elif humming == "failed":
        rows.append(row("cutlass_humming", "h", 4096, None, precision="w4a8", status="failed"))
    return to_frame(rows)


def goal(t: pd.DataFrame, n: int, tokens: int) -> pd.Series:
    (i,) = t.index[(t["goal"] == n) & (t["num_tokens"] == tokens)]
    return t.loc[i]


def test_goal_rows_compute_each_goal_against_its_own_yardstick():
    t = goal_rows(frame())
    assert sorted(zip(t["goal"], t["num_tokens"])) == [(1, 1), (1, 64), (1, 4096), (2, 64), (3, 1), (4, 4096),
                                                      (5, 4096)]
    g1 = goal(t, 1, 64)  # the fastest bf16 peer is FlashInfer's CUTLASS at 90 us, not triton_kernels' best 120 us
    assert (g1["peer_backend"], g1["peer_tactic"], g1["ours_tactic"]) == ("cutlass@0.5.2", "g1:1", "a")
    assert g1["x_goal"] == pytest.approx(100 / 90) and g1["status"] == "not met"
    assert goal(t, 1, 4096)["status"] == "met" and goal(t, 1, 4096)["x_goal"] == pytest.approx(1000 / 1100)
    g2 = goal(t, 2, 64)  # 300 MB in 100 us = 3.0 TB/s
    assert g2["measured"] == pytest.approx(3.0) and g2["target"] == 3.4 and g2["unit"] == "TB/s"
    assert g2["x_goal"] == pytest.approx(3.4 / 3.0) and g2["status"] == "not met"
    g4 = goal(t, 4, 4096)
    assert (g4["measured"], g4["target"], g4["status"]) == (pytest.approx(63.0), pytest.approx(70.0), "not met")
    assert g4["x_goal"] == pytest.approx(0.70 / 0.63)


def test_with_two_triton_releases_ours_meets_the_peers_of_its_own_release():
    rows = []
    for release, ours_us, tk_us in (("3.6.0", 100.0, 120.0), ("3.7.1", 110.0, 105.0)):
        rows += [row("triton", "a", 64, ours_us, wb=300_000_000, triton_version=release),
                 row("triton_kernels", "k", 64, tk_us, triton_version=release)]
    t = goal_rows(to_frame(rows), ours="triton@3.7.1")
    g1 = goal(t, 1, 64)  # not our 3.6.0 build (100 us), not triton_kernels under 3.6.0: triton_kernels@3.7.1
    assert (g1["ours_backend"], g1["peer_backend"]) == ("triton@3.7.1", "triton_kernels@3.7.1")
    assert g1["x_goal"] == pytest.approx(110 / 105) and g1["status"] == "not met"
    g1 = goal(goal_rows(to_frame(rows), ours="triton@3.6.0"), 1, 64)
    assert (g1["peer_backend"], g1["x_goal"]) == ("triton_kernels@3.6.0", pytest.approx(100 / 120))
    with pytest.raises(ValueError, match=r"^ours: .*triton@3.6.0, triton@3.7.1\); pass one"):
        goal_rows(to_frame(rows))  # plain "triton" would silently be "not run"



def test_goal_5_finds_the_w4a8_backend_where_the_rows_hold_several_triton_releases():
    """Session 15's runs (triton under 3.6.0 and 3.7.1) beside session 11's W4A8 runs (3.6.0 only): the W4A8 rows are
    labelled triton_w4a8@3.6.0, and goal 5 must still compare them (it said "triton_w4a8 has no ok row")."""
    rows = [row("triton", "a", 4096, 1000.0, triton_version="3.6.0"),
            row("triton", "a", 4096, 1050.0, triton_version="3.7.1"),
            row("triton_w4a8", "f8", 4096, 900.0, precision="w4a8", rel=4e-2, triton_version="3.6.0"),
            row("cutlass_humming", "h", 4096, 990.0, precision="w4a8")]
    for ours in ("triton@3.6.0", "triton@3.7.1"):  # 3.7.1: the only W4A8 release there is
        g5 = goal(goal_rows(to_frame(rows), ours=ours), 5, 4096)
        assert (g5["ours_backend"], g5["status"]) == ("triton_w4a8@3.6.0", "met")
        assert g5["x_goal"] == pytest.approx(900 / 990)
    rows.append(row("triton_w4a8", "f8", 4096, 950.0, precision="w4a8", rel=4e-2, triton_version="3.7.1"))
    assert goal(goal_rows(to_frame(rows), ours="triton@3.7.1"), 5, 4096)["ours_us"] == pytest.approx(950.0)

def test_goals_cli_takes_ours_under_one_triton_release(tmp_path, capsys):
    from fp4moe_diag.cli import main
    from fp4moe_diag.run_folder import save_run

    rows = []
    for release, ours_us, tk_us in (("3.6.0", 100.0, 120.0), ("3.7.1", 110.0, 105.0)):
        rows += [row("triton", "a", 64, ours_us, wb=300_000_000, triton_version=release),
                 row("triton_kernels", "k", 64, tk_us, triton_version=release)]
    save_run(to_frame(rows), tmp_path / "run")
    assert main(["goals", str(tmp_path / "run"), "--ours", "triton@3.7.1"]) == 0
    out = capsys.readouterr().out
    assert "triton_kernels@3.7.1" in out and "triton_kernels@3.6.0" not in out
    assert main(["goals", str(tmp_path / "run")]) == 2  # which release is ours: said in one line, not guessed
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass one of them" in err, err


def test_goal_3_bound_is_weight_bytes_over_the_read_ceiling_plus_one_launch():
    assert LAUNCH_US == 3.0
    g3 = goal(goal_rows(frame()), 3, 1)  # 40 MB / 4000 GB/s = 10 us, + 3 us launch = 13 us; 1.3 x 13 = 16.9 us
    assert g3["target"] == pytest.approx(16.9) and g3["x_goal"] == pytest.approx(15 / 16.9) and g3["status"] == "met"
    assert "bound 13.0 us" in g3["note"]
    g3 = goal(goal_rows(frame(), launch_us=1.0), 3, 1)  # 1.3 x 11 = 14.3 us < 15 us
    assert g3["target"] == pytest.approx(14.3) and g3["status"] == "not met"


def test_goal_5_compares_w4a8_with_cutlass_humming_and_never_passes_without_it():
    g5 = goal(goal_rows(frame("ok")), 5, 4096)
    assert (g5["ours_backend"], g5["peer_backend"], g5["status"]) == ("triton_w4a8", "cutlass_humming@0.5.2", "met")
    assert g5["x_goal"] == pytest.approx(900 / 990)
    assert (g5["ours_rel_l2_bf16_ref"], g5["bf16_rel_l2_bf16_ref"]) == (pytest.approx(4e-2), pytest.approx(3e-3))
    failed = goal(goal_rows(frame("failed")), 5, 4096)
    assert failed["status"] == "not compared" and pd.isna(failed["x_goal"])
    assert "cutlass_humming has no ok row (1 failed): RuntimeError: CUDA error" in failed["note"]
    missing = goal(goal_rows(frame("none")), 5, 4096)
    assert missing["status"] == "not compared" and missing["note"] == (
        "cutlass_humming not run (it takes no expert biases: goal 5 is compared at the bias-free EP1 shapes, "
        "data/shapes/gpt-oss-nobias.csv)")
    # where Humming could run, "not run" is all there is to say; at EP2 both of its limits are named
    nobias = frame("none").assign(has_bias=False)
    assert goal(goal_rows(nobias), 5, 4096)["note"] == "cutlass_humming not run"
    ep2 = goal(goal_rows(frame("none").assign(ep_size=2)), 5, 4096)["note"]
    assert ep2.startswith("cutlass_humming not run (it takes no expert biases and no EP (EP2 here): goal 5")
    # a W4A8 backend is never goal 1's bf16 peer, even when its rows lack kernel_precision
    d = frame("ok")
    d.loc[d["backend"] == "cutlass_humming", "kernel_precision"] = pd.NA
    assert goal(goal_rows(d), 1, 4096)["peer_backend"] == "triton_kernels"


def test_goal_5_alone_on_the_120b_shape_humming_takes_and_nothing_below_prefill():
    kw = dict(model="gpt-oss-120b", num_experts=128, local_num_experts=128, has_bias=False)
    rows = [row("triton_w4a8", "p8", 4096, 1450.0, precision="w4a8", rel=4e-2, **kw),
            row("cutlass_humming", "h", 4096, 1500.0, precision="w4a8", **kw),
            row("triton_w4a8", "p8", 1024, 400.0, precision="w4a8", rel=4e-2, **kw),
            row("cutlass_humming", "h", 1024, 420.0, precision="w4a8", **kw)]
    t = goal_rows(to_frame(rows))
    assert list(zip(t["goal"], t["model"], t["num_tokens"])) == [(5, "gpt-oss-120b", 4096)]  # T=1024: no goal there
    assert t.iloc[0]["status"] == "met" and t.iloc[0]["x_goal"] == pytest.approx(1450 / 1500)
    # the bf16 path did not run at this shape: its accuracy is said to be missing, never printed as nan
    md = goals_markdown(goal_report(to_frame(rows), None))
    assert "rel_l2 vs bf16 ref: w4a8 4.00e-02, bf16 path not run" in md and "nan" not in md
    assert "rel_l2 vs bf16 ref: w4a8 4.00e-02, bf16 path 3.00e-03" in goals_markdown(goal_report(frame("ok"), None))


def test_without_a_profile_the_reason_is_the_runs_own_cupti_kernel_times():
    """A shape no Nsight Compute profile explains: the reason gives the kernel times CUPTI measured in the timing's own
    run, per kernel role and longest first (ours; goals 1 and 5 the peer's too), or says there are none."""
    from fp4moe_diag.analysis.goal_profiles import cupti_text

    d = frame()
    mine = (d["backend"] == "triton") & (d["num_tokens"] == 4096)
    peer = (d["backend"] == "triton_kernels") & (d["num_tokens"] == 4096)
    d["time_kernel_breakdown"] = pd.Series(pd.NA, index=d.index, dtype="object")
    d.loc[mine, "time_kernel_breakdown"] = ('{"_moe_mxfp4_gemm1_ps_gu_kernel": 560.0, "_moe_mxfp4_gemm2_ps_kernel": '
                                            '308.0, "_topk_sum_kernel": 24.25}')
    d.loc[peer, "time_kernel_breakdown"] = ('{"_matmul_ogs_NNT_bf16xbf16xmxfp4_128x256x128x1_swiglu": 560.5, '
                                            '"_matmul_ogs_NNT_bf16xbf16xmxfp4_128x256x128x1": 301.6, '
                                            '"_reduce_grouped": 23.8}')
    d.loc[mine, ["time_kernel_median_us", "time_kernel_span_median_us"]] = [892.25, 892.8]
    t = goal_report(d, None).table
    assert goal(t, 1, 4096)["reason"] == (
        "no profile; CUPTI in the run: ours gemm1 560.0, gemm2 308.0, topk_sum 24.2 us (sum 892.2, span 892.8); "
        "peer gemm1 560.5, gemm2 301.6, topk_sum 23.8 us")
    assert goal(t, 4, 4096)["reason"] == ("no profile; CUPTI in the run: ours gemm1 560.0, gemm2 308.0, topk_sum "
                                          "24.2 us (sum 892.2, span 892.8)")
    assert goal(t, 2, 64)["reason"] == "no profile"  # that run row has no breakdown
    # kernels of one role are summed; a row without a breakdown, or with a broken one, has none
    assert cupti_text('{"a_gemm2_x": 3.0, "b_gemm2_y": 4.5, "gemm1": 1.0}') == "gemm2 7.5, gemm1 1.0 us"
    assert cupti_text(None) is None and cupti_text("{not json") is None and cupti_text("{}") is None


def committed() -> pd.DataFrame:
    from fp4moe_diag.run_folder import is_run_folder, load_run

    return pd.concat([load_run(d) for d in S9 if is_run_folder(d)], ignore_index=True)


def test_the_committed_h200_runs_of_session_9():
    rep = goal_report(committed(), read_profiles(S9))
    t = rep.table

    def at(n: int, ep: int, tok: int, model: str = "gpt-oss-20b") -> pd.Series:
        return t[(t["goal"] == n) & (t["model"] == model) & (t["ep_size"] == ep) & (t["num_tokens"] == tok)].iloc[0]

    g2 = at(2, 1, 64)
    assert g2["ours_us"] == pytest.approx(164.3, abs=0.05) and g2["measured"] == pytest.approx(2.94, abs=0.005)
    assert g2["status"] == "not met" and g2["ours_run"] == "2026-12-04-nvidia-h200-s9d"
    assert g2["ours_profile"] == "2026-12-04-nvidia-h200-s9d (variant: m16n128k128w4s3-ps)"
    g1 = at(1, 1, 4096)
    assert g1["peer_backend"] == "triton_kernels" and g1["x_goal"] == pytest.approx(1.07, abs=0.005)
    assert g1["status"] == "not met" and g1["reason"].startswith("ours behind most in gemm1")
    assert g1["peer_profile"] == "2026-12-04-nvidia-h200-s9c"  # tk-m128kautow8s3, the timed tactic itself
    assert at(1, 1, 64)["status"] == "met" and at(4, 1, 4096)["measured"] == pytest.approx(61.8, abs=0.05)
    assert at(5, 1, 4096)["status"] == "not compared"
    assert at(5, 1, 4096)["note"].startswith("cutlass_humming not run (it takes no expert biases: goal 5")
    assert "2026-12-04-nvidia-h200-s9f" in set(rep.kernels["source"])  # 120b EP4 T=4096 profiled there only
    assert set(t["status"]) <= {"met", "not met", "not compared"}


def test_goal_2_off_the_h200_is_80_percent_of_the_runs_read_ceiling():
    """The issue's 3.4 TB/s is 80 % of the H200's read ceiling: on another GPU the target is 80 % of the ceiling the
    run measured (4.0 TB/s here: 3.2 TB/s), and the goal's name says both."""
    from fp4moe_diag.analysis.goals import GOAL_NAMES, decode_goal_gbps

    h100 = frame().assign(gpu_name="NVIDIA H100 80GB HBM3")
    g2 = goal(goal_rows(h100), 2, 64)  # 300 MB in 100 us = 3.0 TB/s
    assert g2["target"] == pytest.approx(3.2) and g2["x_goal"] == pytest.approx(3.2 / 3.0) and g2["status"] == "not met"
    assert goal(goal_rows(frame()), 2, 64)["target"] == 3.4  # the H200's: the issue's number
    assert decode_goal_gbps("NVIDIA H200", 4380.0) == 3400.0 and decode_goal_gbps("NVIDIA H100", 3110.0) == 2488.0
    assert GOAL_NAMES[2] == "decode >= 3.4 TB/s on the H200, elsewhere 80 % of the read ceiling (weight bytes / time)"


def test_goals_cli_prints_the_report_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    from fp4moe_diag.cli import main

    assert main(["goals", *map(str, S9), "--csv", str(tmp_path / "g.csv")]) == 0
    out = capsys.readouterr().out
    assert "### Goal 2: decode >= 3.4 TB/s" in out and "| 20b EP1 T=64 | 2.94 TB/s | 3.40 TB/s | **not met** |" in out
    assert len(pd.read_csv(tmp_path / "g.csv")) > 20
    (tmp_path / "empty").mkdir()
    for argv, why in ((["goals", str(tmp_path / "empty")], "has no results"),
                      (["goals", str(S9[1])], "none of the folders has results"),
                      (["goals", str(S9[0]), "--ours", "nope"], "unknown backend 'nope'"),
                      (["goals", str(S9[0]), "--ours", "trtllm"], "no rows of backend 'trtllm'"),
                      (["goals", str(S9[0]), "--ours", "triton@three"], "unknown backend 'triton@three'"),
                      (["goals", str(S9[0]), "--w4a8", "triton_w4a8@3.7.1"], "unknown backend 'triton_w4a8@3.7.1'"),
                      (["goals", str(S9[0]), "--ours", "triton@3.7.1"], "no rows of backend 'triton@3.7.1'")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err


def test_rows_without_ceilings_take_their_run_folders():
    import math

    import pandas as pd

    from fp4moe_diag.analysis.tables import with_run_ceilings

    d = pd.DataFrame({"run_id": ["r1", "r1", "r2"], "gpu_name": ["H200"] * 3,
                      "ceiling_read_GBps": [4380.0, math.nan, math.nan],
                      "ceiling_bf16_TFLOPs": [780.0, math.nan, math.nan],
                      "achieved_TFLOPs": [390.0, 546.0, 100.0], "frac_flops_roofline": [0.5, math.nan, math.nan]})
    w = with_run_ceilings(d)
    assert w["ceiling_read_GBps"].tolist()[:2] == [4380.0, 4380.0] and w["frac_flops_roofline"][1] == 0.7
    assert math.isnan(w["ceiling_bf16_TFLOPs"][2]) and math.isnan(w["frac_flops_roofline"][2])  # r2 measured none
    assert math.isnan(d["ceiling_read_GBps"][1])  # the input is not changed


def _ablation_rows(tactic: str, t: int, times: tuple) -> list[dict]:
    return [dict(model="gpt-oss-20b", ep_size=1, num_tokens=t, tactic=tactic, variant=v, label=tactic, time_median_us=us,
                 frac_read_ceiling=0.5 * times[0] / us) for v, us in zip(("tactic", "nodeq", "load", "seq"), times)]


def test_ablations_of_ours_tactic_follow_the_reason(tmp_path, capsys):
    """``profiling.ablate``'s CSV beside a run: its shares follow the reason where ours' tactic was ablated at that
    shape (T=64, tactic a), nowhere else (T=1: not ablated; T=4096: another tactic was)."""
    from fp4moe_diag.analysis.ablations import read_ablations
    from fp4moe_diag.cli import main

    ab = pd.DataFrame(_ablation_rows("a", 64, (100.0, 80.0, 60.0, 50.0)) + _ablation_rows("q", 4096, (900.0, 800.0, 300.0,
                                                                                                  290.0)))
    rep = goal_report(frame(), None, ablations=ab)
    note = "ablation: dequant 20%, rest of the loop 20%, weight stream 60% of 100.0 us (~load at 83% of the read"
    assert goal(rep.table, 2, 64)["reason"] == "no profile; " + note + " ceiling, ~seq at 100%)"
    assert goal(rep.table, 1, 64)["reason"].endswith(note + " ceiling, ~seq at 100%)")
    assert "ablation" not in goal(rep.table, 3, 1)["reason"] and "ablation" not in goal(rep.table, 4, 4096)["reason"]
    # the CLI reads ablate*.csv from every folder given, and takes a folder that holds only those
    (tmp_path / "ab").mkdir()
    ab.to_csv(tmp_path / "ab" / "ablate-20b.csv", index=False)
    assert read_ablations([tmp_path / "ab", tmp_path]).shape[0] == 8
    assert main(["goals", str(S9[0]), str(tmp_path / "ab")]) == 0
    capsys.readouterr()


def test_goal_4_says_the_clocks_of_ours_and_of_the_ceiling_and_the_sustained_ceiling():
    """Goal 4's verdict takes the run's bf16 ceiling as the issue states it; where the run measured them, the note
    adds the SM clock ours and the ceiling's GEMMs ran at and ours' fraction of the sustained ceiling."""
    rows = [row("triton", "p", 4096, 1000.0, frac=0.66, time_sm_clock_mhz=1815.0, ceiling_bf16_sm_clock_mhz=1980.0,
                ceiling_bf16_sustained_TFLOPs=704.0, ceiling_bf16_sustained_sm_clock_mhz=1830.0),
            row("triton_kernels", "k", 4096, 1100.0)]
    g4 = goal(goal_rows(to_frame(rows)), 4, 4096)
    assert g4["status"] == "not met" and g4["measured"] == pytest.approx(66.0)  # of 800, not of 704
    assert g4["note"] == ("528 of 800 TFLOP/s; ours ran at 1815 MHz, the ceiling's GEMMs at 1980; sustained ceiling "
                          "704 TFLOP/s at 1830 MHz: ours 75.0 % of it")
    assert goal(goal_rows(frame()), 4, 4096)["note"] == "504 of 800 TFLOP/s"  # a run without them: as before


def test_goal_1_says_where_the_medians_were_timed_at_clocks_more_than_5_percent_apart():
    """Session 25 (H100, 20b EP1 T=16384): ours' finalists read 1620 MHz, triton_kernels' 1695; the medians' 1.03x
    was a clock, the duel level. The goal row says so (and goals --duels lists the shape)."""
    from fp4moe_diag.analysis.duels import undecided

    rows = [row("triton", "p", 4096, 1030.0, time_sm_clock_mhz=1620.0),
            row("triton_kernels", "k", 4096, 1000.0, time_sm_clock_mhz=1800.0)]
    t = goal_rows(to_frame(rows))
    g1 = goal(t, 1, 4096)
    assert g1["note"] == "medians at 1620 / 1800 MHz: not like for like in clocks"
    assert (g1["ours_clock_mhz"], g1["peer_clock_mhz"]) == (1620.0, 1800.0)
    assert undecided(t) == ["gpt-oss-20b|1|4096|triton=p|triton_kernels=k"]
    rows[1]["time_sm_clock_mhz"] = 1680.0  # 3.7 % apart: like for like enough
    assert goal(goal_rows(to_frame(rows)), 1, 4096)["note"] == ""


def test_a_run_of_ours_alone_never_stands_against_a_peer_timed_in_another_run():
    """Session 28: a twins sweep of ours alone (a tactic filter, H100 -s28a), newer than the headline, replaced
    ours' best at 20b EP2 T=16384 (3538 us at 1665 MHz against 3365 in the headline) and set it against the
    headline's triton_kernels (1845 MHz): goal 1 turned 'not met'.  Where a run timed both, only such runs speak."""
    head = [row("triton", "a", 4096, 1000.0, run_id="2026-12-06-h", timestamp="2026-12-06T10:00:00"),
            row("triton_kernels", "k", 4096, 1030.0, run_id="2026-12-06-h", timestamp="2026-12-06T10:00:00"),
            row("triton", "a", 64, 100.0, run_id="2026-12-06-h", timestamp="2026-12-06T10:00:00")]
    alone = [row("triton", "a", 4096, 1060.0, run_id="2026-12-06-t", timestamp="2026-12-06T11:00:00"),
             row("triton", "a-u2", 4096, 1100.0, run_id="2026-12-06-t", timestamp="2026-12-06T11:00:00"),
             row("triton", "a", 64, 90.0, run_id="2026-12-06-t", timestamp="2026-12-06T11:00:00")]
    t = goal_rows(to_frame(head + alone))
    g1 = goal(t, 1, 4096)
    assert (g1["ours_us"], g1["peer_us"], g1["status"]) == (1000.0, 1030.0, "met")
    assert goal(t, 2, 64)["ours_us"] == 90.0  # no run timed a peer at T=64: the most recent run speaks, as before
    h = headline_table(to_frame(head + alone)).set_index("num_tokens")  # the headline takes the same run
    assert (h.loc[4096, "triton:us"], h.loc[4096, "triton:tactic"], h.loc[64, "triton:us"]) == (1000.0, "a", 90.0)
    t = goal_rows(to_frame(head[1:] + alone))  # no run timed both at T=4096: ours from the run of ours alone
    assert (goal(t, 1, 4096)["ours_us"], goal(t, 1, 4096)["status"]) == (1060.0, "not met")
