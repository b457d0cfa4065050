"""The sweep's ``--tactics BACKEND=REGEX`` filter: the argument's type and its one-line errors (exit 2, nothing run),
``SweepSpec``'s filter map, and ``tune`` with a filter (nothing matched: one ``unsupported`` row; matched: the tactic
runs).  Split out of ``test_ps_layout.py``, where the filter first served the ps tactics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fp4moe_diag import MoECase
from fp4moe_diag import cli_args as A
from fp4moe_diag.runs import SweepSpec

ROOT = Path(__file__).resolve().parents[1]


# ================================================================== sweep --tactics
def test_tactic_filter_type():
    assert A.tactic_filter("triton=-ps") == "triton=-ps"
    assert A.tactic_filter(" triton =m16.*-ps$") == "triton=m16.*-ps$"
    assert A.tactic_filter("reference=a=b") == "reference=a=b"  # only the first '=' splits
    assert A.type_error_line(A.tactic_filter, "reference=torch") is None
    for text, msg in (("reference=(", "not a valid regular expression"),
                      ("reference=[a-", "not a valid regular expression"),
                      ("nosuch=-ps", "unknown backend 'nosuch'"),
                      ("reference", "expected BACKEND=REGEX"),
                      ("=-ps", "expected BACKEND=REGEX"),
                      ("reference=", "expected BACKEND=REGEX")):
        line = A.type_error_line(A.tactic_filter, text)
        assert line is not None and msg in line and "\n" not in line, (text, line)


SWEEP_ERRORS = {
    "bad_regex": (["--tactics", "reference=("], "not a valid regular expression"),
    "unknown_backend": (["--tactics", "nosuch=x"], "unknown backend"),
    "missing_equals": (["--tactics", "reference"], "BACKEND=REGEX"),
    "not_in_backends": (["--backends", "reference", "--tactics", "triton=-ps"], "no backend of backends"),
    "twice": (["--tactics", "reference=a", "--tactics", "reference=b"], "two filters"),
}


@pytest.mark.parametrize("name", sorted(SWEEP_ERRORS))
def test_sweep_tactics_errors_exit_2_with_one_line(name, capsys, tmp_path):
    from fp4moe_diag.cli import main

    argv, msg = SWEEP_ERRORS[name]
    with pytest.raises(SystemExit) as e:
        main(["sweep", "--device", "cpu", "--no-progress", "--no-ceilings", "--out", str(tmp_path / "run"), *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if "error:" in ln]
    assert len(lines) == 1 and "argument --tactics" in lines[0] and msg in lines[0], err
    assert not (tmp_path / "run").exists()  # nothing ran


def test_sweep_tactics_error_from_the_command_line(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    p = subprocess.run([sys.executable, "-m", "fp4moe_diag", "sweep", "--device", "cpu", "--out", str(tmp_path / "r"),
                        "--backends", "reference", "--tactics", "reference=torch", "--tactics", "triton=-ps"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    last = p.stderr.strip().splitlines()[-1]
    assert "argument --tactics" in last and "'triton'" in last and "no backend of backends" in last, p.stderr
    assert "Traceback" not in p.stderr


def test_sweep_spec_filter_map():
    from fp4moe_diag.measure.options import MeasureOptions as M

    spec = SweepSpec(models=("gpt-oss-20b",), backends=("reference",), options=M(tactic_filters=("reference=torch",)))
    assert dict(spec.options.filters) == {"reference": "torch"} and spec.options.tactic_filter("reference") == "torch"
    assert spec.options.tactic_filters == ("reference=torch",) and spec.options.tactic_filter("triton") is None
    assert dict(SweepSpec(models=("gpt-oss-20b",)).options.filters) == {}
    two = SweepSpec(models=("gpt-oss-20b",), backends=("reference", "triton"),
                    options=M(tactic_filters=["triton=-ps$", "reference=fp32"]))
    assert dict(two.options.filters) == {"triton": "-ps$", "reference": "fp32"}
    assert two.options.tactic_filters == ("triton=-ps$", "reference=fp32")
    for bad in (("reference",), ("=torch",), ("reference=",), ("triton=-ps",), ("reference=a", "reference=b"),
                ("reference=(",)):
        with pytest.raises(ValueError, match=r"^tactic_filters:"):
            SweepSpec(models=("gpt-oss-20b",), backends=("reference",), options=M(tactic_filters=bad))


# ================================================================== tune with a tactic filter
TUNE_CASE = MoECase(num_tokens=4, hidden_size=64, intermediate_size=32, num_experts=4, top_k=2, seed=3)


def test_tune_filter_that_matches_nothing_is_one_unsupported_row():
    from fp4moe_diag.backends import get_backend
    from fp4moe_diag.tune import tune

    from fp4moe_diag.measure.options import MeasureOptions

    opts = MeasureOptions(warmup=0, repeats=1, tactic_filters=("reference=-ps$",))
    res = tune(TUNE_CASE, get_backend("reference"), "cpu", options=opts)
    df = res.rows
    assert len(df) == 1
    row = df.iloc[0]
    assert row["status"] == "unsupported" and row["stage"] == "tactics" and row["backend"] == "reference"
    assert "'-ps$'" in row["error_message"] and "reference" in row["error_message"], row["error_message"]


def test_tune_filter_that_matches_runs_the_tactic():
    from fp4moe_diag.backends import get_backend
    from fp4moe_diag.measure.options import MeasureOptions
    from fp4moe_diag.tune import tune

    for rx in ("torch", "^torch fp32$", "fp3"):
        opts = MeasureOptions(warmup=0, repeats=1, tactic_filters=(f"reference={rx}", "triton=nothing-matches"))
        df = tune(TUNE_CASE, get_backend("reference"), "cpu", options=opts).rows
        assert list(df["status"]) == ["ok"], df[["status", "stage", "error_message"]].to_dict("records")
        assert list(df["tactic_label"]) == ["torch fp32"] and list(df["tactic"]) == ["fp32"]
