"""Device-safe tuner vs FlashInfer's stock AutoTuner, with runners that pack like TVM-FFI."""

from typing import Optional

import pytest
import torch

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.tune import tune
from fp4moe_diag.validate import validate_launch_inputs as validate_inputs
from fp4moe_diag.backends.base import Backend, Tactic
from fp4moe_diag.problem.reference import reference_moe

tvm_ffi = pytest.importorskip("tvm_ffi")
autotuner = pytest.importorskip("flashinfer.autotuner")

PACK = tvm_ffi.get_global_func("testing.nop")  # TVM-FFI's real argument packer, no kernel

CASE = MoECase(num_tokens=4, hidden_size=64, intermediate_size=32, num_experts=4, top_k=2, seed=3)


class PackingRunner(autotuner.TunableRunner):
    """A FlashInfer TunableRunner whose 'kernel' packs its inputs through TVM-FFI (like moe_op)."""

    seen: list = []  # class-level: FlashInfer hashes runners by their __dict__ values

    def __init__(self, n_tactics=3):
        self.n = n_tactics
        PackingRunner.seen = []

    def get_valid_tactics(self, inputs, profile):
        return list(range(self.n))

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        self.seen.append(tactic)
        PACK(*inputs)
        return inputs[0]


def test_stock_autotuner_fails_on_a_meta_placeholder():
    inputs = [torch.zeros(4, 8), torch.empty(4, 16, device="meta")]  # like the routed op's list
    runner = PackingRunner()
    spec = autotuner.DynamicTensorSpec((0, 1), (0, 0), (1, 2, 4), lambda x: x)
    cfg = autotuner.TuningConfig(dynamic_tensor_specs=(spec,))
    tuner = autotuner.AutoTuner.get()
    tuner.clear_cache()
    from fp4moe_diag.backends.flashinfer.stubs import cpu_safe_cuda_queries

    with cpu_safe_cuda_queries(), autotuner.autotune(True):  # 0.7 asks is_current_stream_capturing()
        with pytest.raises(RuntimeError, match="Cannot pack tensors on meta"):
            tuner.choose_one("fp4moe_test::op", [runner], cfg, inputs)
    assert runner.seen == [-1]  # it died in the do_preparation call, before any tactic


class PackingBackend(Backend):
    """A backend whose kernel packs its tensors through TVM-FFI and computes with the reference."""

    name = "fake-tvm"
    device_types = ("cpu",)

    def __init__(self, failing=(), fail_with=RuntimeError("tactic 1: invalid config")):
        self.failing = set(failing)
        self.fail_with = fail_with
        self.calls = []

    def tactics(self, case, prepared=None):
        return [Tactic(id=i, label=f"t{i}", is_default=(i == 0)) for i in range(4)]

    def run(self, prepared, tactic, output: Optional[torch.Tensor] = None):
        self.calls.append(tactic.id)
        PACK(prepared.hidden_states, prepared.packed_topk_ids, prepared.w13.data, prepared.w2.data)
        if tactic.id in self.failing:
            raise self.fail_with
        y = reference_moe(prepared).to(torch.bfloat16)
        if tactic.id == 3:
            y[0] = 0  # a wrong tactic: must show as a failed diff, not a missing row
        if output is not None:
            output.copy_(y)
            return output
        return y


def test_device_safe_tuner_runs_every_tactic_and_survives_failures():
    b = PackingBackend(failing={1})
    res = tune(CASE, b, "cpu", options=MeasureOptions(warmup=1, repeats=3))
    df = res.rows
    assert list(df["tactic"]) == ["0", "1", "2", "3"]
    assert list(df["status"]) == ["ok", "failed", "ok", "incorrect"]
    failed = df[df["tactic"] == "1"].iloc[0]
    assert failed["error_type"] == "RuntimeError" and "invalid config" in failed["error_message"]
    ok = df[df["status"] == "ok"]
    assert (ok["time_median_us"] > 0).all() and (ok["rel_l2"] < 1e-2).all()
    bad = df[df["tactic"] == "3"].iloc[0]
    assert bad["correct"] == False and bad["rel_l2"] > 0.01  # noqa: E712
    assert res.best is not None and res.best.id in (0, 2)
    assert int(df["is_best"].fillna(False).sum()) == 1
    assert res.default.id == 0
    best = df[df["is_best"] == True].iloc[0]  # noqa: E712
    assert best["time_median_us_repeat"] > 0 and best["noise_ratio"] >= 1.0  # re-timed at the end
    assert df[df["is_best"] != True]["noise_ratio"].isna().all()  # noqa: E712


def test_tuner_rejects_meta_and_foreign_tensors_before_any_run():
    inp = build_inputs(CASE)
    b = PackingBackend()
    from dataclasses import replace

    meta = replace(inp, hidden_states=torch.empty(4, 64, dtype=torch.bfloat16, device="meta"))
    with pytest.raises(ValueError, match="hidden_states: .*meta"):
        tune(CASE, b, "cpu", inputs=meta)
    wrong_dtype = replace(inp, hidden_states=inp.hidden_states.float())
    with pytest.raises(ValueError, match="hidden_states: expected dtype torch.bfloat16"):
        tune(CASE, b, "cpu", inputs=wrong_dtype)
    out_of_range = replace(inp, topk_ids=inp.topk_ids + 10)
    with pytest.raises(ValueError, match="topk_ids: expert ids must be in \\[0, 3\\]"):
        validate_inputs(out_of_range, "cpu")
    assert b.calls == []  # nothing ran


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-tensor-to-CUDA path on CPU machines")
def test_cuda_backend_on_cpu_machine_is_unsupported_not_a_crash():
    from fp4moe_diag.backends import get_backend

    for name in ("cutlass", "trtllm"):
        res = tune(CASE, get_backend(name), "cpu")
        assert list(res.rows["status"]) == ["unsupported"]
        assert "cuda" in res.rows["error_message"].iloc[0]


def test_cpu_tensor_handed_to_cuda_device_is_rejected():
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            tune(CASE, PackingBackend(), "cuda")
    else:
        inp = build_inputs(CASE, "cpu")
        with pytest.raises(ValueError, match="expected a tensor on cuda"):
            validate_inputs(inp, "cuda")


def test_broken_cuda_context_aborts_remaining_tactics_cleanly(monkeypatch):
    import fp4moe_diag.tune_steps as at

    b = PackingBackend(failing={1}, fail_with=RuntimeError("CUDA error: an illegal memory access was encountered"))
    monkeypatch.setattr(at, "cuda_context_ok", lambda dev: (False, "RuntimeError: CUDA error: illegal memory access"))
    res = tune(CASE, b, "cpu", options=MeasureOptions(warmup=1, repeats=2))
    df = res.rows
    assert list(df["status"]) == ["ok", "failed", "aborted", "aborted"]
    assert not res.context_ok and "unusable after tactic t1" in res.notes[0]
    assert (df[df["status"] == "aborted"]["error_message"].str.contains("t1")).all()
    assert b.calls.count(2) == 0 and b.calls.count(3) == 0  # nothing launched after the broken context
    assert res.best is not None and res.best.id == 0  # rows gathered so far are still usable


class FakeClock:
    """A clock (seconds) that only the backend moves: timings are exact, whatever the machine's load."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SleepyBackend(Backend):
    """Tactic i takes SLEEP_MS[i] ms on the fake clock (CPU timing) and computes the reference."""

    name = "sleepy"
    device_types = ("cpu",)
    SLEEP_MS = (6.0, 1.0, 4.0, 2.0, 3.0, 8.0)

    def __init__(self, combo: bool = False):
        self.calls: list = []
        self.combo = combo
        self.seen_timings: list = []
        self.clock = FakeClock()

    def tactics(self, case, prepared=None):
        return [Tactic(id=i, label=f"t{i}", is_default=(i == 0)) for i in range(len(self.SLEEP_MS))]

    def combined_tactic(self, timings):
        self.seen_timings = [(t.id, us) for t, us in timings]
        return Tactic(id=99, label="t1+t3") if self.combo else None

    def run(self, prepared, tactic, output: Optional[torch.Tensor] = None):
        self.calls.append(tactic.id)
        self.clock.now += (0.5 if tactic.id == 99 else self.SLEEP_MS[tactic.id]) / 1e3
        y = reference_moe(prepared).to(torch.bfloat16)
        if output is not None:
            output.copy_(y)
            return output
        return y


def test_screening_times_every_tactic_then_the_fastest_and_default_in_full():
    b = SleepyBackend()
    res = tune(CASE, b, "cpu", options=MeasureOptions(warmup=2, repeats=5, screen=2, screen_top=2, repeat_best=False),
               clock=b.clock)
    df = res.rows.set_index("tactic_label")
    assert list(df.index) == [f"t{i}" for i in range(6)] and (df["status"] == "ok").all()
    # t1 (1 ms) and t3 (2 ms) are the two fastest; t0 is the default: those three are timed in full
    assert dict(df["timing_pass"]) == {"t0": "full", "t1": "full", "t2": "screen", "t3": "full", "t4": "screen",
                                       "t5": "screen"}
    assert dict(df["time_repeats"]) == {"t0": 5, "t1": 5, "t2": 2, "t3": 5, "t4": 2, "t5": 2}
    assert df["time_screen_median_us"].tolist() == pytest.approx([ms * 1e3 for ms in SleepyBackend.SLEEP_MS])
    assert res.best.id == 1 and bool(df.loc["t1", "is_best"])
    for label, ms in zip(df.index, SleepyBackend.SLEEP_MS):  # the medians are exactly the fake durations
        assert df.loc[label, "time_median_us"] == pytest.approx(ms * 1e3, rel=1e-9)
    # per tactic: 1 correctness run + 1 warm-up + 2 screened; full pass: 2 warm-up + 5 more each
    assert [b.calls.count(i) for i in range(6)] == [11, 11, 4, 11, 4, 4]
    assert sorted(i for i, _ in b.seen_timings) == list(range(6))  # the combiner saw every correct tactic


def test_combined_tactic_gets_its_own_fully_timed_row():
    b = SleepyBackend(combo=True)
    res = tune(CASE, b, "cpu", options=MeasureOptions(warmup=1, repeats=3, screen=1, screen_top=1, repeat_best=False),
               clock=b.clock)
    df = res.rows.set_index("tactic_label")
    assert "t1+t3" in df.index and df.loc["t1+t3", "timing_pass"] == "full"
    assert df.loc["t1+t3", "status"] == "ok" and df.loc["t1+t3", "time_repeats"] == 3
    assert res.best.id == 99  # 0.5 ms beats every single tactic


def test_screen_must_be_positive():
    with pytest.raises(ValueError, match="^screen: expected an int >= 1 or None, got 0"):
        MeasureOptions(screen=0)
    with pytest.raises(ValueError, match="^options: expected a MeasureOptions"):
        tune(CASE, SleepyBackend(), "cpu", options={"screen": 1})


def test_screening_keeps_failed_and_incorrect_rows():
    res = tune(CASE, PackingBackend(failing={1}), "cpu", options=MeasureOptions(warmup=1, repeats=3, screen=1, screen_top=1))
    df = res.rows
    assert list(df["status"]) == ["ok", "failed", "ok", "incorrect"]
    assert df.loc[df["status"] == "failed", "timing_pass"].isna().all()
    assert res.best is not None and res.best.id in (0, 2)
    best = df[df["is_best"] == True].iloc[0]  # noqa: E712
    assert best["timing_pass"] == "full" and best["time_repeats"] == 3


class RaisingBackend(SleepyBackend):
    """supports() or combined_tactic() raises: a row or a note, never an aborted sweep."""

    name = "raising"

    def __init__(self, where: str):
        super().__init__()
        self.where = where

    def supports(self, device):
        if self.where == "supports":
            raise RuntimeError("driver query failed")
        return super().supports(device)

    def combined_tactic(self, timings):
        if self.where == "combined":
            raise KeyError("g1")
        return None


def test_a_backend_whose_checks_raise_becomes_a_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from fp4moe_diag import backends
    from fp4moe_diag.runs import SweepSpec, run_sweep

    monkeypatch.setitem(backends.REGISTRY, "raising-supports", f"{__name__}:RaisingOnSupports")
    monkeypatch.setitem(backends.REGISTRY, "raising-combined", f"{__name__}:RaisingOnCombined")
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1,), hidden_scale=24, device="cpu",
                     backends=("raising-supports", "raising-combined"), options=MeasureOptions(warmup=0, repeats=1))
    df, _ = run_sweep(spec, tmp_path / "run", progress_bar=False, log=lambda _m: None)
    assert len(df[df["backend"] == "raising-supports"]) == 1
    first = df[df["backend"] == "raising-supports"].iloc[0]
    assert first["status"] == "failed" and first["stage"] == "support" and first["error_type"] == "RuntimeError"
    second = df[df["backend"] == "raising-combined"]
    assert (second["status"] == "ok").sum() == len(second) == len(SleepyBackend.SLEEP_MS)  # it ran every tactic
    res = tune(CASE, RaisingBackend("combined"), "cpu", options=MeasureOptions(warmup=0, repeats=1))
    assert res.best is not None and any("combined_tactic failed: KeyError" in n for n in res.notes)


class RaisingOnSupports(RaisingBackend):
    name = "raising-supports"

    def __init__(self):
        super().__init__("supports")


class RaisingOnCombined(RaisingBackend):
    name = "raising-combined"

    def __init__(self):
        super().__init__("combined")


def test_error_message_keeps_the_cause_of_a_multiline_error():
    from fp4moe_diag.tune_steps import _err

    e = RuntimeError("at 59:20:\n    acc = _mx_dot(...)\n          ^\nNameError('Cannot access global variable _X2_ASM')")
    assert _err(e) == ("RuntimeError", "at 59:20: ... NameError('Cannot access global variable _X2_ASM')")
    assert _err(ValueError("one line")) == ("ValueError", "one line")
    assert _err(KeyError()) == ("KeyError", "")


class DriftingBackend(SleepyBackend):
    """A GPU whose clock falls as it works: each call takes its tactic's time times (1 + 1 % per call made before
    it). Tactic 1 (1.00 ms) is slower than tactic 2 (0.99 ms), but timed one after the other it looks faster."""

    SLEEP_MS = (3.0, 1.0, 0.99, 5.0)

    def run(self, prepared, tactic, output: Optional[torch.Tensor] = None):
        self.clock.now += self.SLEEP_MS[tactic.id] * 0.01 * len(self.calls) / 1e3  # the drift, before the call
        return super().run(prepared, tactic, output)


def test_interleaving_the_second_pass_takes_the_clock_drift_out_of_the_pick():
    opts = dict(warmup=1, repeats=6, screen=1, screen_top=2, repeat_best=False, cuda_graph=True)
    b = DriftingBackend()
    one_by_one = tune(CASE, b, "cpu", options=MeasureOptions(**opts), clock=b.clock)
    assert one_by_one.best.id == 1  # timed first, at a higher clock
    b = DriftingBackend()
    res = tune(CASE, b, "cpu", options=MeasureOptions(**opts, interleave=True), clock=b.clock)
    df = res.rows.set_index("tactic_label")
    assert dict(df["timing_pass"]) == {"t0": "interleaved", "t1": "interleaved", "t2": "interleaved",
                                       "t3": "screen"}  # the two fastest screened and the default
    assert res.best.id == 2 and dict(df["time_repeats"])["t2"] == 6
    # round r calls t0, t1, t2 in an order rotated by r: the three medians differ by their own times only, plus
    # at most the 1 % drift of the two calls between them in a round
    med = df["time_median_us"]
    assert med["t2"] < med["t1"] < med["t2"] * 1.01 * (1 + 0.02)
    calls = [i for i in b.calls if i != 3]
    assert calls[-18:] == [0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2, 1, 2, 0, 2, 0, 1]  # the rounds, rotated


def test_interleave_needs_the_screen_and_graphs():
    with pytest.raises(ValueError, match="^interleave: needs screen .* got screen=None, cuda_graph=True"):
        MeasureOptions(interleave=True, cuda_graph=True)
    with pytest.raises(ValueError, match="^interleave: needs screen .* got screen=2, cuda_graph=False"):
        MeasureOptions(interleave=True, screen=2)


class LateBestBackend(DriftingBackend):
    """The fastest tactic (t3, 0.985 ms) is screened last, when the falling clock has made it look the slowest of
    the three near-equal ones (t1, t2: 1.00 ms); t0 is the slow default."""

    SLEEP_MS = (5.0, 1.0, 1.0, 0.985)


def test_the_reverse_screen_takes_the_clock_drift_out_of_the_choice_of_finalists():
    from fp4moe_diag.tune_passes import merged_screens
    from fp4moe_diag.measure.timing import summarize

    opts = dict(warmup=1, repeats=4, screen=1, screen_top=1, repeat_best=False, cuda_graph=True)
    b = LateBestBackend()
    one_by_one = tune(CASE, b, "cpu", options=MeasureOptions(**opts), clock=b.clock)
    assert one_by_one.best.id == 1  # screened first, at the highest clock: the only finalist besides the default
    b = LateBestBackend()
    res = tune(CASE, b, "cpu", options=MeasureOptions(**opts, interleave=True), clock=b.clock)
    df = res.rows.set_index("tactic_label")
    assert res.best.id == 3 and dict(df["timing_pass"]) == {"t0": "interleaved", "t1": "screen", "t2": "screen",
                                                            "t3": "interleaved"}
    # first pass: 3 calls a tactic (check, warm-up, screen), t0..t3; then the reverse screen, 2 calls each, t3..t0
    assert b.calls[:20] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 2, 2, 1, 1, 0, 0]
    # t1's screen: its timed calls were the 6th and the 18th (drift 5 % and 17 %): the mean of the two medians
    assert df.loc["t1", "time_median_us"] == pytest.approx(1e3 * (1.05 + 1.17) / 2, rel=1e-6)
    assert df.loc["t1", "time_repeats"] == 2
    # the finalist keeps the screen that picked it: 11 % and 13 % drift, below t1's
    assert df.loc["t3", "time_screen_median_us"] == pytest.approx(1e3 * 0.985 * (1.11 + 1.13) / 2, rel=1e-6)
    screen = df["time_screen_median_us"]
    assert screen["t3"] < screen["t1"] == df.loc["t1", "time_median_us"]
    m = merged_screens(summarize([100.0, 110.0], "wall-clock"), summarize([130.0], "wall-clock"))
    assert (m.median_us, m.p10_us, m.p90_us, m.min_us, m.max_us, m.repeats) == (117.5, 101.0, 130.0, 100.0, 130.0, 3)


def test_the_interleaved_tactics_kernel_time_is_taken_in_rounds_too(monkeypatch):
    """With --kernel-time on CUDA the CUPTI time of the interleaved tactics comes from one session of alternating
    rounds; should that fail, each tactic is timed one after another as before, and a note says why."""
    import types

    from fp4moe_diag import tune_passes
    from fp4moe_diag.measure import kernel_time
    from fp4moe_diag.measure.kernel_time import Activity, CallKernels, stats_by_owner

    rows = {0: {}, 1: {}}
    st = types.SimpleNamespace(options=MeasureOptions(kernel_time=True, repeats=4), ctx=types.SimpleNamespace(
        device=torch.device("cuda")), ok=[("t0", rows[0]), ("t1", rows[1])], result=types.SimpleNamespace(notes=[]))
    seen = {}

    def rounds(calls, device, n, warmup, flush_l2):
        seen.update(calls=sorted(calls), n=n)
        owner = [0, 1, 1, 0]
        recs = [CallKernels(i, (Activity("k", True, 0, 1000 * (o + 1)),)) for i, o in enumerate(owner)]
        return stats_by_owner(recs, owner, "kernel-sum (torch.profiler, cuda-graph, alternating rounds)")

    monkeypatch.setattr(kernel_time, "time_kernels_rounds", rounds)
    tune_passes.interleaved_kernel_time(st, {0: "g0", 1: "g1"})
    assert seen == {"calls": [0, 1], "n": 4}
    assert rows[0]["time_kernel_median_us"] == pytest.approx(1.0) and rows[1]["time_kernel_median_us"] == 2.0
    assert rows[1]["time_kernel_method"].endswith("alternating rounds)") and st.result.notes == []

    def broken(*a, **k):
        raise RuntimeError("CUPTI busy")

    one_by_one = []
    monkeypatch.setattr(kernel_time, "time_kernels_rounds", broken)
    monkeypatch.setattr(tune_passes, "add_kernel_time", lambda st_, launch, row: one_by_one.append(launch))
    st.backend = types.SimpleNamespace(launcher=lambda prepared, t, out: f"launch {t}", end_launches=lambda p: None)
    st.prepared, st.out = None, None
    tune_passes.interleaved_kernel_time(st, {0: "g0", 1: "g1"})
    assert one_by_one == ["launch t0", "launch t1"]
    assert st.result.notes == ["interleaved kernel time failed, timed one after another: RuntimeError: CUPTI busy"]
