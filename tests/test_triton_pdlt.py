"""The ``-pdlt`` tactics (``pdl`` 5, :func:`fp4moe_diag.backends.triton.configs_tail.pdlt_twins`): gemm1's tail launch
of a ``-tN`` tactic runs its blocks before its grid-dependency wait and waits last; the ``-pdltt`` ones (``pdl`` 6,
:func:`~fp4moe_diag.backends.triton.configs_tail.pdltt_twins`): gemm2's tail launch too.  Host side: labels, refusals, where
they are offered, the pdl each launch of a call gets; sm_90a build (CPU, Triton's bundled ptxas): where the wait and
the trigger stand; the interpreter runs them (no grid dependencies there) in ``tests/test_triton_tail.py``."""

from __future__ import annotations

import types

import pytest

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton import backend
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_tail import PS_TAIL_PDL_CONFIGS, launch_pdl, pdlt_twins, pdltt_twins
from fp4moe_diag.problem.shapes import default_case
from interpreter import bundled_tools


def test_labels_round_trip_and_refusals():
    kc = parse_config("m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdlt")
    assert (kc.pdl, kc.tail_m, kc.gate_up, kc.tile_major) == (5, 64, True, True)
    assert kc.label == "m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdlt" and kc.params()["pdl"] == 5
    assert [c.label for c in pdlt_twins(PS_TAIL_PDL_CONFIGS)] == [c.label + "t" for c in PS_TAIL_PDL_CONFIGS]
    assert pdlt_twins((parse_config("m128n128k64w8s3-ps-g2n256-t64"), parse_config("m16n64k128w4s3-ps-pdl"))) == ()
    kc = parse_config("m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdltt")
    assert (kc.pdl, kc.tail_m) == (6, 64) and kc.label == "m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdltt"
    assert [c.label for c in pdltt_twins(PS_TAIL_PDL_CONFIGS)] == [c.label + "tt" for c in PS_TAIL_PDL_CONFIGS]
    assert pdltt_twins(pdlt_twins(PS_TAIL_PDL_CONFIGS)) == ()  # twins of the -pdl tactics only
    for suffix in ("-pdlt", "-pdltt"):
        with pytest.raises(ValueError, match=r"^tactic: -pdlt / -pdltt .* need tail blocks \(-tN\); got "
                                             r"'m128n128k64w16s3"):
            parse_config("m128n128k64w16s3-ps-gu-g2n256" + suffix)
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
        for pdl, suffix in ((5, "t"), (6, "tt")):
            late = [c for c in ids if c.pdl == pdl]
            assert len(late) == 7 and all(c.tail_m for c in late)  # 7: the 16-warp tile's -t32 (session 33)
            assert {c.label.removesuffix(suffix) for c in late} <= {c.label for c in ids if c.pdl == 1}  # beside -pdl
            assert {f"m128n128k64w16s3-ps-gu-tm-g2n256-t{n}-pdl{suffix}" for n in (64, 32)} <= {c.label for c in late}
    assert not any(x.id.pdl >= 5 for x in b.tactics(default_case("gpt-oss-20b", 1, 64)))  # decode: none
    _gpu(monkeypatch, False)  # the interpreter: no grid dependencies, none offered
    assert not any(x.id.pdl >= 5 for x in b.tactics(default_case("gpt-oss-20b", 2, 4096)))


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
        assert {lab + "t" for lab in pdl_tails} | {lab + "tt" for lab in pdl_tails} <= {
            lab for lab in labels if prefill.match(lab)}


def test_launch_pdl_gives_5_to_the_tail_launches_each_mode_runs_early():
    for gemm, tail, after, pdlt, pdltt in (("gemm1", True, True, 5, 5), ("gemm2", True, True, 1, 5),
                                           ("gemm1", False, True, 1, 1), ("gemm2", False, True, 1, 1),
                                           ("gemm1", True, False, 1, 1), ("gemm2", True, False, 1, 1)):
        assert (launch_pdl(5, gemm, tail, after), launch_pdl(6, gemm, tail, after)) == (pdlt, pdltt), (gemm, tail)
    assert [launch_pdl(p, "gemm2", True, True) for p in (0, 1, 2, 3, 4)] == [0, 1, 2, 3, 4]  # the other modes: as is
    with pytest.raises(ValueError, match="^gemm: expected 'gemm1' or 'gemm2', got 'gemm3'"):
        launch_pdl(5, "gemm3", True, True)


@pytest.mark.parametrize("tokens, early", [(64, True), (8, False)])
@pytest.mark.parametrize("suffix", ["-pdlt", "-pdltt"])
def test_only_the_tail_launches_get_pdl_5_and_only_behind_a_main_launch(monkeypatch, tokens, early, suffix):
    """64 tokens x top 2 over 4 experts: blocks of 32 and tails of 16 both launch, gemm1's tail with pdl 5, and under
    -pdltt gemm2's too (the other launches 1); 8 tokens: no expert fills a block of 32, the tail launches are the
    first of their GEMM in the call and keep pdl 1 (nothing before them to end after)."""
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
    label = "m32n64k128w4s1-ps-g2n128-t16" + suffix
    b.calls(prep, Tactic(id=label, label=label))
    g1 = [(bm, pdl) for name, bm, pdl in seen if name == "gemm1"]
    g2 = [(bm, pdl) for name, bm, pdl in seen if name == "gemm2"]
    assert g1 == [(32, 1), (16, 5 if early else 1)]
    assert g2 == [(32, 1), (16, 5 if early and suffix == "-pdltt" else 1)]
    assert prep.tail_groupings(32, 16)[0].num_blocks > 0 if early else prep.tail_groupings(32, 16)[0].num_blocks == 0


@pytest.mark.skipif(not bundled_tools("ptxas", "cuobjdump"), reason="triton with its bundled CUDA tools is not "
                    "installed")
def test_the_early_tail_builds_trigger_first_and_wait_last():
    """The tail launch's build (profiling.sass): gemm1's under -pdlt and -pdltt, gemm2's under -pdltt trigger before
    any global load and wait after the last store; gemm2's under -pdlt waits first, as -pdl.  The early gemm2 reads
    its 16-byte activation chunks past L1 (cp.async.cg; only 4-byte scale words go through L1)."""
    import re

    from fp4moe_diag.profiling.sass import _compile

    wait, trigger = "griddepcontrol.wait", "griddepcontrol.launch_dependents"
    for tile in ("m128n128k64w16s3-ps-gu-tm-g2n256-t64", "m128n128k64w8s3-ps-g2n256-t64"):
        for suffix in ("-pdlt", "-pdltt"):
            label = tile + suffix
            for gemm in ("gemm1", "gemm2"):
                ptx = _compile(parse_config(label), gemm, 2880, 90).asm["ptx"]
                assert ptx.count(wait) == ptx.count(trigger) == 1, (label, gemm)
                if gemm == "gemm1" or suffix == "-pdltt":
                    assert ptx.index(trigger) < ptx.index("ld.global"), (label, gemm)
                    assert ptx.index(wait) > ptx.rindex("st.global"), (label, gemm)
                else:
                    assert ptx.index(wait) < ptx.index("ld.global") < ptx.rindex("st.global"), label
            copies = re.findall(r"cp\.async\.(\w+)\.shared\.global \[[^]]*\], \[[^]]*\], (\w+)", ptx)
            assert copies and all(mod == "cg" for mod, size in copies if size == "0x10"), (label, set(copies))
