"""Adversarial cases of issue 15, one section per family; each failed on main before the fix.

Extend the family's table when a new bug is found.  New modules are imported inside the tests so that one missing
name fails its own cases only.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from fp4moe_diag.problem.case import MoECase

B = dict(num_tokens=8, hidden_size=64, intermediate_size=64, num_experts=8, top_k=2)
HERE = Path(__file__).resolve().parent


def _rows(t: int, n: int = 2) -> pd.DataFrame:
    from fp4moe_diag.results import to_frame

    return to_frame([dict(model="m", num_tokens=t, backend="reference", tactic=str(i), status="ok") for i in range(n)])


# ================================================================ family 1: run folders lose data
def _rf(path, mode="new", cfg=None):
    from fp4moe_diag.run_folder import RunFolder

    return RunFolder(path, cfg or {"repeats": 3}, mode)


def f1_second_run_same_out_refused(tmp):
    with _rf(tmp / "r") as rf:
        rf.append_case("T1", _rows(1))
        rf.merge()
    with pytest.raises(ValueError, match="--out.*--resume.*--overwrite"):
        _rf(tmp / "r")


def f1_three_token_runs_with_resume_keep_all(tmp):
    for t in (1, 2, 3):
        with _rf(tmp / "r", "resume") as rf:
            rf.append_case(f"T{t}", _rows(t))
            rf.merge()
    from fp4moe_diag.run_folder import load_run

    assert sorted(load_run(tmp / "r")["num_tokens"].unique()) == [1, 2, 3]


def f1_two_writers_at_once_refused(tmp):
    with _rf(tmp / "r"):
        with pytest.raises(ValueError, match=f"another sweep \\(pid {os.getpid()}"):
            _rf(tmp / "r", "resume")


def f1_save_run_files_are_0644(tmp):
    from fp4moe_diag.run_folder import save_run

    old = os.umask(0o022)
    try:
        out = save_run(_rows(1), tmp / "r")
    finally:
        os.umask(old)
    assert {stat.S_IMODE(Path(out[k]).stat().st_mode) for k in ("parquet", "csv")} == {0o644}


def f1_save_run_writes_a_manifest_naming_both(tmp):
    import json

    from fp4moe_diag.run_folder import save_run
    from fp4moe_diag.atomic_io import sha256_file

    save_run(_rows(1, 3), tmp / "r")
    man = json.loads((tmp / "r" / "manifest.json").read_text())
    assert man["rows"] == 3
    assert man["files"]["results.csv"]["sha256"] == sha256_file(tmp / "r" / "results.csv")


def f1_torn_pair_detected(tmp):
    from fp4moe_diag.run_folder import load_runs, save_run

    save_run(_rows(1, 1), tmp / "r")
    _rows(1, 6).to_csv(tmp / "r" / "results.csv", index=False)  # what a kill between the two writes left
    (tmp / "r" / "results.parquet").write_bytes(b"torn")
    with pytest.raises(ValueError, match="no results file matches manifest.json"):
        load_runs(tmp)


def f1_load_runs_missing_path_raises(tmp):
    from fp4moe_diag.run_folder import load_runs

    with pytest.raises(ValueError, match="does not exist"):
        load_runs(tmp / "nope")


def f1_csv_only_run_visible(tmp):
    from fp4moe_diag.run_folder import load_runs

    (tmp / "r").mkdir()
    _rows(4).to_csv(tmp / "r" / "results.csv", index=False)
    assert load_runs(tmp)["num_tokens"].tolist() == [4, 4]


def f1_temp_files_cleaned_on_next_start(tmp):
    with _rf(tmp / "r") as rf:
        rf.append_case("T1", _rows(1))
    (tmp / "r" / ".tmp-999-ab-.results.csv").write_text("x")
    (tmp / "r" / "parts" / ".tmp-999-cd-T2@x.parquet").write_text("x")
    with _rf(tmp / "r", "resume"):
        assert not list((tmp / "r").rglob(".tmp-*"))


def f1_resume_with_another_config_redoes_cases(tmp):
    with _rf(tmp / "r") as rf:
        rf.append_case("T1", _rows(1))
    with _rf(tmp / "r", "resume", {"repeats": 30}) as rf:
        assert rf.done_cases() == set()
    with _rf(tmp / "r", "resume") as rf:
        assert rf.done_cases() == {"T1"}


def f1_out_is_a_file(tmp):
    (tmp / "f").write_text("x")
    with pytest.raises(ValueError, match="--out"):
        _rf(tmp / "f")


FAMILY1 = [f1_second_run_same_out_refused, f1_three_token_runs_with_resume_keep_all, f1_two_writers_at_once_refused,
           f1_save_run_files_are_0644, f1_save_run_writes_a_manifest_naming_both, f1_torn_pair_detected,
           f1_load_runs_missing_path_raises, f1_csv_only_run_visible, f1_temp_files_cleaned_on_next_start,
           f1_resume_with_another_config_redoes_cases, f1_out_is_a_file]


@pytest.mark.parametrize("case", FAMILY1, ids=lambda f: f.__name__)
def test_family1_run_folders(case, tmp_path):
    case(tmp_path)


# ================================================================ family 2: the pre-launch input check
@pytest.fixture(scope="module")
def inp():
    from fp4moe_diag.problem.inputs import build_inputs

    return {"mx": build_inputs(MoECase(**B)), "nv": build_inputs(MoECase(**B, weight_format="nvfp4")),
            "plain": build_inputs(MoECase(**B, activation="swiglu", has_bias=False)),
            "ds": build_inputs(MoECase(**B, routing_method="DeepSeekV3", n_group=4, topk_group=2))}


def _neg_weight_naive(i):
    from fp4moe_diag.problem.routing import naive_pack_topk

    w = i.topk_weights.clone()
    w[0, 0] = -0.25
    return replace(i, topk_weights=w, packed_topk_ids=naive_pack_topk(i.topk_ids, w))


def _nan(t):
    t = t.clone()
    t.view(-1)[0] = float("nan")
    return t


FAMILY2 = {
    "seed_script_unmasked_packing": ("mx", _neg_weight_naive, "packed_topk_ids:.*65535.*mask"),
    "packed_ids_disagree": ("mx", lambda i: replace(i, packed_topk_ids=i.packed_topk_ids ^ (1 << 16)),
                            "packed_topk_ids: decoded expert ids disagree"),
    "packed_weights_disagree": ("mx", lambda i: replace(i, packed_topk_ids=i.packed_topk_ids ^ 0x40),
                                "packed_topk_ids: decoded routing weights disagree"),
    "packed_on_meta": ("mx", lambda i: replace(i, packed_topk_ids=i.packed_topk_ids.to("meta")),
                       "packed_topk_ids: .*meta"),
    "packed_wrong_shape": ("mx", lambda i: replace(i, packed_topk_ids=i.packed_topk_ids[:, :1]),
                           "packed_topk_ids: expected shape"),
    "meta_nvfp4_global_scale": ("nv", lambda i: replace(i, w13=replace(i.w13, global_scale=i.w13.global_scale.to("meta"))),
                                "w13.global_scale: .*meta"),
    "nan_global_scale": ("nv", lambda i: replace(i, w2=replace(i.w2, global_scale=_nan(i.w2.global_scale))),
                         "w2.global_scale: expected finite values > 0"),
    "zero_global_scale": ("nv", lambda i: replace(i, w2=replace(i.w2, global_scale=i.w2.global_scale * 0)),
                          "w2.global_scale: expected finite values > 0"),
    "missing_global_scale": ("nv", lambda i: replace(i, w13=replace(i.w13, global_scale=None)),
                             "w13.global_scale: NVFP4 needs"),
    "global_scale_wrong_shape": ("nv", lambda i: replace(i, w13=replace(i.w13, global_scale=i.w13.global_scale[:3])),
                                 "w13.global_scale: expected float32 of shape"),
    "bias_wrong_shape": ("mx", lambda i: replace(i, w13_bias=i.w13_bias[:, :5]), "w13_bias: expected shape"),
    "bias_wrong_dtype": ("mx", lambda i: replace(i, w2_bias=i.w2_bias.to(torch.int32)), "w2_bias: expected dtype"),
    "bias_missing": ("mx", lambda i: replace(i, w2_bias=None), "w2_bias: required"),
    "bias_without_has_bias": ("plain", lambda i: replace(i, w13_bias=torch.zeros(8, 128)), "w13_bias: expected None"),
    "nan_bias": ("mx", lambda i: replace(i, w13_bias=_nan(i.w13_bias)), "w13_bias: expected finite"),
    "scale_wrong_shape": ("mx", lambda i: replace(i, w13=replace(i.w13, scale=i.w13.scale[:, :, :1])),
                          "w13.scale: expected shape"),
    "scale_float32": ("mx", lambda i: replace(i, w2=replace(i.w2, scale=i.w2.scale.float())), "w2.scale: expected dtype"),
    "nvfp4_scale_uint8": ("nv", lambda i: replace(i, w2=replace(i.w2, scale=i.w2.scale.view(torch.uint8))),
                          "w2.scale: expected dtype torch.float8_e4m3fn"),
    "nan_routing_weights": ("mx", lambda i: replace(i, topk_weights=_nan(i.topk_weights)),
                            "topk_weights: expected finite"),
    "inf_routing_weights": ("mx", lambda i: replace(i, topk_weights=i.topk_weights + float("inf")),
                            "topk_weights: expected finite"),
    "nan_hidden_states": ("mx", lambda i: replace(i, hidden_states=_nan(i.hidden_states)), "hidden_states: expected finite"),
    "swiglu_limit_zero": ("mx", lambda i: replace(i, swiglu_limit=i.swiglu_limit * 0), "swiglu_limit: expected finite values > 0"),
    "swiglu_alpha_wrong_shape": ("mx", lambda i: replace(i, swiglu_alpha=i.swiglu_alpha[:2]), "swiglu_alpha: expected shape"),
    "routing_bias_missing_deepseek": ("ds", lambda i: replace(i, routing_bias=None), "routing_bias: required"),
    "weights_meta": ("mx", lambda i: replace(i, w2=replace(i.w2, data=i.w2.data.to("meta"))), "w2.data: .*meta"),
    "weights_wrong_block": ("mx", lambda i: replace(i, w13=replace(i.w13, block_size=16)), "w13.block_size"),
}


@pytest.mark.parametrize("name", sorted(FAMILY2))
def test_family2_launch_inputs_rejected(name, inp):
    from fp4moe_diag.validate import validate_launch_inputs

    which, mutate, msg = FAMILY2[name]
    validate_launch_inputs(inp[which], "cpu")  # the unmutated inputs pass
    with pytest.raises(ValueError, match=msg):
        validate_launch_inputs(mutate(inp[which]), "cpu")


# ================================================================ family 3: CLI errors name the flag
def _parser():
    from fp4moe_diag import cli_args as A

    p = argparse.ArgumentParser(prog="fp4moe-diag", exit_on_error=True)
    p.add_argument("--tokens", type=A.token_list)
    p.add_argument("--ep", type=A.ep_list)
    p.add_argument("--models", type=A.model_entries)
    p.add_argument("--model", type=A.model_names)
    p.add_argument("--backends", type=A.backend_names)
    p.add_argument("--device", type=A.device)
    p.add_argument("--screen", type=A.positive_int)
    p.add_argument("--repeats", type=A.positive_int)
    p.add_argument("--warmup", type=A.non_negative_int)
    p.add_argument("--max-seconds-per-tactic", type=A.positive_float)
    p.add_argument("--out", type=A.out_dir)
    p.add_argument("--only", type=A.notebook_prefixes)
    p.add_argument("--param", type=A.report_param, action="append")
    p.add_argument("--log", type=A.log_file)
    p.add_argument("--reproduce-tokens", type=A.positive_int)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("dirs", nargs="*", type=A.existing_dir)
    return p


FAMILY3 = {
    "unknown_model": (["--models", "gpt-oss-21b"], "--models", "unknown model"),
    "tokens_zero": (["--tokens", "0"], "--tokens", ">= 1"),
    "tokens_negative": (["--tokens", "-1"], "--tokens", ">= 1"),
    "tokens_abc": (["--tokens", "abc"], "--tokens", "integer"),
    "ep_abc": (["--ep", "abc"], "--ep", "integer"),
    "backend_nonexistent": (["--backends", "nonexistent"], "--backends", "unknown backend"),
    "device_foo": (["--device", "foo"], "--device", "cpu, cuda"),
    "screen_zero": (["--screen", "0"], "--screen", ">= 1"),
    "repeats_zero": (["--repeats", "0"], "--repeats", ">= 1"),
    "warmup_negative": (["--warmup", "-1"], "--warmup", ">= 0"),
    "max_seconds_negative": (["--max-seconds-per-tactic", "-1"], "--max-seconds-per-tactic", "> 0"),
    "max_seconds_nan": (["--max-seconds-per-tactic", "nan"], "--max-seconds-per-tactic", "> 0"),
    "out_is_a_file": (["--out", str(HERE / "conftest.py")], "--out", "not a directory"),
    "out_under_a_file": (["--out", str(HERE / "conftest.py" / "run")], "--out", "is a file"),
    "report_only_99": (["--only", "99"], "--only", "no notebook starts with '99'"),
    "report_param_bad_json": (["--param", "x=[1,"], "--param", "not valid JSON"),
    "report_param_no_equals": (["--param", "x"], "--param", "key=value"),
    "reproduce_log_missing": (["--log", "/nonexistent/log.txt"], "--log", "does not exist"),
    "reproduce_tokens_zero": (["--reproduce-tokens", "0"], "--reproduce-tokens", ">= 1"),
    "shapes_model_nonexistent": (["--model", "nonexistent"], "--model", "unknown model"),
    "versions_dir_missing": (["/nonexistent_dir"], "dirs", "does not exist"),
    "models_bad_ep": (["--models", "gpt-oss-20b:x"], "--models", "ep must be an integer"),
}


@pytest.mark.parametrize("name", sorted(FAMILY3))
def test_family3_cli_error_is_one_line_naming_the_flag(name, capsys):
    argv, flag, msg = FAMILY3[name]
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert f"argument {flag}" in err[-1] and msg in err[-1], err[-1]


def test_family3_cross_flag_checks(tmp_path, capsys):
    from fp4moe_diag import cli_args as A
    from fp4moe_diag.run_folder import save_run

    save_run(_rows(1), tmp_path / "run")
    p = _parser()
    cases = [(["--out", str(tmp_path / "run")], "argument --out", "--resume"),
             (["--resume", "--overwrite"], "argument --resume", "--overwrite"),
             (["--models", "gpt-oss-20b", "--ep", "3"], "argument --ep", "EP sizes")]
    for argv, flag, msg in cases:
        with pytest.raises(SystemExit) as e:
            A.check_sweep_args(p, p.parse_args(argv))
        assert e.value.code == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert flag in last and msg in last, last
    garbage = tmp_path / "log.txt"
    garbage.write_text("this is not a vLLM log\n")
    with pytest.raises(SystemExit) as e:
        A.check_reproduce_args(p, p.parse_args(["--log", str(garbage)]))
    assert e.value.code == 2 and "argument --log" in capsys.readouterr().err


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
    fn, msg = FAMILY4[name]
    if msg is None:
        fn()
    else:
        with pytest.raises(ValueError, match=msg):
            fn()


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
    fn, msg = FAMILY5[name]
    if msg is None:
        fn()
    else:
        with pytest.raises(ValueError, match=msg):
            fn()


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
