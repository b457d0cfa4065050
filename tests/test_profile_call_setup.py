"""The setup both profiled processes share (fp4moe_diag.profiling.call_setup), on CPU with the reference backend:
inputs built as the sweep builds them, tactics looked up by label, warm-up, a bound launch that writes the output."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import get_backend
from fp4moe_diag.profiling.call_setup import prepare_call

CASE = MoECase(num_tokens=3, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2)


def test_bound_launch_writes_the_reference_output():
    call = prepare_call("reference", CASE, {"t0": "torch fp32"}, "cpu")
    assert list(call.tactics) == ["t0"] and call.tactics["t0"].label == "torch fp32"
    assert tuple(call.out.shape) == (3, 64) and call.out.dtype == torch.bfloat16
    call.out.fill_(float("nan"))  # poisoned: the launch must write every element
    call.bind(call.tactics["t0"])()
    be = get_backend("reference")
    want = be.run(be.prepare(build_inputs(CASE, "cpu")), call.tactics["t0"])
    assert torch.equal(call.out, want.to(torch.bfloat16))
    call.synchronize()  # a no-op on CPU


def test_unknown_label_and_no_labels_are_refused_before_any_launch():
    with pytest.raises(ValueError, match="tactic: reference has no tactic 'nope'"):
        prepare_call("reference", CASE, {"t0": "nope"}, "cpu")
    with pytest.raises(ValueError, match="^labels: expected at least one"):
        prepare_call("reference", CASE, {}, "cpu")
