"""Profiling sessions: whether Nsight Compute can run here, and per-kernel metrics of chosen tactics of one
shape, measured in a subprocess running :mod:`.driver` under nsight-python."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from ..paths import REPO_ROOT, subprocess_env
from .ncu import _ncu_python_dir


def module_version(name: str) -> str:
    """``name.__version__`` (or its distribution's version), '' when not importable."""
    try:
        mod = importlib.import_module(name)
    except Exception:  # noqa: BLE001
        return ""
    v = getattr(mod, "__version__", None)
    if v:
        return str(v)
    try:
        from importlib.metadata import version

        return version({"nsight": "nsight-python"}.get(name, name))
    except Exception:  # noqa: BLE001
        return "?"


def nsight_status(device: str) -> tuple[bool, str]:
    """Whether notebook 04 can profile here: a CUDA device, ``ncu`` on PATH, nsight-python importable."""
    ok, why = source_status(device)
    if not ok:
        return ok, why
    try:
        importlib.import_module("nsight")
    except Exception as e:  # noqa: BLE001
        return False, f"nsight-python is not importable ({type(e).__name__}: {e}); pip install nsight-python"
    return True, f"{why}, nsight-python {module_version('nsight')}"


def source_status(device: str) -> tuple[bool, str]:
    """Whether ``profile --source`` can run here: a CUDA device and ``ncu`` on PATH (no nsight-python needed)."""
    import torch

    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return False, "no CUDA GPU here: Nsight Compute profiles GPU kernels only"
    ncu = shutil.which("ncu")
    if not ncu:
        return False, "Nsight Compute CLI `ncu` is not on PATH (install Nsight Compute / the CUDA toolkit)"
    return True, f"ncu at {ncu}"


def profile_kernels(case: Any, backend: str, device: str, out_dir: Any, tactics: dict[str, str],
                    runs: int = 3, timeout: float = 900.0, stalls: bool = False) -> pd.DataFrame:
    """Per-kernel ncu metrics of the given tactics (``{"best": label, "default": label}``) via nsight-python.

    nsight-python runs ncu over a script, not over a notebook kernel, so this writes a JSON spec to
    ``out_dir`` and runs :mod:`.driver` on it in a subprocess.  Returns one row per
    (role, kernel): mean duration (µs), DRAM / SM throughput (% of peak) and achieved occupancy (%); with
    ``stalls`` also the warp-stall reasons (:data:`.ncu.NCU_STALL_METRICS`).
    """
    if not isinstance(stalls, bool):
        raise ValueError(f"stalls: expected True or False, got {stalls!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = {"case": case.to_record(), "backend": backend, "device": device, "tactics": tactics, "runs": runs,
            "stalls": stalls, "prefix": str(out / "nspy_"), "kernels_csv": str(out / "kernels.csv"),
            "calls_csv": str(out / "calls.csv")}
    (out / "spec.json").write_text(json.dumps(spec, indent=2, default=str))
    env = subprocess_env(back=[_ncu_python_dir()])
    cp = subprocess.run([sys.executable, "-m", "fp4moe_diag.profiling.driver", str(out / "spec.json")],
                        cwd=str(REPO_ROOT), env=env, capture_output=True, text=True, timeout=timeout)
    (out / "nsight_profile.log").write_text(cp.stdout + "\n--- stderr ---\n" + cp.stderr)
    if cp.returncode != 0 or not Path(spec["kernels_csv"]).exists():
        tail = "\n".join((cp.stderr or cp.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"nsight profiling failed (exit {cp.returncode}); log: {out / 'nsight_profile.log'}\n{tail}")
    return pd.read_csv(spec["kernels_csv"])


def profile_vs_events(kernels: pd.DataFrame, tune_rows: pd.DataFrame) -> pd.DataFrame:
    """Per role (best/default): sum of ncu kernel durations next to the CUDA-event median of the tuner."""
    if kernels.empty:
        return pd.DataFrame()
    aggs = {"kernels": ("kernel", "size")}
    if "duration_us" in kernels:
        aggs["ncu_sum_us"] = ("duration_us", "sum")
    if "dram_throughput_pct" in kernels:
        aggs["max_dram_pct"] = ("dram_throughput_pct", "max")
    k = kernels.groupby(["role", "tactic_label"]).agg(**aggs).reset_index()
    ev = tune_rows[["tactic_label", "time_median_us", "time_p10_us", "time_p90_us", "frac_bw_roofline"]]
    return k.merge(ev, on="tactic_label", how="left").rename(columns={"time_median_us": "event_median_us"})
