"""analysis.twins / ``python -m fp4moe_diag twins``: a tactic family beside its twins of the same run and shape."""

from __future__ import annotations

import pandas as pd
import pytest

from fp4moe_diag.analysis.twins import COLUMNS, twin_label, twin_table, twins_markdown


def _rows() -> pd.DataFrame:
    base = dict(run_id="r1", gpu_name="NVIDIA H200", model="gpt-oss-20b", ep_size=1, backend="triton", status="ok")
    rows = [  # (T, label, median us, spread, CUPTI span)
        (1, "m16n64k256w4s3-ps-sk2-pdl", 40.0, 0.01, 39.0),
        (1, "m16n64k256w4s3-ps-sk2-pdlw", 38.0, 0.01, 37.05),  # 0.95: faster beyond 1 %
        (1, "m16n64k256w4s3-ps-sk2-pdl-fs", 41.0, 0.02, float("nan")),
        (1, "m16n64k256w4s3-ps-sk2-pdlw-fs", 41.4, 0.02, float("nan")),  # 1.0098 within 2 %: level
        (64, "m16n128k128w4s3-ps-pdl", 160.0, 0.005, 159.0),
        (64, "m16n128k128w4s3-ps-pdlw", 164.0, 0.005, 163.0),  # 1.025: slower
        (64, "m16n128k128w4s3-ps-g2sk2-pdlw", 150.0, 0.005, 149.0),  # its twin not measured: no row
    ]
    df = pd.DataFrame([{**base, "num_tokens": t, "tactic_label": lab, "time_median_us": us, "time_spread": sp,
                        "time_kernel_span_median_us": span} for t, lab, us, sp, span in rows])
    failed = {**base, "num_tokens": 64, "tactic_label": "m16n128k128w4s3-ps-g2sk2-pdl", "time_median_us": float("nan"),
              "status": "failed", "time_spread": float("nan"), "time_kernel_span_median_us": float("nan")}
    return pd.concat([df, pd.DataFrame([failed])], ignore_index=True)


def test_twin_table_pairs_each_variant_with_its_measured_twin():
    t = twin_table(_rows(), "-pdlw", "-pdl")
    assert list(t.columns) == COLUMNS
    assert t["tactic"].tolist() == ["m16n64k256w4s3-ps-sk2-pdlw", "m16n64k256w4s3-ps-sk2-pdlw-fs",
                                    "m16n128k128w4s3-ps-pdlw"]
    assert t["twin"].tolist() == ["m16n64k256w4s3-ps-sk2-pdl", "m16n64k256w4s3-ps-sk2-pdl-fs", "m16n128k128w4s3-ps-pdl"]
    assert t["ratio"].round(4).tolist() == [0.95, 1.0098, 1.025]
    assert t["kernel_ratio"].iloc[0] == pytest.approx(0.95) and pd.isna(t["kernel_ratio"].iloc[1])
    assert t["verdict"].tolist() == ["faster", "level", "slower"]
    md = twins_markdown(t, "-pdlw", "-pdl")
    assert md.count("\n| NVIDIA H200 |") == 3
    assert md.endswith("-pdlw against -pdl: 3 pairs, 1 faster, 1 level, 1 slower; median ratio 1.010")


def test_twin_label_and_bad_arguments():
    assert twin_label("m16n64k256w4s3-ps-tm-sk2-pdl", "-tm", "") == "m16n64k256w4s3-ps-sk2-pdl"
    assert twin_label("m64n128k64w8s4-ps-t32-pdltt", "-pdltt", "-pdlt") == "m64n128k64w8s4-ps-t32-pdlt"
    with pytest.raises(ValueError, match="holds no '-pdlt'"):  # a whole label part only: not inside -pdltt
        twin_label("m64n128k64w8s4-ps-t32-pdltt", "-pdlt", "-pdl")
    with pytest.raises(ValueError, match="holds no '-tm'"):
        twin_label("m16n64k256w4s3-ps", "-tm", "")
    with pytest.raises(ValueError, match="^variant: expected a label part other than base"):
        twin_table(_rows(), "-pdl", "-pdl")
    with pytest.raises(ValueError, match="^variant: no measured tactic label holds '-gu'"):
        twin_table(_rows(), "-gu", "")
    with pytest.raises(ValueError, match="needs column"):
        twin_table(_rows().drop(columns=["backend"]), "-pdlw", "-pdl")


def test_a_variant_is_a_whole_label_part():
    """-pdlt against -pdl pairs the -pdlt rows only, not -pdltt's (session 32: the substring match took 54 pairs of 27)."""
    base = dict(run_id="r1", gpu_name="NVIDIA H200", model="gpt-oss-20b", ep_size=2, num_tokens=4096,
                backend="triton", status="ok", time_spread=0.001)
    df = pd.DataFrame([{**base, "tactic_label": "m64n128k64w8s4-ps-t32" + s, "time_median_us": us}
                       for s, us in (("-pdl", 100.0), ("-pdlt", 98.0), ("-pdltt", 97.0))])
    assert twin_table(df, "-pdlt", "-pdl")[["tactic", "twin"]].values.tolist() == [
        ["m64n128k64w8s4-ps-t32-pdlt", "m64n128k64w8s4-ps-t32-pdl"]]
    t = twin_table(df, "-pdltt", "-pdlt")
    assert t["twin"].tolist() == ["m64n128k64w8s4-ps-t32-pdlt"] and t["ratio"].round(4).tolist() == [0.9898]


def test_twins_cli_reads_run_folders_and_rejects_a_non_run(tmp_path, capsys):
    from fp4moe_diag.cli import main
    from fp4moe_diag.results import to_frame

    run = tmp_path / "run"
    run.mkdir()
    to_frame(_rows().to_dict("records")).to_csv(run / "results.csv", index=False)  # every schema column
    assert main(["twins", str(run), "--variant=-pdlw", "--base=-pdl", "--csv", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    assert "3 pairs, 1 faster, 1 level, 1 slower" in out and len(pd.read_csv(tmp_path / "t.csv")) == 3
    assert main(["twins", str(tmp_path / "missing"), "--variant=-pdlw"]) == 2
    assert "argument runs: " in capsys.readouterr().err



def test_a_twin_is_of_the_same_triton_release():
    """Session 24: a run imported from two sweeps (Triton 3.9.0 and 3.6.0) paired a 3.9.0 -r128 row with the 3.6.0
    uncapped twin; each row must meet the twin of its own release."""
    base = dict(run_id="r1", gpu_name="NVIDIA H200", model="gpt-oss-20b", ep_size=1, num_tokens=16, backend="triton",
                status="ok", time_spread=0.01)
    rows = [("3.6.0", "m16n128k128w4s3-ps-pdl", 160.0), ("3.6.0", "m16n128k128w4s3-ps-pdl-r128", 168.0),
            ("3.9.0", "m16n128k128w4s3-ps-pdl", 175.0), ("3.9.0", "m16n128k128w4s3-ps-pdl-r128", 175.0),
            ("3.9.0", "m16n128k128w4s3-ps-g2sk2-pdl-r128", 170.0)]  # its 3.9.0 twin not measured: no row
    df = pd.DataFrame([{**base, "triton_version": v, "tactic_label": lab, "time_median_us": us} for v, lab, us in rows]
                      + [{**base, "triton_version": "3.6.0", "tactic_label": "m16n128k128w4s3-ps-g2sk2-pdl",
                          "time_median_us": 150.0}])
    t = twin_table(df, "-r128", "")
    assert t["triton_version"].tolist() == ["3.6.0", "3.9.0"] and t["ratio"].tolist() == [1.05, 1.0]
    assert t["verdict"].tolist() == ["slower", "level"]
    assert "| NVIDIA H200 | 3.9.0 | gpt-oss-20b |" in twins_markdown(t, "-r128", "")


def test_a_pair_timed_in_different_passes_is_unlike():
    """A screened sweep re-times only its finalists: a finalist beside a screen-only twin (2 repeats, taken minutes and
    clocks apart; -s24b had 3 such pairs of 17) is not like for like."""
    base = dict(run_id="r1", gpu_name="NVIDIA H200", model="gpt-oss-20b", ep_size=2, num_tokens=1024,
                backend="triton", status="ok", time_spread=0.01, triton_version="3.9.0")
    rows = [("m64n128k64w8s4-ps", 439.6, "screen"), ("m64n128k64w8s4-ps-r128", 386.3, "screen"),
            ("m64n128k64w8s4-ps-t32", 411.1, "screen"), ("m64n128k64w8s4-ps-t32-r128", 382.0, "interleaved")]
    df = pd.DataFrame([{**base, "tactic_label": lab, "time_median_us": us, "timing_pass": p} for lab, us, p in rows])
    t = twin_table(df, "-r128", "")
    assert t["verdict"].tolist() == ["faster", "unlike"]
    assert t["passes"].tolist() == ["screen", "interleaved / screen"]
    md = twins_markdown(t, "-r128", "")
    assert md.endswith("2 pairs, 1 faster, 0 level, 0 slower, 1 unlike (timed in different passes); median ratio 0.879")
    assert "| screen | faster |" in md and "| interleaved / screen | unlike |" in md


def test_a_finalist_and_a_screen_only_twin_meet_by_their_screens_where_both_kept_them():
    """From session 24 a finalist keeps the screen that picked it (time_screen_median_us): beside a screen-only twin
    the pair compares the two screens, taken in one pass, instead of being unlike."""
    base = dict(run_id="r1", gpu_name="NVIDIA H200", model="gpt-oss-20b", ep_size=1, num_tokens=16384,
                backend="triton", status="ok", time_spread=0.01, triton_version="3.6.0")
    rows = [("m128n128k64w16s4-ps-gu-g2n256", 6700.0, 6390.0, "interleaved"),
            ("m128n128k64w16s4-ps-gu-g2n256-fs", 6366.0, 6366.0, "screen"),
            ("m128n128k64w16s3-ps-gu-g2n256", 6710.0, float("nan"), "interleaved"),  # a run from before: no screen
            ("m128n128k64w16s3-ps-gu-g2n256-fs", 6408.0, 6408.0, "screen")]
    df = pd.DataFrame([{**base, "tactic_label": lab, "time_median_us": us, "time_screen_median_us": sc,
                        "timing_pass": p} for lab, us, sc, p in rows])
    t = twin_table(df, "-fs", "").set_index("tactic")
    assert t.loc["m128n128k64w16s4-ps-gu-g2n256-fs", "passes"] == "screens (screen / interleaved)"
    assert t.loc["m128n128k64w16s4-ps-gu-g2n256-fs", "ratio"] == pytest.approx(6366 / 6390)
    assert t.loc["m128n128k64w16s4-ps-gu-g2n256-fs", "verdict"] == "level"  # 0.4 % within the 1 % spread
    assert t.loc["m128n128k64w16s3-ps-gu-g2n256-fs", "verdict"] == "unlike"
