"""Unpack a ``bundle.tgz`` from ``tools/device/gpu_session.sh`` into ``data/runs/<run_id>/`` with provenance.

    python tools/device/import_gpu_bundle.py /work/.device/12/bundle.tgz 2026-12-02-nvidia-h200 \
        --command "PHASES=... tools/device/gpu_session.sh" --note "first run"

Copies results.{parquet,csv} (the sweeps of the bundle concatenated), env.txt, reproduce/verdict, version matrix, logs and executed
notebooks/HTML, and writes PROVENANCE.md (GPU, driver, torch, flashinfer, triton, commit, command).

A ``partial.tgz`` (``SNAPSHOT_S`` in gpu_session.sh: what a call that ran past its time limit left) holds the
run folders as they were (``r/<name>/parts/*.parquet``, one atomic file per finished case) beside the bundle so
far; their finished cases are imported and PROVENANCE.md says the run is partial.  ``r/ablate-*.csv``
(``profiling.ablate``'s tables) and ``r/duel-*.csv`` (``profiling.duel``'s) are copied beside the results.  ``--only`` takes some of what ``r/`` holds (a call on a
warm machine finds the earlier calls' folders there too).  An existing
``data/runs/<run_id>`` is never written over: that is an error unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from fp4moe_diag.run_folder import load_run, part_files, save_run

KEEP = ("env.txt", "reproduce.txt", "verdict_h200.json", "version_matrix.csv", "debug_cutlass.txt",
        "sweep.txt", "cutlass_build.txt", "gputests.txt")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("run_id")
    ap.add_argument("--command", default="")
    ap.add_argument("--note", default="")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing data/runs/<run_id> "
                    "(its whole folder)")
    ap.add_argument("--only", default="", help="comma list of the run folders and ablate CSVs under r/ to import "
                    "(default: all of them)")
    ap.add_argument("--runs-root", type=Path, default=Path(__file__).resolve().parents[2] / "data" / "runs")
    args = ap.parse_args()
    dst = args.runs_root / args.run_id
    if dst.exists() and not args.overwrite:
        ap.error(f"run_id: {dst} exists; pick a new run id or pass --overwrite")
    if not Path(args.bundle).is_file():
        ap.error(f"bundle: {args.bundle} is not a file")
    only = {x for x in args.only.split(",") if x}
    partial: list[str] = []
    df = None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.bundle) as tf:
            tf.extractall(tmp, filter="data")
        taken = sorted(p for p in (Path(tmp) / "r").glob("*") if not only or p.name in only)
        if only - {p.name for p in taken}:
            ap.error(f"only: not under r/ in {args.bundle}: {', '.join(sorted(only - {p.name for p in taken}))}")
        if dst.exists():  # --overwrite: replaced whole, nothing of the old import left beside the new one
            shutil.rmtree(dst)
        dst.mkdir(parents=True)
        b = Path(tmp) / "bundle"
        for name in KEEP:
            if (b / name).exists():
                shutil.copy2(b / name, dst / name)
        # one sweep -> bundle/run/, several (SWEEPS=...) -> bundle/runs/<name>/: one table per session
        parts = sorted([b / "run" / "results.parquet"] + list((b / "runs").glob("*/results.parquet")))
        frames = [pd.read_parquet(p) for p in parts if p.exists()]
        merged = {p.parent.name for p in parts if p.exists()}
        complete: list[str] = []
        for run in (p for p in taken if p.is_dir() and p.name not in merged):
            n_parts = len(part_files(run))
            if not n_parts:
                continue
            df_parts = load_run(run)  # merged results when the sweep finished, else the cases it finished
            if len(df_parts):
                frames.append(df_parts)
                done = (run / "results.parquet").exists()  # written by the sweep's merge, after its last case
                (complete if done else partial).append(f"{run.name}: {len(df_parts)} rows from {n_parts} cases")
        if frames:
            df = pd.concat(frames, ignore_index=True)
            df["run_id"] = args.run_id
            save_run(df, dst)  # parquet + CSV atomically, with the manifest that load_run checks
        if (b / "reports").exists():
            shutil.copytree(b / "reports", dst / "reports", dirs_exist_ok=True)
        ablations = [p for p in taken if p.is_file() and p.name.startswith("ablate-") and p.suffix == ".csv"]
        duels = [p for p in taken if p.is_file() and p.name.startswith("duel-") and p.suffix == ".csv"]
        for f in ablations + duels:
            shutil.copy2(f, dst / f.name)
    lines = [f"# Run {args.run_id}", ""]
    if df is None:  # no sweep in the call: the environment the ablation / duel CSVs recorded
        env = (pd.concat([pd.read_csv(dst / f.name) for f in ablations + duels], ignore_index=True)
               if ablations + duels else None)
        for k in ("gpu_name", "triton_version", "flashinfer_version", "git_commit"):
            seen = [] if env is None or k not in env else sorted({str(v) for v in env[k].dropna() if str(v)})
            if seen:
                lines.append(f"- {k}: {', '.join(seen)}")
    if df is not None:
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
        lines.append(f"- ceilings measured in the run: read {c.get('ceiling_read_GBps', float('nan')):.0f} GB/s, "
                     f"copy {c.get('ceiling_copy_GBps', float('nan')):.0f} GB/s, "
                     f"bf16 GEMM {c.get('ceiling_bf16_TFLOPs', float('nan')):.0f} TFLOP/s"
                     + (f" ({len(measured)} of {len(df)} rows carry them)" if len(measured) < len(df) else ""))
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
    if args.note:
        lines += ["## Notes", "", args.note, ""]
    present = [n for n in ("results.parquet", "results.csv") + KEEP + ("reports",) if (dst / n).exists()]
    if present:  # a call of ablations or duels alone has no results: their files are named above
        lines += ["Files: " + ", ".join(present) + " (results: schema in README)."]
    (dst / "PROVENANCE.md").write_text("\n".join(lines) + "\n")
    print(f"imported into {dst}")


if __name__ == "__main__":
    main()
