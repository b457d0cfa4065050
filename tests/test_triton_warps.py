"""The tactics with more warps per scheduler (:mod:`fp4moe_diag.backends.triton.configs_warps`): 8-warp decode tiles,
16-warp gate/up prefill tiles.  Host side: labels, where they are offered; sm_90a build (CPU, Triton's bundled ptxas):
no spills in the K loop, fewer registers per thread, more warps resident; interpreter (CPU): against the float32
reference (uneven K, EP offsets, split-K, tails) and against the same tile with fewer warps (the interpreter runs the
same products in the same order whatever the warp count)."""

from __future__ import annotations

import pytest

from fp4moe_diag import MoECase
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_warps import (PS_DECODE8_CONFIGS, PS_DECODE8_PDL_CONFIGS, PS_GU16_CONFIGS,
                                                      PS_GU16_K128_CONFIGS, PS_GU16_K128_PDL_CONFIGS)
from interpreter import HAS_TRITON, SECOND_TRITON, interpreter_fixture, needs_sass_tools

TOL = 1e-2  # relative L2 against the fp32 reference, as tests/test_triton_backend.py
SAME = 1e-6  # against the 4-warp tile: the interpreter's products and sums are the same


def test_decode8_labels_and_lists():
    assert [c.label for c in PS_DECODE8_CONFIGS] == ["m16n128k128w8s3-ps", "m16n128k128w8s4-ps",
                                                     "m16n128k256w8s3-ps-sk2"]
    assert [c.label for c in PS_DECODE8_PDL_CONFIGS] == [c.label + "-pdl" for c in PS_DECODE8_CONFIGS] + [
        "m16n128k128w8s3-ps-g2sk2-pdl"]
    for c in PS_DECODE8_CONFIGS + PS_DECODE8_PDL_CONFIGS:
        assert parse_config(c.label) == c and c.ps and c.block_m == 16 and c.num_warps == 8 and not c.fused
    assert parse_config("m16n128k256w8s3-ps-sk2") == KernelConfig(16, 128, 256, 8, 3, "ps", 2)
    assert [c.label for c in PS_GU16_CONFIGS] == ["m128n128k64w16s3-ps-gu-g2n256", "m128n128k64w16s4-ps-gu-g2n256",
                                                  "m64n128k64w16s4-ps-gu-g2n256", "m128n128k64w16s3-ps-gu-g2n256-t64",
                                                  "m128n128k64w16s3-ps-gu-g2n256-t32", "m128n128k64w16s3-ps-gu-g2n256-t32f",
                                                  "m128n128k64w16s3-ps-gu-g2n256-fs",
                                                  "m128n128k64w16s4-ps-gu-g2n256-fs"]
    assert [c.label for c in PS_GU16_K128_CONFIGS] == ["m128n128k128w16s3-ps-gu-g2n256",
                                                       "m128n128k128w16s4-ps-gu-g2n256",
                                                       "m128n128k128w16s3-ps-gu-g2n256-t64"]
    assert [c.label for c in PS_GU16_K128_PDL_CONFIGS] == [c.label + "-pdl" for c in PS_GU16_K128_CONFIGS]
    for c in PS_GU16_CONFIGS + PS_GU16_K128_CONFIGS + PS_GU16_K128_PDL_CONFIGS:
        assert parse_config(c.label) == c and c.gate_up and c.num_warps == 16 and c.gemm2_block_n == 256


def test_decode8_offered_at_decode_only(monkeypatch):
    from fp4moe_diag.backends.triton import backend

    b = TritonMXFP4Backend()
    case = dict(hidden_size=3072, intermediate_size=3072, num_experts=32, top_k=4)
    compiled = not (backend.interpret_enabled() or backend.kernels_interpreted())
    ids = [t.id for t in b.tactics(MoECase(num_tokens=64, **case))]
    assert all(c in ids for c in PS_DECODE8_CONFIGS)
    assert all((c in ids) == compiled for c in PS_DECODE8_PDL_CONFIGS)
    assert not any(c in ids for c in PS_GU16_CONFIGS + PS_GU16_K128_CONFIGS + PS_GU16_K128_PDL_CONFIGS)
    prefill = [t.id for t in b.tactics(MoECase(num_tokens=65, **case))]  # T * k = 260 > 256
    assert not any(c in prefill for c in PS_DECODE8_CONFIGS + PS_DECODE8_PDL_CONFIGS)
    assert all(c in prefill for c in PS_GU16_CONFIGS)
    # the k128 16-warp tiles (session 26): measured slower (H100 s26g), run by label only
    assert not any(c in prefill for c in PS_GU16_K128_CONFIGS + PS_GU16_K128_PDL_CONFIGS)
    for c in PS_GU16_K128_CONFIGS + (PS_GU16_K128_PDL_CONFIGS if compiled else ()):  # what "by label" means
        t = b.tactic_by_label(MoECase(num_tokens=65, **case), c.label)
        assert t.id == c and t.label == c.label and not t.is_default
    with pytest.raises(ValueError, match="has no tactic 'm128n128k128w16s3-ps-gu-g2n256'"):
        b.tactic_by_label(MoECase(num_tokens=64, **case), PS_GU16_K128_CONFIGS[0].label)  # a prefill tile at decode
    monkeypatch.setattr(backend, "interpret_enabled", lambda: True)  # under the interpreter: no -pdl
    ids = [t.id for t in b.tactics(MoECase(num_tokens=64, **case))]
    assert all(c in ids for c in PS_DECODE8_CONFIGS) and not any(c.pdl for c in ids)
    with pytest.raises(ValueError, match="has no tactic"):
        b.tactic_by_label(MoECase(num_tokens=65, **case), PS_GU16_K128_PDL_CONFIGS[0].label)


@needs_sass_tools()
def test_decode8_builds_without_spills_at_half_the_registers():
    """sm_90a at K = 3072 (gpt-oss as the sweeps run it; there triton 3.6's build matched the H200's Nsight Compute,
    168 registers for the 4-warp gemm1 in s9d)."""
    from fp4moe_diag.profiling.sass import count

    use = {}
    for label in ("m16n128k128w4s3-ps", "m16n128k128w8s3-ps"):
        for gemm in ("gemm1", "gemm2"):
            r = count(label, gemm, 3072, 90)
            assert r.stack_bytes == 0 and r.local_bytes == 0 and r.loop_spills == 0, (label, gemm, r)
            use[label, gemm] = r
    for gemm in ("gemm1", "gemm2"):
        w4, w8 = use["m16n128k128w4s3-ps", gemm].registers, use["m16n128k128w8s3-ps", gemm].registers
        assert w8 < 0.75 * w4, (gemm, w4, w8)  # half the weight fragment per thread
    # warps resident per SM: more with 8 warps (3.6.0: 16 against 12; 3.7.1 and 3.9.0: 16 against 8), but for 3.8.0,
    # whose 8-warp gemm1 takes 142 registers: 8 against 8 (docs/static-h200-s14.md)
    import triton

    w4, w8 = (use[f"m16n128k128w{w}s3-ps", "gemm1"].resident_warps for w in (4, 8))
    assert (w8 == w4) if triton.__version__ == "3.8.0" else (w8 > w4), (triton.__version__, w4, w8)


@needs_sass_tools()
def test_gu16_builds_with_16_warps_resident_and_no_spill_in_the_k_loop():
    """sm_90a at gpt-oss's K = 3072 (as the sweeps run it): the 16-warp -gu gemm1 fits 128 registers (the most 512
    threads may have) without local memory; the 8-warp tile of the same shape needs 255 (2 warps per scheduler).
    The k128 tile (session 26) too, with fewer loop instructions per weight than the k64 one."""
    import triton

    from fp4moe_diag.profiling.sass import count

    for label in ("m128n128k64w16s3-ps-gu-g2n256", "m64n128k64w16s4-ps-gu-g2n256", "m128n128k128w16s4-ps-gu-g2n256"):
        for gemm in ("gemm1", "gemm2"):
            r = count(label, gemm, 3072, 90)  # raises where no loop holds an MMA
            assert r.registers <= 128, (label, gemm, r.registers)  # 16 warps x 32 threads x 128 = the 65536 of an SM
            # 3.7.1 and 3.8.0 spill 2 operations in this gemm2's loop (docs/static-h200-s14.md)
            spills = 2 if (label, gemm, triton.__version__) in (
                ("m128n128k64w16s3-ps-gu-g2n256", "gemm2", "3.7.1"), ("m128n128k64w16s3-ps-gu-g2n256", "gemm2", "3.8.0")
            ) else 0
            assert (r.loop_spills, r.resident_warps) == (spills, 16), (label, gemm, r.loop_spills, r.resident_warps)
            if gemm == "gemm1":  # the k128 tile (session 26): 32 bytes of stack under 3.9.0, none in the K loop
                assert r.stack_bytes <= (32 if "k128" in label else 0), (label, r.stack_bytes)
    assert count("m128n128k64w8s3-ps-gu-g2n256", "gemm1", 3072, 90).registers > 200
    for gemm in ("gemm1", "gemm2"):  # 3.6.0: 4.81 / 4.84 against 5.53; 3.9.0: 4.78 / 4.77 against 5.88 / 5.75
        k64, k128 = (count(f"m128n128k{k}w16s3-ps-gu-g2n256", gemm, 3072, 90).instructions_per_weight
                    for k in (64, 128))
        assert k128 < 0.9 * k64, (gemm, k64, k128)


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
# decode-sized (8 tokens x top 2); H = I = 320: 2.5 steps of 128, 1.25 of 256 (uneven K, masked), 640 gate/up rows
base = dict(num_tokens=8, hidden_size=320, intermediate_size=320, num_experts=4, top_k=2)
cases = {"oai_bias": {}, "ep_offset": dict(num_experts=8, local_num_experts=4, local_expert_offset=4),
         "swiglu_nobias": dict(activation="swiglu", has_bias=False)}
out = {}


def compare(key, case_kw, labels):  # each label against the fp32 reference and its twin with fewer warps (or None)
    inp = build_inputs(MoECase(**case_kw))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    offered = {t.label for t in b.tactics(inp.case)}
    ys = {}  # each label run once (a twin may be a label too)
    run = lambda lab: ys[lab] if lab in ys else ys.setdefault(lab, b.run(prep, Tactic(id=lab, label=lab)).float())
    for lab, twin in labels.items():
        out[f"{key}/{lab}/offered"] = lab in offered
        y = run(lab)
        out[f"{key}/{lab}"] = float((y - ref).norm() / ref.norm())
        if twin:
            y0 = run(twin)
            out[f"{key}/{lab}/vs_twin"] = float((y - y0).norm() / y0.norm())


for name, kw in cases.items():
    if SECOND_TRITON and name != "oai_bias":  # CI's second Triton (tests/interpreter.py): one decode case
        continue
    compare(name, {**base, **kw}, {"m16n128k128w8s3-ps": "m16n128k128w4s3-ps",
                                   "m16n128k256w8s3-ps-sk2": "m16n128k256w4s3-ps-sk2"})
# prefill-sized (160 tokens x top 2 over 4 experts: ~80 pairs each), the 16-warp -gu tiles and their 8-warp twins
base = dict(num_tokens=160, hidden_size=192, intermediate_size=320, num_experts=4, top_k=2)
gu16 = {"m128n128k64w16s3-ps-gu-g2n256-t64": "m128n128k64w8s3-ps-gu-g2n256-t64",
        "m128n128k64w16s3-ps-gu-g2n256": "m128n128k64w8s3-ps-gu-g2n256",
        "m64n128k64w16s4-ps-gu-g2n256": "m64n128k64w8s4-ps-gu-g2n256"}
# -fs: gemm2 sums the top-k rows itself, in the top-k sum kernel's order: the same bits as its unfused twin
fs = {"m128n128k64w16s3-ps-gu-g2n256-fs": "m128n128k64w16s3-ps-gu-g2n256"}
# the k128 16-warp tiles (session 26): K = 192 / 320 in 1.5 / 2.5 steps of 128 (the last masked)
k128 = {"m128n128k128w16s3-ps-gu-g2n256": "m128n128k128w8s3-ps-gu-g2n256"}
if not SECOND_TRITON:  # CI's second Triton: the EP case below (tails, -fs, -pdl) only
    compare("gu16/oai_bias", {**base, **cases["oai_bias"]}, {**gu16, **fs, **k128})
# EP: top 4 of 8 experts, 4 local (~80 pairs each again): 320 pairs a rank, above the decode size (tiling.decode_sized)
# -pdl (session 25; compiled only, so not offered here): the interpreter runs the kernels one after the other, the
# grid dependencies are compiled-only: the same bits as the twin without, EP offsets and the 64-row tails included
pdl = {"m128n128k64w16s3-ps-gu-g2n256-t64-pdl": "m128n128k64w16s3-ps-gu-g2n256-t64",
       "m128n128k128w16s3-ps-gu-g2n256-t64-pdl": "m128n128k128w16s3-ps-gu-g2n256-t64"}
k128_tail = {"m128n128k128w16s3-ps-gu-g2n256-t64": "m128n128k128w8s3-ps-gu-g2n256-t64"}
compare("gu16/ep_offset", {**base, **cases["ep_offset"], "top_k": 4},
        {**dict(list(gu16.items())[:1]), **fs, **k128_tail, **pdl})  # tails, -fs, -pdl (time)
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name", ["oai_bias", "ep_offset", "swiglu_nobias"])
def test_decode8_tactics_match_the_reference_and_the_4_warp_tile(interp_results: dict, name: str):
    if SECOND_TRITON and name != "oai_bias":
        pytest.skip("CI's second Triton runs the oai_bias case (tests/interpreter.py)")
    assert interp_results["interpreted"] is True
    for lab in ("m16n128k128w8s3-ps", "m16n128k256w8s3-ps-sk2"):
        assert interp_results[f"{name}/{lab}/offered"] is True
        assert 0 < interp_results[f"{name}/{lab}"] < TOL, (lab, interp_results[f"{name}/{lab}"])
    for lab in ("m16n128k128w8s3-ps", "m16n128k256w8s3-ps-sk2"):
        assert interp_results[f"{name}/{lab}/vs_twin"] < SAME, (lab, interp_results[f"{name}/{lab}/vs_twin"])


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name,labels", [
    ("oai_bias", ("m128n128k64w16s3-ps-gu-g2n256", "m128n128k64w16s3-ps-gu-g2n256-t64", "m64n128k64w16s4-ps-gu-g2n256",
                  "m128n128k64w16s3-ps-gu-g2n256-fs", "m128n128k128w16s3-ps-gu-g2n256")),
    ("ep_offset", ("m128n128k64w16s3-ps-gu-g2n256-t64", "m128n128k64w16s3-ps-gu-g2n256-fs",
                   "m128n128k128w16s3-ps-gu-g2n256-t64"))])
def test_gu16_tactics_match_the_reference_and_the_8_warp_tile(interp_results: dict, name: str, labels: tuple):
    if SECOND_TRITON and name == "oai_bias":
        pytest.skip("CI's second Triton runs the ep_offset case (tests/interpreter.py)")
    assert interp_results["interpreted"] is True
    for lab in labels:  # the k128 tiles (session 26) run by label only, not offered
        assert interp_results[f"gu16/{name}/{lab}/offered"] is ("k128" not in lab)
        assert 0 < interp_results[f"gu16/{name}/{lab}"] < TOL, (lab, interp_results[f"gu16/{name}/{lab}"])
        assert interp_results[f"gu16/{name}/{lab}/vs_twin"] < SAME, (lab, interp_results[f"gu16/{name}/{lab}/vs_twin"])
        if lab.endswith("-fs"):  # the fused top-k sum adds in the kernel's order: bit-identical to the unfused twin
            assert interp_results[f"gu16/{name}/{lab}/vs_twin"] == 0.0


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("lab", ["m128n128k64w16s3-ps-gu-g2n256-t64-pdl", "m128n128k128w16s3-ps-gu-g2n256-t64-pdl"])
def test_the_16_warp_gu_pdl_tile_matches_the_reference_and_its_twin_bit_for_bit(interp_results: dict, lab: str):
    assert interp_results["interpreted"] is True and interp_results[f"gu16/ep_offset/{lab}/offered"] is False
    assert 0 < interp_results[f"gu16/ep_offset/{lab}"] < TOL
    assert interp_results[f"gu16/ep_offset/{lab}/vs_twin"] == 0.0


def test_the_16_warp_gu_tiles_and_their_tm_twins_have_pdl_twins_offered_compiled_at_prefill_only(monkeypatch):
    """Session 25: -pdl twins of the prefill winners (configs_warps.PS_GU16_PDL_CONFIGS, configs_tm's -tm ones),
    offered where kernels are compiled (GPU), above the decode sizes; never under the interpreter."""
    from fp4moe_diag.backends.triton import backend
    from fp4moe_diag.backends.triton.configs_tm import PS_TM_PREFILL_PDL_CONFIGS
    from fp4moe_diag.backends.triton.configs_warps import PS_GU16_PDL_CONFIGS

    assert [c.label for c in PS_GU16_PDL_CONFIGS] == [
        "m128n128k64w16s3-ps-gu-g2n256-pdl", "m128n128k64w16s4-ps-gu-g2n256-pdl", "m64n128k64w16s4-ps-gu-g2n256-pdl",
        "m128n128k64w16s3-ps-gu-g2n256-t64-pdl", "m128n128k64w16s3-ps-gu-g2n256-t32-pdl",
        "m128n128k64w16s3-ps-gu-g2n256-t32f-pdl"]  # not the -fs ones
    assert [c.label for c in PS_TM_PREFILL_PDL_CONFIGS] == [
        "m128n128k64w16s3-ps-gu-tm-g2n256-pdl", "m128n128k64w16s4-ps-gu-tm-g2n256-pdl",
        "m128n128k64w16s3-ps-gu-tm-g2n256-t64-pdl", "m128n128k64w16s3-ps-gu-tm-g2n256-t32-pdl",
        "m128n128k64w16s3-ps-gu-tm-g2n256-t32f-pdl", "m256n64k64w8s3-ps-gu-tm-g2n128-pdl"]
    for c in PS_GU16_PDL_CONFIGS + PS_TM_PREFILL_PDL_CONFIGS:
        assert parse_config(c.label) == c and c.pdl == 1
    b = TritonMXFP4Backend()
    case = dict(hidden_size=3072, intermediate_size=3072, num_experts=32, top_k=4)
    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(TritonMXFP4Backend, "versions", lambda self: {"triton": "3.6.0"})
    labels = {t.label for t in b.tactics(MoECase(num_tokens=4096, **case))}
    assert {c.label for c in PS_GU16_PDL_CONFIGS + PS_TM_PREFILL_PDL_CONFIGS} <= labels
    decode = {t.label for t in b.tactics(MoECase(num_tokens=64, **case))}
    assert not decode & {c.label for c in PS_GU16_PDL_CONFIGS + PS_TM_PREFILL_PDL_CONFIGS}
    monkeypatch.setattr(backend, "interpret_enabled", lambda: True)  # under the interpreter: no -pdl
    labels = {t.label for t in b.tactics(MoECase(num_tokens=4096, **case))}
    assert not labels & {c.label for c in PS_GU16_PDL_CONFIGS + PS_TM_PREFILL_PDL_CONFIGS}
