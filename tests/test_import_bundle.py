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


def pack_r(snap: Path, tmp_path: Path) -> Path:
    """``snap/r`` alone (the run folders and CSVs of a call without a bundle) packed as ``runs.tgz``."""
    tgz = tmp_path / "runs.tgz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(snap / "r", "r")
    return tgz


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
    assert "**Partial run**" in prov and "s6-ep1: 6 rows from 2 cases" in prov and "s6-ep2:" not in prov
    assert (runs / "2026-12-03-nvidia-h200-s6" / "env.txt").read_text() == "gpu NVIDIA H200\n"

    again = importer(str(tgz), "2026-12-03-nvidia-h200-s6", "--runs-root", str(runs))  # never over a run
    assert again.returncode == 2 and "exists" in again.stderr and "--overwrite" in again.stderr
    assert len(pd.read_parquet(runs / "2026-12-03-nvidia-h200-s6" / "results.parquet")) == 8


def test_a_runs_tgz_of_finished_sweeps_is_complete_not_partial_and_names_its_ceilings(tmp_path):
    """A call that packs only its run folders (r/<sweep>, no bundle/): each finished sweep merged its parts, so the
    run is complete; the ceilings line comes from the sweep that measured them, with how many rows carry them."""
    snap = tmp_path / "snap"
    for name, t, ceil in (("decode", 64, None), ("prefill", 4096, 4449.0)):
        df = rows(t)
        df["triton_version"] = "3.7.1" if t == 64 else "3.6.0"  # two releases, one sweep each (tools/device/plans)
        if ceil is not None:
            df["ceiling_read_GBps"] = ceil
            df["time_sm_clock_mhz"] = [1980.0, 1755.0]  # the prefill sweep's rows read NVML; decode's did not
            df["ceiling_bf16_TFLOPs"], df["ceiling_bf16_sm_clock_mhz"] = 780.0, 1980.0
            df["ceiling_bf16_sustained_TFLOPs"], df["ceiling_bf16_sustained_sm_clock_mhz"] = 629.3, 1230.0
        with RunFolder(snap / "r" / name, CFG) as rf:
            rf.append_case(f"T{t}", df)
            rf.merge()
    tgz = pack_r(snap, tmp_path)
    runs = tmp_path / "runs"
    cp = importer(str(tgz), "2026-12-04-nvidia-h200-x", "--runs-root", str(runs), "--command", "bash call.sh")
    assert cp.returncode == 0, cp.stderr
    prov = (runs / "2026-12-04-nvidia-h200-x" / "PROVENANCE.md").read_text()
    assert "**Partial run**" not in prov
    assert "each complete" in prov and "decode: 2 rows from 1 cases" in prov and "prefill: 2 rows from 1 cases" in prov
    assert "read 4449 GB/s" in prov and "(2 of 4 rows carry them)" in prov
    assert "bf16 GEMM 780 TFLOP/s at 1980 MHz; after 3 s of them 629 TFLOP/s at 1230 MHz (2 of 4" in prov
    assert "- triton_version: 3.7.1 (2 rows), 3.6.0 (2 rows)" in prov or "- triton_version: 3.6.0 (2 rows), 3.7.1" in prov
    assert "- gpu_name: NVIDIA H200\n" in prov  # one value: as before
    assert "- SM clock while timing (NVML, time_sm_clock_mhz): median 1,868 MHz, 1,755-1,980 over the rows\n" in prov
    assert "by:\n\n```\nbash call.sh\n```" in prov and "gpu_session.sh" not in prov
    assert "Files: results.parquet, results.csv (results" in prov and "env.txt" not in prov


def test_only_takes_the_named_sweeps_and_ablations_and_names_an_unknown_one(tmp_path):
    """A call on a warm machine packs the earlier calls' r/ too: --only keeps this call's folders; the ablate CSVs
    it keeps are copied beside the results and named in PROVENANCE.md; an unknown name is exit 2, no folder made."""
    snap = tmp_path / "snap"
    for name, t in (("headline-decode", 1), ("wide-t256", 256)):
        with RunFolder(snap / "r" / name, CFG) as rf:
            rf.append_case(f"T{t}", rows(t))
            rf.merge()
    (snap / "r" / "ablate-a.csv").write_text("model,variant\ngpt-oss-20b,tactic\n")
    (snap / "r" / "ablate-b.csv").write_text("model,variant\ngpt-oss-20b,load\n")
    tgz = pack_r(snap, tmp_path)
    runs = tmp_path / "runs"
    bad = importer(str(tgz), "x", "--runs-root", str(runs), "--only", "headline-decode,headline-prefill")
    assert bad.returncode == 2 and "only: not under r/" in bad.stderr and "headline-prefill" in bad.stderr
    assert not (runs / "x").exists()
    cp = importer(str(tgz), "x", "--runs-root", str(runs), "--only", "headline-decode,ablate-b.csv")
    assert cp.returncode == 0, cp.stderr
    assert sorted(pd.read_parquet(runs / "x" / "results.parquet")["num_tokens"]) == [1, 1]
    assert sorted(p.name for p in (runs / "x").glob("ablate-*")) == ["ablate-b.csv"]
    assert (runs / "x" / "ablate-b.csv").read_text().endswith("load\n")
    prov = (runs / "x" / "PROVENANCE.md").read_text()
    assert "ablate-b.csv" in prov and "ablate-a.csv" not in prov and "wide-t256" not in prov
    again = importer(str(tgz), "x", "--runs-root", str(runs), "--overwrite", "--only", "wide-t256")
    assert again.returncode == 0 and not list((runs / "x").glob("ablate-*"))  # replaced whole
    assert sorted(pd.read_parquet(runs / "x" / "results.parquet")["num_tokens"]) == [256, 256]
    failed = importer(str(tgz), "x", "--runs-root", str(runs), "--overwrite", "--only", "nothing-such")
    assert failed.returncode == 2  # a failed --overwrite import leaves the old run as it was, and no staging folder
    assert sorted(pd.read_parquet(runs / "x" / "results.parquet")["num_tokens"]) == [256, 256]
    assert sorted(p.name for p in runs.iterdir()) == ["x"]
    everything = importer(str(tgz), "y", "--runs-root", str(runs))
    assert everything.returncode == 0 and len(pd.read_parquet(runs / "y" / "results.parquet")) == 4
    assert sorted(p.name for p in (runs / "y").glob("ablate-*")) == ["ablate-a.csv", "ablate-b.csv"]


def test_a_call_without_a_sweep_keeps_its_duels_and_ablations_with_the_environment_they_recorded(tmp_path):
    """Only CSVs under r/ (a profile / duel call): copied, named in PROVENANCE.md, their GPU and versions listed."""
    snap = tmp_path / "snap"
    (snap / "r").mkdir(parents=True)
    (snap / "r" / "duel-20b-t16384.csv").write_text("model,verdict,gpu_name,triton_version,git_commit\n"
                                                     "gpt-oss-20b,level,NVIDIA H100 80GB HBM3,3.6.0,abc\n")
    (snap / "r" / "ablate-x.csv").write_text("model,variant,gpu_name,triton_version,git_commit\n"
                                             "gpt-oss-20b,tactic,NVIDIA H100 80GB HBM3,3.6.0,abc\n")
    (snap / "r" / "energy-20b-ep2-t4096.csv").write_text("model,energy_ratio,gpu_name,triton_version,git_commit\n"
                                                         "gpt-oss-20b,0.979,NVIDIA H100 80GB HBM3,3.6.0,abc\n")
    (snap / "r" / "read-floor-goals.csv").write_text("nbytes,kernel,gpu_name,triton_version,git_commit\n"
                                                     "15077376,torch-sum,NVIDIA H100 80GB HBM3,3.6.0,abc\n")
    tgz = pack_r(snap, tmp_path)
    runs = tmp_path / "runs"
    cp = importer(str(tgz), "z", "--runs-root", str(runs))
    assert cp.returncode == 0, cp.stderr
    assert sorted(p.name for p in (runs / "z").iterdir()) == ["PROVENANCE.md", "ablate-x.csv", "duel-20b-t16384.csv",
                                                              "energy-20b-ep2-t4096.csv", "read-floor-goals.csv"]
    prov = (runs / "z" / "PROVENANCE.md").read_text()
    assert "- gpu_name: NVIDIA H100 80GB HBM3\n- triton_version: 3.6.0\n- git_commit: abc\n" in prov
    assert "SM clock" not in prov  # no rows: no clock line
    assert "Duels (`python -m fp4moe_diag.profiling.duel`: two tactics timed in alternating rounds): " \
           "duel-20b-t16384.csv." in prov and "Ablations (" in prov
    assert "Energy per call (`python -m fp4moe_diag.profiling.energy`" in prov and "energy-20b-ep2-t4096.csv." in prov
    assert "Read floors (`python -m fp4moe_diag.profiling.read_floor`" in prov and "read-floor-goals.csv." in prov
    assert "Files: " not in prov  # no results to name: the CSVs are named above


def test_a_torn_bundle_is_exit_2_and_leaves_no_folder(tmp_path):
    """A bundle cut short in transfer: a one-line error naming the argument; nothing under the runs root."""
    snap = tmp_path / "snap"
    with RunFolder(snap / "r" / "a", CFG) as rf:
        rf.append_case("T1", rows(1))
        rf.merge()
    tgz = pack_r(snap, tmp_path)
    torn = tmp_path / "torn.tgz"
    torn.write_bytes(tgz.read_bytes()[: len(tgz.read_bytes()) // 2])
    runs = tmp_path / "runs"
    cp = importer(str(torn), "t", "--runs-root", str(runs))
    assert cp.returncode == 2 and "bundle: " in cp.stderr and "is not a readable .tgz" in cp.stderr
    assert list(runs.iterdir()) == []


def test_the_gpu_state_csvs_are_copied_and_named(tmp_path):
    """plan_lib.sh's gpu-NAME.csv (clocks, power, temperature at the plan's start and end) travel with the run."""
    snap = tmp_path / "snap"
    (snap / "r").mkdir(parents=True)
    (snap / "r" / "duel-a.csv").write_text("model,verdict,gpu_name\ngpt-oss-20b,level,NVIDIA H200\n")
    (snap / "r" / "gpu-evidence.csv").write_text("timestamp,name,clocks.sm\n2026/12/05 20:00:00.000, NVIDIA H200, 1980\n")
    tgz = pack_r(snap, tmp_path)
    runs = tmp_path / "runs"
    cp = importer(str(tgz), "g", "--runs-root", str(runs))
    assert cp.returncode == 0, cp.stderr
    assert (runs / "g" / "gpu-evidence.csv").read_text().endswith("NVIDIA H200, 1980\n")
    prov = (runs / "g" / "PROVENANCE.md").read_text()
    assert "The GPU's state at each plan's start and end" in prov and "gpu-evidence.csv." in prov


def test_profiles_are_placed_as_goals_reads_them_and_a_failed_one_is_named(tmp_path):
    import lzma

    snap = tmp_path / "snap"
    (snap / "r").mkdir(parents=True)
    (snap / "r" / "gpu-evidence.csv").write_text("when,name\nstart,NVIDIA H100 80GB HBM3\n")
    p = snap / "p"
    ok = p / "2-triton-gpt-oss-20b-ep2-t4096"
    ok.mkdir(parents=True)
    (ok / "spec.json").write_text('{"model": "gpt-oss-20b"}')
    (ok / "calls.csv").write_text("role,tactic\nt0,m128n128k64w16s3-ps-gu-g2n256\n")
    (ok / "kernels.csv").write_text("kernel,duration_us\n_moe_mxfp4_gemm1_ps_gu_kernel,560.9\n")
    (ok / "nspy_ncu-output-fused_moe-0.ncu-rep").write_bytes(b"NCU" * 1000)
    (ok / "nsight_profile.log").write_text("log")  # not kept
    bad = p / "1-triton-gpt-oss-20b-ep2-t4096"
    bad.mkdir()
    (bad / "spec.json").write_text("{}")
    prof = tmp_path / "profiles.tgz"
    with tarfile.open(prof, "w:gz") as tf:
        tf.add(p, "p")
    runs = tmp_path / "runs"
    cp = importer(str(pack_r(snap, tmp_path)), "2026-12-06-nvidia-h100-x", "--profiles", str(prof),
                  "--runs-root", str(runs))
    assert cp.returncode == 0, cp.stderr
    run = runs / "2026-12-06-nvidia-h100-x"
    assert sorted(x.name for x in (run / ok.name).iterdir()) == ["calls.csv", "nspy_ncu-output-fused_moe-0.ncu-rep.xz",
                                                                 "spec.json"]
    assert lzma.decompress((run / ok.name / "nspy_ncu-output-fused_moe-0.ncu-rep.xz").read_bytes()) == b"NCU" * 1000
    assert (run / f"ncu_{ok.name}.csv").read_text() == (ok / "kernels.csv").read_text()
    assert not (run / bad.name).exists() and not (run / f"ncu_{bad.name}.csv").exists()
    text = (run / "PROVENANCE.md").read_text()
    assert f"the folders {ok.name} (spec.json" in text and f"Profiles that failed (no kernels.csv; the call's " \
        f"output says why): {bad.name}." in text
    cp = importer(str(pack_r(snap, tmp_path)), "2026-12-06-nvidia-h100-y", "--profiles", str(tmp_path / "none.tgz"),
                  "--runs-root", str(runs))
    assert cp.returncode == 2 and "profiles: " in cp.stderr and "is not a file" in cp.stderr
    assert not (runs / "2026-12-06-nvidia-h100-y").exists()
