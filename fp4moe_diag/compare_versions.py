"""Run one sweep under several FlashInfer installs, one subprocess each.

:func:`compare_versions` starts ``python -m fp4moe_diag.compare_versions`` once per version with that version's site
directory first on ``PYTHONPATH``; the child imports that FlashInfer, checks its API adapter and runs
:func:`fp4moe_diag.runs.run_sweep` on the same :class:`~fp4moe_diag.runs.SweepSpec` into the run folder
``<out>/<name>/run`` (ceilings, kernel time, screening, tactic filters: the rows of a ``sweep``).  The rows are
concatenated with ``flashinfer_version`` (what the child imported) and ``flashinfer_label`` (the name given) filled
in.  A version that cannot be imported, has no API adapter, or whose child fails, becomes one row:
``status="unsupported"``, ``stage="import"`` (or ``"subprocess"``) and the reason in ``error_message``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

PKG_ROOT = str(Path(__file__).resolve().parent.parent)
#: what a child writes beside its run folder: ``{"version": ..., "stage": ..., "reason": ...}``
CHILD_JSON = "child.json"


def _reason_row(label: str, version: str, stage: str, reason: str) -> dict:
    line = " ".join(str(reason).split())[:500]
    return {"flashinfer_label": label, "flashinfer_version": version, "backend": "", "status": "unsupported",
            "stage": stage, "error_message": line}


def _child_env(site: Any, module: Any) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), PKG_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("FP4MOE_FLASHINFER_API", None)  # each child detects its own adapter
    env.pop("FP4MOE_CUTLASS_MODULE", None)  # a module is built for one FlashInfer generation
    if module is not None:
        env["FP4MOE_CUTLASS_MODULE"] = str(module)
    return env


def _version_rows(label: str, vdir: Path, cp: Any) -> pd.DataFrame:
    """The child's run folder as rows, or the one reason row it (or its exit) left."""
    from .run_folder import load_run

    info = json.loads((vdir / CHILD_JSON).read_text()) if (vdir / CHILD_JSON).is_file() else {}
    if info.get("reason"):
        return pd.DataFrame([_reason_row(label, info.get("version", ""), info.get("stage", "import"), info["reason"])])
    try:
        df = load_run(vdir / "run")
    except ValueError:
        tail = (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
        return pd.DataFrame([_reason_row(label, info.get("version", ""), "subprocess",
                                         f"child exited {cp.returncode}: {tail}")])
    if info.get("version"):
        df["flashinfer_version"] = info["version"]
    return df


def compare_versions(spec: Any, version_dirs: Mapping[str, str | os.PathLike], out_dir: str | os.PathLike, *,
                     timeout: float = 3600.0, python: str = sys.executable,
                     cutlass_modules: Mapping[str, str | os.PathLike] | None = None) -> pd.DataFrame:
    """``run_sweep(spec)`` under each FlashInfer of ``version_dirs`` (name -> site dir holding its ``flashinfer``
    package), one subprocess per version, into ``out_dir/<name>/run``; returns every version's rows.
    ``cutlass_modules``: version name -> that version's prebuilt CUTLASS module (``FP4MOE_CUTLASS_MODULE`` of its
    child; a module of another generation is refused)."""
    from .runs import SweepSpec

    if not isinstance(spec, SweepSpec):
        raise ValueError(f"spec: expected a SweepSpec, got {type(spec).__name__}")
    unknown = sorted(set(cutlass_modules or {}) - set(version_dirs))
    if unknown:
        raise ValueError(f"cutlass_modules: {unknown} name no version of version_dirs {sorted(version_dirs)}")
    spec.cases()  # a bad spec fails here, once, not in every child
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec_text = json.dumps(spec.to_dict())
    frames = []
    for label, site in version_dirs.items():
        vdir = out / label
        vdir.mkdir(parents=True, exist_ok=True)
        (vdir / "spec.json").write_text(spec_text)
        (vdir / CHILD_JSON).unlink(missing_ok=True)
        env = _child_env(site, (cutlass_modules or {}).get(label))
        try:
            cp = subprocess.run([python, "-m", "fp4moe_diag.compare_versions", str(vdir / "spec.json"), str(vdir / "run")],
                                capture_output=True, text=True, timeout=timeout, env=env)
            (vdir / "log.txt").write_text(cp.stdout[-20000:] + "\n--- stderr ---\n" + cp.stderr[-20000:])
            df = _version_rows(label, vdir, cp)
        except subprocess.TimeoutExpired:
            df = pd.DataFrame([_reason_row(label, "", "subprocess", f"timed out after {timeout}s")])
        df["flashinfer_label"] = label
        frames.append(df)
    res = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(res):
        fv = res["flashinfer_version"].astype("string") if "flashinfer_version" in res else pd.Series(pd.NA, index=res.index)
        res["flashinfer_version"] = fv.mask(fv.isna() | (fv == ""), res["flashinfer_label"])
    return res


def _child(spec_path: str, run_dir: str) -> int:
    """In the subprocess: import this version's flashinfer, check its adapter, ``run_sweep`` into ``run_dir``."""
    info_path = Path(spec_path).parent / CHILD_JSON
    try:
        import flashinfer

        version = str(getattr(flashinfer, "__version__", ""))
    except Exception as e:  # noqa: BLE001 - a reason row, whatever broke the import
        info_path.write_text(json.dumps({"version": "", "stage": "import",
                                         "reason": f"flashinfer not importable: {type(e).__name__}: {e}"}))
        return 0
    from .backends.flashinfer.api import api_support_reason

    reason = api_support_reason()
    info_path.write_text(json.dumps({"version": version, "stage": "import", "reason": reason}))
    if reason:
        return 0
    from .runs import SweepSpec, run_sweep

    spec = SweepSpec.from_dict(json.loads(Path(spec_path).read_text()))
    run_sweep(spec, run_dir, progress_bar=False, mode="overwrite")
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1], sys.argv[2]))
