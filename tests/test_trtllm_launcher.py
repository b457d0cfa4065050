"""The trtllm backend's launcher: FlashInfer's routed entry point, bare, with the tactic committed once to FlashInfer's
AutoTuner cache before the timed calls and the cache given back after (``end_launches``).  Over the TVM-FFI packing
stub (FlashInfer's real Python, no SM100 kernel); runs under every covered FlashInfer (CI: 0.7.4 and 0.5.2)."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.backends.flashinfer import hooks  # noqa: E402
from fp4moe_diag.backends.flashinfer.api import get_api  # noqa: E402
from fp4moe_diag.backends.flashinfer.base import FlashInferPrepared  # noqa: E402
from fp4moe_diag.backends.flashinfer.stubs import stub_trtllm_gen_module  # noqa: E402
from fp4moe_diag.backends.flashinfer.trtllm import TrtllmGenBackend, routed_kwargs  # noqa: E402
from fp4moe_diag.measure.timing import time_fn  # noqa: E402
from fp4moe_diag.problem.inputs import build_inputs  # noqa: E402
from test_launcher import WindowClock, _stub_allowed, profiled  # noqa: E402

API = get_api()
SMALL = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2,
                local_num_experts=4, model="small")


@pytest.fixture
def trtllm():
    from flashinfer.autotuner import AutoTuner

    inp = build_inputs(SMALL)
    kw = routed_kwargs(inp, tune_max_num_tokens=4)
    kw["enable_pdl"] = False
    prepared = FlashInferPrepared(inp, kw)  # unshuffled weights: the stub computes nothing
    b = TrtllmGenBackend()
    AutoTuner.get().clear_cache()
    try:
        with stub_trtllm_gen_module() as stub:
            tactics = {t.label: t for t in b.tactics(SMALL, prepared=prepared)}
            yield b, prepared, stub, tactics, torch.zeros(4, 256, dtype=torch.bfloat16)
    finally:
        AutoTuner.get().clear_cache()


def _plain_call(prepared) -> None:
    """The stock entry point under ``autotune(False)``, nothing of ours patched: FlashInfer's cache answers."""
    from flashinfer import autotune

    with autotune(False):
        hooks.routed_moe_function()(**prepared.kwargs)


def _cache_state() -> dict:
    """What a committed tactic lives in: the tuner's in-memory winners (0.5: ``profiling_cache``) and, on 0.7, the
    entries ``load_configs`` loaded."""
    from flashinfer.autotuner import AutoTuner

    tuner = AutoTuner.get()
    state = {"winners": dict(hooks.winner_cache(tuner))}
    if API.name == "v07":
        state["file_configs"] = copy.deepcopy(tuner._file_configs)
    return state


def test_the_timed_call_is_flashinfers_op_with_the_committed_tactic(trtllm):
    from flashinfer.autotuner import AutoTuner

    b, p, stub, tactics, out = trtllm
    choose_one = AutoTuner.choose_one
    launch = b.launcher(p, tactics["tile16/cfg0"], out)
    assert launch.func is hooks.routed_moe_function() and launch.keywords["output"] is out and not launch.args
    assert AutoTuner.choose_one is choose_one  # FlashInfer's own lookup, not patched
    clock = WindowClock()
    try:
        profiled(clock, time_fn, launch, "cpu", warmup=1, repeats=3, clock=clock)
    finally:
        b.end_launches(p)
    assert stub.kernel_tactics() == [[16, 0]] * 4  # warm-up + 3 timed calls, each with the committed tactic
    assert clock.windows == 3 and any("flashinfer" in c.co_filename for c in clock.codes)
    assert "choose_one" in {c.co_name for c in clock.codes}  # FlashInfer's tuner answered, in the window
    assert not [c for c in clock.codes if c.co_name == "signature" and c.co_filename.endswith("inspect.py")]
    codes, files = _stub_allowed()
    codes.add(hooks._describe.__code__)  # the stub's record of the arguments it packed (it stands in for the kernel)
    assert clock.ours(codes, files) == []


def test_timing_run_instead_shows_our_per_call_work(trtllm):
    """``run`` (launcher made on every call) in the window: our frames are seen, so the check above can fail."""
    b, p, stub, tactics, out = trtllm
    clock = WindowClock()
    profiled(clock, time_fn, lambda: b.run(p, tactics["tile32/cfg0"], out), "cpu", warmup=0, repeats=2, clock=clock)
    codes, files = _stub_allowed()
    ours = {name.rsplit(":", 1)[1] for name in clock.ours(codes, files)}
    assert {"checked_kwargs", "capture_tuner_calls", "commit_for_launches"} <= ours
    assert stub.kernel_tactics() == [[32, 0]] * 2


def test_end_launches_gives_the_tuner_back_its_cache(trtllm):
    b, p, stub, tactics, out = trtllm
    b.commit_tactic(p, tactics["tile64/cfg0"])  # what the tuner held before: another tactic for the same key
    before = _cache_state()
    _plain_call(p)
    launch = b.launcher(p, tactics["tile8/cfg0"], out)
    launch()
    during = _cache_state()
    _plain_call(p)  # while the launcher is live, the plain op runs its tactic too
    b.end_launches(p)
    after = _cache_state()
    _plain_call(p)
    assert stub.kernel_tactics() == [[64, 0], [8, 0], [8, 0], [64, 0]]
    assert during != before and after == before
    assert p.tuner_snapshot is None
    b.end_launches(p)  # a second end is a no-op
    assert _cache_state() == before


def test_an_empty_cache_stays_empty_and_the_default_tactic_is_committed_too(trtllm):
    b, p, stub, tactics, out = trtllm
    b.commit_tactic(p, tactics["tile32/cfg0"])
    launch = b.launcher(p, tactics["default(-1)"], out)  # over a committed [32, 0]: the fallback still runs
    launch()
    b.end_launches(p)
    from flashinfer.autotuner import AutoTuner

    AutoTuner.get().clear_cache()
    empty = _cache_state()
    b.launcher(p, tactics["tile16/cfg0"], out)()
    b.end_launches(p)
    _plain_call(p)
    assert stub.kernel_tactics() == [[-1, -1], [16, 0], [-1, -1]]
    assert _cache_state() == empty and not empty["winners"] and not empty.get("file_configs")


def test_v07_winner_of_an_earlier_autotune_is_put_back(trtllm):
    """0.7's commit drops an in-memory winner of the same key (it would win over loaded configs): end_launches
    brings it back, and FlashInfer's lookup answers with it again."""
    if API.name != "v07":
        pytest.skip("0.5 commits into profiling_cache itself (the test above)")
    from flashinfer.autotuner import AutoTuner

    b, p, stub, tactics, out = trtllm
    call = b.tactic_calls(p, tactics["tile8/cfg0"])[0][0]
    hooks.winner_cache(AutoTuner.get())[API.cache_key(call)] = ([64, 0], None)
    before = _cache_state()
    b.launcher(p, tactics["tile32/cfg0"], out)()
    assert API.cache_key(call) not in hooks.winner_cache(AutoTuner.get())
    b.end_launches(p)
    _plain_call(p)
    assert stub.kernel_tactics() == [[32, 0], [64, 0]] and _cache_state() == before


def test_no_commit_inside_autotune_true(trtllm):
    from flashinfer import autotune

    b, p, stub, tactics, out = trtllm
    before = _cache_state()
    with autotune(True), pytest.raises(RuntimeError, match="tuning mode"):
        b.launcher(p, tactics["tile16/cfg0"], out)
    assert p.tuner_snapshot is None and _cache_state() == before and stub.kernel_tactics() == []
