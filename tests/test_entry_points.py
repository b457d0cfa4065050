"""Every entry point that sweeps hands the measuring code the same MeasureOptions: ``sweep`` on the command line,
the notebooks' fresh run, ``compare-versions`` children and torchrun ranks.  A backend registered here
(tests/recording_backend.py) records the options each tactic was measured with; every flag-backed field is set to
a non-default value and must arrive unchanged."""

from __future__ import annotations

import dataclasses
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fp4moe_diag import backends
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.runs import LIBRARY_ONLY_OPTIONS, SweepSpec
from recording_backend import RECORD_ENV, read_records

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = Path(__file__).resolve().parent / "recording_backend.py"
OPTS = MeasureOptions(warmup=2, repeats=3, cuda_graph=True, max_seconds_per_tactic=7.5, screen=2, screen_top=1,
                      kernel_time=True, tactic_filters=("recorder=^rec-",), interleave=True)
FLAGS = ["--warmup", "2", "--repeats", "3", "--cuda-graph", "--max-seconds-per-tactic", "7.5", "--screen", "2",
         "--screen-top", "1", "--kernel-time", "--tactics", "recorder=^rec-", "--interleave"]
SHAPE = ["--models", "gpt-oss-20b", "--ep", "2", "--hidden-scale", "24", "--device", "cpu", "--backends", "recorder"]


@pytest.fixture
def record(tmp_path, monkeypatch):
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv(RECORD_ENV, str(path))
    monkeypatch.setitem(backends.REGISTRY, "recorder", "recording_backend:RecordingBackend")
    return path


def _check(path: Path, opts: MeasureOptions, cases: int) -> list[dict]:
    recs = read_records(path)
    assert recs and all(MeasureOptions.from_dict(r["options"]) == opts for r in recs), recs[:2]
    assert {r["tactic"] for r in recs} == {"rec-a", "rec-b"}  # the tactic filter reached the tuner
    assert len({r["case"] for r in recs}) == cases
    return recs


def test_every_options_field_is_a_flag_or_library_only():
    from fp4moe_diag.cli import MEASURE_FLAGS

    fields = {f.name for f in dataclasses.fields(MeasureOptions) if f.init}
    assert set(MEASURE_FLAGS) | set(LIBRARY_ONLY_OPTIONS) == fields and not set(MEASURE_FLAGS) & set(LIBRARY_ONLY_OPTIONS)
    default = MeasureOptions().to_dict()
    assert all(OPTS.to_dict()[k] != default[k] for k in MEASURE_FLAGS)  # this test sets every flag


def test_cli_sweep(record, tmp_path):
    from fp4moe_diag.cli import main

    assert main(["sweep", *SHAPE, "--tokens", "1", "--out", str(tmp_path / "run"), "--no-progress", *FLAGS]) == 0
    recs = _check(record, OPTS, 1)
    # screened twice (two tactics), the fastest (screen_top 1) and the default timed in full, the best repeated
    assert len(recs) >= 4


def test_cli_compare_versions_builds_the_same_options(record, tmp_path):
    from fp4moe_diag.cli import build_parser, sweep_spec

    for name in ("a", "b"):
        (tmp_path / name / "flashinfer").mkdir(parents=True)
        (tmp_path / name / "flashinfer" / "__init__.py").write_text("__version__ = '0.7.4'\n")
    args = build_parser().parse_args(["compare-versions", "--out", str(tmp_path / "x"), *SHAPE, "--tokens", "1",
                                      *FLAGS, "--flashinfer", f"a={tmp_path / 'a'}", "--flashinfer", f"b={tmp_path / 'b'}"])
    assert sweep_spec(args).options == OPTS


def test_notebook_fresh_run(record, tmp_path):
    from fp4moe_diag.report.context import context, local_run

    ctx = context(backend="recorder", device="cpu", out_dir=tmp_path / "reports")
    opts = dataclasses.replace(OPTS, flush_l2=False, commit_best=True)  # library-only fields travel too
    df = local_run(ctx, tokens=(1,), options=opts, runs_dir=tmp_path / "nb-run", reuse=False)
    assert set(df["backend"]) == {"recorder"}
    _check(record, opts, 1)


def _wrapper_python(tmp_path: Path) -> str:
    script = tmp_path / "python-with-recorder"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{WRAPPER}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_compare_versions_children(record, tmp_path):
    from fp4moe_diag.compare_versions import compare_versions

    site = tmp_path / "fake" / "flashinfer"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("__version__ = '0.7.4'\n")
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1,), hidden_scale=24, device="cpu",
                     backends=("recorder",), options=OPTS)
    df = compare_versions(spec, {"fake": site.parent}, tmp_path / "cmp", python=_wrapper_python(tmp_path))
    assert set(df["status"]) == {"ok"} and set(df["flashinfer_version"]) == {"0.7.4"}, df.to_dict("records")
    recs = _check(record, OPTS, 1)
    assert {r["pid"] for r in recs} != {os.getpid()}  # measured in the child


def test_torchrun_shards(record, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(port), str(WRAPPER), "-m", "fp4moe_diag", "sweep", *SHAPE, "--tokens", "1,2",
           "--out", str(tmp_path / "sharded"), "--no-progress", *FLAGS]
    cp = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    recs = _check(record, OPTS, 2)
    assert len({r["pid"] for r in recs}) == 2  # one case per rank
