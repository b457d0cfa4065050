"""The one child-process runner (fp4moe_diag.child): its environment, its protocol (spec.json in, result.json out),
and the row a crashed or hung child becomes; ``compare-versions`` and ``versions`` both go through it."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from fp4moe_diag import child, settings
from fp4moe_diag.bugrepro import probe_install, version_matrix
from fp4moe_diag.compare_versions import compare_versions, sweep_task
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.paths import REPO_ROOT
from fp4moe_diag.runs import SweepSpec

SPEC = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1,), hidden_scale=24, device="cpu",
                 options=MeasureOptions(warmup=0, repeats=2, screen=1, screen_top=1,
                                        tactic_filters=("reference=fp32",)))


def _fake_site(tmp_path: Path, name: str, init: str) -> Path:
    d = tmp_path / name / "flashinfer"
    d.mkdir(parents=True)
    (d / "__init__.py").write_text(init)
    return d.parent


def _script(tmp_path: Path, name: str, body: str) -> str:
    """An executable standing in for the child's Python."""
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_child_env_puts_the_install_first_and_owns_the_per_install_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/already/there")
    monkeypatch.setenv(settings.FLASHINFER_API, "v05")
    monkeypatch.setenv(settings.CUTLASS_MODULE, "/parent/module.so")
    monkeypatch.setenv(settings.TUNE_SETTINGS, "max=1")
    env = child.child_env(tmp_path / "site")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "site"), str(REPO_ROOT), "/already/there"]
    assert settings.FLASHINFER_API not in env and settings.CUTLASS_MODULE not in env  # each child detects its own
    assert env[settings.TUNE_SETTINGS] == "max=1"  # the others travel
    assert child.child_env(tmp_path / "site", "/v052/module.so")[settings.CUTLASS_MODULE] == "/v052/module.so"
    with pytest.raises(ValueError, match="site: expected the folder"):
        child.child_env("")
    with pytest.raises(ValueError, match="cutlass_module: expected the path"):
        child.child_env(tmp_path, "  ")


def test_a_task_is_a_function_of_the_package():
    assert child.task_name(sweep_task) == "fp4moe_diag.compare_versions:sweep_task"
    assert child.task_name(probe_install) == "fp4moe_diag.bugrepro:probe_install"
    for bad in (lambda folder: {}, _fake_site, print):
        with pytest.raises(ValueError, match="task: expected a module-level function of fp4moe_diag"):
            child.task_name(bad)


def test_both_commands_go_through_the_one_runner(tmp_path, monkeypatch):
    calls = []

    def fake_run_child(task, args, folder, *, site, timeout, cutlass_module=None, python=sys.executable):
        calls.append((child.task_name(task), sorted(args), str(site), cutlass_module, timeout))
        return child.ChildResult(None, "child exited 3 without a result; stderr: RuntimeError: boom", 3,
                                 "RuntimeError: boom")

    monkeypatch.setattr(child, "run_child", fake_run_child)
    site = tmp_path / "site"
    df = compare_versions(SPEC, {"a": site}, tmp_path / "cmp", cutlass_modules={"a": "/a/module.so"}, timeout=60)
    vm = version_matrix([str(site)], timeout=30)
    assert calls == [("fp4moe_diag.compare_versions:sweep_task", ["spec"], str(site), "/a/module.so", 60),
                     ("fp4moe_diag.bugrepro:probe_install", ["path"], str(site), None, 30)]
    row = df.iloc[0]
    assert len(df) == 1 and (row["status"], row["stage"], row["flashinfer_label"]) == ("unsupported", "subprocess", "a")
    assert row["error_message"] == "child exited 3 without a result; stderr: RuntimeError: boom"
    assert vm.to_dict("records") == [{"path": str(site),
                                      "error": "child exited 3 without a result; stderr: RuntimeError: boom"}]


def test_a_crashed_child_is_a_row_with_the_end_of_its_stderr(tmp_path):
    """A real child: its flashinfer import kills the process (exit 3) after writing to stderr."""
    init = ("import os, sys\nsys.stderr.write('fake flashinfer: corrupted libcudart\\n')\nsys.stderr.flush()\n"
            "os._exit(3)\n")
    site = _fake_site(tmp_path, "crash", init)
    df = compare_versions(SPEC, {"crash": site}, tmp_path / "cmp")
    row = df.iloc[0]
    assert len(df) == 1 and (row["status"], row["stage"]) == ("unsupported", "subprocess")
    assert row["error_message"] == "child exited 3 without a result; stderr: fake flashinfer: corrupted libcudart"
    folder = tmp_path / "cmp" / "crash"
    assert json.loads((folder / "spec.json").read_text())["task"] == "fp4moe_diag.compare_versions:sweep_task"
    assert not (folder / "result.json").exists() and (folder / "log.txt").is_file()
    vm = version_matrix([str(site)])
    assert vm["error"].tolist() == ["child exited 3 without a result; stderr: fake flashinfer: corrupted libcudart"]


def test_a_child_that_does_not_finish_is_killed_and_reported(tmp_path):
    pidfile = tmp_path / "pid"
    hang = _script(tmp_path, "hang", f"echo $$ > {pidfile}\necho 'stuck in a CUDA init' >&2\nexec sleep 600\n")
    res = child.run_child(sweep_task, {"spec": SPEC.to_dict()}, tmp_path / "h", site=tmp_path, timeout=3,
                          python=hang)
    assert not res.ok and res.returncode is None
    assert res.error == "child timed out after 3s; stderr: stuck in a CUDA init"
    with pytest.raises(ProcessLookupError):  # the whole child is gone, not left sleeping
        os.kill(int(pidfile.read_text()), 0)


def test_a_clean_exit_without_a_result_and_a_result_are_told_apart(tmp_path):
    quiet = _script(tmp_path, "quiet", "exit 0\n")
    res = child.run_child(sweep_task, {"spec": {}}, tmp_path / "q", site=tmp_path, timeout=30, python=quiet)
    assert (res.ok, res.returncode, res.error) == (False, 0, "child exited 0 without a result; stderr: (empty)")
    long = "x" * 1000
    noisy = _script(tmp_path, "noisy", f"echo 'first line' >&2\necho '{long}' >&2\nexit 1\n")
    res = child.run_child(sweep_task, {"spec": {}}, tmp_path / "n", site=tmp_path, timeout=30, python=noisy)
    assert res.stderr_tail == "..." + ("first line | " + long)[-child.STDERR_TAIL_CHARS:]
    # a real child writing its result: a version without an adapter says why, nothing is swept
    site = _fake_site(tmp_path, "v063", "__version__ = '0.6.3'\n")
    res = child.run_child(sweep_task, {"spec": SPEC.to_dict()}, tmp_path / "r", site=site, timeout=600)
    assert res.ok and res.returncode == 0 and res.result["version"] == "0.6.3" and "PR #2916" in res.result["reason"]
    assert json.loads((tmp_path / "r" / "result.json").read_text()) == res.result


def test_run_child_refuses_a_bad_timeout(tmp_path):
    for bad in (0, -1, "60"):
        with pytest.raises(ValueError, match="timeout: expected seconds > 0"):
            child.run_child(sweep_task, {}, tmp_path, site=tmp_path, timeout=bad)
