"""Adversarial cases of issue 15, families 4-6 (case values, the vLLM log parser, the quantizers); families 1-3 are in
``test_adversarial.py``.  Each failed on main before the fix.

Extend the family's table when a new bug is found.  New modules are imported inside the tests so that one missing
name fails its own cases only.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace

import pytest
import torch

from fp4moe_diag.problem.case import MoECase

B = dict(num_tokens=8, hidden_size=64, intermediate_size=64, num_experts=8, top_k=2)


def _runs_or_raises(fn, msg):
    """A family's entry: ``fn()`` runs (its own asserts) when ``msg`` is None, else raises a ValueError matching it."""
    if msg is None:
        fn()
    else:
        with pytest.raises(ValueError, match=msg):
            fn()


# ================================================================ family 4: values that make a case silently wrong
FAMILY4 = {
    "has_bias_no": (lambda: MoECase(**B, has_bias="no"), "has_bias"),
    "has_bias_one": (lambda: MoECase(**B, has_bias=1), "has_bias"),
    "from_record_has_bias_False_string": (lambda: _assert(MoECase.from_record({**B, "has_bias": "False"}).has_bias
                                                          is False), None),
    "from_record_has_bias_yes": (lambda: MoECase.from_record({**B, "has_bias": "yes"}), "has_bias"),
    "nan_alpha": (lambda: MoECase(**B, swiglu_alpha=float("nan")), "swiglu_alpha"),
    "inf_beta": (lambda: MoECase(**B, swiglu_beta=float("inf")), "swiglu_beta"),
    "inf_limit": (lambda: MoECase(**B, swiglu_limit=float("inf")), "swiglu_limit"),
    "inf_routed_scaling": (lambda: MoECase(**B, routed_scaling_factor=float("inf")), "routed_scaling_factor"),
    "str_routed_scaling_ctor": (lambda: MoECase(**B, routed_scaling_factor="2"), "routed_scaling_factor"),
    "str_routed_scaling_record": (lambda: _assert(MoECase.from_record({**B, "routed_scaling_factor": "2"})
                                                  .routed_scaling_factor == 2.0), None),
    "seed_2_70": (lambda: MoECase(**{**B, "seed": 2**70}), "seed"),
    "from_record_fractional_top_k": (lambda: MoECase.from_record({**B, "top_k": 2.5}), "top_k"),
    "num_tokens_beyond_int32": (lambda: MoECase(**{**B, "num_tokens": 2**40}), "num_tokens"),
    "build_inputs_over_limit": (lambda: _build(MoECase(**B), max_bytes=1000), "case: build_inputs would allocate"),
    "build_inputs_env_limit": (lambda: _build_env(MoECase(**B), "1K"), "FP4MOE_MAX_INPUT_BYTES"),
    "huge_tokens_refused_before_allocating": (lambda: _build(MoECase(**{**B, "num_tokens": 10**9})),
                                              "GiB.*over the limit"),
}


def _assert(cond):
    assert cond


def _build(case, **kw):
    from fp4moe_diag.problem.inputs import build_inputs

    return build_inputs(case, "cpu", **kw)


def _build_env(case, value):
    old = os.environ.get("FP4MOE_MAX_INPUT_BYTES")
    os.environ["FP4MOE_MAX_INPUT_BYTES"] = value
    try:
        return _build(case)
    finally:
        if old is None:
            del os.environ["FP4MOE_MAX_INPUT_BYTES"]
        else:
            os.environ["FP4MOE_MAX_INPUT_BYTES"] = old


@pytest.mark.parametrize("name", sorted(FAMILY4))
def test_family4_case_values(name):
    _runs_or_raises(*FAMILY4[name])


def test_family4_estimate_says_what_build_inputs_allocates():
    from fp4moe_diag.problem.inputs import estimate_input_bytes

    c = MoECase(**B)
    assert 0 < estimate_input_bytes(c) < estimate_input_bytes(c.with_tokens(10**6))
    assert estimate_input_bytes(MoECase(**{**B, "num_tokens": 10**9})) > 64 * 2**30


# ================================================================ family 5: the vLLM log parser
def _seed_log() -> str:
    import test_vllm_log as T

    return T.SEED_LOG


def _dp1(text: str) -> str:
    return text.replace("(EngineCore_DP0 pid=121033)", "(EngineCore_DP1 pid=121034)").replace(
        "local_expert_offset : 0", "local_expert_offset : 16")


def _parse(text, **kw):
    from fp4moe_diag.problem.vllm_log import parse_vllm_kwargs_log

    return parse_vllm_kwargs_log(text, **kw)


def _dp0_missing_offset_plus_dp1():
    dp0 = "".join(ln for ln in _seed_log().splitlines(True) if "local_expert_offset" not in ln)
    return dp0 + _dp1(_seed_log())


FAMILY5 = {
    "dp0_missing_line_takes_dp1_offset": (lambda: _parse(_dp0_missing_offset_plus_dp1()), "more than one process"),
    "same_name_two_pids": (lambda: _parse(_seed_log() + _seed_log().replace("pid=121033", "pid=9")),
                           "more than one process"),
    "process_picks_dp0": (lambda: _assert(_parse(_dp0_missing_offset_plus_dp1(), process="EngineCore_DP0")
                                          .local_expert_offset == 0), None),
    "process_picks_dp1": (lambda: _assert(_parse(_seed_log() + _dp1(_seed_log()), process=121034)
                                          .local_expert_offset == 16), None),
    "process_not_in_log": (lambda: _parse(_seed_log(), process="EngineCore_DP7"), "process: no kwarg line"),
    "gemm2_bias_without_gemm1_bias": (lambda: _parse("".join(ln for ln in _seed_log().splitlines(True)
                                                             if "gemm1_bias" not in ln)), "gemm1_bias/gemm2_bias"),
    "none_input": (lambda: _parse(None), "text: expected"),
    "bytes_input": (lambda: _parse(b"x : 1"), "text: expected"),
    "overlong_line": (lambda: _parse(_seed_log() + "(EngineCore_DP0 pid=121033) x : " + "a" * 100_000),
                      "longer than any kwarg line"),
}


@pytest.mark.parametrize("name", sorted(FAMILY5))
def test_family5_parser(name):
    _runs_or_raises(*FAMILY5[name])


def test_family5_whitespace_lines_are_linear():
    """Interior whitespace made the old ``.*?\\s*$`` quadratic (32 KB: seconds).  2000 lines of 4 KB each would take
    minutes if quadratic (~16M steps per line), and take well under a second when linear: the 60 s bound holds on
    any loaded machine and still catches a quadratic parser."""
    from fp4moe_diag.problem.vllm_log import MAX_LINE_CHARS, parse_vllm_kwargs_lines

    pad = MAX_LINE_CHARS - 12
    lines = [f"x{i} : 1{' ' * pad}2" for i in range(2000)]
    ws = " " * 32768  # a 32 KB whitespace line is a blank line
    t0 = time.process_time()
    for ln in lines:
        with pytest.raises(ValueError, match="cannot read"):
            parse_vllm_kwargs_lines(ln)
    assert parse_vllm_kwargs_lines(ws + "\n" + "x : 1" + "\n" + ws) == {"x": 1}
    assert time.process_time() - t0 < 60


# ================================================================ family 6: quantizers fail loosely at the edges
def _q():
    import fp4moe_diag.problem.quant as Q

    return Q


X = torch.randn(2, 32)
FAMILY6 = {
    "nvfp4_global_scale_nan": (lambda Q: Q.quantize_nvfp4(X, torch.tensor(float("nan"))), "global_scale"),
    "nvfp4_global_scale_zero": (lambda Q: Q.quantize_nvfp4(X, torch.tensor(0.0)), "global_scale"),
    "nvfp4_global_scale_negative": (lambda Q: Q.quantize_nvfp4(X, -1.0), "global_scale"),
    "nvfp4_global_scale_inf": (lambda Q: Q.quantize_nvfp4(X, float("inf")), "global_scale"),
    "dequantize_nvfp4_global_scale_zero": (lambda Q: (lambda q: Q.dequantize_nvfp4(q.data, q.scale, torch.tensor(0.0)))(
        Q.quantize_nvfp4(X)), "global_scale"),
    "fp4tensor_nvfp4_without_global_scale": (lambda Q: replace(Q.quantize_nvfp4(X), global_scale=None).dequantize(),
                                             "global_scale"),
    # [2, 128] values need [2, 4] ue8m0 bytes: a float32 [2, 1] has exactly those bytes and was reinterpreted
    "float32_scale_to_dequantize_mxfp4": (lambda Q: Q.dequantize_mxfp4(Q.quantize_mxfp4(torch.randn(2, 128)).data,
                                                                       torch.ones(2, 1)), "scale: expected ue8m0"),
    "empty_nvfp4": (lambda Q: Q.quantize_nvfp4(torch.empty(0, 16)), "x: expected a non-empty"),
    "fp8_input": (lambda Q: Q.quantize_mxfp4(X.to(torch.float8_e4m3fn)), "x: expected a floating-point"),
    "fp8_input_nvfp4": (lambda Q: Q.quantize_nvfp4(torch.randn(2, 16).to(torch.float8_e4m3fn)), "x:"),
    "numpy_input": (lambda Q: Q.quantize_mxfp4(X.numpy()), "x: expected a torch.Tensor"),
    "numpy_dequantize": (lambda Q: Q.dequantize_mxfp4(Q.quantize_mxfp4(X).data.numpy(), Q.quantize_mxfp4(X).scale),
                         "data: expected a torch.Tensor"),
    "meta_input": (lambda Q: Q.quantize_nvfp4(X[:, :16].to("meta")), "x: a meta tensor"),
    "meta_input_mxfp4": (lambda Q: Q.quantize_mxfp4(X.to("meta")), "x: a meta tensor"),
    "ue8m0_inf": (lambda Q: Q.ue8m0_from_float(torch.tensor(float("inf"))), "v:"),
    "ue8m0_nan": (lambda Q: Q.ue8m0_from_float(torch.tensor(float("nan"))), "v:"),
    "ue8m0_negative": (lambda Q: Q.ue8m0_from_float(torch.tensor(-1.0)), "v:"),
    "float64_beyond_float32": (lambda Q: Q.quantize_mxfp4(torch.full((1, 32), 1e300, dtype=torch.float64)), "x:"),
}


@pytest.mark.parametrize("name", sorted(FAMILY6))
def test_family6_quantizers(name):
    fn, msg = FAMILY6[name]
    with pytest.raises(ValueError, match=msg):
        fn(_q())


def test_family6_edges_that_must_keep_working():
    Q = _q()
    assert int(Q.ue8m0_from_float(torch.tensor(0.0))) == 0 and int(Q.ue8m0_from_float(torch.tensor(1.0))) == 127
    q = Q.quantize_mxfp4(torch.zeros(1, 32))
    assert torch.equal(q.dequantize(), torch.zeros(1, 32))
    assert math.isfinite(float(Q.quantize_nvfp4(torch.zeros(1, 16)).dequantize().abs().max()))
