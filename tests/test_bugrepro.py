"""The upstream bug, reproduced with FlashInfer's real Python over a TVM-FFI packing stub."""

import pytest
import torch

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.bugrepro import SEED_CASE, reproduce_meta_bug, static_meta_check  # noqa: E402
from fp4moe_diag.backends.flashinfer.hooks import TRTLLM_FP4_OP, find_meta_tensors, intercept_choose_one, routed_moe_function
from fp4moe_diag.backends.flashinfer.status import flashinfer_status
from fp4moe_diag.backends.flashinfer.stubs import stub_trtllm_gen_module
from fp4moe_diag.backends.flashinfer.api import get_api  # noqa: E402
from fp4moe_diag.backends.flashinfer.trtllm import routed_kwargs  # noqa: E402
from fp4moe_diag.problem.inputs import build_inputs  # noqa: E402

API = get_api().name  # "v05": the bug's API (meta placeholder); "v07": fixed upstream (PR #2916, 0.6.8)

SMALL = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2,
                local_num_experts=4, model="small")


def test_static_check_reproduces_the_seed_error_in_tvm_ffi():
    v = static_meta_check(SMALL, "cpu")
    if API == "v07":  # the routed op hands the tuner routing_logits=None: nothing on meta, tuning completes
        assert v.status == "fixed-upstream", v.reason
        assert v.meta_inputs == [] and v.traceback == ""
        assert [i.name for i in v.tuner_inputs] == ["output", "routing_logits", "topk_ids", "expert_weights",
                                                    "hidden_states", "hidden_states_scale", "gemm1_lora_delta",
                                                    "per_token_scale"]
        assert v.tuner_inputs[1].kind == "none"
        return
    assert v.status == "reproduced", v.reason
    assert "Cannot pack tensors on meta" in v.reason
    assert "trtllm_fp4_block_scale_moe" in v.traceback and "choose_one" in v.traceback
    assert [m.name for m in v.meta_inputs] == ["routing_logits"]
    rl = v.meta_inputs[0]
    assert rl.shape == (4, 8) and rl.dtype == "bfloat16"  # [num_tokens, num_experts], routed dtype
    names = [i.name for i in v.tuner_inputs]
    assert names == ["output", "routing_logits", "topk_ids", "expert_weights", "hidden_states"]


def test_without_autotune_the_stock_call_goes_through():
    v = static_meta_check(SMALL, "cpu", tune=False)
    assert v.status == "fixed-upstream"  # no profiling -> the placeholder never reaches TVM-FFI
    # 0.5: the tuner still got the placeholder; 0.7: there is none
    assert [m.name for m in v.meta_inputs] == (["routing_logits"] if API == "v05" else [])


def test_reproduce_is_not_applicable_without_sm100():
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 10:
        pytest.skip("on SM100 the real kernel runs")
    v = reproduce_meta_bug(SMALL)
    assert v.status == "not-applicable"
    assert "SM100" in v.reason and ("reproduced" if API == "v05" else "fixed-upstream") in v.reason
    assert v.flashinfer_version == flashinfer_status().version


def test_force_mode_hands_no_meta_tensor_to_the_kernel():
    kw = routed_kwargs(build_inputs(SMALL), tune_max_num_tokens=4)
    kw["enable_pdl"] = False
    from flashinfer import autotune

    with stub_trtllm_gen_module() as stub:
        with intercept_choose_one("force", tactic=[8, 0], ops=[TRTLLM_FP4_OP]) as rec:
            with autotune(True):
                routed_moe_function()(**kw)
    kernel_calls = [c for c in stub.calls if c[0] == "trtllm_fp4_block_scale_moe"]
    assert len(kernel_calls) == 1
    assert not [i for i in kernel_calls[0][1] if i.is_meta]
    # 0.7 passes routing_input_mode first, then routing_logits
    assert kernel_calls[0][1][0 if API == "v05" else 1].kind == "none"  # routing_logits=None: the kernel uses topk_ids
    assert [m.name for m in find_meta_tensors(rec.last)] == (["routing_logits"] if API == "v05" else [])


def test_seed_case_matches_the_seed_script():
    assert (SEED_CASE.num_tokens, SEED_CASE.num_experts, SEED_CASE.top_k, SEED_CASE.hidden_size) == (16, 16, 4, 3072)


def test_best_tactic_handed_to_flashinfer_cache_is_used_without_autotune():
    from flashinfer import autotune
    from flashinfer.autotuner import AutoTuner

    from fp4moe_diag.backends.flashinfer.hooks import install_tactic_in_autotuner

    kw = routed_kwargs(build_inputs(SMALL), tune_max_num_tokens=4)
    kw["enable_pdl"] = False
    AutoTuner.get().clear_cache()
    with stub_trtllm_gen_module() as stub:
        with intercept_choose_one("stop", ops=[TRTLLM_FP4_OP]) as rec:
            with pytest.raises(Exception, match="stopped at AutoTuner.choose_one"):
                routed_moe_function()(**kw)
        install_tactic_in_autotuner(rec.last, [16, 0])
        with autotune(False):
            routed_moe_function()(**kw)  # stock path, no interception: the cache answers
    assert stub.kernel_tactics()[-1] == [16, 0]  # the tactic argument the kernel received
    AutoTuner.get().clear_cache()
    # and without the cache entry the fallback is used
    with stub_trtllm_gen_module() as stub2:
        with autotune(False):
            routed_moe_function()(**kw)
    assert stub2.kernel_tactics()[-1] == [-1, -1]


def test_trtllm_backend_tactics_run_and_commit_over_the_stub():
    from fp4moe_diag.backends.flashinfer.base import FlashInferPrepared
    from fp4moe_diag.backends.flashinfer.trtllm import TrtllmGenBackend

    inp = build_inputs(SMALL)
    kw = routed_kwargs(inp, tune_max_num_tokens=4)
    kw["enable_pdl"] = False
    prepared = FlashInferPrepared(inp, kw)  # unshuffled weights: the stub computes nothing
    b = TrtllmGenBackend()
    with stub_trtllm_gen_module() as stub:
        tactics = b.tactics(SMALL, prepared=prepared)
        assert [t.label for t in tactics] == ["default(-1)", "tile8/cfg0", "tile16/cfg0", "tile32/cfg0", "tile64/cfg0"]
        out = torch.zeros(4, 256, dtype=torch.bfloat16)
        assert b.run(prepared, tactics[2], out) is out
        assert stub.kernel_tactics()[-1] == [16, 0]  # the forced tactic reached the kernel call
        from flashinfer import autotune
        from flashinfer.autotuner import AutoTuner

        AutoTuner.get().clear_cache()
        key = b.commit_tactic(prepared, tactics[3])[0]
        if API == "v05":  # 0.5: (runner_id, tactic, profile) in the private profiling_cache
            assert AutoTuner.get().profiling_cache[key][1] == [32, 0]
        else:  # 0.7: a tuner-config entry loaded through load_configs, keyed without the runner hash
            assert key.startswith("('flashinfer::trtllm_fp4_block_scale_moe', ")
        with autotune(False):  # the stock call, no interception: the committed tactic runs
            routed_moe_function()(**kw)
        assert stub.kernel_tactics()[-1] == [32, 0]
    AutoTuner.get().clear_cache()


def test_routed_kwargs_follow_the_installed_api():
    kw = routed_kwargs(build_inputs(SMALL))
    assert ("tile_tokens_dim" in kw) == (API == "v05")  # removed in 0.6.8; 0.7 adapter drops it on purpose
    from fp4moe_diag.backends.flashinfer.hooks import call_with_supported_kwargs

    with pytest.raises(ValueError, match=r"takes no argument\(s\) \['not_an_argument'\]"):
        call_with_supported_kwargs(routed_moe_function(), {**kw, "not_an_argument": 1})
