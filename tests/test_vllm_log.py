"""Tests for fp4moe_diag.problem.vllm_log: parse vLLM's logged routed-MoE kwargs into a MoECase."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fp4moe_diag.problem.case import ActivationFormat, GatedActivation, MoECase, RoutingMethod, WeightFormat
from fp4moe_diag.problem.shapes import load_vllm_cases
from fp4moe_diag.problem.vllm_log import TensorDesc, parse_vllm_kwargs_lines, parse_vllm_kwargs_log

SEED_FILE = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "flashinfer-routed-moe-autotune-bug.txt"

# Verbatim from the seed's repro docstring (vLLM, gpt-oss-20b, DP2 + EP, rank 0).
SEED_LOG = """\
(EngineCore_DP0 pid=121033) topk_ids : torch.int32 torch.Size([16384, 4]) (4, 1) cuda:0
(EngineCore_DP0 pid=121033) routing_bias : None
(EngineCore_DP0 pid=121033) hidden_states : torch.bfloat16 torch.Size([16384, 3072]) (3072, 1) cuda:0
(EngineCore_DP0 pid=121033) hidden_states_scale : None
(EngineCore_DP0 pid=121033) gemm1_weights : torch.uint8 torch.Size([16, 6144, 1536]) (9437184, 1536, 1) cuda:0
(EngineCore_DP0 pid=121033) gemm1_weights_scale : torch.float8_e4m3fn torch.Size([16, 6144, 96]) (589824, 96, 1) cuda:0
(EngineCore_DP0 pid=121033) gemm1_bias : torch.float32 torch.Size([16, 6144]) (6144, 1) cuda:0
(EngineCore_DP0 pid=121033) gemm1_alpha : torch.float32 torch.Size([16]) (1,) cuda:0
(EngineCore_DP0 pid=121033) gemm1_beta : torch.float32 torch.Size([16]) (1,) cuda:0
(EngineCore_DP0 pid=121033) gemm1_clamp_limit : torch.float32 torch.Size([16]) (1,) cuda:0
(EngineCore_DP0 pid=121033) gemm2_weights : torch.uint8 torch.Size([16, 3072, 1536]) (4718592, 1536, 1) cuda:0
(EngineCore_DP0 pid=121033) gemm2_weights_scale : torch.float8_e4m3fn torch.Size([16, 3072, 96]) (294912, 96, 1) cuda:0
(EngineCore_DP0 pid=121033) gemm2_bias : torch.float32 torch.Size([16, 3072]) (3072, 1) cuda:0
(EngineCore_DP0 pid=121033) output1_scale_scalar : None
(EngineCore_DP0 pid=121033) output1_scale_gate_scalar : None
(EngineCore_DP0 pid=121033) output2_scale_scalar : None
(EngineCore_DP0 pid=121033) num_experts : 32
(EngineCore_DP0 pid=121033) top_k : 4
(EngineCore_DP0 pid=121033) n_group : None
(EngineCore_DP0 pid=121033) topk_group : None
(EngineCore_DP0 pid=121033) intermediate_size : 3072
(EngineCore_DP0 pid=121033) local_expert_offset : 0
(EngineCore_DP0 pid=121033) local_num_experts : 16
(EngineCore_DP0 pid=121033) routed_scaling_factor : None
(EngineCore_DP0 pid=121033) tile_tokens_dim : None
(EngineCore_DP0 pid=121033) routing_method_type : 1
(EngineCore_DP0 pid=121033) do_finalize : True
(EngineCore_DP0 pid=121033) output : torch.bfloat16 torch.Size([16384, 3072]) (3072, 1) cuda:0
(EngineCore_DP0 pid=121033) tune_max_num_tokens : 1
"""


def _drop(text: str, *names: str) -> str:
    """The log without the lines for ``names``."""
    pat = re.compile(r"\)\s(" + "|".join(names) + r") :")
    return "".join(line for line in text.splitlines(True) if not pat.search(line))


def _set(text: str, name: str, value: str) -> str:
    """The log with ``name``'s value replaced by ``value``."""
    out, n = re.subn(rf"^(.*\) {name} : ).*$", lambda m: m.group(1) + value, text, flags=re.M)
    assert n == 1, name
    return out


def _render(case: MoECase, prefix: str = "(EngineCore_DP0 pid=1) ") -> str:
    """What vLLM would log for ``case`` (bf16 hidden states, trtllm-gen weight shapes)."""
    t, h, i, loc, blk = case.num_tokens, case.hidden_size, case.intermediate_size, case.local_num_experts, case.block_size

    def tens(dtype: str, *shape: int) -> str:
        strides, acc = [], 1
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
        return f"torch.{dtype} torch.Size([{', '.join(map(str, shape))}]) ({', '.join(map(str, strides))}{',' if len(shape) == 1 else ''}) cuda:0"

    kw: dict[str, str] = {
        "topk_ids": tens("int32", t, case.top_k),
        "routing_bias": "None",
        "hidden_states": tens("bfloat16", t, h),
        "gemm1_weights": tens("uint8", loc, 2 * i, h // 2),
        "gemm1_weights_scale": tens("float8_e4m3fn", loc, 2 * i, h // blk),
        "gemm2_weights": tens("uint8", loc, h, i // 2),
        "gemm2_weights_scale": tens("float8_e4m3fn", loc, h, i // blk),
    }
    if case.has_bias:
        kw["gemm1_bias"] = tens("float32", loc, 2 * i)
        kw["gemm2_bias"] = tens("float32", loc, h)
    if case.activation is GatedActivation.SWIGLU_OAI:
        for name in ("gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"):
            kw[name] = tens("float32", loc)
    kw.update(
        num_experts=str(case.num_experts), top_k=str(case.top_k), n_group=str(case.n_group),
        topk_group=str(case.topk_group), intermediate_size=str(i),
        local_expert_offset=str(case.local_expert_offset), local_num_experts=str(loc),
        routed_scaling_factor=str(case.routed_scaling_factor),
        routing_method_type=str(int(case.routing_method)), do_finalize="True",
        output=tens("bfloat16", t, h),
    )
    return "".join(f"{prefix}{k} : {v}\n" for k, v in kw.items())


def _assert_seed_case(case: MoECase) -> None:
    assert case.num_tokens == 16384
    assert case.hidden_size == 3072
    assert case.intermediate_size == 3072
    assert case.num_experts == 32
    assert case.local_num_experts == 16
    assert case.local_expert_offset == 0
    assert case.top_k == 4
    assert case.routing_method is RoutingMethod.Renormalize
    assert case.weight_format is WeightFormat.MXFP4
    assert case.has_bias is True
    assert case.activation is GatedActivation.SWIGLU_OAI
    assert (case.swiglu_alpha, case.swiglu_beta, case.swiglu_limit) == (1.702, 1.0, 7.0)
    assert case.activation_format is ActivationFormat.BF16
    assert case.n_group is None and case.topk_group is None and case.routed_scaling_factor is None
    assert (case.ep_size, case.ep_rank) == (2, 0)


# ---- the seed log -----------------------------------------------------------------------------

def test_seed_log_parses_to_the_gpt_oss_20b_ep2_case() -> None:
    _assert_seed_case(parse_vllm_kwargs_log(SEED_LOG))


def test_seed_constant_matches_the_seed_file() -> None:
    if not SEED_FILE.is_file():
        pytest.skip("seed file not present")
    seed_lines = [ln.strip() for ln in SEED_FILE.read_text().splitlines() if ln.strip().startswith("(EngineCore_DP0 pid=121033)")]
    assert seed_lines == SEED_LOG.splitlines()


def test_seed_lines_values() -> None:
    kw = parse_vllm_kwargs_lines(SEED_LOG)
    assert len(kw) == 29
    assert list(kw)[:3] == ["topk_ids", "routing_bias", "hidden_states"]
    assert kw["topk_ids"] == TensorDesc("torch.int32", (16384, 4), (4, 1), "cuda:0")
    assert kw["gemm1_weights"] == TensorDesc("torch.uint8", (16, 6144, 1536), (9437184, 1536, 1), "cuda:0")
    assert kw["gemm1_weights_scale"].dtype == "torch.float8_e4m3fn"
    assert kw["gemm1_alpha"] == TensorDesc("torch.float32", (16,), (1,), "cuda:0")
    assert kw["gemm1_alpha"].numel == 16
    assert kw["routing_bias"] is None and kw["routed_scaling_factor"] is None
    assert kw["num_experts"] == 32 and kw["local_num_experts"] == 16
    assert kw["do_finalize"] is True
    assert kw["tune_max_num_tokens"] == 1 and kw["routing_method_type"] == 1


def test_tensor_desc_is_frozen() -> None:
    d = TensorDesc("torch.int32", (2, 3), (3, 1), "cpu")
    with pytest.raises(AttributeError):
        d.dtype = "torch.int64"  # type: ignore[misc]
    assert d.numel == 6


def test_docstring_wrapped_seed_parses() -> None:
    wrapped = '    # Reconstruct input tensors from vLLM.\n    """\n' + "".join(
        f"    {ln}\n" for ln in SEED_LOG.splitlines()
    ) + '\n    """\n\n'
    _assert_seed_case(parse_vllm_kwargs_log(wrapped))


# ---- prefixes ---------------------------------------------------------------------------------

def test_other_dp_rank_and_pid() -> None:
    text = SEED_LOG.replace("(EngineCore_DP0 pid=121033)", "(EngineCore_DP1 pid=7)")
    assert parse_vllm_kwargs_log(text) == parse_vllm_kwargs_log(SEED_LOG)


@settings(max_examples=25, deadline=None)
@given(rank=st.integers(0, 511), pid=st.integers(1, 2**22))
def test_any_dp_rank_and_pid(rank: int, pid: int) -> None:
    text = SEED_LOG.replace("(EngineCore_DP0 pid=121033)", f"(EngineCore_DP{rank} pid={pid})")
    _assert_seed_case(parse_vllm_kwargs_log(text))


def test_no_prefix() -> None:
    text = SEED_LOG.replace("(EngineCore_DP0 pid=121033) ", "")
    assert "EngineCore" not in text
    _assert_seed_case(parse_vllm_kwargs_log(text))


def test_mixed_prefixes_and_logger_prefix() -> None:
    lines = SEED_LOG.splitlines() + ["(EngineCore_DP0 pid=121033) ", "(VllmWorker_DP1 rank=0 pid=3) x : 1"]
    lines[0] = lines[0].replace("(EngineCore_DP0 pid=121033) ", "")
    lines[1] = lines[1].replace(") ", ") INFO 11-01 12:49:12 [trtllm_moe.py:130] ", 1)
    with pytest.raises(ValueError, match="more than one process.*VllmWorker_DP1 rank=0 pid=3.*process="):
        parse_vllm_kwargs_log("\n".join(lines))  # another process's line is never merged silently
    _assert_seed_case(parse_vllm_kwargs_log("\n".join(lines), process="EngineCore_DP0"))
    _assert_seed_case(parse_vllm_kwargs_log("\n".join(lines), process=121033))


# ---- optional fields --------------------------------------------------------------------------

def test_no_bias_lines_means_no_bias() -> None:
    case = parse_vllm_kwargs_log(_drop(SEED_LOG, "gemm1_bias", "gemm2_bias"))
    assert case.has_bias is False
    assert case.activation is GatedActivation.SWIGLU_OAI


def test_bias_none_means_no_bias() -> None:
    assert parse_vllm_kwargs_log(_set(_set(SEED_LOG, "gemm1_bias", "None"), "gemm2_bias", "None")).has_bias is False
    with pytest.raises(ValueError, match="gemm1_bias/gemm2_bias: the log has gemm2_bias but not the other"):
        parse_vllm_kwargs_log(_set(SEED_LOG, "gemm1_bias", "None"))  # never dropped silently


def test_no_alpha_beta_clamp_means_plain_swiglu() -> None:
    case = parse_vllm_kwargs_log(_drop(SEED_LOG, "gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"))
    assert case.activation is GatedActivation.SWIGLU
    assert (case.swiglu_alpha, case.swiglu_beta, case.swiglu_limit) == (None, None, None)
    assert case.has_bias is True


def test_scalar_alpha_value_is_used() -> None:
    case = parse_vllm_kwargs_log(_set(SEED_LOG, "gemm1_clamp_limit", "10.0"))
    assert case.swiglu_limit == 10.0 and case.swiglu_alpha == 1.702


def test_missing_local_fields_default_from_weights() -> None:
    case = parse_vllm_kwargs_log(_drop(SEED_LOG, "local_num_experts", "local_expert_offset"))
    assert (case.local_num_experts, case.local_expert_offset) == (16, 0)


def test_minimal_log() -> None:
    text = (
        "hidden_states : torch.bfloat16 torch.Size([8, 2048]) (2048, 1) cuda:0\n"
        "num_experts : 128\ntop_k : 8\nintermediate_size : 768\n"
    )
    case = parse_vllm_kwargs_log(text, model="m")
    assert (case.num_tokens, case.hidden_size, case.intermediate_size) == (8, 2048, 768)
    assert case.local_num_experts == 128 and case.top_k == 8 and case.model == "m"
    assert case.routing_method is RoutingMethod.Renormalize
    assert case.has_bias is False and case.activation is GatedActivation.SWIGLU


def test_routing_method_enum_repr_and_float_scalar() -> None:
    text = _set(SEED_LOG, "routing_method_type", "<RoutingMethodType.RenormalizeNaive: 4>")
    assert parse_vllm_kwargs_log(text).routing_method is RoutingMethod.RenormalizeNaive
    kw = parse_vllm_kwargs_lines("routed_scaling_factor : 2.5\nx : -1e-05\ny : False")
    assert kw == {"routed_scaling_factor": 2.5, "x": -1e-05, "y": False}


# ---- formats ----------------------------------------------------------------------------------

def test_block16_scales_mean_nvfp4() -> None:
    text = _set(SEED_LOG, "gemm1_weights_scale",
                "torch.float8_e4m3fn torch.Size([16, 6144, 192]) (1179648, 192, 1) cuda:0")
    text = _set(text, "gemm2_weights_scale",
                "torch.float8_e4m3fn torch.Size([16, 3072, 192]) (589824, 192, 1) cuda:0")
    assert parse_vllm_kwargs_log(text).weight_format is WeightFormat.NVFP4


def test_flattened_scales_use_element_count() -> None:
    text = _set(SEED_LOG, "gemm1_weights_scale", "torch.float8_e4m3fn torch.Size([9437184]) (1,) cuda:0")
    assert parse_vllm_kwargs_log(text).weight_format is WeightFormat.MXFP4


def test_packed_fp4_hidden_states_double_the_hidden_size() -> None:
    text = _set(SEED_LOG, "hidden_states", "torch.uint8 torch.Size([16384, 1536]) (1536, 1) cuda:0")
    assert parse_vllm_kwargs_log(text).hidden_size == 3072


def test_fp8_hidden_states_mean_mxfp8_activations() -> None:
    text = _set(SEED_LOG, "hidden_states", "torch.float8_e4m3fn torch.Size([16384, 3072]) (3072, 1) cuda:0")
    assert parse_vllm_kwargs_log(text).activation_format is ActivationFormat.MXFP8


def test_deepseek_style_log() -> None:
    case = load_vllm_cases(models=["DeepSeek-R1-FP4"], ep_sizes=[8], token_counts=[64])[0]
    text = _render(case)
    assert "n_group : 8" in text and "routed_scaling_factor : 2.5" in text
    parsed = parse_vllm_kwargs_log(text, model=case.model)
    assert parsed == case
    assert parsed.routing_method is RoutingMethod.DeepSeekV3 and parsed.weight_format is WeightFormat.NVFP4


def test_every_shape_table_case_round_trips() -> None:
    cases = load_vllm_cases(token_counts=[1, 16384])
    assert len(cases) == 36
    for case in cases:
        assert parse_vllm_kwargs_log(_render(case), model=case.model) == case, case.label


# ---- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "bad",
    [
        "this is not a kwargs line",
        "(EngineCore_DP0 pid=121033) topk_ids : torch.int32 banana",
        "(EngineCore_DP0 pid=121033) activation : swiglu",
        "(EngineCore_DP0 pid=121033) : 3",
        '"""x',
    ],
)
def test_garbage_line_raises_quoting_it(bad: str) -> None:
    lines = SEED_LOG.splitlines()
    lines.insert(5, bad)
    with pytest.raises(ValueError) as info:
        parse_vllm_kwargs_lines("\n".join(lines))
    assert bad in str(info.value)
    assert "line 6" in str(info.value)


def test_missing_hidden_states_names_it() -> None:
    with pytest.raises(ValueError, match="hidden_states"):
        parse_vllm_kwargs_log(_drop(SEED_LOG, "hidden_states"))


@pytest.mark.parametrize("name", ["num_experts", "top_k", "intermediate_size"])
def test_missing_required_scalar_names_it(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        parse_vllm_kwargs_log(_drop(SEED_LOG, name))


@pytest.mark.parametrize(
    "name, value, field",
    [
        ("gemm1_weights", "torch.uint8 torch.Size([16, 6144, 1024]) (6291456, 1024, 1) cuda:0", "gemm1_weights"),
        ("gemm2_weights", "torch.uint8 torch.Size([16, 3072, 1024]) (3145728, 1024, 1) cuda:0", "gemm2_weights"),
        ("local_num_experts", "8", "gemm1_weights"),
        ("intermediate_size", "2048", "gemm1_weights"),
        ("topk_ids", "torch.int32 torch.Size([16384, 8]) (8, 1) cuda:0", "topk_ids"),
        ("output", "torch.bfloat16 torch.Size([16, 3072]) (3072, 1) cuda:0", "output"),
        ("gemm1_bias", "torch.float32 torch.Size([16, 3072]) (3072, 1) cuda:0", "gemm1_bias"),
        ("gemm1_alpha", "torch.float32 torch.Size([32]) (1,) cuda:0", "gemm1_alpha"),
        ("gemm1_weights_scale", "torch.float8_e4m3fn torch.Size([16, 6144, 100]) (614400, 100, 1) cuda:0",
         "gemm1_weights_scale"),
        ("gemm2_weights_scale", "torch.float8_e4m3fn torch.Size([16, 3072, 192]) (589824, 192, 1) cuda:0",
         "block sizes disagree"),
        ("gemm1_weights", "torch.bfloat16 torch.Size([16, 6144, 1536]) (9437184, 1536, 1) cuda:0", "packed FP4"),
        ("num_experts", "8", "local_expert_offset"),
    ],
)
def test_inconsistent_shapes_raise(name: str, value: str, field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        parse_vllm_kwargs_log(_set(SEED_LOG, name, value))


def test_conflicting_duplicate_raises() -> None:
    text = SEED_LOG + "(EngineCore_DP0 pid=121033) num_experts : 64\n"
    with pytest.raises(ValueError, match="num_experts logged twice"):
        parse_vllm_kwargs_lines(text)
    assert parse_vllm_kwargs_lines(SEED_LOG + SEED_LOG.splitlines()[0])["top_k"] == 4


def test_unknown_routing_method_type_raises() -> None:
    with pytest.raises(ValueError, match="routing_method"):
        parse_vllm_kwargs_log(_set(SEED_LOG, "routing_method_type", "9"))


def test_an_error_line_with_a_colon_is_not_a_kwarg_line() -> None:
    from fp4moe_diag.problem.vllm_log import extract_kwargs_log, is_kwarg_line

    err = "(EngineCore_DP0 pid=121033) ERROR 11-01 12:49:12 [core.py:800] RuntimeError: Cannot pack tensors on meta"
    assert not is_kwarg_line(err)
    assert is_kwarg_line("(EngineCore_DP0 pid=121033) INFO 11-01 12:49:12 [x.py:1] top_k : 4")
    _assert_seed_case(parse_vllm_kwargs_log(extract_kwargs_log(err + "\n" + SEED_LOG)))


@pytest.mark.parametrize("name, value, message", [
    ("top_k", "-4", "top_k: expected an int >= 1 (experts per token), got -4"),
    ("top_k", "0", "top_k: expected an int >= 1 (experts per token), got 0"),
    ("top_k", "40", "top_k: expected <= num_experts (32), got 40"),
    ("num_experts", "-1", "num_experts: expected an int >= 1 (global experts), got -1"),
    ("intermediate_size", "0", "intermediate_size: expected an int >= 1 (I), got 0"),
])
def test_bad_required_scalar_names_itself_not_a_tensor(name: str, value: str, message: str) -> None:
    line = f"(EngineCore_DP0 pid=121033) {name} : "
    (old,) = [ln for ln in SEED_LOG.splitlines() if ln.startswith(line)]
    with pytest.raises(ValueError) as info:
        parse_vllm_kwargs_log(SEED_LOG.replace(old, line + value))
    assert str(info.value) == message  # it blamed topk_ids' (or gemm1_weights') shape
