"""Run the same cases x backends x every tactic under several FlashInfer installs, one subprocess each.

:func:`compare_versions` starts ``python -m fp4moe_diag.versions`` once per version with that
version's site directory first on ``PYTHONPATH``; the child runs :func:`fp4moe_diag.tune.sweep` and
writes its rows (pickle).  The rows are concatenated with ``flashinfer_version`` (what the child
imported) and ``flashinfer_label`` (the name given) filled in.  A version that cannot be imported, has
no API adapter, or whose child fails, becomes one row: ``status="unsupported"``, ``stage="import"``
(or ``"subprocess"``) and the reason in ``error_message``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .case import MoECase

PKG_ROOT = str(Path(__file__).resolve().parent.parent)


def _reason_row(label: str, version: str, stage: str, reason: str) -> dict:
    line = " ".join(str(reason).split())[:500]
    return {"flashinfer_label": label, "flashinfer_version": version, "backend": "", "status": "unsupported",
            "stage": stage, "error_message": line}


def compare_versions(
    cases: Sequence[MoECase],
    backends: Sequence[Any],
    version_dirs: Mapping[str, str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    device: str | None = None,
    timeout: float = 3600.0,
    python: str = sys.executable,
    cutlass_modules: Mapping[str, str | os.PathLike] | None = None,
    **tune_kwargs: Any,
) -> pd.DataFrame:
    """``sweep(cases, backends, **tune_kwargs)`` under each FlashInfer of ``version_dirs`` (name -> site dir
    holding its ``flashinfer`` package), one subprocess per version; rows under ``out_dir/<name>/``.

    ``backends``: registry names (or Backend instances, by their ``name``).  ``tune_kwargs`` must be
    JSON-serialisable (they cross the process boundary).  ``cutlass_modules``: version name -> that version's
    prebuilt CUTLASS module (``FP4MOE_CUTLASS_MODULE`` of its child; a module of another generation is refused)."""
    unknown = sorted(set(cutlass_modules or {}) - set(version_dirs))
    if unknown:
        raise ValueError(f"cutlass_modules: {unknown} name no version of version_dirs {sorted(version_dirs)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [b if isinstance(b, str) else b.name for b in backends]
    spec = {"cases": [c.to_record() for c in cases], "backends": names, "device": device, "tune_kwargs": tune_kwargs}
    try:
        spec_text = json.dumps(spec, default=str)
    except TypeError as e:
        raise ValueError(f"tune_kwargs: must be JSON-serialisable to cross to the subprocess ({e})") from e
    frames = []
    for label, site in version_dirs.items():
        vdir = out / label
        vdir.mkdir(parents=True, exist_ok=True)
        (vdir / "spec.json").write_text(spec_text)
        rows_path = vdir / "rows.pkl"
        if rows_path.exists():
            rows_path.unlink()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(site), PKG_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.pop("FP4MOE_FLASHINFER_API", None)  # each child detects its own adapter
        env.pop("FP4MOE_CUTLASS_MODULE", None)  # a module is built for one FlashInfer generation
        if cutlass_modules and label in cutlass_modules:
            env["FP4MOE_CUTLASS_MODULE"] = str(cutlass_modules[label])
        try:
            cp = subprocess.run([python, "-m", "fp4moe_diag.versions", str(vdir / "spec.json"), str(rows_path)],
                                capture_output=True, text=True, timeout=timeout, env=env)
            (vdir / "log.txt").write_text(cp.stdout[-20000:] + "\n--- stderr ---\n" + cp.stderr[-20000:])
            if rows_path.exists():
                df = pd.read_pickle(rows_path)
            else:
                tail = (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
                df = pd.DataFrame([_reason_row(label, "", "subprocess", f"child exited {cp.returncode}: {tail}")])
        except subprocess.TimeoutExpired:
            df = pd.DataFrame([_reason_row(label, "", "subprocess", f"timed out after {timeout}s")])
        df["flashinfer_label"] = label
        frames.append(df)
    res = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(res):
        fv = res["flashinfer_version"].astype("string") if "flashinfer_version" in res else pd.Series(pd.NA, index=res.index)
        res["flashinfer_version"] = fv.mask(fv.isna() | (fv == ""), res["flashinfer_label"])
    return res


def _child(spec_path: str, rows_path: str) -> int:
    """In the subprocess: import this version's flashinfer, check its adapter, run the sweep, write rows."""
    spec = json.loads(Path(spec_path).read_text())
    label = Path(spec_path).parent.name
    try:
        import flashinfer

        version = str(getattr(flashinfer, "__version__", ""))
    except Exception as e:  # noqa: BLE001 - a reason row, whatever broke the import
        pd.DataFrame([_reason_row(label, "", "import", f"flashinfer not importable: {type(e).__name__}: {e}")]
                     ).to_pickle(rows_path)
        return 0
    from .backends.flashinfer.api import api_support_reason

    reason = api_support_reason()
    if reason:
        pd.DataFrame([_reason_row(label, version, "import", reason)]).to_pickle(rows_path)
        return 0
    from .backends import get_backend
    from .tune import sweep

    cases = [MoECase.from_record(r) for r in spec["cases"]]
    backends = [get_backend(n) for n in spec["backends"]]
    df = sweep(cases, backends, spec.get("device"), progress_bar=False, **spec.get("tune_kwargs", {}))
    df = df.copy()
    df["flashinfer_version"] = version
    df.to_pickle(rows_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1], sys.argv[2]))
