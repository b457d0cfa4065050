"""tools/device/plans/plan_lib.sh on CPU, with a stand-in ``nvidia-smi`` on PATH: ``require_gpu`` (ONLY_ON) stops a
plan on another card before anything runs; ``gpu_state`` appends the GPU's clocks to a CSV, and on a driver without
the clock-event-reasons field it still writes a line, that column empty."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "tools" / "device" / "plans" / "plan_lib.sh"


def fake_smi(tmp_path: Path, name: str, old_driver: bool = False) -> Path:
    """An ``nvidia-smi`` that answers --query-gpu with ``name`` and fixed clocks (the fields asked, in order)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    reject = 'case "$q" in *clocks_event_reasons*) echo "Field is not a valid field to query."; exit 2 ;; esac' \
        if old_driver else ""
    script = f"""#!/usr/bin/env bash
q=""; for a in "$@"; do case "$a" in --query-gpu=*) q=${{a#--query-gpu=}} ;; esac; done
{reject}
out=""; IFS=, read -ra f <<< "$q"
for x in "${{f[@]}}"; do case "$x" in
  name) v="{name}" ;; timestamp) v="2026/12/05 20:00:00.000" ;; clocks.sm) v=1980 ;; clocks.mem) v=3201 ;;
  clocks_event_reasons.active) v=0x0000000000000000 ;; *) v=7 ;; esac
  out="$out${{out:+, }}$v"; done
echo "$out"
"""
    smi = bin_dir / "nvidia-smi"
    smi.write_text(script)
    smi.chmod(0o755)
    return bin_dir


def bash(tmp_path: Path, bin_dir: Path, body: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **env}
    return subprocess.run(["bash", "-c", f". {LIB}; {body}"], capture_output=True, text=True, env=full_env,
                          cwd=tmp_path, timeout=60)


def test_only_on_stops_a_plan_on_another_card_and_lets_it_run_on_its_own(tmp_path):
    h100 = fake_smi(tmp_path, "NVIDIA H100 80GB HBM3")
    cp = bash(tmp_path, h100, "require_gpu; echo ran", ONLY_ON="H200")
    assert cp.returncode == 3 and "ran" not in cp.stdout
    assert "ONLY_ON=H200: this machine's GPU is NVIDIA H100 80GB HBM3; the plan stops here, nothing run" in cp.stdout
    assert bash(tmp_path, h100, "require_gpu; echo ran").stdout == "ran\n"  # no ONLY_ON: any card
    (tmp_path / "other").mkdir()
    h200 = fake_smi(tmp_path / "other", "NVIDIA H200")
    assert bash(tmp_path, h200, "require_gpu; echo ran", ONLY_ON="H200").stdout == "ran\n"


def test_gpu_state_appends_a_line_per_call_under_one_header(tmp_path):
    smi = fake_smi(tmp_path, "NVIDIA H200")
    csv = tmp_path / "gpu-x.csv"
    assert bash(tmp_path, smi, f"gpu_state {csv}; gpu_state {csv}").returncode == 0
    lines = csv.read_text().splitlines()
    assert lines[0] == ("timestamp,name,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,temperature.gpu,"
                        "clocks_event_reasons.active")
    assert lines[1:] == ["2026/12/05 20:00:00.000, NVIDIA H200, 1980, 3201, 7, 7, 7, 7, 0x0000000000000000"] * 2


def test_gpu_state_on_a_driver_without_clock_event_reasons_leaves_that_column_empty(tmp_path):
    smi = fake_smi(tmp_path, "NVIDIA H200", old_driver=True)
    csv = tmp_path / "gpu-y.csv"
    assert bash(tmp_path, smi, f"gpu_state {csv}").returncode == 0
    lines = csv.read_text().splitlines()
    assert len(lines) == 2 and lines[1] == "2026/12/05 20:00:00.000, NVIDIA H200, 1980, 3201, 7, 7, 7, 7,"
    assert "not a valid field" not in csv.read_text()


def test_a_triton_kit_goes_first_on_the_path_and_names_the_outputs(tmp_path):
    """kit_check refuses a missing KIT before a plan starts; use_kit unpacks it first on PYTHONPATH and sets TV (the
    suffix evidence.sh and twins.sh name their outputs with); without KIT, TV is empty and nothing changes."""
    import tarfile

    smi = fake_smi(tmp_path, "NVIDIA H200")
    cp = bash(tmp_path, smi, "kit_check; echo ran", KIT=str(tmp_path / "missing.tar.xz"))
    assert cp.returncode == 2 and "ran" not in cp.stdout and "KIT: no file" in cp.stderr
    pkg = tmp_path / "src" / "triton"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "9.9.0"\n')
    kit = tmp_path / "triton-9.9.0-cp312.tar.xz"
    with tarfile.open(kit, "w:xz") as t:
        t.add(pkg, arcname="triton")
    body = 'PLAN=t; T0=$(date +%s); use_kit; echo "TV=$TV PP=$PYTHONPATH"'
    out = bash(tmp_path, smi, f"kit_check; {body}", KIT=str(kit), KIT_DIR=str(tmp_path / "k"), PYTHONPATH="/x").stdout
    lines = out.splitlines()  # the say line's seconds depend on the machine's speed: any count
    assert len(lines) == 2 and re.fullmatch(r"\[t \+\d+s\] KIT: triton9\.9\.0", lines[0])
    assert lines[1] == f"TV=-triton9.9.0 PP={tmp_path / 'k'}:/x"
    assert bash(tmp_path, smi, body, PYTHONPATH="/x").stdout == "TV= PP=/x\n"


def test_duels_name_a_second_duel_at_one_shape_apart_and_stop_when_time_runs_out(tmp_path):
    """evidence.sh's DUELS: each duel's CSV is named by its shape; a second duel at the same shape must not overwrite
    the first's file (session 24), and a duel with 40 s or less left is skipped with a line saying so."""
    smi = fake_smi(tmp_path, "NVIDIA H200")
    duels = ("gpt-oss-20b|1|16384|triton=a|tk=b gpt-oss-20b|2|4096|triton=c|tk=b "
             "gpt-oss-20b|1|16384|triton=d|tk=b gpt-oss-20b|1|16384|triton=e|tk=b")
    body = ('duel() { echo "duel $1 $2 $3 $4 $5 $6 $7"; }; say() { echo "$*"; }; left() { echo 300; }; TV=""; '
            'duels 560')
    out = bash(tmp_path, smi, body, DUELS=duels).stdout.splitlines()
    assert out == ["duel 20b-ep1-t16384 gpt-oss-20b 1 16384 300 triton=a tk=b",
                   "duel 20b-ep2-t4096 gpt-oss-20b 2 4096 300 triton=c tk=b",
                   "duel 20b-ep1-t16384-2 gpt-oss-20b 1 16384 300 triton=d tk=b",
                   "duel 20b-ep1-t16384-3 gpt-oss-20b 1 16384 300 triton=e tk=b"]
    late = bash(tmp_path, smi, body.replace("echo 300", "echo 40"), DUELS=duels).stdout.splitlines()
    assert late[0] == "no time left for the duel gpt-oss-20b|1|16384|triton=a|tk=b" and len(late) == 4


def test_the_duel_pairs_can_go_through_energy_instead_and_a_third_kind_is_refused(tmp_path):
    """evidence.sh's PARTS=energy (session 25): the same DUELS pairs, named the same way, through profiling.energy."""
    smi = fake_smi(tmp_path, "NVIDIA H200")
    duels = "gpt-oss-20b|2|4096|triton=c|tk=b gpt-oss-20b|2|4096|triton=d|tk=b"
    body = ('energy() { echo "energy $1 $2 $3 $4 $5 $6 $7"; }; say() { echo "$*"; }; left() { echo 300; }; TV=""; '
            'duels 560 energy')
    out = bash(tmp_path, smi, body, DUELS=duels).stdout.splitlines()
    assert out == ["energy 20b-ep2-t4096 gpt-oss-20b 2 4096 300 triton=c tk=b",
                   "energy 20b-ep2-t4096-2 gpt-oss-20b 2 4096 300 triton=d tk=b"]
    late = bash(tmp_path, smi, body.replace("echo 300", "echo 40"), DUELS=duels).stdout.splitlines()
    assert late[0] == "no time left for the energy gpt-oss-20b|2|4096|triton=c|tk=b"
    bad = bash(tmp_path, smi, body.replace("duels 560 energy", "duels 560 ncu; echo rc=$?"), DUELS=duels)
    assert bad.stdout.strip() == "rc=2" and "duels: expected duel, energy or conditions, got ncu" in bad.stderr


def test_conditions_run_one_pair_four_ways_each_into_its_own_file(tmp_path):
    """evidence.sh's PARTS=conditions (session 26): one duel plain, traced, traced with the GPU idle before each
    call, and idle, each into duel-NAME-cN.csv, each given a quarter of the time left; with under 20 s each, none
    runs and a line says so."""
    smi = fake_smi(tmp_path, "NVIDIA H100 80GB HBM3")
    (smi / "python3").write_text('#!/usr/bin/env bash\necho "python3 $*"\n')
    (smi / "python3").chmod(0o755)
    body = 'say() { echo "$*"; }; left() { echo 300; }; TV=""; duels 560 conditions'
    out = bash(tmp_path, smi, body, DUELS="gpt-oss-20b|2|4096|triton=c|tk=b").stdout.splitlines()
    flags = [re.search(r"tk=b ?(.*) --out /tmp/r/(duel-.*csv)", line).groups() for line in out[:4]]
    assert flags == [("", "duel-20b-ep2-t4096-c1.csv"), ("--kernel-time", "duel-20b-ep2-t4096-c2.csv"),
                     ("--kernel-time --sync-after-flush", "duel-20b-ep2-t4096-c3.csv"),
                     ("--sync-after-flush", "duel-20b-ep2-t4096-c4.csv")]
    assert all("-m fp4moe_diag.profiling.duel --model gpt-oss-20b --ep 2 --tokens 4096" in x for x in out[:4])
    assert out[4] == "conditions 20b-ep2-t4096 done"
    short = bash(tmp_path, smi, body.replace("echo 300", "echo 79"), DUELS="gpt-oss-20b|2|4096|triton=c|tk=b")
    assert short.stdout.splitlines() == ["conditions 20b-ep2-t4096: no time (4 x 20 s needed, 79 s left)"]


def test_evidence_takes_the_conditions_pairs_from_conditions_else_duels(tmp_path):
    """evidence.sh's PARTS=conditions line (session 26): CONDITIONS (what `goals --plan` names) when set, else the
    DUELS pairs; DUELS itself is left as it was for PARTS=duel."""
    smi = fake_smi(tmp_path, "NVIDIA H200")
    line = next(x for x in (LIB.parent / "evidence.sh").read_text().splitlines() if x.startswith("has conditions"))
    body = ('conditions() { echo "conditions $1 $6"; }; say() { echo "$*"; }; left() { echo 300; }; TV=""; '
            f'has() {{ return 0; }}; {line}; echo "after: $DUELS"')
    out = bash(tmp_path, smi, body, DUELS="gpt-oss-20b|1|16384|triton=a|tk=b",
               CONDITIONS="gpt-oss-20b|2|4096|triton=c|tk=b").stdout.splitlines()
    assert out == ["conditions 20b-ep2-t4096 triton=c", "after: gpt-oss-20b|1|16384|triton=a|tk=b"]
    out = bash(tmp_path, smi, body, DUELS="gpt-oss-20b|1|16384|triton=a|tk=b").stdout.splitlines()
    assert out[0] == "conditions 20b-ep1-t16384 triton=a"


def test_profiles_take_an_optional_backend_and_stop_when_time_runs_out(tmp_path):
    """evidence.sh's PARTS=profile (plan_lib's profiles): MODEL|EP|T|TACTIC profiles our triton tactic, and
    MODEL|EP|T|BACKEND=TACTIC another backend's (session 27: triton_kernels' kernels beside ours at a shape), each
    into its own numbered folder named by backend and shape; with 45 s or less left, none runs and a line says so."""
    smi = fake_smi(tmp_path, "NVIDIA H100 80GB HBM3")
    (smi / "python3").write_text('#!/usr/bin/env bash\necho "python3 $*"\n')
    (smi / "python3").chmod(0o755)
    (smi / "tar").write_text('#!/usr/bin/env bash\necho "tar $*"\n')
    (smi / "tar").chmod(0o755)
    body = 'say() { echo "$*"; }; left() { echo 300; }; OUT=/o; TV=""; profiles 560'
    out = bash(tmp_path, smi, body, PROFILES="gpt-oss-20b|2|4096|m128n128k64w16s3-ps-gu-g2n256 "
               "gpt-oss-20b|2|4096|triton_kernels=tk-m128kautow8s3").stdout.splitlines()
    assert out == [
        "python3 -m fp4moe_diag profile --backend triton --model gpt-oss-20b --ep 2 --tokens 4096 --tactics "
        "m128n128k64w16s3-ps-gu-g2n256 --stalls --out /tmp/p/1-triton-gpt-oss-20b-ep2-t4096",
        "tar -czf /o/profiles.tgz -C /tmp p", "profile 1 done",
        "python3 -m fp4moe_diag profile --backend triton_kernels --model gpt-oss-20b --ep 2 --tokens 4096 --tactics "
        "tk-m128kautow8s3 --stalls --out /tmp/p/2-triton_kernels-gpt-oss-20b-ep2-t4096",
        "tar -czf /o/profiles.tgz -C /tmp p", "profile 2 done"]
    short = bash(tmp_path, smi, body.replace("echo 300", "echo 45"), PROFILES="m|1|4|triton_kernels=t")
    assert short.stdout.splitlines() == ["no time left for the profile of triton_kernels t"]
