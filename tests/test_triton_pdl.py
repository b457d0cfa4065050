"""Programmatic dependent launch of our ps kernels (tactic suffixes ``-pdl`` / ``-pdlpf`` / ``-pdlpfe``).

* Host side: labels, the ``pdl`` field's checks, the launch switches (none under the interpreter).
* Interpreter (TRITON_INTERPRET=1, one subprocess, small shapes): the -pdl / -pdlpf tactics against the float32
  reference with EP offsets, uneven K (a half-empty last K tile) and split-K / gemm2-only split-K, bit-identical to
  the same tactic without PDL (the interpreter runs the kernels one after the other; the grid-dependency
  instructions are compiled-only).
* Compiled for sm_90a on this CPU host (Triton's bundled ptxas, no GPU): the PTX holds ``griddepcontrol.wait`` and
  ``.launch_dependents`` (and gemm2's ``cp.async.bulk.prefetch.L2`` for -pdlpf / -pdlpfe) exactly when asked, and the
  register count of gemm2 does not grow.
"""

from __future__ import annotations

import pytest

from interpreter import HAS_TRITON, bundled_tools, interpreter_fixture

from fp4moe_diag.backends.triton.configs import PDL_LABELS, PS_PDL_CONFIGS, KernelConfig, parse_config

TOL = 1e-2  # as tests/test_triton_backend.py: relative L2 against the fp32 reference


def test_pdl_labels_round_trip_and_checks():
    kc = parse_config("m16n128k128w4s3-ps-g2sk2-pdl")
    assert (kc.pdl, kc.gemm2_split, kc.label) == (1, 2, "m16n128k128w4s3-ps-g2sk2-pdl")
    assert parse_config("m16n64k256w4s3-ps-sk2-pdlpf") == KernelConfig(16, 64, 256, 4, 3, "ps", 2, pdl=2)
    assert parse_config("m16n128k128w4s3-ps-pdlpfe").label == "m16n128k128w4s3-ps-pdlpfe"
    assert parse_config("m16n128k128w4s3-ps").pdl == 0 and "pdl" not in parse_config("m16n128k128w4s3-ps").params()
    assert kc.params()["pdl"] == 1
    assert PDL_LABELS == {0: "", 1: "-pdl", 2: "-pdlpf", 3: "-pdlpfe", 4: "-pdlw", 5: "-pdlt", 6: "-pdltt"}
    assert parse_config("m16n64k256w4s3-ps-sk4-pdlw-fs") == KernelConfig(16, 64, 256, 4, 3, "ps", 4, pdl=4, fused=True)
    assert parse_config("m16n128k128w4s3-ps-tm-g2sk2-pdlw").label == "m16n128k128w4s3-ps-tm-g2sk2-pdlw"
    assert all(c.pdl == 1 and c.ps and c.block_m == 16 for c in PS_PDL_CONFIGS)  # decode tiles only (s8, s9a runs)
    assert all(parse_config(c.label) == c for c in PS_PDL_CONFIGS)
    with pytest.raises(ValueError, match="pdl .* is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", pdl=1)
    with pytest.raises(ValueError, match="pdl must be one of"):
        KernelConfig(16, 64, 128, 4, 3, "ps", pdl=7)
    with pytest.raises(ValueError, match="pdl must be one of"):
        KernelConfig(16, 64, 128, 4, 3, "ps", pdl=True)
    with pytest.raises(ValueError, match="expected a label"):
        parse_config("m16n64k128w4s3-ps-pdl-sk2")  # the suffix comes last
    with pytest.raises(ValueError, match="~load of a -pdlw tactic"):
        parse_config("m16n64k128w4s3-ps-pdlw~load")
    assert parse_config("m16n64k128w4s3-ps-pdlw~nodeq").pdl == 4


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_decode_tiles_are_offered_by_the_pairs_a_rank_expects(monkeypatch):
    """tiling.decode_sized: T * top_k * local / num experts <= 256, the pairs of a rank, not the call's: 120b EP4
    T=256 (1024 pairs, 256 a rank) gets the decode tiles (-pdl, -g2sk2, -tm) as 20b EP1 T=64 does; 20b EP1 T=256 and
    120b EP4 T=1024 do not."""
    from fp4moe_diag.backends.triton import backend
    from fp4moe_diag.backends.triton.tiling import expected_local_pairs
    from fp4moe_diag.problem.shapes import default_case

    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
    b = backend.TritonMXFP4Backend()
    decode = {"m16n128k128w4s3-ps-g2sk2-pdl", "m16n128k128w4s3-ps-tm-g2sk2-pdl", "m16n64k256w4s3-ps-sk2"}
    for (model, ep, t), pairs, offered in ((("gpt-oss-120b", 4, 256), 256, True), (("gpt-oss-20b", 1, 64), 256, True),
                                           (("gpt-oss-20b", 2, 128), 256, True), (("gpt-oss-20b", 1, 256), 1024, False),
                                           (("gpt-oss-120b", 4, 1024), 1024, False)):
        case = default_case(model, ep, t)
        labels = {x.label for x in b.tactics(case)}
        assert expected_local_pairs(case) == pairs
        assert (decode <= labels) == offered and bool(decode & labels) == offered


def test_pdl_launch_switches():
    from fp4moe_diag.backends.triton import launch

    with pytest.raises(ValueError, match="^pdl: only the pre-shuffled kernels"):
        launch._pdl_args(1, ps=False)
    with pytest.raises(ValueError, match="^pdl: expected 0"):
        launch._pdl_args(6, ps=True)
    with pytest.raises(ValueError, match="^pdl: expected 0"):
        launch._pdl_args(True, ps=True)
    assert launch._w_first_args(4) == {"W_FIRST": True} and launch._w_first_args(1) == {}  # the interpreter's too
    assert launch._pdl_args(0, ps=True) == {}
    want = {} if launch.INTERPRETED else {"PDL": 2, "launch_pdl": True}
    assert launch._pdl_args(2, ps=True) == want


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
base = dict(num_tokens=6, hidden_size=192, intermediate_size=320, top_k=2)
cases = {  # K = 192 / 320 in steps of 128: a half-empty last K tile; 8 experts, this rank holds 4..7
    "ep_offset_uneven": dict(num_experts=8, local_num_experts=4, local_expert_offset=4),
}
labels = ("m16n64k128w4s1-ps", "m16n64k128w4s1-ps-pdl", "m16n64k128w4s1-ps-pdlpf",
          "m16n64k128w4s1-ps-sk2", "m16n64k128w4s1-ps-sk2-pdl", "m16n64k128w4s1-ps-sk2-pdlpfe",
          "m32n128k64w4s1-ps-g2sk3", "m32n128k64w4s1-ps-g2sk3-pdl", "m32n128k64w4s1-ps-g2sk3-pdlpfe",
          "m16n64k128w4s1-ps-pdlw", "m16n64k128w4s1-ps-sk2-pdlw", "m32n128k64w4s1-ps-g2sk3-pdlw")
out = {}
for name, kw in cases.items():
    inp = build_inputs(MoECase(**{**base, **kw}))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    ys = {}
    for lab in labels:
        y = b.run(prep, Tactic(id=lab, label=lab))
        assert y.dtype == torch.bfloat16 and y.shape == ref.shape
        ys[lab] = y
        out[f"{name}/{lab}"] = float((y.float() - ref).norm() / ref.norm())
    out[f"{name}/same_bits"] = all(torch.equal(ys[lab], ys[lab.rsplit("-pdl", 1)[0]]) for lab in labels if "-pdl" in lab)
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name", ["ep_offset_uneven"])
def test_pdl_tactics_match_the_reference_in_the_interpreter(interp_results: dict, name: str):
    assert interp_results["interpreted"] is True
    errs = {k: v for k, v in interp_results.items() if k.startswith(name + "/") and "same_bits" not in k}
    assert len(errs) == 12 and sum("-pdl" in k for k in errs) == 9 and sum("-pdlw" in k for k in errs) == 3
    assert not {k: v for k, v in errs.items() if not v < TOL}, errs
    assert interp_results[f"{name}/same_bits"] is True


def _ptx_and_regs(label: str, gemm: str) -> tuple[str, int]:
    from fp4moe_diag.profiling.sass import _compile, resource_usage

    cc = _compile(parse_config(label), gemm, 256, 90)
    return cc.asm["ptx"], resource_usage(cc)["reg"]


@pytest.mark.skipif(not bundled_tools("ptxas", "cuobjdump"), reason="triton with its bundled CUDA tools is not "
                    "installed")
def test_pdl_instructions_in_the_sm90_build():
    wait, trigger, prefetch = "griddepcontrol.wait", "griddepcontrol.launch_dependents", "cp.async.bulk.prefetch.L2"
    ptx0, reg0 = _ptx_and_regs("m16n64k128w4s3-ps", "gemm2")
    ptx1, reg1 = _ptx_and_regs("m16n64k128w4s3-ps-pdl", "gemm2")
    ptx2, _ = _ptx_and_regs("m16n64k128w4s3-ps-pdlpf", "gemm2")
    ptx3, reg3 = _ptx_and_regs("m16n64k128w4s3-ps-pdlpfe", "gemm2")
    g1, _ = _ptx_and_regs("m16n64k128w4s3-ps-pdl", "gemm1")
    assert not any(s in ptx0 for s in (wait, trigger, prefetch))
    assert ptx1.count(wait) == ptx1.count(trigger) == 1 and prefetch not in ptx1
    assert ptx2.count(wait) == 1 and ptx2.count(prefetch) == 2  # 512 weight bytes + 32 scale bytes per chunk
    assert ptx2.index(prefetch) < ptx2.index(wait)  # the prefetch runs before the wait
    assert ptx3.count(prefetch + ".global.L2::cache_hint") == 2 and "L2::evict_last" in ptx3  # one issuer per slab
    assert ptx3.index(prefetch) < ptx3.index(wait) and reg3 <= reg0 + 8
    assert g1.count(wait) == g1.count(trigger) == 1
    assert reg1 <= reg0 + 8  # the wait costs no registers worth an occupancy step
    # the 16-warp -gu prefill tile (session 25, configs_warps.PS_GU16_PDL_CONFIGS): its gemm1 (the -gu kernel) and its
    # gemm2 wait once, trigger once, and keep their 128 registers (16 warps x 128 fill the register file)
    for gemm in ("gemm1", "gemm2"):
        p0, r0 = _ptx_and_regs("m128n128k64w16s3-ps-gu-g2n256", gemm)
        p1, r1 = _ptx_and_regs("m128n128k64w16s3-ps-gu-g2n256-pdl", gemm)
        assert wait not in p0 and p1.count(wait) == p1.count(trigger) == 1 and r1 == r0 <= 128, (gemm, r0, r1)


@pytest.mark.skipif(not bundled_tools("ptxas", "cuobjdump"), reason="triton with its bundled CUDA tools is not "
                    "installed")
def test_pdlw_loads_gemm2_weights_before_the_wait_at_the_pdl_registers():
    """-pdlw: gemm2's routing tables and its first K step's weights (16-byte vector loads) are loaded before
    ``griddepcontrol.wait``, none of them with -pdl; capped at the -pdl twin's registers (launch_bind._bound), so that the
    same programs fit an SM; gemm1 keeps -pdl's order (nothing loaded before its wait)."""
    import re

    wait = "griddepcontrol.wait"

    def loads_before_wait(ptx: str) -> tuple[int, int]:
        head = ptx[:ptx.index(wait)]
        return len(re.findall(r"ld\.global\.[^\n]*v4", head)), len(re.findall(r"ld\.global", head))

    ptx1, reg1 = _ptx_and_regs("m16n64k256w4s3-ps-sk2-pdl", "gemm2")
    ptx4, reg4 = _ptx_and_regs("m16n64k256w4s3-ps-sk2-pdlw", "gemm2")
    g1, _ = _ptx_and_regs("m16n64k256w4s3-ps-sk2-pdlw", "gemm1")
    assert loads_before_wait(ptx1) == (0, 0) and loads_before_wait(g1) == (0, 0)
    vec, total = loads_before_wait(ptx4)
    assert vec >= 4 and total > vec  # 64 x 256 fp4 = 8 KB over 128 threads: 4 x 16 bytes each; then tables, scales
    assert ptx4.count(wait) == 1 and reg4 <= reg1
