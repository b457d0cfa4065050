"""tools/device/plans/plan_lib.sh on CPU, with a stand-in ``nvidia-smi`` on PATH: ``require_gpu`` (ONLY_ON) stops a
plan on another card before anything runs; ``gpu_state`` appends the GPU's clocks to a CSV, and on a driver without
the clock-event-reasons field it still writes a line, that column empty."""

from __future__ import annotations

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
