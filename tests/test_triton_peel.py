"""The ``-pk`` tactics of our ps kernels (backends/triton/configs_peel.py): the K steps inside K in every split run
without K masks, the rest masked.

* Host side: labels, the ``peel`` field's checks, the launcher's checks, ``tiling.k_main`` and
  ``tiling.residency_cap``, and that the decode tactic lists offer every -pk twin beside its plain one.
* Interpreter (TRITON_INTERPRET=1, one subprocess, small shapes): bit-identical to the plain twin with EP offsets,
  K not a whole number of steps (a half-empty last step), split-K whose last split is short, gemm2-only split-K, the
  fused ends, and both grid orders.
* Compiled for sm_90a on this CPU host (Triton's bundled tools): at the suite's K (3072, whole steps) the loop loses
  its weight-chunk masks, at 2880 (not whole) gemm1 fits one more program an SM.
"""

from __future__ import annotations

import pytest

from interpreter import HAS_TRITON, SECOND_TRITON, check_twins, interpreter_fixture, needs_sass_tools, twin_script

from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_peel import PS_PK_DECODE_CONFIGS, PS_PK_DECODE_PDL_CONFIGS
from fp4moe_diag.backends.triton.tiling import k_main, k_split, residency_cap

TOL = 1e-2  # as tests/test_triton_backend.py: relative L2 against the fp32 reference


def test_peel_labels_round_trip_and_checks():
    kc = parse_config("m16n128k128w4s3-ps-pk-g2sk2-pdl-fs")
    assert (kc.peel, kc.pdl, kc.fused, kc.gemm2_split, kc.params()["peel"]) == (True, 1, True, 2, True)
    assert parse_config("m16n64k256w4s3-ps-tm-pk-sk2") == KernelConfig(16, 64, 256, 4, 3, "ps", 2, tile_major=True,
                                                                        peel=True)
    assert "peel" not in parse_config("m16n64k64w4s1-ps").params()
    assert all(parse_config(c.label) == c and c.peel for c in PS_PK_DECODE_CONFIGS + PS_PK_DECODE_PDL_CONFIGS)
    assert len(PS_PK_DECODE_CONFIGS) == 5 and len(PS_PK_DECODE_PDL_CONFIGS) == 11
    for bad in ("m16n128k64w4s3-ps-gu-pk", "m16n64k128w4s3-ps-pk-pt", "m16n64k128w4s3-ps-pk-pdlw",
                "m16n64k128w4s3-ps-pk~nodeq"):
        with pytest.raises(ValueError, match="peel .* is a mode ps option"):
            parse_config(bad)
    with pytest.raises(ValueError, match="peel .* is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", peel=True)
    with pytest.raises(ValueError, match="expected a label"):
        parse_config("m16n64k128w4s3-ps-sk2-pk")  # -pk comes right after -ps / -gu / -tm


@pytest.mark.parametrize("k, block_k, split, main", [
    (3072, 128, 1, 3072), (2880, 128, 1, 2816), (2880, 256, 2, 1280), (3072, 256, 2, 1536), (192, 128, 1, 128),
    (320, 64, 3, 64), (704, 128, 2, 256), (96, 128, 1, 0)])
def test_k_main_is_the_steps_inside_k_in_every_split(k: int, block_k: int, split: int, main: int):
    assert k_main(k, block_k, split) == main
    per = k_split(k, block_k, split)
    assert main % block_k == 0 and main <= per and all(s * per + main <= k for s in range(split))
    assert (split - 1) * per + main + block_k > k or main == per  # one more step would leave K in the last split


def test_residency_cap_takes_one_granule_for_one_more_program():
    assert residency_cap(170, 4) == 168  # 2 programs of 4 warps an SM -> 3
    assert residency_cap(218, 4) is None and residency_cap(144, 4) is None  # more than 8 registers away
    assert residency_cap(168, 4) is None and residency_cap(129, 4) == 128
    assert residency_cap(129, 4, dict(warps=12)) is None  # 3 programs of 4 warps already fill 12 warps


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_peel_launch_switches_and_offers(monkeypatch):
    from fp4moe_diag.backends.triton import backend, launch
    from fp4moe_diag.problem.shapes import default_case

    with pytest.raises(ValueError, match="^peel: "):
        launch._peel_args(True, False, False, 3072, 128, 1)
    with pytest.raises(ValueError, match="^peel: "):
        launch._peel_args(True, True, True, 3072, 64, 1)
    assert launch._peel_args(True, True, False, 2880, 256, 2) == {"PEEL": True, "K_MAIN": 1280}
    assert launch._peel_args(False, False, False, 2880, 256, 2) == {}
    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
    b = backend.TritonMXFP4Backend()
    for model, ep, t, n in (("gpt-oss-20b", 1, 1, 16), ("gpt-oss-120b", 4, 64, 16), ("gpt-oss-20b", 1, 4096, 0)):
        labels = {x.label for x in b.tactics(default_case(model, ep, t))}
        pk = {lab for lab in labels if "-pk" in lab}
        assert len(pk) == n and {lab.replace("-pk", "") for lab in pk} <= labels


# K = 192 / 320 and 704 / 448: not whole 128-wide steps, and short last splits
_BASES = ("m16n64k128w4s1-ps", "m16n64k128w4s1-ps-sk2", "m32n128k64w4s1-ps-sk3-g2sk2", "m16n64k128w4s1-ps-sk2-fs")
_PEEL_CASES = {"a": dict(hidden_size=192, intermediate_size=320), "b": dict(hidden_size=704, intermediate_size=448)}
if SECOND_TRITON:  # CI's second Triton (tests/interpreter.py): the first case
    _PEEL_CASES.pop("b")
_INTERP_SCRIPT = twin_script(_PEEL_CASES, [(base, base.replace("-ps", "-ps-pk")) for base in _BASES])

interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_peeled_tactics_match_their_plain_twins_in_the_interpreter(interp_results: dict):
    n = len(_BASES) * len(_PEEL_CASES)
    assert n == (4 if SECOND_TRITON else 8)
    check_twins(interp_results, errors=n, twins=n, tol=TOL)


@needs_sass_tools()
def test_peeled_k_loops_in_the_sm90_build():
    from fp4moe_diag.profiling.sass import count

    plain, pk = (count(f"m16n64k256w4s3-ps{s}-sk2-pdl", "gemm2", 3072) for s in ("", "-pk"))
    assert pk.loop_instructions < plain.loop_instructions and abs(pk.registers - plain.registers) <= 8
    g1, g1pk = (count(f"m16n128k128w4s3-ps{s}-pdl", "gemm1", 2880) for s in ("", "-pk"))
    assert g1pk.loop_instructions < g1.loop_instructions
    if g1.triton_version == "3.6.0":  # the GPU image's: 218 registers -> 166 (capped), 2 -> 3 programs an SM
        assert g1pk.resident_programs > g1.resident_programs and g1pk.stack_bytes == 0
    else:  # 3.9 builds both with 2 programs an SM (243 / 255 registers, -pk with 8 bytes of stack): configs_peel
        assert g1pk.resident_programs == g1.resident_programs == 2
