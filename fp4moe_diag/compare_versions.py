"""Run one sweep under several FlashInfer installs, one child process each.

:func:`compare_versions` runs :func:`sweep_task` once per version through the one child runner
(:func:`fp4moe_diag.child.run_child`: that version's site directory first on ``PYTHONPATH``, its CUTLASS module or
none); the child imports that FlashInfer, checks its API adapter and runs :func:`fp4moe_diag.runs.run_sweep` on the
same :class:`~fp4moe_diag.runs.SweepSpec` into the run folder ``<out>/<name>/run`` (ceilings, kernel time,
screening, tactic filters: the rows of a ``sweep``).  The rows are concatenated with ``flashinfer_version`` (what the
child imported) and ``flashinfer_label`` (the name given) filled in.  A version that cannot be imported or has no API
adapter becomes one row: ``status="unsupported"``, ``stage="import"`` and the reason in ``error_message``; a child
that crashed or timed out, one row with ``stage="subprocess"``, the exit code (or the timeout) and the end of its
stderr (after the rows of the cases it finished).  Each version's folder keeps the child's ``spec.json``,
``result.json``, ``log.txt`` (stdout) and ``stderr.txt``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from . import child

RUN = "run"


def _reason_row(label: str, version: str, stage: str, reason: str) -> dict:
    line = " ".join(str(reason).split())[:600]
    return {"flashinfer_label": label, "flashinfer_version": version, "backend": "", "status": "unsupported",
            "stage": stage, "error_message": line}


def _version_rows(label: str, vdir: Path, res: child.ChildResult) -> pd.DataFrame:
    """The child's run folder as rows, or the one reason row it (or its crash) left."""
    from .run_folder import load_run

    if not res.ok:  # the cases it finished (if any), then why it stopped
        try:
            done = load_run(vdir / RUN)
        except ValueError:
            done = pd.DataFrame()
        return pd.concat([done, pd.DataFrame([_reason_row(label, "", "subprocess", res.error)])], ignore_index=True)
    info = res.result
    if info.get("reason"):
        return pd.DataFrame([_reason_row(label, info.get("version", ""), info.get("stage", "import"), info["reason"])])
    try:
        df = load_run(vdir / RUN)
    except ValueError as e:
        return pd.DataFrame([_reason_row(label, info.get("version", ""), "subprocess",
                                         f"child finished but left no readable run folder: {e}")])
    df["flashinfer_version"] = info["version"]
    return df


def compare_versions(spec: Any, version_dirs: Mapping[str, str | os.PathLike], out_dir: str | os.PathLike, *,
                     timeout: float = 3600.0, python: str = sys.executable,
                     cutlass_modules: Mapping[str, str | os.PathLike] | None = None) -> pd.DataFrame:
    """``run_sweep(spec)`` under each FlashInfer of ``version_dirs`` (name -> site dir holding its ``flashinfer``
    package), one child per version, into ``out_dir/<name>/run``; returns every version's rows.
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
    frames = []
    for label, site in version_dirs.items():
        vdir = out / label
        res = child.run_child(sweep_task, {"spec": spec.to_dict()}, vdir, site=site, timeout=timeout, python=python,
                              cutlass_module=(cutlass_modules or {}).get(label))
        df = _version_rows(label, vdir, res)
        df["flashinfer_label"] = label
        frames.append(df)
    res = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(res):
        fv = res["flashinfer_version"].astype("string") if "flashinfer_version" in res else pd.Series(pd.NA, index=res.index)
        res["flashinfer_version"] = fv.mask(fv.isna() | (fv == ""), res["flashinfer_label"])
    return res


def sweep_task(folder: Path, spec: dict) -> dict:
    """In the child: import this version's flashinfer, check its adapter, ``run_sweep`` into ``folder/run``.
    Returns ``{"version", "stage", "reason"}`` (``reason`` '' when the sweep ran)."""
    try:
        import flashinfer

        version = str(getattr(flashinfer, "__version__", ""))
    except Exception as e:  # noqa: BLE001 - a reason row, whatever broke the import
        return {"version": "", "stage": "import", "reason": f"flashinfer not importable: {type(e).__name__}: {e}"}
    from .backends.flashinfer.api import api_support_reason

    reason = api_support_reason()
    if reason:
        return {"version": version, "stage": "import", "reason": reason}
    from .runs import SweepSpec, run_sweep

    run_sweep(SweepSpec.from_dict(spec), Path(folder) / RUN, progress_bar=False, mode="overwrite")
    return {"version": version, "stage": "", "reason": ""}
