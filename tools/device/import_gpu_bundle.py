"""Unpack a ``bundle.tgz`` from ``tools/device/gpu_session.sh`` into ``data/runs/<run_id>/`` with provenance.

    python tools/device/import_gpu_bundle.py /work/.device/12/bundle.tgz 2026-12-02-nvidia-h200 \
        --command "PHASES=... tools/device/gpu_session.sh" --note "first run"

Copies results.{parquet,csv} (the sweeps of the bundle concatenated), env.txt, reproduce/verdict, version matrix, logs and executed
notebooks/HTML, and writes PROVENANCE.md (GPU, driver, torch, flashinfer, triton, commit, command).

A ``partial.tgz`` (``SNAPSHOT_S`` in gpu_session.sh: what a call that ran past its time limit left) holds the
run folders as they were (``r/<name>/parts/*.parquet``, one atomic file per finished case) beside the bundle so
far; their finished cases are imported and PROVENANCE.md says the run is partial.  ``r/ablate-*.csv``
(``profiling.ablate``'s tables), ``r/duel-*.csv`` (``profiling.duel``'s), ``r/read-floor-*.csv``
(``profiling.read_floor``'s) and ``r/gpu-*.csv`` (the GPU's clocks, power
and temperature at each plan's start and end, ``plan_lib.sh``) are copied beside the results.  ``--only`` takes some of what ``r/`` holds (a call on a
warm machine finds the earlier calls' folders there too).  ``--profiles profiles.tgz`` (``evidence.sh PARTS=profile``,
``warps.sh``: ``p/<n>-<backend>-<model>-ep<E>-t<T>/``) places each profile beside the run as ``goals`` reads it: the
folder with its ``spec.json``, ``calls.csv`` and the ``.ncu-rep`` xz-compressed, its ``kernels.csv`` as
``ncu_<folder>.csv``; a profile without a ``kernels.csv`` (one that failed) is left out and named.  An existing
``data/runs/<run_id>`` is never written over: that is an error unless ``--overwrite``.  The run is assembled in a
hidden folder beside it and renamed into place at the end, so a killed import leaves no half run folder.
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from fp4moe_diag.analysis.samples import clock_range
from fp4moe_diag.measure import SUSTAIN_S
from fp4moe_diag.run_folder import load_run, part_files, save_run

KEEP = ("env.txt", "reproduce.txt", "verdict_h200.json", "version_matrix.csv", "debug_cutlass.txt",
        "sweep.txt", "cutlass_build.txt", "gputests.txt")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("run_id")
    ap.add_argument("--command", default="")
    ap.add_argument("--note", default="")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing data/runs/<run_id> "
                    "(its whole folder)")
    ap.add_argument("--only", default="", help="comma list of the run folders and ablate CSVs under r/ to import "
                    "(default: all of them)")
    ap.add_argument("--profiles", type=Path, default=None, help="a profiles.tgz of the same call (p/<name>/ folders "
                    "of Nsight Compute profiles) to place beside the run")
    ap.add_argument("--runs-root", type=Path, default=Path(__file__).resolve().parents[2] / "data" / "runs")
    args = ap.parse_args(argv)
    args.dst = args.runs_root / args.run_id
    if args.dst.exists() and not args.overwrite:
        ap.error(f"run_id: {args.dst} exists; pick a new run id or pass --overwrite")
    if not Path(args.bundle).is_file():
        ap.error(f"bundle: {args.bundle} is not a file")
    if args.profiles is not None and not args.profiles.is_file():
        ap.error(f"profiles: {args.profiles} is not a file")
    args.only_set = {x for x in args.only.split(",") if x}
    args.error = ap.error
    return args


def sweep_frames(b: Path, taken: list[Path]) -> tuple[list[pd.DataFrame], list[str], list[str]]:
    """The bundle's merged sweeps (``bundle/run``, ``bundle/runs/<name>``) and the run folders under ``r/`` it has
    not merged (finished cases of a cut-off sweep): (frames, complete notes, partial notes)."""
    parts = sorted([b / "run" / "results.parquet"] + list((b / "runs").glob("*/results.parquet")))
    frames = [pd.read_parquet(p) for p in parts if p.exists()]
    merged = {p.parent.name for p in parts if p.exists()}
    complete: list[str] = []
    partial: list[str] = []
    for run in (p for p in taken if p.is_dir() and p.name not in merged):
        n_parts = len(part_files(run))
        if not n_parts:
            continue
        df_parts = load_run(run)  # merged results when the sweep finished, else the cases it finished
        if len(df_parts):
            frames.append(df_parts)
            done = (run / "results.parquet").exists()  # written by the sweep's merge, after its last case
            (complete if done else partial).append(f"{run.name}: {len(df_parts)} rows from {n_parts} cases")
    return frames, complete, partial


def environment_lines(df: pd.DataFrame | None, csvs: list[Path]) -> list[str]:
    """PROVENANCE.md's environment: from the results, or (a call of ablations or duels alone) from their CSVs."""
    lines: list[str] = []
    if df is None:
        env = pd.concat([pd.read_csv(f) for f in csvs], ignore_index=True) if csvs else None
        for k in ("gpu_name", "triton_version", "flashinfer_version", "git_commit"):
            seen = [] if env is None or k not in env else sorted({str(v) for v in env[k].dropna() if str(v)})
            if seen:
                lines.append(f"- {k}: {', '.join(seen)}")
        return lines
    r = df.iloc[0]
    measured = df.dropna(subset=[c for c in ("ceiling_read_GBps",) if c in df.columns])
    c = measured.iloc[0] if len(measured) else r
    for k in ("gpu_name", "compute_capability", "driver_version", "torch_version", "cuda_version",
              "flashinfer_version", "triton_version", "git_commit"):
        seen = [str(v) for v in df[k].dropna().astype(str).unique() if str(v) != ""] if k in df else []
        lines.append(f"- {k}: " + (", ".join(f"{v} ({int((df[k].astype(str) == v).sum())} rows)" for v in seen)
                                    if len(seen) > 1 else str(r.get(k, ''))))
    lines.append(f"- rows: {len(df)} ({', '.join(f'{b}: {n}' for b, n in df['backend'].value_counts().items())})")
    lines.append(f"- statuses: {dict(df['status'].value_counts())}")
    clocks = clock_range(df)
    if clocks:  # rows from a commit that reads NVML, on a machine that has it
        lines.append(f"- SM clock while timing (NVML, time_sm_clock_mhz): median {clocks[0]:,.0f} MHz, "
                     f"{clocks[1]:,.0f}-{clocks[2]:,.0f} over the rows")
    lines.append(f"- ceilings measured in the run: read {c.get('ceiling_read_GBps', float('nan')):.0f} GB/s, "
                 f"copy {c.get('ceiling_copy_GBps', float('nan')):.0f} GB/s, "
                 f"bf16 GEMM {c.get('ceiling_bf16_TFLOPs', float('nan')):.0f} TFLOP/s" + _bf16_clocks(c)
                 + (f" ({len(measured)} of {len(df)} rows carry them)" if len(measured) < len(df) else ""))
    return lines


def _bf16_clocks(c: pd.Series) -> str:
    """`` at 1980 MHz; after 3 s of them 629 TFLOP/s at 1230 MHz`` (:data:`fp4moe_diag.measure.SUSTAIN_S` seconds) where
    the run measured the ceiling's clocks and its sustained figure (measure.ceilings), else ``""``."""
    mhz, held, held_mhz = (float(c.get(k, float("nan"))) for k in (
        "ceiling_bf16_sm_clock_mhz", "ceiling_bf16_sustained_TFLOPs", "ceiling_bf16_sustained_sm_clock_mhz"))
    out = f" at {mhz:.0f} MHz" if mhz == mhz else ""
    if held == held:
        at = f" at {held_mhz:.0f} MHz" if held_mhz == held_mhz else ""
        out += f"; after {SUSTAIN_S:g} s of them {held:.0f} TFLOP/s{at}"
    return out


def unpack(args: argparse.Namespace, what: str, tmp: Path) -> None:
    """The .tgz of argument ``what`` (bundle, profiles) unpacked into ``tmp``; a truncated download or a file that is no
    tarball is that argument's error (exit 2)."""
    path = getattr(args, what)
    try:
        with tarfile.open(path) as tf:
            tf.extractall(tmp, filter="data")
    except (tarfile.TarError, EOFError) as e:
        args.error(f"{what}: {path} is not a readable .tgz ({e})")


def place_profiles(args: argparse.Namespace, tmp: Path, folder: Path) -> tuple[list[str], list[str]]:
    """The profiles of ``args.profiles`` placed in ``folder`` (the module's docstring says how): (placed, failed)."""
    unpack(args, "profiles", tmp)
    placed: list[str] = []
    failed: list[str] = []
    for src in sorted((p for p in (tmp / "p").glob("*") if p.is_dir()), key=lambda p: (len(p.name), p.name)):
        if not (src / "kernels.csv").is_file():
            failed.append(src.name)
            continue
        dst = folder / src.name
        dst.mkdir()
        for name in ("spec.json", "calls.csv"):
            if (src / name).is_file():
                shutil.copy2(src / name, dst / name)
        for rep in src.glob("*.ncu-rep"):
            (dst / f"{rep.name}.xz").write_bytes(lzma.compress(rep.read_bytes()))
        shutil.copy2(src / "kernels.csv", folder / f"ncu_{src.name}.csv")
        placed.append(src.name)
    if not placed and not failed:
        args.error(f"profiles: {args.profiles} holds no p/<name>/ profile folder")
    return placed, failed


def provenance(args: argparse.Namespace, df: pd.DataFrame | None, complete: list[str], partial: list[str],
               csvs: dict[str, list[Path]], folder: Path, profiles: tuple[list[str], list[str]] = ([], [])) -> str:
    ablations, duels, energies, states = csvs["ablate"], csvs["duel"], csvs["energy"], csvs["gpu"]
    floors = csvs["read-floor"]
    lines = [f"# Run {args.run_id}", ""] + environment_lines(df, [folder / f.name
                                                                  for f in ablations + duels + energies + floors])
    lines += ["", "Produced on the lent GPU machine" + (f" by:\n\n```\n{args.command}\n```" if args.command
                                                         else " by `tools/device/gpu_session.sh`."), ""]
    if complete:
        lines += ["Imported from the sweeps' run folders, each complete (merged after its last case): "
                  + "; ".join(complete) + ".", ""]
    if partial:
        lines += ["**Partial run**: the device call ended (time limit) before these sweeps finished; only the "
                  "cases they had finished are here (" + "; ".join(partial) + ").", ""]
    if ablations:
        lines += ["Ablations (`python -m fp4moe_diag.profiling.ablate`, read by `goals` and notebook 04): "
                  + ", ".join(f.name for f in ablations) + ".", ""]
    if duels:
        lines += ["Duels (`python -m fp4moe_diag.profiling.duel`: two tactics timed in alternating rounds): "
                  + ", ".join(f.name for f in duels) + ".", ""]
    if energies:
        lines += ["Energy per call (`python -m fp4moe_diag.profiling.energy`: two tactics in alternating blocks of "
                  "back-to-back replays, NVML's energy counter): " + ", ".join(f.name for f in energies) + ".", ""]
    if floors:
        lines += ["Read floors (`python -m fp4moe_diag.profiling.read_floor`: the fastest one-kernel read of each size, "
                  "read by `goals`): " + ", ".join(f.name for f in floors) + ".", ""]
    if states:
        lines += ["The GPU's state at each plan's start and end (nvidia-smi: SM and memory clocks, their maxima, power, "
                  "temperature, clock event reasons): " + ", ".join(f.name for f in states) + ".", ""]
    placed, failed = profiles  # place_profiles'
    if placed:
        lines += ["Nsight Compute profiles (`evidence.sh PARTS=profile`, read by `goals` and notebook 04): the folders "
                  + ", ".join(placed) + " (spec.json, calls.csv, the .ncu-rep xz-compressed) and their kernels as "
                  "ncu_<folder>.csv.", ""]
    if failed:
        lines += ["Profiles that failed (no kernels.csv; the call's output says why): " + ", ".join(failed) + ".", ""]
    if args.note:
        lines += ["## Notes", "", args.note, ""]
    present = [n for n in ("results.parquet", "results.csv") + KEEP + ("reports",) if (folder / n).exists()]
    if present:  # a call of ablations or duels alone has no results: their files are named above
        lines += ["Files: " + ", ".join(present) + " (results: schema in README)."]
    return "\n".join(lines) + "\n"


def assemble(args: argparse.Namespace, tmp: Path, folder: Path) -> None:
    """Everything of the import written into ``folder`` (the staging folder) from the bundle unpacked in ``tmp``."""
    unpack(args, "bundle", tmp)
    taken = sorted(p for p in (tmp / "r").glob("*") if not args.only_set or p.name in args.only_set)
    missing = args.only_set - {p.name for p in taken}
    if missing:
        args.error(f"only: not under r/ in {args.bundle}: {', '.join(sorted(missing))}")
    b = tmp / "bundle"
    for name in KEEP:
        if (b / name).exists():
            shutil.copy2(b / name, folder / name)
    frames, complete, partial = sweep_frames(b, taken)  # one sweep -> bundle/run/, several -> bundle/runs/<name>/
    df = None
    if frames:
        df = pd.concat(frames, ignore_index=True)
        df["run_id"] = args.run_id
        save_run(df, folder)  # parquet + CSV atomically, with the manifest that load_run checks
    if (b / "reports").exists():
        shutil.copytree(b / "reports", folder / "reports", dirs_exist_ok=True)
    csvs = {k: [p for p in taken if p.is_file() and p.name.startswith(f"{k}-") and p.suffix == ".csv"]
            for k in ("ablate", "duel", "energy", "gpu", "read-floor")}
    for f in sum(csvs.values(), []):
        shutil.copy2(f, folder / f.name)
    profiles = place_profiles(args, tmp / "profiles", folder) if args.profiles is not None else ([], [])
    (folder / "PROVENANCE.md").write_text(provenance(args, df, complete, partial, csvs, folder, profiles))


def publish(staged: Path, dst: Path) -> None:
    """``staged`` becomes ``dst`` by renames; with ``--overwrite`` the old folder is moved aside first and removed
    only once the new one is in place."""
    old = dst.with_name(f".{dst.name}.replaced-{os.getpid()}")
    if dst.exists():
        dst.rename(old)
    staged.rename(dst)
    shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.runs_root.mkdir(parents=True, exist_ok=True)
    staged = args.dst.with_name(f".{args.run_id}.importing-{os.getpid()}")
    try:
        staged.mkdir()
        with tempfile.TemporaryDirectory() as tmp:
            assemble(args, Path(tmp), staged)
        publish(staged, args.dst)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    print(f"imported into {args.dst}")


if __name__ == "__main__":
    main()
