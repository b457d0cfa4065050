"""analysis.duels: the duel-*.csv of run folders and goal 1's verdict from them (goals, issue #25)."""

from __future__ import annotations

import pandas as pd
import pytest

from fp4moe_diag.analysis.duels import COLUMNS, apply_duels, duel_text, duel_verdict, read_duels

H100 = "NVIDIA H100 80GB HBM3"


def _duel(t: int, a_tactic: str, ratio: float, p10: float, p90: float, verdict: str, share: float) -> dict:
    return dict(model="gpt-oss-20b", ep_size=2, num_tokens=t, a_backend="triton", a_tactic=a_tactic,
                b_backend="triton_kernels", b_tactic="tk-m128kautow8s3", ratio_median=ratio, ratio_p10=p10,
                ratio_p90=p90, a_faster_share=share, rounds=30, verdict=verdict, gpu_name=H100,
                a_median_us=100.0 * ratio, b_median_us=100.0)


def _folder(tmp_path, rows: list[dict], name: str = "duels"):
    d = tmp_path / name
    d.mkdir()
    for i, r in enumerate(rows):
        pd.DataFrame([r]).to_csv(d / f"duel-{i}.csv", index=False)
    return d


def _goal1(t: int, x: float, status: str, note: str = "") -> dict:
    return dict(gpu_name=H100, model="gpt-oss-20b", ep_size=2, has_bias=True, num_tokens=t, goal=1, x_goal=x,
                status=status, note=note, ours_backend="triton", peer_backend="triton_kernels")


def test_read_duels_and_the_best_of_ours_against_the_peer(tmp_path):
    d = _folder(tmp_path, [_duel(4096, "s3", 1.009, 1.005, 1.012, "behind", 0.0),
                           _duel(4096, "s3-tm", 1.005, 1.003, 1.010, "behind", 0.0),
                           _duel(16384, "s3-tm", 0.993, 0.992, 0.998, "ahead", 0.9)])
    duels = read_duels([d, tmp_path])  # a folder without duels adds nothing
    assert len(duels) == 3 and duels["source"].tolist() == ["duels/duel-0.csv", "duels/duel-1.csv", "duels/duel-2.csv"]
    best = duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton@3.6.0", "triton_kernels")
    assert best["a_tactic"] == "s3-tm" and best["ratio_median"] == 1.005  # ours' best of the two
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 1024, "triton", "triton_kernels") is None
    assert duel_verdict(duels, "NVIDIA H200", "gpt-oss-20b", 2, 4096, "triton", "triton_kernels") is None
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton", "cutlass") is None
    assert duel_text(best) == ("duel (30 alternating rounds, duels/duel-1.csv): ours `s3-tm` / peer `tk-m128kautow8s3` "
                               "1.005 (p10 1.003, p90 1.010), ours faster in 0 % of rounds: behind")
    assert list(read_duels([tmp_path]).columns) == COLUMNS + ["l2_flushed", "sync_after_flush", "kernel_time",
                                                              "source"]
    assert duels["l2_flushed"].tolist() == [True] * 3  # files from before the column: every duel flushed the L2
    assert duels["sync_after_flush"].tolist() == duels["kernel_time"].tolist() == [False] * 3  # nor idled, nor traced


def test_apply_duels_sets_goal_1_from_the_verdict(tmp_path):
    duels = read_duels([_folder(tmp_path, [_duel(4096, "a", 1.005, 1.003, 1.010, "behind", 0.0),
                                           _duel(16384, "b", 0.993, 0.992, 0.998, "ahead", 0.9),
                                           _duel(1024, "c", 0.999, 0.990, 1.010, "level", 0.5)])])
    table = pd.DataFrame([_goal1(4096, 0.999, "met"), _goal1(16384, 1.01, "not met"), _goal1(1024, 1.004, "not met"),
                          _goal1(256, 0.95, "met"), {**_goal1(16384, 0.5, "met"), "goal": 2}])
    t = apply_duels(table, duels)
    assert t["status"].tolist() == ["not met", "met", "level", "met", "met"]  # level: neither faster (session 25)
    assert t["x_goal"].tolist()[:4] == [1.005, 0.993, 0.999, 0.95] and t["x_goal"].iloc[4] == 0.5
    assert t["note"].iloc[1].startswith("duel (30 alternating rounds") and t["note"].iloc[1].endswith(": ahead")
    assert t["note"].iloc[2].endswith(": level") and t["note"].iloc[3] == "" and t["note"].iloc[4] == ""
    assert table["status"].tolist()[:2] == ["met", "not met"]  # the input is left as it was


def test_a_duel_file_without_its_columns_is_refused(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    pd.DataFrame([{"model": "x", "verdict": "ahead"}]).to_csv(d / "duel-x.csv", index=False)
    with pytest.raises(ValueError, match=r"^runs: .*duel-x.csv lacks the duel column\(s\) \['ep_size'"):
        read_duels([d])


def test_goals_takes_a_folder_of_duels_alone(tmp_path):
    from fp4moe_diag.cli_goals import _has_profiles

    d = _folder(tmp_path, [_duel(4096, "a", 1.005, 1.003, 1.010, "behind", 0.0)])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _has_profiles(d) and not _has_profiles(empty)


def test_committed_duels_of_a_runs_folder(tmp_path):
    from fp4moe_diag.analysis.duels import committed_duels

    assert committed_duels(tmp_path).empty
    _folder(tmp_path, [_duel(16384, "b", 0.993, 0.992, 0.998, "ahead", 0.9),
                       _duel(4096, "a", 1.005, 1.003, 1.010, "behind", 0.0)], name="2026-12-05-run")
    _folder(tmp_path, [{**_duel(4096, "a", 1.004, 1.001, 1.008, "behind", 0.1), "sync_after_flush": True,
                        "kernel_time": True}], name="2026-12-06-run")
    d = committed_duels(tmp_path)
    assert d["num_tokens"].tolist() == [4096, 4096, 16384] and d["verdict"].tolist() == ["behind", "behind", "ahead"]
    assert d["source"].tolist() == ["2026-12-05-run/duel-1.csv", "2026-12-06-run/duel-0.csv",
                                    "2026-12-05-run/duel-0.csv"]
    assert d["condition"].tolist() == ["plain", "idle before each call, traced", "plain"]  # diagnoses said


def test_undecided_lists_goal_1_shapes_a_duel_should_decide():
    from fp4moe_diag.analysis.duels import undecided

    def row(t: int, x: float, status: str, note: str = "", peer: str = "tk-a") -> dict:
        return {**_goal1(t, x, status, note), "ours_backend": "triton@3.6.0", "ours_tactic": f"ours-{t}",
                "peer_tactic": peer}

    table = pd.DataFrame([row(1, 1.004, "not met"), row(4, 0.99, "met"), row(16, 0.97, "met"),
                          row(64, 1.01, "not met", note="duel (30 alternating rounds, x): ours ... behind"),
                          row(256, 1.2, "not met", peer=None), {**row(1024, 1.1, "not met"), "goal": 2}])
    assert undecided(table) == ["gpt-oss-20b|2|1|triton=ours-1|triton_kernels=tk-a",
                                "gpt-oss-20b|2|4|triton=ours-4|triton_kernels=tk-a"]
    assert undecided(table, margin=0.05) == ["gpt-oss-20b|2|1|triton=ours-1|triton_kernels=tk-a",
                                             "gpt-oss-20b|2|4|triton=ours-4|triton_kernels=tk-a",
                                             "gpt-oss-20b|2|16|triton=ours-16|triton_kernels=tk-a"]
    with pytest.raises(ValueError, match="^margin: expected a fraction"):
        undecided(table, margin=1.0)
    # ahead by 3 % (beyond the margin), but the two best rows read clocks 6 % apart: undecided (session 25); 4 % apart,
    # or one clock missing: decided by the medians
    clocked = table.assign(ours_clock_mhz=[float("nan")] * 6, peer_clock_mhz=[float("nan")] * 6)
    clocked.loc[2, ["ours_clock_mhz", "peer_clock_mhz"]] = [1980.0, 1860.0]
    assert undecided(clocked)[-1] == "gpt-oss-20b|2|16|triton=ours-16|triton_kernels=tk-a" and len(undecided(clocked)) == 3
    clocked.loc[2, ["ours_clock_mhz", "peer_clock_mhz"]] = [1935.0, 1860.0]
    assert len(undecided(clocked)) == 2
    clocked.loc[2, ["ours_clock_mhz", "peer_clock_mhz"]] = [1980.0, float("nan")]
    assert len(undecided(clocked)) == 2


def test_a_duel_counts_only_for_the_triton_release_it_was_timed_under(tmp_path):
    """evidence.sh with KIT duels under another Triton release: that duel must not decide ours@3.6.0's goal 1."""
    rows = [{**_duel(4096, "s3", 0.98, 0.97, 0.99, "ahead", 1.0), "triton_version": "3.6.0"},
            {**_duel(4096, "s3", 1.03, 1.02, 1.04, "behind", 0.0), "triton_version": "3.9.0"}]
    duels = read_duels([_folder(tmp_path, rows)])
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton@3.6.0", "triton_kernels")["ratio_median"] == 0.98
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton@3.9.0", "triton_kernels")["ratio_median"] == 1.03
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton@3.7.1", "triton_kernels") is None
    # without a release, every duel of the backend counts (ours' best of them)
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels")["ratio_median"] == 0.98


def test_a_duel_of_another_tactic_of_ours_decides_only_when_ours_is_ahead(tmp_path):
    """s23 on the H200: the run's best at 20b EP2 T=16384 is a tile the duel (of session 15's winners) did not time;
    that duel, behind by 0.4 %, says nothing of the best tile, and the shape goes back on the duel list."""
    from fp4moe_diag.analysis.duels import NOT_DECIDING, undecided

    duels = read_duels([_folder(tmp_path, [_duel(16384, "old", 1.004, 1.001, 1.007, "behind", 0.07),
                                           _duel(4096, "old", 0.98, 0.97, 0.99, "ahead", 1.0),
                                           _duel(1024, "best", 1.01, 1.005, 1.02, "behind", 0.0)])])

    def row(t: int, x: float, status: str) -> dict:
        return {**_goal1(t, x, status), "ours_tactic": "best", "peer_tactic": "tk-m128kautow8s3"}

    t = apply_duels(pd.DataFrame([row(16384, 0.987, "met"), row(4096, 1.003, "not met"), row(1024, 0.99, "met")]),
                    duels)
    assert t["status"].tolist() == ["met", "met", "not met"]  # medians kept; another tactic ahead; the best behind
    assert t["x_goal"].tolist() == [0.987, 0.98, 1.01]
    assert t["note"].iloc[0].endswith(f": behind ({NOT_DECIDING}: not this run's best `best`)")
    assert NOT_DECIDING not in t["note"].iloc[1] + t["note"].iloc[2]
    assert undecided(t) == ["gpt-oss-20b|2|16384|triton=best|triton_kernels=tk-m128kautow8s3"]


def test_a_lost_duel_of_the_runs_best_is_not_hidden_behind_a_level_duel_of_an_older_tactic(tmp_path):
    """Session 24: 20b EP1 T=16384 had a level duel of session 15's tile (1.001) and a lost duel of the run's best
    (1.004); goal 1 must read the second, and an ahead duel of any tactic of ours still decides."""
    rows = [_duel(16384, "old", 1.001, 1.000, 1.002, "level", 0.1),
            _duel(16384, "best", 1.004, 1.003, 1.010, "behind", 0.03)]
    duels = read_duels([_folder(tmp_path, rows)])
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 16384, "triton", "triton_kernels")["a_tactic"] == "old"
    assert duel_verdict(duels, H100, "gpt-oss-20b", 2, 16384, "triton", "triton_kernels", "best")["a_tactic"] == "best"
    row = {**_goal1(16384, 0.99, "met"), "ours_tactic": "best"}
    t = apply_duels(pd.DataFrame([row]), duels)
    assert t["status"].tolist() == ["not met"] and t["x_goal"].tolist() == [1.004]
    assert "not deciding" not in t["note"].iloc[0] and t["note"].iloc[0].endswith(": behind")
    ahead = read_duels([_folder(tmp_path, rows + [_duel(16384, "other", 0.995, 0.99, 0.998, "ahead", 0.9)], "more")])
    t = apply_duels(pd.DataFrame([row]), ahead)
    assert t["status"].tolist() == ["met"] and t["x_goal"].tolist() == [0.995]


def test_a_win_against_one_tactic_of_the_peer_does_not_hide_a_loss_against_another(tmp_path):
    """Session 25 (H100, 20b EP2 T=4096): ours' best beat tk-m128k128w8 (0.996) in one call and lost to
    tk-m128kautow8s3 (1.004) in another; goal 1 (never slower than the peer's best) reads the loss.  Against one peer
    tactic the rules stay: an ahead duel of any tactic of ours decides."""
    lost = _duel(4096, "best", 1.004, 1.001, 1.008, "behind", 0.03)
    won = {**_duel(4096, "best", 0.996, 0.991, 0.998, "ahead", 0.97), "b_tactic": "tk-m128k128w8"}
    duels = read_duels([_folder(tmp_path, [won, lost])])
    v = duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best")
    assert (v["b_tactic"], v["ratio_median"], v["verdict"]) == ("tk-m128kautow8s3", 1.004, "behind")
    t = apply_duels(pd.DataFrame([{**_goal1(4096, 0.995, "met"), "ours_tactic": "best"}]), duels)
    assert t["status"].tolist() == ["not met"] and t["x_goal"].tolist() == [1.004]
    other = {**_duel(4096, "other", 0.998, 0.995, 0.999, "ahead", 0.9)}  # another tactic of ours beats kautow8s3
    v = duel_verdict(read_duels([_folder(tmp_path, [won, lost, other], "more")]), H100, "gpt-oss-20b", 2, 4096,
                     "triton", "triton_kernels", "best")
    assert (v["a_tactic"], v["b_tactic"], v["ratio_median"]) == ("other", "tk-m128kautow8s3", 0.998)
    # a peer tactic duelled only by an older tactic of ours, lost: says nothing of ours' best (the H200's 20b EP2
    # T=16384: s23a's m256 tile behind tk-mautokautow8, s24c's best ahead of tk-m128kautow8s3)
    old = {**_duel(4096, "old", 1.004, 1.001, 1.007, "behind", 0.07), "b_tactic": "tk-mautokautow8"}
    v = duel_verdict(read_duels([_folder(tmp_path, [old, won], "old")]), H100, "gpt-oss-20b", 2, 4096, "triton",
                     "triton_kernels", "best")
    assert (v["a_tactic"], v["b_tactic"], v["verdict"]) == ("best", "tk-m128k128w8", "ahead")
    v = duel_verdict(read_duels([_folder(tmp_path, [old], "only")]), H100, "gpt-oss-20b", 2, 4096, "triton",
                     "triton_kernels", "best")
    assert v["a_tactic"] == "old"  # alone it still answers, and apply_duels calls it not deciding


def test_a_duel_without_the_l2_flush_diagnoses_and_never_decides_goal_1(tmp_path):
    """profiling.duel --no-l2-flush (session 25): whether a gap lies in how the calls meet a cold L2; the goals'
    method flushes it before every call, so goal 1 reads only the flushed duels."""
    flushed = _duel(4096, "best", 1.004, 1.001, 1.008, "behind", 0.03)
    warm = {**_duel(4096, "best", 0.990, 0.985, 0.995, "ahead", 1.0), "l2_flushed": False}
    duels = read_duels([_folder(tmp_path, [flushed, warm])])
    assert duels["l2_flushed"].tolist() == [True, False]
    v = duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best")
    assert (v["ratio_median"], v["verdict"]) == (1.004, "behind")
    only_warm = read_duels([_folder(tmp_path, [warm], "warm")])
    assert duel_verdict(only_warm, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best") is None


def test_a_duel_with_an_idle_gap_or_under_the_profiler_diagnoses_and_never_decides_goal_1(tmp_path):
    """profiling.duel --sync-after-flush / --kernel-time (session 26): the conditions of a sweep's CUPTI pass and
    the same replays traced; goal 1 reads only the duels timed by its own method."""
    plain = _duel(4096, "best", 1.004, 1.001, 1.008, "behind", 0.03)
    idle = {**_duel(4096, "best", 0.985, 0.980, 0.990, "ahead", 1.0), "sync_after_flush": True}
    traced = {**_duel(4096, "best", 0.988, 0.983, 0.992, "ahead", 1.0), "kernel_time": "True"}
    duels = read_duels([_folder(tmp_path, [plain, idle, traced])])
    assert duels["sync_after_flush"].tolist() == [False, True, False]
    assert duels["kernel_time"].tolist() == [False, False, True]
    v = duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best")
    assert (v["ratio_median"], v["verdict"]) == (1.004, "behind")
    diagnoses = read_duels([_folder(tmp_path, [idle, traced], "diag")])
    assert duel_verdict(diagnoses, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best") is None


def test_a_traced_duel_names_each_kernel_role_beside_goal_1_and_never_decides_it(tmp_path):
    """profiling.duel --kernel-time (session 26): goal 1's reason gives ours' and the peer's kernels of the same
    replays, role by role; the verdict stays the plain duel's."""
    from fp4moe_diag.analysis.traced_duels import by_role, traced_note

    plain = _duel(4096, "best", 1.005, 1.001, 1.009, "behind", 0.03)
    traced = {**_duel(4096, "best", 1.004, 1.001, 1.008, "behind", 0.1), "kernel_time": True,
              "sync_after_flush": False, "span_ratio_median": 1.0041,
              "a_kernels": '{"_moe_mxfp4_gemm1_ps_gu_kernel": 593.3, "_moe_mxfp4_gemm2_ps_kernel": 319.2, '
                           '"_topk_sum_kernel": 24.06}',
              "b_kernels": '{"_matmul_ogs_NNT_bf16xbf16xmxfp4_128x256x128x1_swiglu": 589.2, '
                           '"_matmul_ogs_NNT_bf16xbf16xmxfp4_128x256x128x1": 320.5, "_reduce_grouped": 23.2}'}
    assert by_role(traced["b_kernels"]) == {"gemm1": 589.2, "gemm2": 320.5, "topk_sum": 23.2}
    assert by_role("") == {} and by_role(float("nan")) == {}
    duels = read_duels([_folder(tmp_path, [plain, traced])])
    note = traced_note(duels, H100, "gpt-oss-20b", 2, 4096, "triton@3.6.0", "triton_kernels")
    assert note == ("traced (duels/duel-1.csv, the calls back to back): ours `best` / peer `tk-m128kautow8s3` events "
                    "1.004, kernel spans 1.004; us a call: gemm1 593.3 / 589.2, gemm2 319.2 / 320.5, topk_sum 24.1 / "
                    "23.2")
    assert traced_note(duels, H100, "gpt-oss-20b", 2, 1024, "triton", "triton_kernels") == ""
    assert traced_note(read_duels([_folder(tmp_path, [plain], "old")]), H100, "gpt-oss-20b", 2, 4096, "triton",
                       "triton_kernels") == ""  # a file from before the kernel columns
    v = duel_verdict(duels, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best")
    assert v["source"] == "duels/duel-0.csv" and v["ratio_median"] == 1.005
    from fp4moe_diag.analysis.traced_duels import traced_table

    tt = traced_table(duels)  # notebook 04's table: the traced duel only, role by role
    assert len(tt) == 1 and tt.iloc[0]["source"] == "duels/duel-1.csv" and not tt.iloc[0]["idle_before"]
    assert (tt.iloc[0]["gemm1 ours"], tt.iloc[0]["gemm1 peer"], tt.iloc[0]["topk_sum peer"]) == (593.3, 589.2, 23.2)
    assert traced_table(read_duels([tmp_path / "old"])).empty
    from fp4moe_diag.analysis.goals import goal_report
    from fp4moe_diag.results import to_frame
    from frames import _row

    rows = [_row("triton", "best", 0, 4096, 2, "ok", 880.0, is_best=True),
            _row("triton_kernels", "tk-m128kautow8s3", 0, 4096, 2, "ok", 884.0, is_best=True)]
    g1 = goal_report(to_frame(rows).assign(gpu_name=H100), duels=duels).table.query("goal == 1").iloc[0]
    assert g1["status"] == "not met" and g1["x_goal"] == 1.005  # the medians said ahead; the plain duel decides
    assert g1["reason"].endswith(note)


def test_repeated_duels_of_one_pair_are_pooled_not_the_luckiest_one_picked(tmp_path):
    """Session 26, H200, 20b EP1 T=16384: two duels of the same tactics, 1.003 level (ours faster in 20 % of rounds)
    and 1.003 behind (7 %); their 60 rounds pooled: ours faster in 13.5 %, level, and the note names both files.
    On the H100 at 20b EP2 T=4096, 17 % and 0 %: pooled 8.5 %, behind (the lowest alone said level)."""
    from fp4moe_diag.analysis.duels import apply_duels, pooled

    level = _duel(16384, "best", 1.0028, 0.999, 1.005, "level", 0.2)
    behind = _duel(16384, "best", 1.0031, 1.002, 1.004, "behind", 0.07)
    other_peer = {**_duel(16384, "best", 0.99, 0.98, 0.995, "ahead", 1.0), "b_tactic": "tk-m128k128w8"}
    duels = read_duels([_folder(tmp_path, [level, behind, other_peer])])
    p = pooled(duels).set_index("b_tactic")
    assert p.loc["tk-m128kautow8s3", "rounds"] == 60 and p.loc["tk-m128kautow8s3", "duels"] == 2
    assert p.loc["tk-m128kautow8s3", "a_faster_share"] == pytest.approx(0.135)
    assert p.loc["tk-m128k128w8", "duels"] == 1 and p.loc["tk-m128k128w8", "verdict"] == "ahead"  # another pair
    t = apply_duels(pd.DataFrame([{**_goal1(16384, 0.999, "met"), "ours_tactic": "best",
                                   "peer_tactic": "tk-m128kautow8s3"}]), duels)
    r = t.iloc[0]
    assert (r["status"], r["x_goal"]) == ("level", pytest.approx(1.00295))
    assert r["note"].startswith("duel (2 of this pair pooled: 60 alternating rounds, ratios their rounds-weighted "
                                "means, duels/duel-0.csv; duels/duel-1.csv): ours `best` / peer `tk-m128kautow8s3` "
                                "1.003")
    from fp4moe_diag.analysis.duels import undecided

    assert undecided(t) == []  # pooled duels count as duelled: the shape is not listed again
    assert r["note"].endswith("ours faster in 13 % of rounds: level")
    h100 = read_duels([_folder(tmp_path, [_duel(4096, "best", 1.004, 0.999, 1.008, "level", 0.17),
                                          _duel(4096, "best", 1.004, 1.002, 1.008, "behind", 0.0)], "h100")])
    v = duel_verdict(h100, H100, "gpt-oss-20b", 2, 4096, "triton", "triton_kernels", "best")
    assert (v["verdict"], v["a_faster_share"], v["duels"]) == ("behind", pytest.approx(0.085), 2)


def test_untraced_lists_goal_1_shapes_not_met_whose_best_tactic_no_duel_traced(tmp_path):
    """goals --plan's CONDITIONS (session 26): a shape not met and never traced with ours' best tactic is listed; one
    traced (or met, or level) is not; a traced duel of another tactic of ours does not count."""
    from fp4moe_diag.analysis.traced_duels import untraced

    def row(t: int, status: str) -> dict:
        return {**_goal1(t, 1.004, status), "ours_tactic": "best", "peer_tactic": "tk-m128kautow8s3",
                "ours_backend": "triton@3.6.0"}

    table = pd.DataFrame([row(4096, "not met"), row(16384, "not met"), row(1024, "level"), row(256, "met")])
    traced = [{**_duel(16384, "best", 1.004, 1.001, 1.008, "behind", 0.1), "kernel_time": True},
              {**_duel(4096, "older", 1.004, 1.001, 1.008, "behind", 0.1), "kernel_time": True},
              _duel(4096, "best", 1.004, 1.001, 1.008, "behind", 0.0)]  # plain: not traced
    duels = read_duels([_folder(tmp_path, traced)])
    assert untraced(table, duels) == ["gpt-oss-20b|2|4096|triton=best|triton_kernels=tk-m128kautow8s3"]
    assert untraced(table, read_duels([tmp_path / "none"])) == [
        "gpt-oss-20b|2|4096|triton=best|triton_kernels=tk-m128kautow8s3",
        "gpt-oss-20b|2|16384|triton=best|triton_kernels=tk-m128kautow8s3"]
