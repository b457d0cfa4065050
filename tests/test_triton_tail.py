"""The tail-block tactics (``-tN``, :mod:`fp4moe_diag.backends.triton.configs_tail`): each expert's last ``n mod
block_m`` pairs, when 1..N, run as one block of N rows in a second gemm1 / gemm2 launch pair.  Host side: labels,
refusals, the pair split (hand-checked), the tactics offered; interpreter (CPU): the tactics against the float32
reference and against the same tile without tail blocks."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag import MoECase
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_tail import PS_TAIL_CONFIGS, PS_TAIL_PDL_CONFIGS, pdlt_twins, pdltt_twins

from fp4moe_diag.backends.triton.configs_warps import PS_GU16_CONFIGS, PS_GU16_PDL_CONFIGS
from fp4moe_diag.backends.triton.grouping import group_pairs_by_expert, split_tail_pairs, tail_groupings
from interpreter import HAS_TRITON, interpreter_fixture

TOL = 1e-2  # relative L2 against the fp32 reference, as tests/test_triton_backend.py
SAME = 1e-5  # against the same tile without tail blocks: the same products, other block shapes


def test_tail_labels_round_trip_and_refusals():
    kc = parse_config("m128n128k64w8s3-ps-g2n256-t64")
    assert kc == KernelConfig(128, 128, 64, 8, 3, "ps", block_n2=256, tail_m=64) and kc.params()["tail_m"] == 64
    assert parse_config("m256n64k64w8s3-ps-gu-g2n128-t128").label == "m256n64k64w8s3-ps-gu-g2n128-t128"
    assert "tail_m" not in parse_config("m128n128k64w8s3-ps-g2n256").params()
    assert parse_config("m64n128k64w8s4-ps-t32-pdl") == KernelConfig(64, 128, 64, 8, 4, "ps", tail_m=32, pdl=1)
    for bad in (dict(tail_m=128), dict(tail_m=48), dict(tail_m=8), dict(tail_m=64, split_k=2), dict(tail_m=64, pdl=2),
                dict(tail_m=64, fused=True), dict(tail_m=True)):
        with pytest.raises(ValueError, match="^tactic: tail_m"):
            KernelConfig(128, 128, 64, 8, 3, "ps", **bad)
    with pytest.raises(ValueError, match="^tactic: tail_m"):
        KernelConfig(128, 128, 64, 8, 3, "x2", tail_m=64)
    with pytest.raises(ValueError, match="^tactic: expected a label"):
        parse_config("m128n128k64w8s3-ps-t64-g2n256")  # -tN after -g2nN


def test_split_tail_pairs_hand_checked():
    # 4 experts, block 4, tails of 2; flat pair index = 2 token + slot.  Expert 0: pairs 0, 3, 6, 9, 12 (r 1: the last
    # to the tail); expert 1: 1, 5, 10 (r 3 > 2: all in blocks of 4); expert 2: 2, 7, 8, 14, 15 (r 1); expert 3: 4, 13
    # (r 2: both to the tail); pair 11 is another rank's (-1)
    ids = torch.tensor([[0, 1], [2, 0], [3, 1], [0, 2], [2, 0], [1, -1], [0, 3], [2, 2]], dtype=torch.int32)
    big, small = split_tail_pairs(ids, 4, 4, 2)
    assert big.dtype == torch.int32 and big.shape == ids.shape
    assert big.flatten().tolist() == [0, 1, 2, 0, -1, 1, 0, 2, 2, 0, 1, -1, -1, -1, 2, -1]
    assert small.flatten().tolist() == [-1] * 4 + [3] + [-1] * 7 + [0, 3, -1, 2]
    gb, gs = group_pairs_by_expert(big, 4, 4), group_pairs_by_expert(small, 4, 2)
    assert gb.block_expert_ids.tolist() == [0, 1, 2] and gs.block_expert_ids.tolist() == [0, 2, 3]
    assert gb.num_valid_pairs + gs.num_valid_pairs == int((ids >= 0).sum()) == 15
    assert gb.sorted_pair_ids.tolist() == [0, 3, 6, 9, 1, 5, 10, 16, 2, 7, 8, 14]
    assert gs.sorted_pair_ids.tolist() == [12, 16, 15, 16, 4, 13]  # 16 = T * k: padding
    for bad in (4, 0, 2.0):
        with pytest.raises(ValueError, match="^tail_m:"):
            split_tail_pairs(ids, 4, 4, bad)
    with pytest.raises(ValueError, match="^local_topk_ids:"):
        split_tail_pairs(ids.float(), 4, 4, 2)


def test_tail_tactics_offered_above_the_decode_sizes(monkeypatch):
    from fp4moe_diag.backends.triton import backend

    b = TritonMXFP4Backend()
    case = dict(hidden_size=192, intermediate_size=320, num_experts=4, top_k=2)
    assert not any(t.id.tail_m for t in b.tactics(MoECase(num_tokens=64, **case)))
    prefill = [t.id for t in b.tactics(MoECase(num_tokens=1024, **case)) if t.id.tail_m and not t.id.reg_cap]
    compiled = not (backend.interpret_enabled() or backend.kernels_interpreted())
    gu16 = [c for c in PS_GU16_CONFIGS if c.tail_m]  # the 16-warp -gu tile with 64-row tails (configs_warps)
    gu16_pdl = [c for c in PS_GU16_PDL_CONFIGS if c.tail_m]  # and its -pdl twin (session 25)
    pdl = list(PS_TAIL_PDL_CONFIGS) + gu16_pdl  # and, on a GPU, their -pdlt (session 28) and -pdltt twins (32)
    late = list(pdlt_twins(tuple(pdl)) + pdltt_twins(tuple(pdl)))
    assert prefill == gu16 + list(PS_TAIL_CONFIGS) + (pdl + late if compiled else [])
    assert [c.tail_m * 2 == c.block_m for c in PS_TAIL_CONFIGS] == [True] * 3
    assert [c.pdl for c in PS_TAIL_PDL_CONFIGS] == [1] * 3 and [c.label for c in PS_TAIL_PDL_CONFIGS][1] == \
        "m128n128k64w8s3-ps-g2n256-t64-pdl"
    monkeypatch.setattr(backend, "interpret_enabled", lambda: True)  # under the interpreter: no -pdl
    assert [t.id for t in b.tactics(MoECase(num_tokens=1024, **case)) if t.id.tail_m and not t.id.reg_cap] == gu16 + list(PS_TAIL_CONFIGS)


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
# 64 tokens x top 2 over 4 experts (~32 pairs each): blocks of 32 with tails of 16 split some experts, not others
base = dict(num_tokens=64, hidden_size=192, intermediate_size=320, num_experts=4, top_k=2)
cases = {"oai_bias": {}, "ep_offset": dict(num_experts=8, local_num_experts=4, local_expert_offset=4),
         "swiglu_nobias": dict(activation="swiglu", has_bias=False)}
labels = {"m32n64k64w8s1-ps-gu-t16": "m32n64k64w8s1-ps-gu", "m32n64k128w4s1-ps-g2n128-t16": "m32n64k128w4s1-ps-g2n128"}
PLAIN = labels["m32n64k128w4s1-ps-g2n128-t16"]  # -pdlt (session 28), -pdltt (32): no grid dependencies here, one case
LATE = {"m32n64k128w4s1-ps-g2n128-t16-pdlt": PLAIN, "m32n64k128w4s1-ps-g2n128-t16-pdltt": PLAIN}
out = {}
for name, kw in cases.items():
    inp = build_inputs(MoECase(**{**base, **kw}))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    big, small = prep.tail_groupings(32, 16)
    out[f"{name}/split"] = [big.num_blocks, small.num_blocks, big.num_valid_pairs + small.num_valid_pairs,
                            prep.grouping(32).num_valid_pairs]
    for lab, plain in (labels | (LATE if name == "oai_bias" else {})).items():
        y = b.run(prep, Tactic(id=lab, label=lab))
        y0 = b.run(prep, Tactic(id=plain, label=plain))
        out[f"{name}/{lab}"] = float((y.float() - ref).norm() / ref.norm())
        out[f"{name}/{lab}/vs_plain"] = float((y.float() - y0.float()).norm() / y0.float().norm())
# a tail a quarter of the block (session 33's -t32 of the 128-row tile): 128 tokens, ~64 pairs an expert, blocks of 64
inp = build_inputs(MoECase(**{**base, "num_tokens": 128}))
ref, prep = reference_moe(inp), b.prepare(inp)
big, small = prep.tail_groupings(64, 16)
out["quarter/split"] = [big.num_blocks, small.num_blocks, big.num_valid_pairs + small.num_valid_pairs,
                        prep.grouping(64).num_valid_pairs]
y, y0 = (b.run(prep, Tactic(id=lab, label=lab)) for lab in ("m64n64k64w16s1-ps-gu-t16", "m64n64k64w16s1-ps-gu"))
out["quarter/rel"] = float((y.float() - ref).norm() / ref.norm())
out["quarter/vs_plain"] = float((y.float() - y0.float()).norm() / y0.float().norm())
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name", ["oai_bias", "ep_offset", "swiglu_nobias"])
def test_tail_tactics_match_the_reference_and_the_same_tile_without_tails(interp_results: dict, name: str):
    assert interp_results["interpreted"] is True
    n_big, n_small, n_split, n_all = interp_results[f"{name}/split"]
    assert n_big > 0 and n_small > 0 and n_split == n_all  # both launch pairs run; every pair in one of them
    late = ("m32n64k128w4s1-ps-g2n128-t16-pdlt", "m32n64k128w4s1-ps-g2n128-t16-pdltt")
    for lab in ("m32n64k64w8s1-ps-gu-t16", "m32n64k128w4s1-ps-g2n128-t16") + (late if name == "oai_bias" else ()):
        assert 0 < interp_results[f"{name}/{lab}"] < TOL, (lab, interp_results[f"{name}/{lab}"])
        assert interp_results[f"{name}/{lab}/vs_plain"] < SAME, (lab, interp_results[f"{name}/{lab}/vs_plain"])


@pytest.mark.parametrize("model, ep, tokens, tail_m, main, tail", [
    ("gpt-oss-120b", 4, 4096, 64, 0.989, 0.247), ("gpt-oss-120b", 4, 4096, 32, 0.989, 0.124),
    ("gpt-oss-20b", 1, 1024, 64, 1.000, 0.266), ("gpt-oss-20b", 1, 1024, 32, 1.000, 0.133),
    ("gpt-oss-20b", 2, 1024, 64, 1.004, 0.314), ("gpt-oss-20b", 2, 1024, 32, 1.004, 0.157),
    ("gpt-oss-20b", 1, 4096, 64, 1.000, 0.062), ("gpt-oss-20b", 1, 4096, 32, 1.008, 0.029),
])
def test_tail_padding_at_the_gpt_oss_routings(model: str, ep: int, tokens: int, tail_m: int, main: float, tail: float):
    """configs_tail's docstring (session 33): padded rows per routed pair of the 128-row tile's main and tail launches
    at the cases' own routings, 64- against 32-row tails."""
    from fp4moe_diag.problem.inputs import case_routing, local_expert_ids
    from fp4moe_diag.problem.shapes import default_case

    case = default_case(model, ep, tokens)
    ids = local_expert_ids(case_routing(case)[0], case)
    gb, gs = tail_groupings(ids, case.local_num_experts, 128, tail_m)
    n = gb.num_valid_pairs + gs.num_valid_pairs
    assert n == int((ids >= 0).sum())
    assert (round(gb.num_padded_pairs / n, 3), round(gs.num_padded_pairs / n, 3)) == (main, tail)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_a_tail_a_quarter_of_the_block_matches_the_reference_and_the_same_tile(interp_results: dict):
    """Tails a quarter of BLOCK_M (as -t32 of the 128-row 16-warp tile, session 33), 16 warps, -gu."""
    n_big, n_small, n_split, n_all = interp_results["quarter/split"]
    assert n_big > 0 and n_small > 0 and n_split == n_all
    assert 0 < interp_results["quarter/rel"] < TOL
    assert interp_results["quarter/vs_plain"] < SAME
