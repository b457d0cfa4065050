"""The ``-g2sN`` tactics of our ps kernels (backends/triton/configs_stages.py): gemm2's own pipeline depth.

* Host side: labels, the ``num_stages2`` field's checks, that gemm2's launch (and only gemm2's) gets the depth, and
  that no tactic list offers them (measured slower, data/runs/2026-12-05-nvidia-h100-s20d).
* Compiled for sm_90a on this CPU host (Triton's bundled tools): the deeper gemm2 costs shared memory, not registers
  or programs an SM.  (The interpreter has no pipeline: the outputs are the plain twin's by construction.)
"""

from __future__ import annotations

import pytest

from interpreter import HAS_TRITON, needs_sass_tools

from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_stages import PS_G2S_DECODE_PDL_CONFIGS


def test_stages2_labels_round_trip_and_checks():
    kc = parse_config("m16n128k128w4s3-ps-pk-g2sk2-g2s5-pdl")
    assert (kc.num_stages, kc.num_stages2, kc.gemm2_stages, kc.gemm2_split, kc.peel) == (3, 5, 5, 2, True)
    assert parse_config("m16n64k256w4s3-ps-sk2-g2s3-pdl").label == "m16n64k256w4s3-ps-sk2-pdl"  # same depth: dropped
    assert KernelConfig(16, 64, 128, 4, 3, "ps", num_stages2=4).label == "m16n64k128w4s3-ps-g2s4"
    assert "num_stages2" not in parse_config("m16n64k64w4s1-ps").params()
    assert len(PS_G2S_DECODE_PDL_CONFIGS) == 9 and all(parse_config(c.label) == c for c in PS_G2S_DECODE_PDL_CONFIGS)
    with pytest.raises(ValueError, match="num_stages2 .* is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", num_stages2=4)
    with pytest.raises(ValueError, match="num_stages2 must be an int"):
        KernelConfig(16, 64, 128, 4, 3, "ps", num_stages2=-1)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_gemm2_alone_gets_the_depth_and_none_is_offered(monkeypatch):
    from fp4moe_diag import MoECase, build_inputs
    from fp4moe_diag.backends.base import Tactic
    from fp4moe_diag.backends.triton import backend
    from fp4moe_diag.problem.shapes import default_case

    b = backend.TritonMXFP4Backend()
    prep = b.prepare(build_inputs(MoECase(num_tokens=4, hidden_size=128, intermediate_size=128, num_experts=4,
                                          top_k=2)))
    lab = "m16n64k64w4s3-ps-g2s5"
    calls = b.calls(prep, Tactic(id=lab, label=lab))  # bound, not run: gemm1, gemm2, the top-k sum
    assert [c.keywords.get("num_stages") for c in calls[:2]] == [3, 5]
    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
    for model, ep, t in (("gpt-oss-20b", 1, 1), ("gpt-oss-20b", 1, 64), ("gpt-oss-120b", 4, 64)):
        assert not any(x.id.num_stages2 for x in b.tactics(default_case(model, ep, t)))
        assert b.tactic_by_label(default_case(model, ep, t), PS_G2S_DECODE_PDL_CONFIGS[0].label).id == \
            PS_G2S_DECODE_PDL_CONFIGS[0]  # by label


@needs_sass_tools()
def test_deeper_gemm2_costs_shared_memory_only():
    from fp4moe_diag.profiling.sass import count

    s3, s5 = (count(f"m16n128k128w4s3-ps-g2sk2{s}-pdl", "gemm2", 3072) for s in ("", "-g2s5"))
    assert s5.shared_bytes > s3.shared_bytes and abs(s5.registers - s3.registers) <= 8
    assert s5.resident_programs == s3.resident_programs  # 4 under Triton 3.6.0 (123 registers), 3 under 3.9 (158)
    g1 = count("m16n128k128w4s3-ps-g2sk2-g2s5-pdl", "gemm1", 3072)
    assert g1.shared_bytes == count("m16n128k128w4s3-ps-g2sk2-pdl", "gemm1", 3072).shared_bytes  # gemm1 keeps 3
