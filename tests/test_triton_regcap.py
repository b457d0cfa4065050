"""The ``-rN`` tactics of our ps kernels (backends/triton/configs_regcap.py): a winner built with Triton's ``maxnreg``
so that an SM holds as many of its programs under Triton 3.7+ as under 3.6.0.

* Host side: labels, the ``reg_cap`` field's checks, the launcher's ``maxnreg`` (compiled only), and that a compiled
  run offers the twins from Triton 3.7 on only, each beside its uncapped twin.
* Interpreter (TRITON_INTERPRET=1, one subprocess): the capped twin runs the same kernels (no registers there):
  bit-identical to the uncapped one.
* Compiled for sm_90a on this CPU host: the capped 64-row tile's gemm1 keeps 2 programs of 8 warps an SM without a
  spill in its loop (Triton 3.9.0 uncapped: 177 registers, 1 program); the k128 decode winner capped at 128 holds 4
  programs of 4 warps, without a spill.
"""

from __future__ import annotations

import pytest

from interpreter import HAS_TRITON, check_twins, interpreter_fixture, needs_sass_tools, twin_script

from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_regcap import (PS_RC4_DECODE_PDL_CONFIGS, PS_RC_CONFIGS,
                                                        PS_RC_DECODE_PDL_CONFIGS, PS_RC_PREFILL_CONFIGS,
                                                        regcap_configs, triton_release)

TOL = 1e-2  # as tests/test_triton_backend.py: relative L2 against the fp32 reference


def test_regcap_labels_round_trip_and_checks():
    kc = parse_config("m16n128k128w4s3-ps-g2sk2-pdl-fs-r168")
    assert (kc.reg_cap, kc.pdl, kc.fused, kc.gemm2_split, kc.params()["reg_cap"]) == (168, 1, True, 2, 168)
    assert parse_config("m64n128k64w8s4-ps-t32-r128") == KernelConfig(64, 128, 64, 8, 4, "ps", tail_m=32, reg_cap=128)
    assert "reg_cap" not in parse_config("m64n128k64w8s4-ps").params()
    rc = PS_RC_CONFIGS + PS_RC_DECODE_PDL_CONFIGS + PS_RC_PREFILL_CONFIGS + PS_RC4_DECODE_PDL_CONFIGS
    assert all(parse_config(c.label) == c and c.reg_cap in (128, 168) for c in rc) and len(set(rc)) == 8
    for bad in ("m16n64k128w4s3-ps-r100", "m16n64k128w4s3-ps-r16", "m16n64k128w4s3-ps-r264",
                "m16n64k128w4s3-ps-pk-r128", "m16n64k128w4s3-ps-r128~nodeq"):
        with pytest.raises(ValueError, match=r"reg_cap \(-rN.* is a mode ps option"):
            parse_config(bad)
    with pytest.raises(ValueError, match=r"reg_cap \(-rN.* got 128 in 'x2'"):
        KernelConfig(16, 64, 128, 4, 3, "x2", reg_cap=128)
    with pytest.raises(ValueError, match="expected a label"):
        parse_config("m16n64k128w4s3-ps-r128-fs")  # -rN comes after -fs


def test_triton_release_and_which_releases_offer_them():
    assert [triton_release(v) for v in ("3.9.0", "3.10.1", "3.7.1+git", None, "not importable")] == [
        (3, 9), (3, 10), (3, 7), (0, 0), (0, 0)]
    assert regcap_configs(True, "3.6.0") == () and regcap_configs(False, None) == ()  # -s24a: slower under 3.6.0
    assert regcap_configs(True, "3.7.1") == PS_RC_CONFIGS + PS_RC_DECODE_PDL_CONFIGS + PS_RC4_DECODE_PDL_CONFIGS
    assert regcap_configs(False, "3.9.0") == PS_RC_CONFIGS + PS_RC_PREFILL_CONFIGS


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_regcap_launch_option_and_offers(monkeypatch):
    from fp4moe_diag.backends.triton import backend, launch
    from fp4moe_diag.problem.shapes import default_case

    assert launch._reg_cap_args(0, True) == {}
    assert launch._reg_cap_args(128, True) == ({} if launch.INTERPRETED else {"maxnreg": 128})
    for bad, ps in ((128, False), (8, True), (True, True), (300, True)):
        with pytest.raises(ValueError, match="^reg_cap: "):
            launch._reg_cap_args(bad, ps)
    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
    b = backend.TritonMXFP4Backend()
    for version, counts in (("3.6.0", (0, 0, 0)), ("3.9.0", (7, 7, 2))):
        monkeypatch.setattr(backend.TritonMXFP4Backend, "versions", lambda self, v=version: {"triton": v})
        for (model, ep, t), n in zip((("gpt-oss-20b", 1, 1), ("gpt-oss-120b", 4, 64), ("gpt-oss-20b", 1, 4096)), counts):
            labels = {x.label for x in b.tactics(default_case(model, ep, t))}
            rc = {lab for lab in labels if "-r1" in lab}
            assert len(rc) == n, (version, model, t, sorted(rc))
            assert {lab.rsplit("-r", 1)[0] for lab in rc} <= labels  # each beside its uncapped twin


_INTERP_SCRIPT = twin_script({"a": dict(hidden_size=192, intermediate_size=320)},
                             [(base, base + "-r128") for base in ("m16n64k128w4s1-ps-sk2", "m32n64k64w4s1-ps-t16")])

interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_capped_tactics_match_their_twins_in_the_interpreter(interp_results: dict):
    check_twins(interp_results, errors=2, twins=2, tol=TOL)


@needs_sass_tools()
def test_the_capped_64_row_tile_keeps_two_programs_an_sm_without_a_loop_spill():
    from fp4moe_diag.profiling.sass import count

    plain, capped = (count(f"m64n128k64w8s4-ps-t32{s}", "gemm1", 3072) for s in ("", "-r128"))
    assert capped.registers <= 128 and capped.resident_programs == 2 and capped.loop_spills == 0
    if plain.triton_version != "3.6.0":  # 3.9.0: 177 registers, 1 program of 8 warps (docs/triton39-h200-s23.md)
        assert plain.resident_programs == 1 and plain.registers > 128


@needs_sass_tools()
def test_the_decode_winner_capped_at_128_holds_four_programs_an_sm():
    from fp4moe_diag.profiling.sass import count

    plain, capped = (count(f"m16n128k128w4s3-ps-g2sk2-pdl{s}", "gemm1", 3072) for s in ("", "-r128"))
    assert plain.resident_programs < 4 and capped.resident_programs == 4 and capped.loop_spills == 0
    assert max(capped.mma_waits) == 0  # the price: every wgmma waited before the next (3.6.0 uncapped: <= 7)


@needs_sass_tools()
def test_the_cap_is_gemm1s_only():
    """Capped, ptxas gave gemm2 more registers and it ran slower (-s24c): gemm2 is built as its uncapped twin."""
    from fp4moe_diag.profiling.sass import count

    for label in ("m64n128k64w8s4-ps-t32", "m16n128k128w4s3-ps-g2sk2-pdl"):
        plain, capped = (count(f"{label}{s}", "gemm2", 3072) for s in ("", "-r128"))
        assert capped.registers == plain.registers, label
