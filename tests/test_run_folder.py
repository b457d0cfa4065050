"""Run folders: refused when they exist, locked, one atomic part per case, parquet/CSV that never disagree.

The kill tests SIGKILL a real child process stopped inside a write (it blocks in ``os.replace`` of a chosen file
after printing READY), then check what is on disk and that the next writer picks up cleanly."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fp4moe_diag.run_folder import load_run
from fp4moe_diag.results import to_frame
from fp4moe_diag.run_folder import RunFolder, load_runs

ROOT = Path(__file__).resolve().parent.parent
CFG = {"backends": ["reference"], "repeats": 3, "warmup": 1}


def rows(case: int, n: int = 2) -> pd.DataFrame:
    return to_frame([dict(model="m", num_tokens=case, backend="reference", tactic=str(i), status="ok",
                          time_median_us=1.0 + i) for i in range(n)])


CHILD = textwrap.dedent("""
    import os, sys, time
    import pandas as pd
    os.umask(0o022)
    from fp4moe_diag.results import to_frame
    from fp4moe_diag.run_folder import RunFolder
    out, stop_at, ncases, merge_every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    real = os.replace
    def replace(src, dst):
        if os.path.basename(str(dst)).startswith(stop_at):
            print("READY", flush=True)
            time.sleep(600)
        real(src, dst)
    rf = RunFolder(out, {"backends": ["reference"], "repeats": 3, "warmup": 1}, "resume")
    os.replace = replace
    print("LOCKED", flush=True)
    for c in range(ncases):
        df = to_frame([dict(model="m", num_tokens=c, backend="reference", tactic=str(i), status="ok",
                            time_median_us=1.0 + i) for i in range(2)])
        rf.append_case(f"m/T{c}|reference", df)
        if merge_every and (c + 1) % merge_every == 0:
            rf.merge()
    print("READY", flush=True)
    time.sleep(600)
""")


def run_child_until_ready(out: Path, stop_at: str, ncases: int, merge_every: int = 0) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(out), stop_at, str(ncases), str(merge_every)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    for line in p.stdout:  # blocks until the child is inside the write (no sleeps, no timing)
        if line.strip() == "READY":
            return p
    p.wait()
    raise AssertionError(f"child exited {p.returncode} before READY: {p.stderr.read()[-2000:]}")


def kill(p: subprocess.Popen) -> None:
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL


def test_sigkill_inside_a_part_write_keeps_the_finished_cases(tmp_path):
    out = tmp_path / "run"
    p = run_child_until_ready(out, "m%2FT2", ncases=4)  # blocks replacing case 2's part
    lock = json.loads((out / ".lock").read_text())
    assert lock["pid"] == p.pid
    kill(p)
    tmp = list((out / "parts").glob(".tmp-*"))
    assert len(tmp) == 1  # the torn write is a temp file, never a part
    assert sorted(f.name.split("@")[0] for f in (out / "parts").glob("*.parquet") if not f.name.startswith(".")) \
        == ["m%2FT0%7Creference", "m%2FT1%7Creference"]
    assert sorted(load_run(out)["num_tokens"].tolist()) == [0, 0, 1, 1]
    with RunFolder(out, CFG, "resume") as rf:  # the dead pid's lock is taken over
        assert rf.done_cases() == {"m/T0|reference", "m/T1|reference"}
        assert not list((out / "parts").glob(".tmp-*"))  # temp files cleaned on start
        for part in (out / "parts").glob("*.parquet"):
            assert stat.S_IMODE(part.stat().st_mode) == 0o644
        rf.append_case("m/T2|reference", rows(2))
        rf.merge()
    assert sorted(load_run(out)["num_tokens"].unique().tolist()) == [0, 1, 2]


def test_sigkill_between_parquet_and_csv_never_gives_disagreeing_results(tmp_path):
    out = tmp_path / "run"
    # merges after cases 3 and 6; blocks replacing results.csv of the second merge (parquet already replaced)
    p = run_child_until_ready(out, "results.csv", ncases=6, merge_every=3)
    kill(p)  # first kill is inside the *first* merge's csv replace: no manifest yet
    assert not (out / "manifest.json").exists()
    assert len(load_run(out)) == 6  # the parts are trusted: cases 0..2, 2 rows each
    with RunFolder(out, CFG, "resume") as rf:
        rf.merge()
    man = json.loads((out / "manifest.json").read_text())
    pq, csv = pd.read_parquet(out / "results.parquet"), pd.read_csv(out / "results.csv")
    assert len(pq) == len(csv) == man["rows"] == 6
    assert stat.S_IMODE((out / "results.csv").stat().st_mode) == 0o644
    # now a kill after the parquet of a later merge was replaced but not the csv
    p = run_child_until_ready(out, "results.csv", ncases=6, merge_every=6)
    kill(p)
    assert len(pd.read_parquet(out / "results.parquet")) == 12 and len(pd.read_csv(out / "results.csv")) == 6
    assert len(load_run(out)) == 12  # parts, not the torn pair
    import shutil

    shutil.rmtree(out / "parts")  # without parts, only what the manifest vouches for is read
    assert len(load_run(out)) == 6
    (out / "results.csv").write_text("garbage\n")
    with pytest.raises(ValueError, match="no results file matches manifest.json"):
        load_run(out)


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path):
    out = tmp_path / "run"
    p = run_child_until_ready(out, "never", ncases=1)  # holds the lock, idle
    try:
        with pytest.raises(ValueError, match=f"--out: .* being written by another sweep \\(pid {p.pid} "):
            RunFolder(out, CFG, "resume")
    finally:
        kill(p)
    with RunFolder(out, CFG, "resume") as rf:
        assert rf.done_cases() == {"m/T0|reference"}
    with RunFolder(out, CFG, "resume"):  # released on close
        with pytest.raises(ValueError, match=f"pid {os.getpid()}"):  # same process, second writer
            RunFolder(out, CFG, "resume")


def test_an_existing_run_is_refused_unless_resume_or_overwrite(tmp_path):
    out = tmp_path / "run"
    with RunFolder(out, CFG) as rf:
        rf.append_case("a", rows(1))
        rf.merge()
    with pytest.raises(ValueError, match="--out: .*already holds a run; pass --resume .* or --overwrite"):
        RunFolder(out, CFG, "new")
    with RunFolder(out, {**CFG, "repeats": 30}, "resume") as rf:  # another configuration: nothing is done
        assert rf.done_cases() == set()
        rf.append_case("b", rows(2))
        rf.merge()
    assert load_run(out)["num_tokens"].unique().tolist() == [2]
    assert len(list((out / "parts").glob("*.parquet"))) == 2  # the old configuration's part is kept
    with RunFolder(out, CFG, "overwrite") as rf:
        assert rf.done_cases() == set() and not (out / "results.parquet").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="--out: .* not a directory"):
        RunFolder(tmp_path / "file", CFG)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="--out: .*non-empty folder that is not a run"):
        RunFolder(tmp_path / "other", CFG)
    with pytest.raises(ValueError, match="mode: expected one of"):
        RunFolder(tmp_path / "x", CFG, "append")


def test_loaders_are_strict_and_read_csv_only_runs(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_runs(tmp_path / "missing")
    with pytest.raises(ValueError, match="no run folders"):
        load_runs(tmp_path)
    with pytest.raises(ValueError, match="not a run folder"):
        load_run(tmp_path / "missing")
    csv_only = tmp_path / "csvrun"
    csv_only.mkdir()
    rows(5).to_csv(csv_only / "results.csv", index=False)
    got = load_runs(tmp_path)
    assert got["num_tokens"].tolist() == [5, 5] and got["run_id"].unique().tolist() == ["csvrun"]
    torn = tmp_path / "torn"
    torn.mkdir()
    rows(1, n=1).to_parquet(torn / "results.parquet")
    rows(1, n=6).to_csv(torn / "results.csv", index=False)
    with pytest.raises(ValueError, match="1 rows.*6 rows.*disagree"):
        load_run(torn)
