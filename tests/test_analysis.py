"""Tables (fp4moe_diag.analysis) from synthetic frames."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from fp4moe_diag import analysis as A  # noqa: E402
from fp4moe_diag.report import nb03  # noqa: E402
from fp4moe_diag.results import to_frame  # noqa: E402
from frames import FI, GPU, TOKENS, _row  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_best_per_shape(df):
    best = A.best_per_shape(df)
    assert len(best) == 2 * 2 * len(TOKENS)  # backend x EP x T
    c = best[(best["backend"] == "cutlass") & (best["ep_size"] == 1) & (best["num_tokens"] == 8)].iloc[0]
    assert c["default_tactic"] == "default(-1,-1)" and c["best_tactic"] == "g1:0"
    assert c["speedup"] == pytest.approx(1.6 / 1.2)
    assert A.provenance(df) == f"{GPU} · flashinfer {FI}"



def test_best_per_shape_takes_the_fastest_flagged_row_of_a_run_that_merged_several_sweeps():
    """A run imported from several sweeps of one shape holds one tuner-flagged best per sweep: the fastest of them
    is the shape's best, not the first sweep's (session 15's run: the 16-warp tile's sweep ran after another)."""
    rows = [_row("triton", "a", 0, 4096, 1, t_us=1777.0, is_best=True),  # sweep 1's best
            _row("triton", "b", 0, 4096, 1, t_us=1800.0),
            _row("triton", "c", 0, 4096, 1, t_us=1742.0, is_best=True),  # sweep 2's best
            _row("triton", "d", 0, 4096, 1, t_us=1700.0)]  # faster, but not flagged: a screened-out measurement
    best = A.best_per_shape(to_frame(rows)).iloc[0]
    assert best["best_tactic"] == "c" and best["best_us"] == 1742.0
    unflagged = A.best_per_shape(to_frame([{**r, "is_best": False} for r in rows])).iloc[0]
    assert unflagged["best_tactic"] == "d" and unflagged["best_us"] == 1700.0

# --------------------------------------------------------------------------- report helpers
def test_summary_tables(df):
    t = A.summary_tables(df)
    assert set(t) >= {"best_per_shape", "backend_summary", "status_counts", "failures", "correctness", "provenance"}
    assert len(t["best_per_shape"]) == 16
    bs = t["backend_summary"].set_index("backend")
    assert bs.loc["cutlass", "fastest_backend_on_shapes"] == 8
    assert bs.loc["reference", "median_speedup_vs_default"] == pytest.approx(1.0)
    dec_best, dec_med = bs["best_roofline_decode(T<=64)"], bs["median_roofline_decode(T<=64)"]
    assert (dec_best >= dec_med).all() and dec_best.notna().all()
    assert t["failures"]["rows"].sum() == 2 and t["failures"]["tactic_label"].eq("g2:0").all()
    assert t["provenance"].loc[0, "gpu_name"] == GPU and t["provenance"].loc[0, "flashinfer_version"] == FI
    with pytest.raises(ValueError):
        A.summary_tables(to_frame([]))


def test_correctness_tables(df):
    table = A.correctness_table(df)
    assert set(table["verdict"]) == {"PASS", "FAIL", "no output (failed)"}
    assert (table["verdict"] == "FAIL").sum() == 2  # g1:1 at T=8, EP1 and EP2
    summary = A.correctness_summary(df).set_index(["backend", "tactic_label"])
    assert summary.loc[("cutlass", "g1:1"), "failed"] == 2
    assert "background-color" in nb03.style_pass_fail(table).to_html()
    assert A.worst_tokens(df, 3)["frac_tokens_over_tol"].iloc[0] == 0.5
    assert A.worst_measurement(df)["tactic_label"] == "g1:1"


def test_latest_per_shape_keeps_the_newest_run_of_each_shape():
    from fp4moe_diag.analysis import best_per_shape, latest_per_shape

    old = [_row("triton", "a", 0, t, 1, t_us=100.0 * t, is_best=True) for t in (1, 64, 512)]
    new = [_row("triton", "a", 0, t, 1, t_us=10.0 * t, is_best=True) for t in (1, 64)]  # a later, partial run
    for r in old:
        r.update(run_id="z-older-but-later-name", timestamp="2026-12-01T10:00:00")
    for r in new:
        r.update(run_id="a-newer", timestamp="2026-12-03T10:00:00")
    df = to_frame(old + new)
    best = best_per_shape(df)
    assert len(best) == 5
    kept = latest_per_shape(best, df).set_index("num_tokens")
    assert sorted(kept.index) == [1, 64, 512]
    assert kept.loc[1, "run_id"] == "a-newer" and kept.loc[1, "best_us"] == 10.0
    assert kept.loc[512, "run_id"] == "z-older-but-later-name" and kept.loc[512, "best_us"] == 51200.0
    single = best[best["run_id"] == "a-newer"]
    assert latest_per_shape(single, df).equals(single)  # one run: unchanged
    # a CUDA-graph-timed run wins over an eager one for the shapes both have, whatever the dates
    for r in old:
        r.update(time_method="cuda-graph")
    kept = latest_per_shape(best_per_shape(to_frame(old + new)), to_frame(old + new)).set_index("num_tokens")
    assert set(kept["run_id"]) == {"z-older-but-later-name"}
