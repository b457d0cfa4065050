"""FlashInfer's CUTLASS MoE on a real SM90 GPU (marked ``gpu``): a committed tactic is what a plain
``autotune(False)`` call of the stock entry point runs, under the installed FlashInfer generation.

Needs CUDA on SM90, flashinfer and a slim CUTLASS module (``FP4MOE_CUTLASS_MODULE``: a JIT build of the
whole module takes far longer than a test).  The CPU twin over the stub is in ``test_flashinfer_api.py``."""

import os

import pytest
import torch

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.backends.base import Tactic  # noqa: E402
from fp4moe_diag.backends.flashinfer.cutlass import GEMM1_OP, GEMM2_OP, CutlassBackend, _cutlass_fn  # noqa: E402
from fp4moe_diag.problem.inputs import build_inputs  # noqa: E402
from fp4moe_diag.problem.reference import reference_moe  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(not os.environ.get("FP4MOE_CUTLASS_MODULE"), reason="FP4MOE_CUTLASS_MODULE is not set"),
]

# gpt-oss-20b padded as vLLM pads it for CUTLASS (K/32 a multiple of 4), EP1, a decode shape
CASE = MoECase(num_tokens=64, hidden_size=3072, intermediate_size=3072, num_experts=32, top_k=4,
               activation="swiglu_oai", has_bias=True, model="gpt-oss-20b-padded")


def _rel_l2(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.float() - ref).norm() / ref.norm())


def test_gpu_committed_cutlass_tactic_runs_in_a_plain_call(monkeypatch):
    from flashinfer import autotune
    from flashinfer.autotuner import AutoTuner

    if torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("the slim module is built for SM90")
    b = CutlassBackend()
    inputs = build_inputs(CASE, "cuda")
    ref = reference_moe(inputs, torch.float32)
    p = b.prepare(inputs)
    tactics = b.tactics(CASE, p)
    g1s = [t.id[0] for t in tactics if t.id[0] != -1]
    g2s = [t.id[1] for t in tactics if t.id[1] != -1]
    assert len(g1s) > 2 and len(g2s) > 2, (g1s, g2s)
    pick = Tactic(id=(g1s[1], g2s[2]), label=f"g1:{g1s[1]}+g2:{g2s[2]}")
    forced = b.run(p, pick).clone()
    torch.cuda.synchronize()
    assert _rel_l2(forced, ref) < 0.01

    seen: list = []
    orig = AutoTuner.choose_one

    def recording(self, custom_op, *args, **kwargs):
        res = orig(self, custom_op, *args, **kwargs)
        seen.append((custom_op, res[1]))
        return res

    monkeypatch.setattr(AutoTuner, "choose_one", recording)
    AutoTuner.get().clear_cache()
    try:
        with autotune(False):  # nothing committed yet: FlashInfer's fallback
            _cutlass_fn()(**p.kwargs)
        assert seen == [(GEMM1_OP, -1), (GEMM2_OP, -1)]
        keys = b.commit_tactic(p, pick)
        assert len(keys) == 2
        seen.clear()
        out = torch.full_like(forced, float("nan"))
        with autotune(False):  # the stock call: FlashInfer's own tuner answers with the commit
            res = _cutlass_fn()(**{**p.kwargs, "output": out})
        torch.cuda.synchronize()
        y = res[0] if isinstance(res, (list, tuple)) else res
        assert seen == [(GEMM1_OP, pick.id[0]), (GEMM2_OP, pick.id[1])]
        assert _rel_l2(y, ref) < 0.01
        assert _rel_l2(y, forced) < 1e-3  # the same kernels as the forced run (finalize order may differ)
    finally:
        AutoTuner.get().clear_cache()


def test_gpu_sm90_weight_interleave_port_matches_flashinfer():
    """capture.layouts.sm90_interleave_weights (what a dump replay inverts) == FlashInfer's CUDA interleave."""
    import flashinfer.fused_moe as fm

    from fp4moe_diag.backends.flashinfer.cutlass import load_slim_module_if_configured
    from fp4moe_diag.capture import layouts

    if not hasattr(fm, "interleave_moe_weights_for_sm90_mixed_gemm"):
        pytest.skip("this flashinfer has no interleave_moe_weights_for_sm90_mixed_gemm")
    load_slim_module_if_configured()
    g = torch.Generator().manual_seed(0)
    w = torch.randint(0, 256, (2, 256, 1536), dtype=torch.uint8, generator=g)
    real = fm.interleave_moe_weights_for_sm90_mixed_gemm(w.cuda(), "fp4").cpu()
    assert torch.equal(layouts.sm90_interleave_weights(w), real)
    assert torch.equal(layouts.sm90_deinterleave_weights(real), w)
