"""FlashInfer API adapters: detection, strict kwargs, CUTLASS tactics/forcing/commit over a CPU stub module.

Runs under every covered FlashInfer (CI: 0.5.2 and, with PYTHONPATH=/work/fi/074, 0.7.4); expectations that
differ between generations branch on the detected adapter."""

import pytest

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.backends.base import Tactic  # noqa: E402
from fp4moe_diag.backends.flashinfer import api  # noqa: E402
from fp4moe_diag.backends.flashinfer.cutlass import CutlassBackend, _cutlass_fn  # noqa: E402
from fp4moe_diag.backends.flashinfer.stubs import stub_cutlass_module  # noqa: E402
from fp4moe_diag.problem.inputs import build_inputs  # noqa: E402

API = api.get_api()
CASE = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2,
               local_num_experts=8, model="small")


def test_versions_map_to_adapters_and_unknown_ones_are_refused(monkeypatch):
    monkeypatch.delenv(api.ENV_FORCE, raising=False)
    assert api.adapter_name_for("0.5.2") == "v05" and api.adapter_name_for("0.7.4") == "v07"
    assert api.adapter_name_for("0.7.0rc1") == "v07"
    for v, why in (("0.6.3", "PR #2916"), ("0.8.0", "no fp4moe-diag adapter"), ("0.4.9", "covered: v05")):
        with pytest.raises(api.UnsupportedFlashInferVersion, match=why):
            api.adapter_name_for(v)
    monkeypatch.setenv(api.ENV_FORCE, "v07")
    assert api.adapter_name_for("0.6.3") == "v07"
    monkeypatch.setenv(api.ENV_FORCE, "v99")
    with pytest.raises(api.UnsupportedFlashInferVersion, match="expected one of"):
        api.adapter_name_for("0.5.2")


def test_installed_version_has_its_adapter():
    import flashinfer

    assert API.version == flashinfer.__version__
    assert API.name == {"0.5": "v05", "0.7": "v07"}[flashinfer.__version__[:3]]
    assert API.has_profile_ids == API.has_tuner_configs == (API.name == "v07")


def test_an_argument_the_entry_point_does_not_take_is_an_error_unless_mapped():
    def entry(a, b=2):
        return a, b

    assert api.checked_kwargs(entry, {"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match=r"takes no argument\(s\) \['tile_tokens_dim'\]"):
        api.checked_kwargs(entry, {"a": 1, "tile_tokens_dim": 8})
    assert api.checked_kwargs(entry, {"a": 1, "tile_tokens_dim": 8}, mapped=["tile_tokens_dim"]) == {"a": 1}


def _prepared(backend):
    p = backend.prepare(build_inputs(CASE))
    p.kwargs["enable_pdl"] = False
    return p


def test_cutlass_tactics_labels_follow_the_installed_api():
    b = CutlassBackend(scale_layout="raw")  # the stub computes nothing: any byte layout will do
    with stub_cutlass_module(n_gemm1=6, n_gemm2=6, zero_occupancy={2, 8}):
        labels = [t.label for t in b.tactics(CASE, _prepared(b))]
        idx = [t.params["gemm2_index"] for t in b.tactics(CASE, _prepared(b)) if t.label.startswith("g2:")]
    if API.name == "v05":  # one config list for both GEMMs, no occupancy filter
        assert labels == ["default(-1,-1)"] + [f"g1:{i}" for i in range(6)] + [f"g2:{i}" for i in range(6)]
        assert idx == list(range(6))
    else:  # gemm2 ids absolute (6..11), zero-occupancy tactics 2 and 8 filtered by get_valid_tactics
        assert labels == ["default(-1,-1)", "g1:0", "g1:1", "g1:3", "g1:4", "g1:5",
                          "g2:6", "g2:7", "g2:9", "g2:10", "g2:11"]
        assert idx == [0, 1, 3, 4, 5]


def test_forced_cutlass_tactic_reaches_run_moe():
    b = CutlassBackend(scale_layout="raw")
    with stub_cutlass_module() as stub:
        p = _prepared(b)
        g2 = 3 if API.name == "v05" else 6 + 3
        b.run(p, Tactic(id=(1, g2), label="x"))
        assert stub.tactics_run == [(1, g2)]
        # 0.7: forced through profile_ids, so the tuner is never asked (no run_gemm_profile either)
        assert not [c for c in stub.calls if c[0] == "run_gemm_profile"]


def test_committed_cutlass_tactic_is_what_a_plain_untuned_call_runs():
    from flashinfer import autotune
    from flashinfer.autotuner import AutoTuner

    b = CutlassBackend(scale_layout="raw")
    g2 = 5 if API.name == "v05" else 6 + 5
    AutoTuner.get().clear_cache()
    try:
        with stub_cutlass_module() as stub:
            p = _prepared(b)
            with autotune(False):
                _cutlass_fn()(**p.kwargs)
            keys = b.commit_tactic(p, Tactic(id=(4, g2), label="g1:4+g2:x"))
            assert len(keys) == 2
            with autotune(False):
                _cutlass_fn()(**p.kwargs)  # stock call, nothing patched: FlashInfer's tuner answers
            assert stub.tactics_run == [(-1, -1), (4, g2)]
            other = CASE.with_tokens(64)  # another shape bucket keeps the fallback
            p2 = b.prepare(build_inputs(other))
            p2.kwargs["enable_pdl"] = False
            with autotune(False):
                _cutlass_fn()(**p2.kwargs)
            assert stub.tactics_run[-1] == (-1, -1)
        if API.name == "v07":
            assert all(k.startswith("('trtllm::fused_moe::gemm") and "'MoERunner'" in k for k in keys)
    finally:
        AutoTuner.get().clear_cache()


def test_trtllm_row_on_an_h200_says_the_tactic_list_needs_sm100(monkeypatch):
    import torch

    import fp4moe_diag.backends.base as bb
    from fp4moe_diag.backends.flashinfer.trtllm import TrtllmGenBackend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(bb, "device_capability", lambda dev: (9, 0))
    sup = TrtllmGenBackend().supports("cuda")
    assert not sup.ok and "SM100" in sup.reason and "H200 is SM90" in sup.reason
    assert "tactic list needs one too (trtllm_get_valid_moe_configs queries the live GPU)" in sup.reason
