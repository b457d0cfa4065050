"""Unpack a ``bundle.tgz`` from ``tools/gpu_session.sh`` into ``data/runs/<run_id>/`` with provenance.

    python tools/import_gpu_bundle.py /work/.device/12/bundle.tgz 2026-12-02-nvidia-h200 \
        --command "PHASES=... tools/gpu_session.sh" --note "first run"

Copies results.{parquet,csv} (the sweeps of the bundle concatenated), env.txt, reproduce/verdict, version matrix, logs and executed
notebooks/HTML, and writes PROVENANCE.md (GPU, driver, torch, flashinfer, triton, commit, command).
"""

from __future__ import annotations

import argparse
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

KEEP = ("env.txt", "reproduce.txt", "verdict_h200.json", "version_matrix.csv", "debug_cutlass.txt",
        "sweep.txt", "cutlass_build.txt", "gputests.txt")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("run_id")
    ap.add_argument("--command", default="")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    dst = root / "data" / "runs" / args.run_id
    dst.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.bundle) as tf:
            tf.extractall(tmp, filter="data")
        b = Path(tmp) / "bundle"
        for name in KEEP:
            if (b / name).exists():
                shutil.copy2(b / name, dst / name)
        # one sweep -> bundle/run/, several (SWEEPS=...) -> bundle/runs/<name>/: one table per session
        parts = sorted([b / "run" / "results.parquet"] + list((b / "runs").glob("*/results.parquet")))
        frames = [pd.read_parquet(p) for p in parts if p.exists()]
        if frames:
            df = pd.concat(frames, ignore_index=True)
            df["run_id"] = args.run_id
            df.to_parquet(dst / "results.parquet", index=False)
            df.to_csv(dst / "results.csv", index=False)
        if (b / "reports").exists():
            shutil.copytree(b / "reports", dst / "reports", dirs_exist_ok=True)
    lines = [f"# Run {args.run_id}", ""]
    if (dst / "results.parquet").exists():
        df = pd.read_parquet(dst / "results.parquet")
        r = df.iloc[0]
        for k in ("gpu_name", "compute_capability", "driver_version", "torch_version", "cuda_version",
                  "flashinfer_version", "triton_version", "git_commit"):
            lines.append(f"- {k}: {r.get(k, '')}")
        lines.append(f"- rows: {len(df)} ({', '.join(f'{b}: {n}' for b, n in df['backend'].value_counts().items())})")
        lines.append(f"- statuses: {dict(df['status'].value_counts())}")
        lines.append(f"- ceilings measured in the run: read {r.get('ceiling_read_GBps', float('nan')):.0f} GB/s, "
                     f"copy {r.get('ceiling_copy_GBps', float('nan')):.0f} GB/s, "
                     f"bf16 GEMM {r.get('ceiling_bf16_TFLOPs', float('nan')):.0f} TFLOP/s")
    lines += ["", "Produced on the lent H200 by `tools/gpu_session.sh`"
              + (f":\n\n```\n{args.command}\n```" if args.command else "."), ""]
    if args.note:
        lines += ["## Notes", "", args.note, ""]
    lines += ["Files: results.parquet/csv (schema in README), env.txt (nvidia-smi, versions), reproduce.txt + "
              "verdict_h200.json (bug verdict), version_matrix.csv, sweep.txt (log), reports/ (executed notebooks)."]
    (dst / "PROVENANCE.md").write_text("\n".join(lines) + "\n")
    print(f"imported into {dst}")


if __name__ == "__main__":
    main()
