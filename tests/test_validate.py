"""validate_launch_inputs: every built case passes; any corruption of a packed id, weight or scale fails (properties)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fp4moe_diag.problem.case import MoECase
from fp4moe_diag.problem.inputs import build_inputs
from fp4moe_diag.problem.routing import naive_pack_topk, pack_topk
from fp4moe_diag.validate import launch_tensors, validate_launch_inputs

cases = st.builds(
    lambda t, e, k, ep, fmt, oai, bias, seed: MoECase(
        num_tokens=t, hidden_size=64, intermediate_size=32 if fmt == "mxfp4" else 48, num_experts=e,
        top_k=min(k, e), local_num_experts=e // ep, local_expert_offset=(e // ep) * (seed % ep), weight_format=fmt,
        activation="swiglu_oai" if oai else "swiglu", has_bias=bias, seed=seed),
    st.integers(1, 9), st.sampled_from([4, 8]), st.integers(1, 3), st.sampled_from([1, 2, 4]),
    st.sampled_from(["mxfp4", "nvfp4"]), st.booleans(), st.booleans(), st.integers(0, 50))


@settings(max_examples=25, deadline=None)
@given(cases, st.data())
def test_built_inputs_pass_and_a_flipped_id_bit_fails(case, data):
    inp = build_inputs(case)
    validate_launch_inputs(inp, "cpu")
    t = data.draw(st.integers(0, case.num_tokens - 1))
    k = data.draw(st.integers(0, case.top_k - 1))
    bit = data.draw(st.integers(16, 31))
    packed = inp.packed_topk_ids.clone()
    packed[t, k] ^= (1 << bit) if bit < 31 else -(1 << 31)
    with pytest.raises(ValueError, match="packed_topk_ids"):
        validate_launch_inputs(replace(inp, packed_topk_ids=packed), "cpu")


@settings(max_examples=25, deadline=None)
@given(cases, st.lists(st.floats(-4, 4, allow_nan=False, width=16), min_size=1, max_size=27))
def test_seed_packing_fails_exactly_when_a_weight_is_negative(case, ws):
    inp = build_inputs(case)
    n = inp.topk_weights.numel()
    w = torch.tensor((ws * n)[:n], dtype=torch.float32).reshape(inp.topk_weights.shape).to(torch.bfloat16).float()
    good = replace(inp, topk_weights=w, packed_topk_ids=pack_topk(inp.topk_ids, w, case.num_experts))
    validate_launch_inputs(good, "cpu")  # masked packing: always fine
    naive = replace(inp, topk_weights=w, packed_topk_ids=naive_pack_topk(inp.topk_ids, w))
    if bool(torch.signbit(w).any()):
        with pytest.raises(ValueError, match="65535"):
            validate_launch_inputs(naive, "cpu")
    else:
        validate_launch_inputs(naive, "cpu")


@settings(max_examples=15, deadline=None)
@given(cases, st.data())
def test_any_tensor_moved_to_meta_is_named(case, data):
    inp = build_inputs(case)
    present = sorted(k for k, v in launch_tensors(inp).items() if v is not None)
    name = data.draw(st.sampled_from(present))
    if "." in name:
        w, attr = name.split(".")
        bad = replace(inp, **{w: replace(getattr(inp, w), **{attr: getattr(getattr(inp, w), attr).to("meta")})})
    else:
        bad = replace(inp, **{name: getattr(inp, name).to("meta")})
    with pytest.raises(ValueError, match=f"^{name.replace('.', '[.]')}: .*meta"):
        validate_launch_inputs(bad, "cpu")


def test_bad_arguments():
    inp = build_inputs(MoECase(num_tokens=2, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2))
    with pytest.raises(ValueError, match="inputs: expected MoEInputs"):
        validate_launch_inputs({"hidden_states": None}, "cpu")
    with pytest.raises(ValueError, match="device"):
        validate_launch_inputs(inp, "foo")
    with pytest.raises(ValueError, match="device: 'meta'"):
        validate_launch_inputs(inp, "meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="hidden_states: expected a tensor on cuda"):
            validate_launch_inputs(inp, "cuda")
