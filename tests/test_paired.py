"""Paired timing (measure.paired) and the duel that uses it (profiling.duel): the round orders, the per-round ratio and
its verdict on series whose answers are known, and the command line's refusals before any GPU work."""

from __future__ import annotations

import pytest

from fp4moe_diag.measure.paired import paired_summary, round_orders
from fp4moe_diag.profiling import duel

from cli_errors import refusal


def test_each_call_goes_first_in_turn():
    assert round_orders(["a", "b"], 4) == [["a", "b"], ["b", "a"], ["a", "b"], ["b", "a"]]
    assert round_orders(["a", "b", "c"], 3) == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    with pytest.raises(ValueError, match="two or more distinct"):
        round_orders(["a", "a"], 3)
    with pytest.raises(ValueError, match="rounds"):
        round_orders(["a", "b"], 0)


def test_a_drift_that_two_medians_would_read_as_a_gap_is_level_or_a_lead_round_by_round():
    # the clocks sag over the timing: b's rounds all later in a serial timing would look 10 % slower; paired, a is 1 %
    # faster in every round
    drift = [100.0 * (1 + 0.01 * i) for i in range(20)]
    s = paired_summary([0.99 * t for t in drift], drift)
    assert s.ratio_median == pytest.approx(0.99) and s.ratio_p90 == pytest.approx(0.99)
    assert (s.verdict, s.a_faster_share) == ("ahead", 1.0)
    assert s.a.median_us == pytest.approx(0.99 * 109.5) and s.b.repeats == 20
    # a faster in 17 of 20 rounds, 3 slower: p90 of the ratio above 1 -> level; reversed -> level too
    a = [99.0] * 17 + [101.0] * 3
    s = paired_summary(a, [100.0] * 20)
    assert (s.verdict, s.a_faster_share) == ("level", 0.85)
    assert paired_summary([101.0] * 20, [100.0] * 20).verdict == "behind"
    d = paired_summary([99.0, 100.0], [100.0, 100.0]).as_dict()
    assert d["rounds"] == 2 and d["a_faster_share"] == 0.5 and d["ratio_p10"] == pytest.approx(0.991)  # 0.99 + 0.1 x (1.0 - 0.99)
    with pytest.raises(ValueError, match="same rounds"):
        paired_summary([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        paired_summary([0.0], [1.0])


def test_the_duel_refuses_bad_input_before_any_gpu_work(tmp_path, capsys):
    out = tmp_path / "d.csv"
    a = ["--a", "triton=m16n128k128w4s3-ps"]

    def refused(*argv: str) -> str:
        return refusal(duel.main, ["--tokens", "64", "--out", str(out), "--device", "cpu", *argv], capsys)

    assert "argument --b: expected BACKEND=TACTIC" in refused(*a, "--b", "tk-m16k128w4")
    assert "argument --b: unknown backend 'nope'" in refused(*a, "--b", "nope=x")
    assert "argument --b: the same call as --a (triton=m16n128k128w4s3-ps)" in refused(*a, "--b",
                                                                                     "triton=m16n128k128w4s3-ps")
    assert "argument --rounds" in refused(*a, "--b", "triton_kernels=tk-m16k128w4", "--rounds", "0")
    assert "argument --device: a duel is timed on a CUDA GPU" in refused(*a, "--b", "triton_kernels=tk-m16k128w4")
    out.write_text("kept")
    assert f"argument --out: {out} exists" in refused(*a, "--b", "triton_kernels=tk-m16k128w4")
    assert out.read_text() == "kept"


def test_a_duel_prepares_both_calls_and_summarizes_their_rounds_into_one_row(monkeypatch):
    """The wiring on a CPU (the reference backend twice; time_paired replaced by one launch each and known times):
    both calls are prepared and launched, and the row carries both sides and the paired verdict."""
    from fp4moe_diag import MoECase
    from fp4moe_diag.measure import paired

    launched = []

    def fake_time_paired(launches, device, rounds, warmup, flush_l2=True, sync_after_flush=False):
        for name, fn in launches.items():
            fn()
            launched.append((name, flush_l2))
        return {"a": [99.0] * rounds, "b": [100.0] * rounds}

    monkeypatch.setattr(paired, "time_paired", fake_time_paired)
    case = MoECase(num_tokens=2, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2, model="tiny")
    row = duel.duel_case(case, ("reference", "torch fp32"), ("reference", "torch fp32"), "cpu", rounds=5, warmup=0)
    assert launched == [("a", True), ("b", True)]
    assert {k: row[k] for k in ("model", "num_tokens", "a_backend", "b_tactic", "rounds", "verdict")} == {
        "model": "tiny", "num_tokens": 2, "a_backend": "reference", "b_tactic": "torch fp32", "rounds": 5,
        "verdict": "ahead"}
    assert row["ratio_median"] == pytest.approx(0.99) and set(duel.COLUMNS) <= set(row) and row["l2_flushed"] is True
    launched.clear()
    row = duel.duel_case(case, ("reference", "torch fp32"), ("reference", "torch fp32"), "cpu", rounds=5, warmup=0,
                         flush_l2=False)  # --no-l2-flush: a diagnosis, said in the row
    assert launched == [("a", False), ("b", False)] and row["l2_flushed"] is False
    assert row["sync_after_flush"] is False and row["kernel_time"] is False and row["a_kernels"] == ""


def test_a_traced_duel_fills_the_kernel_columns_from_the_same_replays(monkeypatch):
    """``--kernel-time`` on a CPU (traced_rounds replaced by known replays): the verdict comes from the replays'
    event times, the kernel columns from their kernels, and the row says the conditions."""
    from fp4moe_diag import MoECase
    from fp4moe_diag.measure import paired, traced_rounds as tr

    seen = {}

    def fake_traced(calls, device, rounds, warmup, flush_l2, sync_after_flush):
        seen.update(names=sorted(calls), sync=sync_after_flush)
        return {"a": [tr.TracedReplay(101.0, 95.0, 94.0, (("g1", 60.0), ("g2", 34.0)))] * rounds,
                "b": [tr.TracedReplay(100.0, 99.0, 98.0, (("t1", 64.0), ("t2", 34.0)))] * rounds}

    monkeypatch.setattr(tr, "traced_rounds", fake_traced)
    monkeypatch.setattr(paired, "graph_replays", lambda launches, device: launches)
    case = MoECase(num_tokens=2, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2, model="tiny")
    row = duel.duel_case(case, ("reference", "torch fp32"), ("reference", "torch fp32"), "cpu", rounds=4, warmup=0,
                         sync_after_flush=True, kernel_time=True)
    assert seen == {"names": ["a", "b"], "sync": True}
    assert row["verdict"] == "behind" and row["ratio_median"] == pytest.approx(1.01)  # the events: a is slower
    assert row["span_ratio_median"] == pytest.approx(95 / 99)  # its kernels: a is faster
    assert (row["a_event_minus_span_us"], row["b_event_minus_span_us"]) == (6.0, 1.0)
    assert row["a_kernels"] == '{"g1": 60.0, "g2": 34.0}' and row["sync_after_flush"] and row["kernel_time"]
    assert set(duel.COLUMNS + duel.KERNEL_COLUMNS) <= set(row)
