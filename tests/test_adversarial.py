"""Adversarial cases of issue 15, families 1-3 (run folders, the pre-launch input check, CLI errors); families 4-6
are in ``test_adversarial_values.py``.  Each failed on main before the fix.

Extend the family's table when a new bug is found.  New modules are imported inside the tests so that one missing
name fails its own cases only.
"""

from __future__ import annotations

import argparse
import os
import stat
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

