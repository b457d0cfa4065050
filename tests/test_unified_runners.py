"""FlashInfer 0.7's unified SM90 MXFP4 runners as backends (issue #22): every runner FlashInfer's own registry
offers for MXFP4 weights on SM90 is wired; what a runner cannot take (biases, EP) is a row saying so before
anything is built; on CPU every one of them is an `unsupported` row, never a crash or a number."""

import pytest

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.backends import available_backends, get_backend  # noqa: E402
from fp4moe_diag.backends.flashinfer.api import get_api  # noqa: E402
from fp4moe_diag.runs import SweepSpec, run_sweep  # noqa: E402

v07 = pytest.mark.skipif(get_api().name == "v05", reason="the unified MoE API is FlashInfer 0.7.x")
CASE = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2, local_num_experts=8,
               model="small", activation="swiglu_oai", swiglu_alpha=1.702, swiglu_beta=1.0, swiglu_limit=7.0,
               has_bias=False)


@v07
def test_every_sm90_mxfp4_runner_flashinfer_offers_is_a_backend():
    from fp4moe_diag.backends.flashinfer.unified import RUNNERS, runner_class, sm90_mxfp4_runners

    offered = sm90_mxfp4_runners()
    assert {"CutlassW4A16Runner", "CutlassHummingRunner", "CuTileMxfp4Bf16Runner"} <= set(offered)
    wired = sorted(runner_class(s).__name__ for s in RUNNERS.values())
    assert wired == offered
    assert set(RUNNERS) <= set(available_backends())


@v07
@pytest.mark.parametrize("name", ["cutlass_w4a16", "cutlass_humming", "cutile_mxfp4", "frost_low_latency"])
def test_what_a_runner_cannot_take_is_said(name):
    b = get_backend(name)
    assert b.check_case(CASE).ok
    biased = b.check_case(CASE.replace(has_bias=True))
    assert not biased.ok and "biases" in biased.reason and "gpt-oss-nobias.csv" in biased.reason
    ep = b.check_case(CASE.replace(local_num_experts=4))
    assert not ep.ok and "expert parallelism" in ep.reason
    with pytest.raises(ValueError, match="biases"):
        b.prepare(__import__("fp4moe_diag.problem.inputs", fromlist=["build_inputs"]).build_inputs(CASE.replace(has_bias=True)))


@v07
def test_on_cpu_each_runner_is_an_unsupported_row(tmp_path):
    names = ("cutlass_w4a16", "cutlass_humming", "cutile_mxfp4", "frost_low_latency")
    spec = SweepSpec(models=("gpt-oss-20b",), backends=names, tokens=(4,), hidden_scale=12, device="cpu",
                     measure_ceilings=False, shapes_file="data/shapes/gpt-oss-nobias.csv")
    df, _ = run_sweep(spec, tmp_path / "run", progress_bar=False, log=lambda s: None)
    assert sorted(df["backend"]) == sorted(names)
    assert (df["status"] == "unsupported").all()
    assert df["error_message"].str.contains("cuda", case=False).all()
    assert (~df["has_bias"].astype(bool)).all()


def test_the_launcher_is_flashinfers_forward_with_everything_bound():
    """What is timed is the runner's own ``forward``: no frame of ours between the call and FlashInfer's, the
    tuner's poisoned output in the runner's output slot, the tactic and launch arguments bound once."""
    import functools

    import torch

    from fp4moe_diag.backends.base import Tactic
    from fp4moe_diag.backends.flashinfer.unified import UnifiedPrepared

    class FakeRunner:
        calls = []

        def forward(self, inputs, tactic=-1, **kw):
            self.calls.append((inputs, tactic, kw))
            inputs[0].fill_(1.0)
            return inputs[0]

    own, x, out = torch.zeros(2, 4), torch.ones(2, 4), torch.full((2, 4), float("nan"))
    r = FakeRunner()
    prep = UnifiedPrepared(inputs=None, runner=r, packed=[own, x], launch_kwargs={"enable_pdl": False})
    b = get_backend("cutlass_w4a16")
    launch = b.launcher(prep, Tactic(id=(3, -1), label="g1:3"), out)
    assert isinstance(launch, functools.partial) and launch.func == r.forward
    y = launch()
    assert y is out and torch.equal(out, torch.ones(2, 4)) and not own.any()
    (inputs, tactic, kw), = r.calls
    assert inputs[1] is x and tactic == (3, -1) and kw == {"enable_pdl": False}
    assert b.run(prep, Tactic(id=-1, label="default(-1)")) is own  # no output given: the runner's own buffer


def test_the_cutlass_runners_get_the_combined_tactic_like_the_flat_path():
    from fp4moe_diag.backends.base import Tactic

    b = get_backend("cutlass_w4a16")
    t = lambda i, us: (Tactic(id=i, label=str(i)), us)  # noqa: E731
    combo = b.combined_tactic([t(-1, 300.0), t((57, -1), 258.0), t((3, -1), 280.0), t((-1, 169), 278.0)])
    assert combo.id == (57, 169) and combo.label == "g1:57+g2:169"
    assert b.combined_tactic([t(-1, 250.0), t((57, -1), 258.0), t((-1, 169), 240.0)]) is None  # gemm1 loses
    assert get_backend("cutile_mxfp4").combined_tactic([t(-1, 1.0)]) is None


def test_fp8_activation_runners_are_checked_with_room_for_fp8():
    from fp4moe_diag.backends.flashinfer import unified as U
    from fp4moe_diag.measure.correctness import REL_L2_TOL

    assert U.CutlassHummingBackend.kernel_precision == "w4a8" and U.CutlassHummingBackend.rel_l2_tol == 5e-2
    assert U.CutlassW4A16Backend.rel_l2_tol is None and REL_L2_TOL < 5e-2  # bf16 runners: the standard tolerance
