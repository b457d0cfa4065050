"""The ``-tNf`` tactics (session 34, :mod:`fp4moe_diag.backends.triton._kernels_over`): an expert's last ``r <= N``
pairs ride in the program of its last block of ``block_m``, a second dot on the same upcast weight tile, one launch
per GEMM with those blocks first.  Host side: labels and refusals, the grouping (hand-checked, and its blocks at the
gpt-oss routings), the launchers' argument checks; interpreter (CPU): against the float32 reference and the same
tile without tails (uneven K, EP offsets, no bias); sm_90a builds of the offered tile."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_tail import pdlt_twins, pdltt_twins
from fp4moe_diag.backends.triton.grouping import fused_tail_grouping, overflow_groupings
from interpreter import HAS_TRITON, interpreter_fixture, needs_sass_tools

TOL = 1e-2  # relative L2 against the fp32 reference, as tests/test_triton_tail.py
SAME = 1e-5  # against the same tile without tails


def test_labels_round_trip_and_refusals():
    kc = parse_config("m128n128k64w16s3-ps-gu-tm-g2n256-t32f-pdl")
    assert (kc.tail_m, kc.tail_fused, kc.tile_major, kc.pdl, kc.label) == (
        32, True, True, 1, "m128n128k64w16s3-ps-gu-tm-g2n256-t32f-pdl")
    assert kc.params()["tail_fused"] is True and "tail_fused" not in parse_config("m128n128k64w16s3-ps-gu-t32").params()
    for bad, why in (("m128n128k64w16s3-ps-g2n256-t32f", "-gu"), ("m64n128k64w4s3-ps-gu-t32f", "8 or 16 warps"),
                     ("m128n128k64w16s3-ps-gu-t32f-pt", "-pt")):
        with pytest.raises(ValueError, match=why):
            parse_config(bad)
    with pytest.raises(ValueError, match="needs -tN"):
        KernelConfig(128, 128, 64, 16, 3, "ps", gate_up=True, tail_fused=True)
    pdl = (parse_config("m128n128k64w16s3-ps-gu-g2n256-t32f-pdl"),)
    assert pdlt_twins(pdl) == () and pdltt_twins(pdl) == ()  # one launch per GEMM: no tail launch to start early


def test_the_grouping_hand_checked():
    # expert 0: pairs 0 2 4 6 8 (5: a block of 4 and 1 over); expert 1: 1 3 9 10 (4: one block); expert 2: 5 11
    ids = torch.tensor([[0, 1], [0, 1], [0, 2], [0, -1], [0, 1], [1, 2]], dtype=torch.int32)
    main, over = overflow_groupings(ids, 3, 4, 2)
    assert main.sorted_pair_ids.tolist() == [1, 3, 9, 10, 5, 11, 12, 12] and main.block_expert_ids.tolist() == [1, 2]
    assert over.sorted_pair_ids.tolist() == [0, 2, 4, 6, 8, 12] and over.block_expert_ids.tolist() == [0]
    assert (over.block_m, over.num_valid_pairs, main.num_valid_pairs) == (6, 5, 6)
    g, n_over = fused_tail_grouping(ids, 3, 4, 2)
    assert n_over == 1 and g.block_m == 4 and g.block_expert_ids.tolist() == [0, 1, 2]
    assert g.sorted_pair_ids.tolist() == [0, 2, 4, 6, 8, 12, 1, 3, 9, 10, 5, 11, 12, 12]
    assert g.num_valid_pairs == 11 and g.expert_counts.tolist() == [5, 4, 2]
    with pytest.raises(ValueError, match="over_m"):
        overflow_groupings(ids, 3, 4, 4)


@pytest.mark.parametrize("model, ep, tokens, blocks, n_over, padded", [
    ("gpt-oss-120b", 4, 4096, 32, 16, 1.113), ("gpt-oss-20b", 1, 1024, 32, 17, 1.133),
    ("gpt-oss-20b", 2, 1024, 16, 10, 1.161), ("gpt-oss-20b", 1, 4096, 129, 15, 1.037),
    ("gpt-oss-20b", 2, 4096, 64, 5, 1.029), ("gpt-oss-20b", 1, 16384, 517, 12, 1.016),
])
def test_the_blocks_at_the_gpt_oss_routings(model: str, ep: int, tokens: int, blocks: int, n_over: int,
                                            padded: float):
    """One launch's blocks and those with a tail (128 + 32 entries) at the cases' own routings, and the entries per
    routed pair (the -t32 tile's main and tail launches at 120b EP4 T=4096: 0.989 + 0.124, tests/test_triton_tail)."""
    from fp4moe_diag.problem.inputs import case_routing, local_expert_ids
    from fp4moe_diag.problem.shapes import default_case

    case = default_case(model, ep, tokens)
    ids = local_expert_ids(case_routing(case)[0], case)
    g, n = fused_tail_grouping(ids, case.local_num_experts, 128, 32)
    assert g.num_valid_pairs == int((ids >= 0).sum())
    assert (g.num_blocks, n, round(g.num_padded_pairs / g.num_valid_pairs, 3)) == (blocks, n_over, padded)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_the_launchers_refuse_a_grouping_of_another_shape():
    from fp4moe_diag.backends.triton.launch_over import gemm2_over_calls

    ids, experts = torch.zeros(6, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    w, ws = torch.zeros(1, 4, 1, 512, dtype=torch.uint8), torch.zeros(1, 4, 1, 32, dtype=torch.uint8)
    a, tw, out = torch.zeros(2, 64, dtype=torch.bfloat16), torch.zeros(2), torch.zeros(2, 64)
    args = (a, w, ws, None, tw, out, ids, experts, 2)
    with pytest.raises(ValueError, match="sorted_pair_ids: expected 1 blocks of 32 \\+ 16 entries"):
        gemm2_over_calls(*args, 32, 16, 1, 64, 64, 8, 1)
    with pytest.raises(ValueError, match="n_over: expected an int in 0..1"):
        gemm2_over_calls(*args, 32, 16, 2, 64, 64, 8, 1)
    with pytest.raises(ValueError, match="over_m: expected fewer rows than block_m=32"):
        gemm2_over_calls(*args, 32, 32, 1, 64, 64, 8, 1)
    with pytest.raises(ValueError, match="chunk dots"):
        gemm2_over_calls(*args, 32, 16, 1, 64, 128, 4, 1)


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
# 64 tokens x top 2 over 4 experts (~32 pairs each): blocks of 32 with tails of 16 put some experts' tails in their
# last block; K = 192 / 320 in steps of 128 (-k128: uneven K in both GEMMs)
base = dict(num_tokens=64, hidden_size=192, intermediate_size=320, num_experts=4, top_k=2)
cases = {"oai_bias": {}, "ep_offset": dict(num_tokens=160, num_experts=8, local_num_experts=4, local_expert_offset=4),
         "swiglu_nobias": dict(activation="swiglu", has_bias=False)}
labels = {"m32n64k64w8s1-ps-gu-t16f": "m32n64k64w8s1-ps-gu", "m32n64k128w8s1-ps-gu-t16f": "m32n64k128w8s1-ps-gu",
          "m32n64k64w8s1-ps-gu-tm-t16f": "m32n64k64w8s1-ps-gu"}
out = {}
for name, kw in cases.items():
    inp = build_inputs(MoECase(**{**base, **kw}))
    ref, prep = reference_moe(inp), b.prepare(inp)
    g, n_over = prep.fused_tail_grouping(32, 16)
    out[f"{name}/blocks"] = [g.num_blocks, n_over, g.num_valid_pairs, prep.grouping(32).num_valid_pairs]
    for lab, plain in labels.items():
        if name != "oai_bias" and "-tm" in lab:
            continue
        y, y0 = (b.run(prep, Tactic(id=t, label=t)) for t in (lab, plain))
        out[f"{name}/{lab}"] = float((y.float() - ref).norm() / ref.norm())
        out[f"{name}/{lab}/vs_plain"] = float((y.float() - y0.float()).norm() / y0.float().norm())
"""

interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name", ["oai_bias", "ep_offset", "swiglu_nobias"])
def test_the_tactics_match_the_reference_and_the_same_tile_without_tails(interp_results: dict, name: str):
    assert interp_results["interpreted"] is True
    blocks, n_over, n_fused, n_all = interp_results[f"{name}/blocks"]
    assert 0 < n_over < blocks and n_fused == n_all  # both kinds of block run; every pair in one of them
    for lab in ("m32n64k64w8s1-ps-gu-t16f", "m32n64k128w8s1-ps-gu-t16f") + (
            ("m32n64k64w8s1-ps-gu-tm-t16f",) if name == "oai_bias" else ()):
        assert 0 < interp_results[f"{name}/{lab}"] < TOL, (lab, interp_results[f"{name}/{lab}"])
        assert interp_results[f"{name}/{lab}/vs_plain"] < SAME, (lab, interp_results[f"{name}/{lab}/vs_plain"])


@needs_sass_tools()
@pytest.mark.parametrize("gemm", ["gemm1", "gemm2"])
def test_the_offered_tile_builds_for_sm90a_with_two_k_loops(gemm: str):
    """sm_90a, K = 3072, the installed Triton and the ptxas the backend builds these kernels with (assembler: 3.6,
    3.7: Triton's 12.8; 3.9.0: its 12.9, not the 13.4 it calls for sm_90): 128 registers, one program of 16 warps an
    SM, two K loops (8 wgmma a step with the tail's dot, 4 without); spills: none in the one-dot loop, at most 2 in the
    other (Triton 3.6.0: gemm2 2; 3.7.1: 2 each; 3.9.0 by 12.9: 2 each).  The wgmma waits follow the ptxas, not the
    release: with ptxas 12.8-13.2 some groups stay in flight (3.6.0: at most 7 and 3; 3.7.1 and 3.9.0: 3 and 1); from
    13.3 both loops wait for every wgmma (0), ptxas' advisory C7512 "serialized due to insufficient register
    resources": what made both -tNf kernels 1.20-1.27x slower under 3.9.0 than under 3.6.0 on the H100 (-s36a)."""
    from fp4moe_diag.backends.triton.defaults import SERIALISING_PTXAS
    from fp4moe_diag.profiling.sass_over import summary
    from fp4moe_diag.release import release_tuple

    s = summary("m128n128k64w16s3-ps-gu-g2n256-t32f-pdl", gemm)
    assert (s["registers"], s["resident_programs"]) == (128, 1)
    assert [lp["wgmma"] for lp in s["loops"]] == [8, 4]
    assert s["loops"][0]["spills"] <= 2 and s["loops"][1]["spills"] == 0
    assert s["loops"][0]["instructions"] > s["loops"][1]["instructions"]
    waits = [lp["waits"] for lp in s["loops"]]
    serialised = [a for a in s["advisories"] if a.startswith("C7512: wgmma.mma_async instructions are serialized due "
                                                               "to insufficient register resources")]
    if release_tuple(s["ptxas"], 2) >= SERIALISING_PTXAS:  # (13, 3): the threshold the defaults use
        assert waits == [[0], [0]] and serialised, (s["ptxas"], s["advisories"])
    else:
        assert all(w and min(w) >= 1 for w in waits) and not serialised, (s["ptxas"], waits, s["advisories"])


@needs_sass_tools()
def test_an_older_ptxas_under_the_installed_triton_keeps_wgmma_groups_in_flight(tmp_path):
    """The same Triton's PTX assembled by the ptxas its wheel ships for targets below sm_90 (12.9 in 3.9.0; 12.8 in
    3.6.0, which calls it for sm_90 too), through ``sass_over --ptxas`` in a child process: gemm2's two K loops keep
    groups in flight (3 and 1 under 3.9.0), so under 3.9 the wait of 0 is the assembler's, not Triton's IR."""
    import json
    import os
    import subprocess
    import sys

    from fp4moe_diag.profiling.sass import bundled_tool

    ptxas = bundled_tool("ptxas")
    out = subprocess.run([sys.executable, "-m", "fp4moe_diag.profiling.sass_over", "--tactic",
                          "m128n128k64w16s3-ps-gu-g2n256-t32f-pdl", "--gemm", "gemm2", "--ptxas", ptxas],
                         capture_output=True, text=True, timeout=600, env=os.environ | {"TRITON_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    s = json.loads(out.stdout)
    assert s["ptxas"].startswith("12.") and [lp["wgmma"] for lp in s["loops"]] == [8, 4]
    waits = [lp["waits"] for lp in s["loops"]]
    assert all(w and min(w) >= 1 for w in waits) and not s["advisories"], (s["ptxas"], waits, s["advisories"])


@needs_sass_tools()
@pytest.mark.parametrize("gemm", ["gemm1", "gemm2"])
def test_the_64_token_tile_keeps_groups_in_flight_under_every_ptxas(gemm: str):
    """Session 37's m64 twin of the offered -t32f tile: half the accumulator, so every ptxas (13.4 too) keeps wgmma
    groups in flight without an advisory, one program of 16 warps an SM (3.9.0: 128 registers, 3.6.0: 110 in gemm1);
    no spill in the one-dot loop, at most 2 in the other (3.9.0's gemm2 as the backend builds it, by its 12.9)."""
    from fp4moe_diag.profiling.sass_over import summary

    s = summary("m64n128k64w16s3-ps-gu-g2n256-t32f-pdl", gemm)
    assert s["registers"] <= 128 and (s["resident_programs"], s["advisories"]) == (1, []), s
    assert [lp["wgmma"] for lp in s["loops"]] == [8, 4] and s["loops"][0]["spills"] <= 2 and s["loops"][1]["spills"] == 0
    assert all(lp["waits"] and min(lp["waits"]) >= 1 for lp in s["loops"]), (s["ptxas"], s["loops"])


def test_the_tools_refuse_or_route_a_tnf_label_before_any_build():
    """profiling.sass counts one K loop per kernel: it refuses a -tNf label; profiling.sass_over takes it and refuses
    any other (CLI: one line, exit 2)."""
    from fp4moe_diag.profiling import sass, sass_over

    label = "m128n128k64w16s3-ps-gu-g2n256-t32f-pdl"
    with pytest.raises(ValueError, match="profiling.sass_over"):
        sass.count(label, "gemm1")
    with pytest.raises(ValueError, match="expected a -tNf label"):
        sass_over.compile_over("m128n128k64w16s3-ps-gu-g2n256-t32", "gemm1")
    with pytest.raises(ValueError, match="k: expected a multiple of 64"):
        sass_over.compile_over(label, "gemm1", 96)
    with pytest.raises(SystemExit) as e:
        sass_over.main(["--tactic", "m128n128k64w16s3-ps-gu-g2n256-t32"])
    assert e.value.code == 2


@needs_sass_tools()
def test_waves_counts_both_kinds_of_program_of_one_launch():
    """profiling.waves on a -tNf tactic: per GEMM a row for the blocks with a tail (BLOCK_M + N entries, the two-dot
    loop) and one for the plain blocks, their programs those of fused_tail_grouping (hand-counted from the routing),
    their waves the whole launch's."""
    from fp4moe_diag import MoECase
    from fp4moe_diag.problem.inputs import case_routing, local_expert_ids
    from fp4moe_diag.profiling.waves import launch_waves

    case = MoECase(num_tokens=300, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2)
    plan = launch_waves(case, "m128n128k64w16s3-ps-gu-g2n256-t32f-pdl", sms=10)
    assert [w.kernel for w in plan] == ["gemm1 long", "gemm1 plain", "gemm2 long", "gemm2 plain"]
    assert [w.block_m for w in plan] == [160, 128, 160, 128]
    ids = local_expert_ids(case_routing(case)[0], case)
    counts = torch.bincount(ids[ids >= 0].flatten(), minlength=4).tolist()
    long = sum(n > 128 and 0 < n % 128 <= 32 for n in counts)
    plain = sum(n // 128 - (n > 128 and 0 < n % 128 <= 32) + (n % 128 > 32 or (n < 128 and n > 0)) for n in counts)
    assert long > 0 and plain > 0, counts  # the seed's routing has both kinds (150 pairs an expert on average)
    g1 = 2  # gemm1: I = 256 in 128-column tiles; gemm2: H = 256 in one 256-row tile
    assert [w.programs for w in plan] == [long * g1, plain * g1, long, plain]
    assert plan[0].launch_programs == plan[1].launch_programs == (long + plain) * g1
    assert plan[0].waves == plan[1].waves == pytest.approx((long + plain) * g1 / (plan[0].per_sm * 10))
    assert plan[0].loop_instructions > plan[1].loop_instructions  # the two-dot loop is the longer
    assert plan[0].step_flops == 2 * 160 * 256 * 64 and plan[3].step_flops == 2 * 128 * 256 * 64
