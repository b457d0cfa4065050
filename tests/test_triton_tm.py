"""The ``-tm`` tactics (:mod:`fp4moe_diag.backends.triton.configs_tm`): the ps kernels reading a copy of the weights
stored tile by tile (:func:`fp4moe_diag.backends.triton.ps_layout.tile_major`).  Host side: the copy (every tile the
ps tile's bytes, K padded with zeros), labels, where they are offered and refused; sm_90a build (CPU, Triton's bundled
ptxas): the ps loop's loads and no spills; interpreter (CPU): bit-identical to the ps twin and against the float32
reference (uneven K, EP offsets, split-K, -fs, -gu with one dot per chunk)."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag import MoECase
from fp4moe_diag.backends.triton import ps_layout
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_tm import PS_TM_DECODE_CONFIGS, PS_TM_PREFILL_CONFIGS, tm_refusal
from interpreter import interpreter_fixture, needs_sass_tools

TOL = 1e-2  # relative L2 against the fp32 reference, as tests/test_triton_backend.py
GPT = dict(hidden_size=3072, intermediate_size=3072, num_experts=32, top_k=4)


def test_the_copy_holds_each_ps_tile_contiguously_and_pads_k_with_zeros():
    g = torch.Generator().manual_seed(0)
    ps = torch.randint(0, 256, (2, 8, 5, 512), dtype=torch.uint8, generator=g)  # 8 slabs, 5 chunks
    tm = ps_layout.tile_major(ps, 4, 2, "w")  # tiles of 4 slabs by 2 chunks: K padded to 6 chunks
    assert tm.shape == (2, 8, 6, 512) and tm.stride(1) == 6 * 512
    flat = tm.view(2, -1)
    for e in range(2):
        for b in range(2):  # slab blocks
            for k in range(3):  # tiles along K
                start = b * 4 * 6 * 512 + k * 4 * 2 * 512  # slab0 x stride(1) + chunk0 x S x 512
                tile = flat[e, start:start + 4 * 2 * 512].view(4, 2, 512)
                want = torch.zeros(4, 2, 512, dtype=torch.uint8)
                got_chunks = ps[e, 4 * b:4 * b + 4, 2 * k:min(2 * k + 2, 5)]
                want[:, :got_chunks.shape[1]] = got_chunks
                assert torch.equal(tile, want), (e, b, k)
    with pytest.raises(ValueError, match="whole tiles of 3 slabs; the matrix has 8 slabs"):
        ps_layout.tile_major(ps, 3, 2, "w")
    with pytest.raises(ValueError, match="expected uint8"):
        ps_layout.tile_major(ps.float(), 4, 2, "w")


def test_labels_offers_and_refusals():
    kc = parse_config("m128n128k64w16s3-ps-gu-tm-g2n256-t64")
    assert (kc.tile_major, kc.gate_up, kc.tail_m, kc.label) == (True, True, 64, "m128n128k64w16s3-ps-gu-tm-g2n256-t64")
    assert parse_config("m16n128k128w4s3-ps-tm-g2sk2-pdl").params()["tile_major"] is True
    with pytest.raises(ValueError, match="tile_major \\(-tm\\) is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", tile_major=True)
    assert parse_config("m16n128k128w4s3-ps-tm~nodeq").tile_major  # the decode taken out of the -tm loop
    for ab in ("load", "seq"):  # their loads would take the ps addresses in the tile-major copy
        with pytest.raises(ValueError, match=f"~{ab} reads the ps layout's tiles, not the tile-major copy"):
            parse_config(f"m16n128k128w4s3-ps-tm~{ab}")
    b = TritonMXFP4Backend()
    decode = {t.label for t in b.tactics(MoECase(num_tokens=64, **GPT))}
    prefill = {t.label for t in b.tactics(MoECase(num_tokens=4096, **GPT))}
    assert {c.label for c in PS_TM_DECODE_CONFIGS} <= decode and not {c.label for c in PS_TM_PREFILL_CONFIGS} & decode
    assert {c.label for c in PS_TM_PREFILL_CONFIGS} <= prefill
    odd = MoECase(num_tokens=64, hidden_size=3072, intermediate_size=2880, num_experts=32, top_k=4)  # 180 slabs
    assert "I / 16 = 180 slabs in tiles of 8" in tm_refusal(odd, parse_config("m16n128k128w4s3-ps-tm"))
    assert "m16n128k128w4s3-ps-tm" not in {t.label for t in b.tactics(odd)}
    assert tm_refusal(odd, parse_config("m16n64k256w4s3-ps-tm-sk2")) is None  # 180 = 45 tiles of 4


@needs_sass_tools()
@pytest.mark.parametrize("tactic", ["m16n128k128w4s3-ps-g2sk2", "m128n128k64w16s3-ps-gu-g2n256"])
def test_sm90_loop_is_the_ps_loop_but_for_its_addresses(tactic):
    from fp4moe_diag.profiling.sass import count

    tm = tactic.replace("-ps-gu", "-ps-gu-tm") if "-gu" in tactic else tactic.replace("-ps", "-ps-tm")
    for gemm in ("gemm1", "gemm2"):
        a, b = count(tactic, gemm, 3072, 90), count(tm, gemm, 3072, 90)
        for op in ("LDGSTS", "LDS", "HGMMA", "HMUL2"):
            assert a.opcodes.get(op, 0) == b.opcodes.get(op, 0), (gemm, op, a.opcodes, b.opcodes)
        assert b.loop_spills == 0 and b.instructions_per_weight <= a.instructions_per_weight, (gemm, a, b)


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
out = {}
for key, kw, labels in (
        # decode, EP offsets, uneven K (H = 384: 6 chunks in tiles of 4, padded; I = 320: 5), split-K, -fs
        ("decode", dict(num_tokens=8, hidden_size=384, intermediate_size=320, num_experts=8, local_num_experts=4,
                        local_expert_offset=4, top_k=2), ("m16n64k256w4s3-ps-sk2", "m16n64k256w4s3-ps-sk2-fs")),
        ("decode128", dict(num_tokens=8, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2),
         ("m16n128k128w4s3-ps", "m16n128k128w4s3-ps-g2sk2")),
        # prefill-sized -gu tiles: one dot per K step, and one per chunk (4 warps, BLOCK_K 128)
        ("gu", dict(num_tokens=160, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2),
         ("m128n128k64w8s3-ps-gu-g2n256", "m64n128k128w4s3-ps-gu"))):
    inp = build_inputs(MoECase(**kw))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    for lab in labels:
        tm = lab.replace("-ps-gu", "-ps-gu-tm") if "-gu" in lab else lab.replace("-ps", "-ps-tm")
        y0 = b.run(prep, Tactic(id=lab, label=lab)).float()
        y = b.run(prep, Tactic(id=tm, label=tm)).float()
        out[f"{key}/{tm}"] = [float((y - ref).norm() / ref.norm()), float((y - y0).abs().max())]
"""
interp_results = interpreter_fixture(_INTERP_SCRIPT)


def test_interpreter_bit_identical_to_the_ps_twin_and_within_tolerance(interp_results):
    assert interp_results["interpreted"]
    keys = [k for k in interp_results if "-tm" in k]
    assert len(keys) == 6
    for k in keys:
        rel, diff = interp_results[k]
        assert rel < TOL and diff == 0.0, (k, rel, diff)


def test_the_headline_plan_sweeps_the_tm_twins():
    """tools/device/plans/headline.sh's decode / prefill filters of backend triton take the -tm twin of every ps
    tactic they take (offered at the goal shapes as compiled on a GPU): the next headline call times them side by side."""
    from plans import headline_triton_filters

    decode, prefill = headline_triton_filters()
    b = TritonMXFP4Backend()
    for t, rx in ((64, decode), (4096, prefill)):
        tm = [x.label for x in b.tactics(MoECase(num_tokens=t, **GPT)) if x.id.tile_major]
        twins = [lab for lab in tm if rx.match(lab.replace("-tm", ""))]
        assert len(twins) >= 3 and [lab for lab in twins if not rx.match(lab)] == [], (t, tm)
