import math

import pytest
import torch

from fp4moe_diag.measure.correctness import REL_L2_TOL, error_metrics, poison_


def test_identical_output_is_correct():
    ref = torch.randn(8, 32)
    m = error_metrics(ref.clone(), ref)
    assert m["rel_l2"] == 0 and m["cosine"] == pytest.approx(1.0) and m["correct"]


def test_bf16_rounding_passes_and_a_broken_row_fails():
    torch.manual_seed(0)
    ref = torch.randn(16, 64)
    out = ref.to(torch.bfloat16)
    m = error_metrics(out, ref)
    assert m["rel_l2"] < 5e-3 and m["correct"]
    bad = out.clone()
    bad[3] = 0
    mb = error_metrics(bad, ref)
    assert not mb["correct"] and mb["rel_l2"] > REL_L2_TOL and mb["worst_token"] == 3
    assert mb["frac_tokens_over_tol"] == pytest.approx(1 / 16)


def test_poisoned_rows_show_as_unwritten():
    ref = torch.randn(4, 8)
    out = poison_(torch.empty(4, 8))
    out[:2] = ref[:2]
    m = error_metrics(out, ref)
    assert m["unwritten_rows"] == 2 and m["nan_count"] == 16 and not m["correct"]


def test_rank_with_no_tokens_must_output_exact_zeros():
    ref = torch.zeros(1, 16)
    ok = error_metrics(torch.zeros(1, 16, dtype=torch.bfloat16), ref)
    assert ok["correct"] and ok["rel_l2"] == 0.0 and ok["cosine"] == 1.0
    bad = error_metrics(torch.full((1, 16), 1e-3), ref)
    assert not bad["correct"] and math.isinf(bad["rel_l2"])


def test_rows_of_other_ranks_are_zero_and_checked():
    ref = torch.randn(3, 8)
    ref[1] = 0  # token 1 routed only to other ranks
    out = ref.clone()
    out[1, 0] = 0.5  # a kernel that wrote garbage into it
    m = error_metrics(out, ref)
    assert m["worst_token"] == 1 and m["frac_tokens_over_tol"] == pytest.approx(1 / 3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="out: expected shape"):
        error_metrics(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="ref: the reference is empty"):
        error_metrics(torch.zeros(0, 3), torch.zeros(0, 3))
    with pytest.raises(ValueError, match="ref: the reference has NaN"):
        error_metrics(torch.zeros(1, 3), torch.tensor([[0.0, float("nan"), 1.0]]))
