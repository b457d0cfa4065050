"""tools/device/import_gpu_bundle.py: a partial.tgz of a call cut off mid-sweep keeps its finished cases; an existing
run folder is never written over."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd

from fp4moe_diag.run_folder import save_run
from fp4moe_diag.results import to_frame
from fp4moe_diag.run_folder import RunFolder

ROOT = Path(__file__).resolve().parent.parent
CFG = {"backends": ["reference"], "repeats": 3}


def rows(case: int, n: int = 2) -> pd.DataFrame:
    return to_frame([dict(model="gpt-oss-20b", num_tokens=case, backend="reference", tactic=str(i), status="ok",
                          time_median_us=1.0 + i, gpu_name="NVIDIA H200") for i in range(n)])


def importer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "device" / "import_gpu_bundle.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_partial_snapshot_brings_back_the_finished_cases_and_says_partial(tmp_path):
    snap = tmp_path / "snap"
    (snap / "bundle").mkdir(parents=True)
    (snap / "bundle" / "env.txt").write_text("gpu NVIDIA H200\n")
    done = snap / "r" / "s6-ep2"
    with RunFolder(done, CFG) as rf:  # a sweep that finished: merged into results.parquet, copied to the bundle
        rf.append_case("T1", rows(1))
        rf.merge()
    (snap / "bundle" / "runs" / "s6-ep2").mkdir(parents=True)
    save_run(rows(1), snap / "bundle" / "runs" / "s6-ep2")
    cut = snap / "r" / "s6-ep1"
    rf = RunFolder(cut, CFG)  # cut off: two cases finished, no merge, a temp file of a third being written
    rf.append_case("T16", rows(16, 3))
    rf.append_case("T64", rows(64, 3))
    (cut / "parts" / ".tmp-123-abcd-T256@x.parquet").write_bytes(b"torn")
    tgz = tmp_path / "partial.tgz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(snap / "r", "r")
        tf.add(snap / "bundle", "bundle")
    rf.close()
    runs = tmp_path / "runs"
    cp = importer(str(tgz), "2026-12-03-nvidia-h200-s6", "--runs-root", str(runs))
    assert cp.returncode == 0, cp.stderr
    df = pd.read_parquet(runs / "2026-12-03-nvidia-h200-s6" / "results.parquet")
    assert sorted(df["num_tokens"].tolist()) == [1, 1, 16, 16, 16, 64, 64, 64]  # both sweeps, the torn part not
    assert set(df["run_id"]) == {"2026-12-03-nvidia-h200-s6"}
    prov = (runs / "2026-12-03-nvidia-h200-s6" / "PROVENANCE.md").read_text()
    assert "**Partial run**" in prov and "s6-ep1: 6 rows from 2 finished cases" in prov and "s6-ep2:" not in prov
    assert (runs / "2026-12-03-nvidia-h200-s6" / "env.txt").read_text() == "gpu NVIDIA H200\n"

    again = importer(str(tgz), "2026-12-03-nvidia-h200-s6", "--runs-root", str(runs))  # never over a run
    assert again.returncode == 2 and "exists" in again.stderr and "--overwrite" in again.stderr
    assert len(pd.read_parquet(runs / "2026-12-03-nvidia-h200-s6" / "results.parquet")) == 8
