"""The ``-uN`` tactics (:mod:`fp4moe_diag.backends.triton.configs_unroll`): the 16-warp ``-gu`` prefill tiles with
both K loops unrolled.  Host side: labels, checks, where they are offered; sm_90a build (CPU, Triton's bundled ptxas):
a quarter fewer loop instructions per weight, no spill; interpreter (CPU): against the float32 reference and, bit for
bit, against the same tile not unrolled (odd and even K step counts, EP offsets, 64-row tails, -tm, -pdl)."""

from __future__ import annotations

import pytest

from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_unroll import PS_GU16_U2_CONFIGS, PS_GU16_U2_PDL_CONFIGS
from interpreter import HAS_TRITON, interpreter_fixture, needs_sass_tools

TOL = 1e-2  # relative L2 against the fp32 reference, as tests/test_triton_backend.py


def test_labels_round_trip_and_bad_unrolls_are_refused():
    assert [c.label for c in PS_GU16_U2_CONFIGS] == ["m128n128k64w16s3-ps-gu-u2-g2n256",
                                                     "m128n128k64w16s3-ps-gu-tm-u2-g2n256",
                                                     "m128n128k64w16s3-ps-gu-tm-u2-g2n256-t64"]
    assert [c.label for c in PS_GU16_U2_PDL_CONFIGS] == [c.label + "-pdl" for c in PS_GU16_U2_CONFIGS]
    for c in PS_GU16_U2_CONFIGS + PS_GU16_U2_PDL_CONFIGS:
        assert parse_config(c.label) == c and c.unroll == 2 and c.params()["unroll"] == 2
    assert "unroll" not in parse_config("m128n128k64w16s3-ps-gu-g2n256").params()  # older rows' params unchanged
    for bad, why in (("m128n128k64w16s3-ps-u2-g2n256", "got 2 in 'm128n128k64w16s3-ps-u2-g2n256'"),  # not -gu
                     ("m128n128k64w16s3-ps-gu-u1-g2n256", "got 1 in"), ("m128n128k64w16s3-ps-gu-u9-g2n256", "got 9")):
        with pytest.raises(ValueError, match=f"^tactic: unroll .*{why}"):
            parse_config(bad)
    with pytest.raises(ValueError, match="unroll .* without an ablation"):
        KernelConfig(128, 128, 64, 16, 3, "ps", gate_up=True, unroll=2, ablate="nodeq")


def test_unroll_args_are_checked_before_a_launch():
    from fp4moe_diag.backends.triton import launch

    assert launch._unroll_args(0, True, False) == {} and launch._unroll_args(2, True) == {"UNROLL": 2}
    for kw in (dict(unroll=2, ps=True, gate_up=False), dict(unroll=2, ps=False), dict(unroll=True, ps=True),
               dict(unroll=1, ps=True)):
        with pytest.raises(ValueError, match="^unroll: 0 or an int from 2 to 8"):
            launch._unroll_args(**kw)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_measured_slower_so_run_by_label_only(monkeypatch):
    """Timed in session 28 (H100 ``-s28a``, ``twins --variant=-u2``: 36 pairs, 0 faster, median 1.058): not offered
    anywhere; at prefill every one runs by label (the -pdl ones compiled only), at decode none does."""
    from fp4moe_diag.backends.triton import backend
    from fp4moe_diag.problem.shapes import default_case

    b = backend.TritonMXFP4Backend()
    u2 = set(PS_GU16_U2_CONFIGS + PS_GU16_U2_PDL_CONFIGS)
    for compiled in (False, True):
        monkeypatch.setattr(backend, "interpret_enabled", lambda: not compiled)
        monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
        monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
        for model, ep, t in (("gpt-oss-20b", 2, 4096), ("gpt-oss-120b", 4, 4096), ("gpt-oss-20b", 1, 64)):
            case = default_case(model, ep, t)
            assert not any(x.id.unroll for x in b.tactics(case)), (compiled, case)
        case = default_case("gpt-oss-20b", 2, 4096)
        runnable = set(PS_GU16_U2_CONFIGS + (PS_GU16_U2_PDL_CONFIGS if compiled else ()))
        assert {c for c in backend.label_only_configs(case, compiled) if c.unroll} == runnable
        for c in u2:
            if c in runnable:
                assert b.tactic_by_label(case, c.label).id == c
            else:
                with pytest.raises(ValueError, match=f"has no tactic '{c.label}'"):
                    b.tactic_by_label(case, c.label)
        with pytest.raises(ValueError, match="has no tactic 'm128n128k64w16s3-ps-gu-u2-g2n256'"):
            b.tactic_by_label(default_case("gpt-oss-20b", 1, 64), PS_GU16_U2_CONFIGS[0].label)  # decode: none


@needs_sass_tools()
def test_unrolled_loops_take_a_quarter_fewer_instructions_per_weight_without_spills():
    """sm_90a at gpt-oss's K = 3072, the installed Triton (CI: 3.9.0 and the 3.6.0 leg): 3.6.0 4.08 / 4.11 against
    5.44 (gemm1 / gemm2 of the -tm tile), 3.9.0 4.33 / 4.38 against 5.72 / 5.50; 128 registers, 16 warps an SM."""
    from fp4moe_diag.profiling.sass import count

    for gemm in ("gemm1", "gemm2"):
        u2, one = (count(lab, gemm, 3072, 90) for lab in ("m128n128k64w16s3-ps-gu-tm-u2-g2n256",
                                                           "m128n128k64w16s3-ps-gu-tm-g2n256"))
        assert u2.weights_per_thread == 2 * one.weights_per_thread == 64  # an iteration takes two K steps
        assert u2.instructions_per_weight < 0.82 * one.instructions_per_weight, (gemm, u2, one)
        assert (u2.loop_spills, u2.registers, u2.resident_warps) == (0, 128, 16), (gemm, u2)
        assert u2.mma == "HGMMA" and u2.shared_bytes == 2 * one.shared_bytes  # each stage holds two K steps


_INTERP_SCRIPT = r"""
import json
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
out = {}


def compare(key, case_kw, labels):  # each -u2 label against the fp32 reference and its twin not unrolled
    inp = build_inputs(MoECase(**case_kw))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    for lab in labels:
        y = b.run(prep, Tactic(id=lab, label=lab)).float()
        twin = b.run(prep, Tactic(id=lab.replace("-u2", ""), label=lab.replace("-u2", ""))).float()
        out[f"{key}/{lab}"] = float((y - ref).norm() / ref.norm())
        out[f"{key}/{lab}/vs_twin"] = float((y - twin).norm() / twin.norm())


# 160 tokens x top 2 over 4 experts (~80 pairs each); H = 192, I = 320: 3 and 5 K steps of 64 (odd: one step after
# the unrolled pairs)
compare("odd", dict(num_tokens=160, hidden_size=192, intermediate_size=320, num_experts=4, top_k=2),
        ["m128n128k64w16s3-ps-gu-u2-g2n256", "m128n128k64w16s4-ps-gu-u2-g2n256-t64"])
# EP (top 4 of 8, 4 local: 320 pairs a rank) with whole -tm tiles (H = I = 256: 4 steps), 64-row tails, -pdl (the
# interpreter runs it without the grid dependency)
compare("ep_tm", dict(num_tokens=160, hidden_size=256, intermediate_size=256, num_experts=8, local_num_experts=4,
                      local_expert_offset=4, top_k=4),
        ["m128n128k64w16s3-ps-gu-tm-u2-g2n256-t64", "m128n128k64w16s3-ps-gu-tm-u2-g2n256-pdl"])
"""

interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("key,labels", [
    ("odd", ("m128n128k64w16s3-ps-gu-u2-g2n256", "m128n128k64w16s4-ps-gu-u2-g2n256-t64")),
    ("ep_tm", ("m128n128k64w16s3-ps-gu-tm-u2-g2n256-t64", "m128n128k64w16s3-ps-gu-tm-u2-g2n256-pdl"))])
def test_unrolled_tiles_match_the_reference_and_their_twins_bit_for_bit(interp_results: dict, key: str, labels):
    assert interp_results["interpreted"] is True
    for lab in labels:
        assert 0 < interp_results[f"{key}/{lab}"] < TOL, (lab, interp_results[f"{key}/{lab}"])
        assert interp_results[f"{key}/{lab}/vs_twin"] == 0.0, (lab, interp_results[f"{key}/{lab}/vs_twin"])
