"""The ``-pdlt`` tactics (``pdl`` 5, :func:`fp4moe_diag.backends.triton.configs_tail.pdlt_twins`): gemm1's tail launch
of a ``-tN`` tactic runs its blocks before its grid-dependency wait and waits last.  Host side: labels, refusals, where
they are offered, the pdl each launch of a call gets; sm_90a build (CPU, Triton's bundled ptxas): where the wait and
the trigger stand; the interpreter runs them (no grid dependencies there) in ``tests/test_triton_tail.py``."""

from __future__ import annotations

import types

import pytest

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton import backend
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_tail import PS_TAIL_PDL_CONFIGS, pdlt_twins
from fp4moe_diag.problem.shapes import default_case
from interpreter import bundled_tools


def test_labels_round_trip_and_refusals():
    kc = parse_config("m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdlt")
    assert (kc.pdl, kc.tail_m, kc.gate_up, kc.tile_major) == (5, 64, True, True)
    assert kc.label == "m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdlt" and kc.params()["pdl"] == 5
    assert [c.label for c in pdlt_twins(PS_TAIL_PDL_CONFIGS)] == [c.label + "t" for c in PS_TAIL_PDL_CONFIGS]
    assert pdlt_twins((parse_config("m128n128k64w8s3-ps-g2n256-t64"), parse_config("m16n64k128w4s3-ps-pdl"))) == ()
    with pytest.raises(ValueError, match=r"^tactic: -pdlt .* needs tail blocks \(-tN\); got 'm128n128k64w16s3"):
        parse_config("m128n128k64w16s3-ps-gu-g2n256-pdlt")
    with pytest.raises(ValueError, match="^tactic: tail_m"):
        KernelConfig(128, 128, 64, 8, 3, "ps", split_k=2, tail_m=64, pdl=5)


def _gpu(monkeypatch, compiled: bool) -> None:
    monkeypatch.setattr(backend, "interpret_enabled", lambda: not compiled)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))


def test_offered_at_prefill_on_a_gpu_beside_their_pdl_twins(monkeypatch):
    b = backend.TritonMXFP4Backend()
    _gpu(monkeypatch, True)
    for model, ep, t in (("gpt-oss-20b", 1, 16384), ("gpt-oss-20b", 2, 4096), ("gpt-oss-120b", 4, 4096)):
        ids = [x.id for x in b.tactics(default_case(model, ep, t))]
        late = [c for c in ids if c.pdl == 5]
        assert len(late) == 5 and all(c.tail_m for c in late)
        assert {c.label[:-1] for c in late} <= {c.label for c in ids if c.pdl == 1}  # each beside its -pdl twin
        assert "m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdlt" in {c.label for c in late}
    assert not any(x.id.pdl == 5 for x in b.tactics(default_case("gpt-oss-20b", 1, 64)))  # decode: none
    _gpu(monkeypatch, False)  # the interpreter: no grid dependencies, none offered
    assert not any(x.id.pdl == 5 for x in b.tactics(default_case("gpt-oss-20b", 2, 4096)))


def test_the_headline_plan_sweeps_the_pdlt_twin_of_each_pdl_tail_tactic_it_sweeps(monkeypatch):
    """tools/device/plans/headline.sh's prefill filter of backend triton takes the -pdlt twin of every -pdl tactic with
    tail blocks that it takes, at the prefill goal shapes as compiled on a GPU: the headline times them side by side."""
    import re

    from plans import headline_triton_filters

    prefill = headline_triton_filters()[1]
    b = backend.TritonMXFP4Backend()
    _gpu(monkeypatch, True)
    for model, ep, t in (("gpt-oss-20b", 1, 16384), ("gpt-oss-20b", 2, 4096), ("gpt-oss-120b", 4, 4096)):
        labels = {x.label for x in b.tactics(default_case(model, ep, t))}
        pdl_tails = {lab for lab in labels if prefill.match(lab) and re.search(r"-t\d+-pdl$", lab)}
        assert len(pdl_tails) >= 3, (model, ep, t, pdl_tails)
        assert {lab + "t" for lab in pdl_tails} <= {lab for lab in labels if prefill.match(lab)}


@pytest.mark.parametrize("tokens, early", [(64, True), (8, False)])
def test_only_gemm1s_tail_launch_gets_pdl_5_and_only_behind_a_main_launch(monkeypatch, tokens, early):
    """64 tokens x top 2 over 4 experts: blocks of 32 and tails of 16 both launch, the tail with pdl 5 (gemm2's two
    launches get 5, which gemm2 reads as 1); 8 tokens: no expert fills a block of 32, the tail launch is the first
    gemm1 launch of the call and keeps pdl 1 (nothing before it to end after)."""
    seen: list[tuple[str, int, int]] = []

    def record(name):
        def launch(*a, **kw):
            seen.append((name, int(a[13 if name == "gemm1" else 9]), kw["pdl"]))
            return []
        return launch

    fake = types.SimpleNamespace(gemm1_calls=record("gemm1"), gemm2_calls=record("gemm2"),
                                 topk_sum_calls=lambda *a, **kw: [])
    monkeypatch.setattr(backend, "load_kernels", lambda: fake)
    b = backend.TritonMXFP4Backend()
    prep = b.prepare(build_inputs(MoECase(num_tokens=tokens, hidden_size=192, intermediate_size=320, num_experts=4,
                                          top_k=2)))
    b.calls(prep, Tactic(id="m32n64k128w4s1-ps-g2n128-t16-pdlt", label="m32n64k128w4s1-ps-g2n128-t16-pdlt"))
    g1 = [(bm, pdl) for name, bm, pdl in seen if name == "gemm1"]
    assert g1 == [(32, 1), (16, 5 if early else 1)] and [p for n, _, p in seen if n == "gemm2"] == [5, 5]
    assert prep.tail_groupings(32, 16)[0].num_blocks > 0 if early else prep.tail_groupings(32, 16)[0].num_blocks == 0


@pytest.mark.skipif(not bundled_tools("ptxas", "cuobjdump"), reason="triton with its bundled CUDA tools is not "
                    "installed")
def test_gemm1_triggers_first_and_waits_last_gemm2_waits_first():
    from fp4moe_diag.profiling.sass import _compile

    wait, trigger = "griddepcontrol.wait", "griddepcontrol.launch_dependents"
    for label in ("m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdlt", "m128n128k64w8s3-ps-g2n256-t64-pdlt"):
        g1 = _compile(parse_config(label), "gemm1", 2880, 90).asm["ptx"]
        assert g1.count(wait) == g1.count(trigger) == 1, label
        assert g1.index(trigger) < g1.index("ld.global") and g1.index(wait) > g1.rindex("st.global"), label
        g2 = _compile(parse_config(label), "gemm2", 2880, 90).asm["ptx"]  # gemm2 with pdl 5: as -pdl
        assert g2.count(wait) == 1 and g2.index(wait) < g2.index("ld.global") < g2.rindex("st.global"), label
