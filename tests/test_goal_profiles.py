"""Issue #25's goal table with Nsight Compute profiles (analysis.goal_profiles): a profile explains a shape only where
it profiled the tactic that was timed, on the same GPU and Triton release; ``goals --unprofiled`` lists the missed
shapes no profile explains.  The frames and helpers are those of ``test_goals.py``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fp4moe_diag.analysis.goal_profiles import kernel_role, match_profile, read_profiles, reason_text, tactic_match
from fp4moe_diag.analysis.goals import goal_report
from fp4moe_diag.analysis.goals_markdown import goals_markdown
from fp4moe_diag.run_folder import save_run
from test_goals import frame, goal


PROFILE = ("annotation,launch,kernel,duration_us,dram_throughput_pct,sm_throughput_pct,achieved_occupancy_pct,"
           "issue_slots_busy_pct,dram_read_bytes,registers_per_thread,stall_wait_pct,stall_selected_pct,"
           "dram_read_GBps,runs,role,tactic_label\n")


def write_profile(folder: Path, name: str, tactic: str, kernels: list[tuple[str, float, float]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = "".join(f"t0: {tactic},{i},{k},{us},10,50,12,40,1e8,255,{wait},90,300,3,t0,{tactic}\n"
                   for i, (k, us, wait) in enumerate(kernels))
    (folder / name).write_text(PROFILE + body)


def test_profiles_match_the_timed_tactic_and_give_the_measured_reason(tmp_path):
    write_profile(tmp_path / "run-a", "ncu_1-triton-gpt-oss-20b-ep1-t4096.csv", "p",
                  [("_moe_mxfp4_gemm1_ps_kernel", 700.0, 30.0), ("_moe_mxfp4_gemm2_ps_kernel", 250.0, 20.0),
                   ("_topk_sum_kernel", 30.0, 1.0)])
    write_profile(tmp_path / "run-b", "ncu_1-triton-gpt-oss-20b-ep1-t4096.csv", "p-pdl", [("_moe_gemm1", 1.0, 1.0)])
    write_profile(tmp_path / "run-b", "ncu_2-triton_kernels-gpt-oss-20b-ep1-t4096.csv", "k",
                  [("_matmul_ogs_x_swiglu", 600.0, 10.0), ("_matmul_ogs_x", 300.0, 10.0),
                   ("_reduce_grouped", 30.0, 5.0)])
    p = read_profiles([tmp_path / "run-a", tmp_path / "run-b"])
    assert p["top_stall"].iloc[0] == "wait 30.0 %"  # 'selected' (90 %) is issuing, not a stall
    assert (tactic_match("p", "p"), tactic_match("p", "p-pdl"), tactic_match("p", "px")) == (
        "exact", "variant", "other tactic")
    m = match_profile(p, "triton", "gpt-oss-20b", 1, 4096, "p")
    assert (m.source, m.match) == ("run-a", "exact")
    m = match_profile(p, "triton", "gpt-oss-20b", 1, 4096, "p-pdl-x")  # both variants: the later folder
    assert (m.source, m.match, m.tactic) == ("run-b", "variant", "p-pdl")
    assert match_profile(p, "triton", "gpt-oss-20b", 2, 4096, "p") is None
    assert [kernel_role(k) for k in ("_matmul_ogs_x_swiglu", "_matmul_ogs_x", "_reduce_grouped", "_quant_rows")] == [
        "gemm1", "gemm2", "topk_sum", "quant"]
    ours, peer = match_profile(p, "triton", "gpt-oss-20b", 1, 4096, "p"), match_profile(
        p, "triton_kernels", "gpt-oss-20b", 1, 4096, "k")
    text = reason_text(ours, peer)  # gemm1 +100 us over the peer, gemm2 -50 us
    assert text.startswith("ours behind most in gemm1: 700.0 us of 980.0 vs peer 600.0 of 930.0 us")
    assert "ours latency-bound: SM 50 %" in text and "255 regs, stall wait 30.0 %" in text
    assert reason_text(ours).startswith("gemm1 700.0 us of 980.0 us in 3 kernels")

    rep = goal_report(frame(), p)
    g1 = goal(rep.table, 1, 4096)
    assert g1["reason"] == text and g1["ours_profile"] == "run-a" and g1["peer_profile"] == "run-b"
    k = rep.kernels[rep.kernels["num_tokens"] == 4096]
    assert list(k["side"]) == ["ours"] * 3 + ["peer"] * 3 and set(k["source"]) == {"run-a", "run-b"}
    assert list(k.columns[:9]) == ["gpu_name", "model", "ep_size", "num_tokens", "side", "backend", "tactic", "match",
                                   "source"]
    md = goals_markdown(rep)
    assert "| 20b EP1 T=64 | 3.00 TB/s | 3.40 TB/s | **not met** | 1.13x |" in md
    assert "| ours | triton | `p` | run-a | _moe_mxfp4_gemm1_ps_kernel | 700.0 | 300 | 50 | 40 | 12 | 255 |" in md



def test_unprofiled_lists_the_missed_shapes_no_profile_of_ours_tactic_explains(tmp_path, capsys):
    """goals --unprofiled: the missed shapes (T=64: goals 1 and 2; T=4096: goal 4) less the one a profile of ours'
    timed tactic itself explains; a profile of another tactic does not count. The lines evidence.sh takes."""
    from fp4moe_diag.analysis.goal_profiles import unprofiled
    from fp4moe_diag.cli import main

    got = unprofiled(goal_report(frame(), None).table)
    assert [(r.num_tokens, r.tactic, r.goals) for r in got.itertuples()] == [(64, "a", "1,2"), (4096, "p", "4")]
    write_profile(tmp_path / "prof", "ncu_1-triton-gpt-oss-20b-ep1-t4096.csv", "p", [("_moe_gemm1", 1.0, 1.0)])
    write_profile(tmp_path / "prof", "ncu_2-triton-gpt-oss-20b-ep1-t64.csv", "b", [("_moe_gemm1", 1.0, 1.0)])
    rep = goal_report(frame(), read_profiles([tmp_path / "prof"]))
    assert [(r.num_tokens, r.tactic) for r in unprofiled(rep.table).itertuples()] == [(64, "a")]
    assert set(rep.table["ours_profile_match"].dropna()) == {"exact", "other tactic"}
    runs = tmp_path / "runs"
    save_run(frame(), runs)
    assert main(["goals", str(runs), str(tmp_path / "prof"), "--unprofiled"]) == 0
    assert capsys.readouterr().out == "gpt-oss-20b|1|64|a\n"


def test_goal_ones_peer_is_profiled_too_where_ours_is_behind_and_a_call_can(tmp_path, capsys):
    """goals --plan (session 27): at a goal-1 shape not met where the peer is triton_kernels, its tactic goes to
    PROFILES as triton_kernels=TACTIC until a profile of that tactic is in the runs (then goal 1's reason names the
    kernel role ours loses in); a FlashInfer peer (T=64 here) is not listed: evidence.sh does not carry its module."""
    from fp4moe_diag.analysis.goal_profiles import unprofiled
    from fp4moe_diag.cli import main

    df = frame()
    df.loc[(df["backend"] == "triton_kernels") & (df["num_tokens"] == 4096), "time_median_us"] = 950.0
    write_profile(tmp_path / "prof", "ncu_1-triton-gpt-oss-20b-ep1-t4096.csv", "p",
                  [("_moe_mxfp4_gemm1_ps_kernel", 700.0, 30.0), ("_moe_mxfp4_gemm2_ps_kernel", 250.0, 20.0)])
    got = unprofiled(goal_report(df, read_profiles([tmp_path / "prof"])).table)
    assert [(r.num_tokens, r.tactic, r.goals) for r in got.itertuples()] == [(64, "a", "1,2"),
                                                                             (4096, "triton_kernels=k", "1")]
    runs = tmp_path / "runs"
    save_run(df, runs)
    assert main(["goals", str(runs), str(tmp_path / "prof"), "--plan"]) == 0
    assert 'PROFILES="gpt-oss-20b|1|64|a gpt-oss-20b|1|4096|triton_kernels=k"' in capsys.readouterr().out
    write_profile(tmp_path / "prof", "ncu_2-triton_kernels-gpt-oss-20b-ep1-t4096.csv", "k",
                  [("_matmul_ogs_x_swiglu", 600.0, 10.0), ("_matmul_ogs_x", 300.0, 10.0)])
    rep = goal_report(df, read_profiles([tmp_path / "prof"]))
    assert [r.tactic for r in unprofiled(rep.table).itertuples()] == ["a"]
    assert goal(rep.table, 1, 4096)["peer_profile_match"] == "exact"
    assert goal(rep.table, 1, 4096)["reason"].startswith("ours behind most in gemm1: 700.0 us of 950.0 vs peer 600.0")


def test_a_report_over_two_gpus_names_the_gpu_of_each_shape():
    """Runs of an H200 and an H100 together: each goal per GPU x shape, the label naming the GPU (one GPU: no name)."""
    both = pd.concat([frame(), frame().assign(gpu_name="NVIDIA H100 80GB HBM3")], ignore_index=True)
    md = goals_markdown(goal_report(both, None))
    assert "| H200 20b EP1 T=64 | 3.00 TB/s | 3.40 TB/s | **not met** |" in md
    assert "| H100 80GB HBM3 20b EP1 T=64 | 3.00 TB/s | 3.20 TB/s | **not met** |" in md  # 80 % of its 4.0 TB/s
    assert "| 20b EP1 T=64 |" in goals_markdown(goal_report(frame(), None))


def test_a_gpus_timing_is_never_explained_by_another_gpus_profile(tmp_path):
    """with_folder_gpus: a profile takes the GPU of its folder's timings; the H100's shape takes the H100 profile (or one
    of no known GPU), never the H200's, even where that one matches the tactic better."""
    from fp4moe_diag.analysis.goal_profiles import with_folder_gpus

    for folder, tactic, us in (("h200", "p", 90), ("h100", "q", 99)):
        write_profile(tmp_path / folder, "ncu_1-triton-gpt-oss-20b-ep1-t64.csv", tactic,
                      [("_moe_mxfp4_gemm1_ps_kernel", us, 1)])
    p = with_folder_gpus(read_profiles([tmp_path / "h200", tmp_path / "h100"]),
                         {"h200": {"NVIDIA H200"}, "h100": {"NVIDIA H100 80GB HBM3"}, "x": {"A", "B"}})
    assert dict(zip(p["source"], p["gpu_name"])) == {"h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3"}
    h100 = "NVIDIA H100 80GB HBM3"
    m = match_profile(p, "triton", "gpt-oss-20b", 1, 64, "p", gpu_name=h100)
    assert (m.source, m.match) == ("h100", "other tactic")
    assert match_profile(p, "triton", "gpt-oss-20b", 1, 64, "p", gpu_name="NVIDIA H200").source == "h200"
    assert match_profile(p, "triton", "gpt-oss-20b", 1, 64, "p").source == "h200"  # no GPU asked: the best match
    unknown = with_folder_gpus(read_profiles([tmp_path / "h200"]), {})
    assert match_profile(unknown, "triton", "gpt-oss-20b", 1, 64, "p", gpu_name=h100).source == "h200"


def test_a_triton_release_takes_only_profiles_that_release_built(tmp_path):
    """triton@3.7.1's timing is never explained by a profile of kernels 3.6.0 built; a profile that records no release
    (made before the driver wrote it) still matches, with a note."""
    write_profile(tmp_path / "old", "ncu_1-triton-gpt-oss-20b-ep1-t64.csv", "p", [("_moe_mxfp4_gemm1_ps_kernel", 9, 1)])
    for release in ("3.6.0", "3.7.1"):
        write_profile(tmp_path / f"r{release}", "ncu_1-triton-gpt-oss-20b-ep1-t64.csv", "p",
                      [("_moe_mxfp4_gemm1_ps_kernel", 100.0 if release == "3.6.0" else 120.0, 1.0)])
        f = tmp_path / f"r{release}" / "ncu_1-triton-gpt-oss-20b-ep1-t64.csv"
        pd.read_csv(f).assign(triton_version=release).to_csv(f, index=False)
    p = read_profiles([tmp_path / "old", tmp_path / "r3.6.0", tmp_path / "r3.7.1"])
    m = match_profile(p, "triton@3.7.1", "gpt-oss-20b", 1, 64, "p", timed_in="r3.6.0")  # not 3.6.0's, despite the tie
    assert (m.source, m.kernels["duration_us"].iloc[0], m.note) == ("r3.7.1", 120.0, "")
    m = match_profile(p, "triton@3.6.0", "gpt-oss-20b", 1, 64, "p", timed_in="r3.6.0")
    assert (m.source, m.kernels["duration_us"].iloc[0]) == ("r3.6.0", 100.0)
    m = match_profile(p, "triton@3.8.0", "gpt-oss-20b", 1, 64, "p")  # no 3.8.0 profile: the unrecorded one, said
    assert (m.source, m.note) == ("old", "its Triton release not recorded")
    assert m.label() == "old (its Triton release not recorded)"
    assert match_profile(p[p["source"] != "old"], "triton@3.8.0", "gpt-oss-20b", 1, 64, "p") is None
    assert match_profile(p, "triton", "gpt-oss-20b", 1, 64, "p").note == ""  # one release in the rows: no tag
    from fp4moe_diag.analysis.goal_profiles import with_folder_releases

    # an unrecorded file takes its folder's release where the folder's timings ran under one; several: unknown
    filled = with_folder_releases(p, {"old": {"3.8.0"}, "r3.6.0": {"3.6.0"}})
    m = match_profile(filled, "triton@3.8.0", "gpt-oss-20b", 1, 64, "p")
    assert (m.source, m.note) == ("old", "")
    assert list(filled["triton_version"]) == ["3.8.0", "3.6.0", "3.7.1"]  # a recorded one is never overwritten
    assert with_folder_releases(p, {"old": {"3.6.0", "3.7.1"}})["triton_version"].isna().iloc[0]


def test_plan_prints_the_one_evidence_call_the_committed_h200_runs_still_need(capsys):
    """``goals --plan`` over session 15's H200 runs: evidence.sh with both lists, ONLY_ON the runs' GPU; the same lists
    as --duels and --unprofiled print (5 duels, 11 profiles)."""
    from fp4moe_diag.cli import main

    s15 = [str(Path(__file__).resolve().parents[1] / "data" / "runs" / f"2026-12-05-nvidia-h200-s15{x}") for x in "abcd"]
    lists = {}
    for flag in ("--duels", "--unprofiled", "--plan"):
        assert main(["goals", *s15, "--ours", "triton@3.6.0", flag]) == 0
        lists[flag] = capsys.readouterr().out.strip()
    duels, profiles = lists["--duels"].splitlines(), lists["--unprofiled"].splitlines()
    assert len(duels) == 5 and len(profiles) == 11
    assert duels[0] == "gpt-oss-20b|1|4096|triton=m128n128k64w16s3-ps-gu-g2n256-t64|triton_kernels=tk-m128kautow8s3"
    assert "gpt-oss-20b|1|1|m16n64k256w4s3-ps-sk2-pdl" in profiles
    # goal 1 not met (by the medians) and never traced: 20b EP2 T=4096 goes to CONDITIONS (its first way, c1, is the
    # plain duel), the other undecided shapes stay in DUELS (session 26)
    traced = [d for d in duels if d.startswith("gpt-oss-20b|2|4096|")]
    assert len(traced) == 1
    # and the read floors of the eight goal 2-3 shapes not met (none read in session 15)
    floors = "15077376,45232128,60309504,75386880,180928512,407089152,422166528,482476032"
    assert lists["--plan"] == (f'ONLY_ON=H200 PARTS="floor duel conditions profile" FLOOR_BYTES="{floors}" '
                               f'DUELS="{" ".join(d for d in duels if d not in traced)}" CONDITIONS="{traced[0]}" '
                               f'PROFILES="{" ".join(profiles)}" bash tools/device/plans/evidence.sh')


def test_plan_says_when_nothing_is_left_and_refuses_runs_of_several_gpus():
    from fp4moe_diag.cli_goals import evidence_command

    h100 = pd.Series(["NVIDIA H100 80GB HBM3"] * 3)
    assert evidence_command([], [], h100).startswith("# NVIDIA H100 80GB HBM3: nothing left to measure")
    assert evidence_command([], ["m|1|4|t"], h100) == ('ONLY_ON=H100 PARTS="profile" PROFILES="m|1|4|t" '
                                                       'bash tools/device/plans/evidence.sh')
    assert evidence_command(["d"], [], h100, ["c"]) == ('ONLY_ON=H100 PARTS="duel conditions" DUELS="d" CONDITIONS="c" '
                                                        'bash tools/device/plans/evidence.sh')
    assert evidence_command([], ["m|1|4|t"], h100, (), [15077376, 60309504]) == (
        'ONLY_ON=H100 PARTS="floor profile" FLOOR_BYTES="15077376,60309504" PROFILES="m|1|4|t" '
        'bash tools/device/plans/evidence.sh')
    two = pd.Series(["NVIDIA H100 80GB HBM3", "NVIDIA H200"])
    with pytest.raises(ValueError, match=r"^argument --plan: expected the runs of one GPU"):
        evidence_command(["d"], [], two)


def test_plan_duels_and_unprofiled_are_one_choice(tmp_path, capsys):
    from fp4moe_diag.cli import main

    runs = tmp_path / "run"
    save_run(frame(), runs)
    with pytest.raises(SystemExit) as e:
        main(["goals", str(runs), "--duels", "--unprofiled"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
