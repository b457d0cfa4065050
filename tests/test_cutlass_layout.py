"""CPU checks of the CUTLASS backend's host-side layout and its refusal paths."""

import pytest
import torch

from fp4moe_diag import MoECase
from fp4moe_diag.backends.flashinfer.cutlass import CutlassBackend, interleave_mxfp4_scales_sm90


def test_sm90_scale_interleave_matches_vllm_layout():
    s = torch.arange(2 * 3 * 8, dtype=torch.uint8).reshape(2, 3, 8)
    out = interleave_mxfp4_scales_sm90(s)
    assert out.shape == (2, 2, 12)
    # row r's K-blocks 4g..4g+3 are contiguous; rows follow each other within a K-group
    assert out[0, 0].tolist() == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]
    assert out[0, 1].tolist() == [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23]
    assert out[1, 0, 0] == 24
    # a permutation: every byte kept
    assert sorted(out.flatten().tolist()) == sorted(s.flatten().tolist())


def test_sm90_scale_interleave_rejects_bad_shapes():
    with pytest.raises(ValueError, match="scales: expected"):
        interleave_mxfp4_scales_sm90(torch.zeros(2, 3, 6, dtype=torch.uint8))


def test_cutlass_refuses_what_it_does_not_implement():
    b = CutlassBackend()
    nv = MoECase(num_tokens=1, hidden_size=256, intermediate_size=256, num_experts=4, top_k=1,
                 weight_format="nvfp4", activation="swiglu")
    assert not b.check_case(nv).ok and "MXFP4" in b.check_case(nv).reason
    odd = MoECase(num_tokens=1, hidden_size=96, intermediate_size=256, num_experts=4, top_k=1)
    assert not b.check_case(odd).ok and "128" in b.check_case(odd).reason
    with pytest.raises(ValueError, match="scale_layout"):
        CutlassBackend(scale_layout="zigzag")


def test_combined_tactic_takes_the_fastest_gemm1_and_gemm2():
    from fp4moe_diag.backends.base import Tactic
    from fp4moe_diag.backends.flashinfer.cutlass import CutlassBackend

    t = lambda g1, g2: Tactic(id=(g1, g2), label=f"{g1},{g2}")  # noqa: E731
    timings = [(t(-1, -1), 100.0), (t(0, -1), 90.0), (t(3, -1), 80.0), (t(-1, 1), 95.0), (t(-1, 7), 70.0)]
    combo = CutlassBackend().combined_tactic(timings)
    assert combo.id == (3, 7) and combo.label == "g1:3+g2:7" and not combo.is_default
    # a gemm whose tactics never beat the default: FlashInfer's tuner would keep -1 -> no new row
    assert CutlassBackend().combined_tactic([(t(-1, -1), 50.0), (t(0, -1), 60.0), (t(-1, 1), 40.0)]) is None
    assert CutlassBackend().combined_tactic([]) is None
