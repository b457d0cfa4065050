"""cli_args: what each type accepts (the rejections are in test_adversarial.py, family 3)."""

from __future__ import annotations

import argparse

import pytest

from fp4moe_diag import cli_args as A


def test_accepted_values(tmp_path):
    assert A.token_list("1, 16,256,16") == (1, 16, 256)
    assert A.ep_list("2") == (2,)
    assert A.model_entries("gpt-oss-20b:2,gpt-oss-120b:4:64") == ("gpt-oss-20b:2", "gpt-oss-120b:4:64")
    assert A.model_names("gpt-oss-20b") == ["gpt-oss-20b"]
    assert A.backend_names("reference,triton,reference") == ("reference", "triton")
    assert A.device("cpu") == "cpu"
    assert A.positive_int("3") == 3 and A.non_negative_int("0") == 0
    assert A.positive_float("0.5") == 0.5 and A.non_negative_float("0") == 0.0
    assert A.out_dir(str(tmp_path / "new" / "run")) == tmp_path / "new" / "run"
    assert not (tmp_path / "new").exists()  # checked, not created
    assert A.out_file(str(tmp_path / "v.json")) == tmp_path / "v.json"
    assert A.notebook_prefixes("01,05") == ["01", "05"]
    assert A.report_param("n=3") == ("n", 3) and A.report_param("s=text") == ("s", "text")
    assert A.report_param('l=["a", 1]') == ("l", ["a", 1]) and A.report_param("b=true") == ("b", True)
    assert A.existing_dir(str(tmp_path)) == tmp_path
    log = tmp_path / "log.txt"
    log.write_text("(EngineCore_DP0 pid=1) top_k : 4\n")
    assert A.log_file(str(log)) == log
    assert A.type_error_line(A.positive_int, "0") == "expected an integer >= 1, got 0"


def test_reproduce_log_is_parsed_with_the_process_flag(tmp_path):
    import test_vllm_log as T

    log = tmp_path / "two.log"
    log.write_text(T.SEED_LOG + T.SEED_LOG.replace("EngineCore_DP0 pid=121033", "EngineCore_DP1 pid=7"))
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--log", type=A.log_file)
    p.add_argument("--process")
    p.add_argument("--tokens", type=A.positive_int)
    case = A.check_reproduce_args(p, p.parse_args(["--log", str(log), "--process", "7", "--tokens", "4"]))
    assert case.num_tokens == 4 and case.local_num_experts == 16
    with pytest.raises(SystemExit):
        A.check_reproduce_args(p, p.parse_args(["--log", str(log)]))  # two processes, none chosen
    assert A.check_reproduce_args(p, p.parse_args([])) is None
