"""Persistent tile loops of our ps kernels (tactic suffixes ``-pt`` / ``-ptf``, backends/triton/configs_persist.py).

* Host side: labels, the ``persist`` field's checks, the launcher's checks, the grid an SM's registers and shared
  memory allow (``tiling.residency`` with a device's limits), and that no tactic list offers them (measured slower,
  data/runs/2026-12-05-nvidia-h100-s20a).
* Interpreter (TRITON_INTERPRET=1, one subprocess, small shapes): -pt / -ptf bit-identical to the plain tactic with EP
  offsets, uneven K (a half-empty last K tile), split-K, gemm2-only split-K and both grid orders (16-row tiles: M
  blocks fastest; 32-row: N tiles fastest), with fewer programs than tiles (each program loops over several).
* Compiled for sm_90a on this CPU host (Triton's bundled tools): -pt's K loop is the plain one; -ptf's one flattened
  loop issues far more instructions per weight (why it was slower on the GPU).
"""

from __future__ import annotations

import pytest

from interpreter import HAS_TRITON, check_twins, interpreter_fixture, needs_sass_tools

from fp4moe_diag.backends.triton.configs import PERSIST_LABELS, KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_persist import PS_PT_DECODE_CONFIGS, PS_PT_DECODE_PDL_CONFIGS
from fp4moe_diag.backends.triton.tiling import SM90_LIMITS, residency

TOL = 1e-2  # as tests/test_triton_backend.py: relative L2 against the fp32 reference


def test_persist_labels_round_trip_and_checks():
    kc = parse_config("m16n128k128w4s3-ps-g2sk2-pt-pdl")
    assert (kc.persist, kc.pdl, kc.gemm2_split, kc.params()["persist"]) == (1, 1, 2, 1)
    assert parse_config("m16n64k256w4s3-ps-sk2-ptf") == KernelConfig(16, 64, 256, 4, 3, "ps", 2, persist=2)
    assert PERSIST_LABELS == {0: "", 1: "-pt", 2: "-ptf"} and "persist" not in parse_config("m16n64k64w4s1-ps").params()
    assert all(parse_config(c.label) == c for c in PS_PT_DECODE_CONFIGS + PS_PT_DECODE_PDL_CONFIGS)
    assert len(PS_PT_DECODE_CONFIGS) == 8 and len(PS_PT_DECODE_PDL_CONFIGS) == 12
    for bad in ("m16n64k128w4s3-ps-pt-fs", "m16n128k64w4s3-ps-gu-pt", "m16n64k128w4s3-ps-pt-pdlw",
                "m16n64k128w4s3-ps-pt-pdlpf", "m64n128k64w4s3-ps-t32-pt", "m16n64k128w4s3-ps-pt~nodeq"):
        with pytest.raises(ValueError, match="persist .* is a mode ps option without"):
            parse_config(bad)
    with pytest.raises(ValueError, match="persist .* is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", persist=1)
    with pytest.raises(ValueError, match="persist must be one of"):
        KernelConfig(16, 64, 128, 4, 3, "ps", persist=True)
    with pytest.raises(ValueError, match="expected a label"):
        parse_config("m16n64k128w4s3-ps-pdl-pt")  # -pt comes before the PDL suffix


def test_residency_takes_the_device_limits():
    assert residency(168, 47104, 4) == 3 and residency(126, 29696, 4) == 4  # sm_90: by registers
    assert residency(126, 29696, 4, dict(SM90_LIMITS, shared_bytes=100 * 1024)) == 3  # by shared memory
    assert residency(32, 0, 4, dict(warps=48)) == 12 and residency(32, 0, 4) == 16  # by warps
    with pytest.raises(ValueError, match="^residency: expected"):
        residency(0, 0, 4)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_persist_launcher_checks():
    from fp4moe_diag.backends.triton import launch_bind

    for kw, msg in ((dict(persist=3, ps=True), "expected 0"), (dict(persist=True, ps=True), "expected 0"),
                    (dict(persist=1, ps=False), "expected 0"),
                    (dict(persist=1, ps=True, fused=True), "takes none of fused"),
                    (dict(persist=2, ps=True, gate_up=True, ablate=1), "takes none of ablate, gate_up")):
        with pytest.raises(ValueError, match=f"^persist: .*{msg}"):
            launch_bind._persist_check(**kw)
    assert launch_bind._persist_check(0, False, fused=True) is None  # off: nothing to refuse
    assert launch_bind.INTERPRETED_PROGRAMS == 3


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_persistent_tactics_are_not_offered(monkeypatch):
    from fp4moe_diag.backends.triton import backend
    from fp4moe_diag.problem.shapes import default_case

    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
    b = backend.TritonMXFP4Backend()
    for model, ep, t in (("gpt-oss-20b", 1, 1), ("gpt-oss-20b", 1, 64), ("gpt-oss-120b", 4, 64)):
        labels = {x.label for x in b.tactics(default_case(model, ep, t))}
        assert "m16n128k128w4s3-ps-g2sk2-pdl" in labels and not any("-pt" in lab for lab in labels)
        for lab in ("m16n128k128w4s3-ps-pt", "m16n128k128w4s3-ps-g2sk2-ptf-pdl"):  # they run by label
            assert b.tactic_by_label(default_case(model, ep, t), lab).id == backend.parse_config(lab)
    with pytest.raises(ValueError, match="has no tactic 'm16n128k128w4s3-ps-pt'"):  # decode tiles, not prefill
        b.tactic_by_label(default_case("gpt-oss-20b", 1, 4096), "m16n128k128w4s3-ps-pt")


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted
from fp4moe_diag.backends.triton import launch_bind

b = TritonMXFP4Backend()
# K = 192 / 320 in steps of 128: a half-empty last K tile; 8 experts, this rank holds 4..7
case = MoECase(num_tokens=6, hidden_size=192, intermediate_size=320, top_k=2, num_experts=8, local_num_experts=4,
               local_expert_offset=4)
inp = build_inputs(case)
ref = reference_moe(inp)
prep = b.prepare(inp)
bases = ("m16n64k128w4s1-ps", "m16n64k128w4s1-ps-sk2", "m32n128k64w4s1-ps-g2sk3", "m32n64k64w4s1-ps-sk2")
out = {}
for base in bases:
    y0 = b.run(prep, Tactic(id=base, label=base))
    out[f"{base}/err"] = float((y0.float() - ref).norm() / ref.norm())
    for suffix in ("-pt", "-ptf"):
        lab = base + suffix
        y = b.run(prep, Tactic(id=lab, label=lab))
        out[f"{lab}/err"] = float((y.float() - ref).norm() / ref.norm())
        out[f"{lab}/same_bits"] = bool(torch.equal(y, y0))
g16, g32 = prep.grouping(16), prep.grouping(32)
out["tiles_16_gemm1"] = g16.block_expert_ids.numel() * -(-320 // 64)
out["tiles_32_gemm2"] = g32.block_expert_ids.numel() * -(-192 // 128)
out["programs"] = launch_bind.INTERPRETED_PROGRAMS
"""

interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_persistent_tactics_match_their_plain_twins_in_the_interpreter(interp_results: dict):
    r = interp_results
    check_twins(r, errors=12, twins=8, tol=TOL)
    # fewer programs than tiles: every program loops over several tiles (M blocks x N tiles, before the splits)
    assert r["tiles_16_gemm1"] > 2 * r["programs"] and r["tiles_32_gemm2"] > r["programs"]


@needs_sass_tools()
def test_persistent_k_loops_in_the_sm90_build():
    from fp4moe_diag.profiling.sass import count

    plain, pt, ptf = (count(f"m16n128k128w4s3-ps{s}-pdl", "gemm2", 2880) for s in ("", "-pt", "-ptf"))
    assert plain.mma == pt.mma == ptf.mma == "HGMMA"
    assert pt.loop_instructions <= plain.loop_instructions * 1.05  # the K loop inside the tile loop: the plain one
    assert ptf.instructions_per_weight > 1.5 * plain.instructions_per_weight  # set-up and store in the one loop
    assert plain.stack_bytes == pt.stack_bytes == ptf.stack_bytes == 0
