"""A run folder that is never lost: refused when it exists, locked while written, one part file per case.

::

    <run>/run.json                      configuration (and its hash) of the current writer
    <run>/.lock                         flock()ed by the writer; holds its pid and host
    <run>/parts/<case key>@<hash>.parquet   one per finished case, written atomically
    <run>/results.parquet, results.csv  merged from the parts (:meth:`RunFolder.merge`)
    <run>/manifest.json                 written after both: row count and sha256 of each

* ``RunFolder(path, config, mode="new")`` refuses an existing run: the error names ``--out`` and the two choices
  ``--resume`` / ``--overwrite``.  ``"resume"`` keeps the parts (a missing folder is started fresh);
  ``"overwrite"`` removes the run's own files (parts, results, manifest, run.json; nothing else).
* The lock is an ``flock`` on ``.lock``: a second writer gets a ``ValueError`` naming the holder's pid; the kernel
  drops the lock when its holder dies (SIGKILL included), so a stale lock of a dead pid is simply taken over.
* ``config`` holds the settings that decide a case's rows (backends, timing, device, versions...), not which cases
  run: a part records the hash of the configuration it was measured with (in its name), :meth:`done_cases` lists
  the cases finished under the current one, and :meth:`merge` / :func:`load_run` use only those.  Parts of an
  earlier configuration stay on disk (never deleted by a resume).
* Every file is written to ``.tmp-<pid>-...`` then fsynced and ``os.replace``d (normal 0644 permissions); temp
  files left by a killed writer are removed when the next writer starts (it holds the lock, so none is live).
"""

from __future__ import annotations

import datetime
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import urllib.parse
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from .atomic_io import TMP_PREFIX, atomic_write, sha256_file
from .paths import RUNS_ROOT
from .results import coerce, read_results_file, to_frame, validate_frame

def run_dir_name(gpu_name: str, date: Optional[str] = None, tag: str = "") -> str:
    date = date or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    gpu = re.sub(r"[^A-Za-z0-9]+", "-", gpu_name).strip("-").lower() or "cpu"
    return f"{date}-{gpu}" + (f"-{tag}" if tag else "")


#: a run folder's files (see :mod:`fp4moe_diag.run_folder`)
PARTS_DIR, MANIFEST, RUN_JSON, LOCK = "parts", "manifest.json", "run.json", ".lock"
MANIFEST_FORMAT = 1


def save_run(df: pd.DataFrame, out_dir: Any, name: str = "results", extra: Optional[dict] = None) -> dict[str, Path]:
    """Write ``<out_dir>/<name>.parquet`` and ``.csv`` (each atomically), then ``manifest.json`` naming both with
    the row count and sha256.  A kill in between leaves an old manifest that no longer matches: :func:`load_run`
    then trusts the parts (or refuses), never a torn pair."""
    validate_frame(df)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    pq, csv = out / f"{name}.parquet", out / f"{name}.csv"
    atomic_write(pq, lambda f: df.to_parquet(f, index=False))
    atomic_write(csv, lambda f: f.write(df.to_csv(index=False).encode()))
    manifest = {"format": MANIFEST_FORMAT, "rows": int(len(df)), **(extra or {}),
                "files": {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in (pq, csv)}}
    atomic_write(out / MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1, sort_keys=True).encode()))
    return {"parquet": pq, "csv": csv, "manifest": out / MANIFEST}


def default_runs_root() -> Path:
    return RUNS_ROOT


def part_files(run_dir: Path, config_hash: Optional[str] = None) -> list[Path]:
    """The per-case part files of a run folder (those of ``config_hash`` only, when given), oldest first."""
    d = Path(run_dir) / PARTS_DIR
    if not d.is_dir():
        return []
    parts = [p for p in d.glob("*.parquet") if not p.name.startswith(TMP_PREFIX)]
    if config_hash is not None:
        parts = [p for p in parts if p.stem.rpartition("@")[2] == config_hash]
    return sorted(parts, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _run_config_hash(run_dir: Path) -> Optional[str]:
    try:
        return json.loads((run_dir / RUN_JSON).read_text()).get("config_hash")
    except (OSError, ValueError):
        return None


def read_parts(run_dir: Path, config_hash: Optional[str] = None) -> pd.DataFrame:
    frames = [read_results_file(p) for p in part_files(run_dir, config_hash)]
    return coerce(pd.concat(frames, ignore_index=True)) if frames else to_frame([])


def load_run(path: Any) -> pd.DataFrame:
    """One run folder -> its rows.  Trusts, in this order: the per-case parts (``parts/``, those of the run's
    current configuration); else ``manifest.json`` (the parquet, or the CSV, whose sha256 and row count match
    it); else a run without a manifest (older runs): parquet and CSV must agree in row count, and a CSV-only
    run is read from the CSV.  A missing path, a folder with no results or a torn pair -> ValueError."""
    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"path: {d} is not a run folder (it does not exist or is not a directory)")
    if part_files(d):
        df = read_parts(d, _run_config_hash(d))
    elif (d / MANIFEST).is_file():
        man = json.loads((d / MANIFEST).read_text())
        df = None
        for name, info in sorted(man.get("files", {}).items(), key=lambda kv: not kv[0].endswith(".parquet")):
            p = d / name
            if p.is_file() and sha256_file(p) == info.get("sha256"):
                df = read_results_file(p)
                break
        if df is None or len(df) != man.get("rows"):
            raise ValueError(f"path: {d}: no results file matches {MANIFEST} (a write was interrupted and there are "
                             "no parts to rebuild from)")
    else:
        pq, csv = d / "results.parquet", d / "results.csv"
        if pq.is_file():
            df = read_results_file(pq)
            if csv.is_file():
                n_csv = len(pd.read_csv(csv, usecols=[0]))
                if n_csv != len(df):
                    raise ValueError(f"path: {d}: results.parquet ({len(df)} rows) and results.csv ({n_csv} rows) "
                                     "disagree and there is no manifest to say which is whole")
        elif csv.is_file():
            df = read_results_file(csv)
        else:
            raise ValueError(f"path: {d} has no results (no parts/, results.parquet or results.csv)")
    if "run_id" not in df or df["run_id"].isna().all():
        df["run_id"] = d.name
    return coerce(df)


def is_run_folder(d: Path) -> bool:
    return d.is_dir() and any((d / n).exists() for n in (PARTS_DIR, MANIFEST, "results.parquet", "results.csv"))


def load_run_args(dirs: list, argument: str = "runs") -> list[pd.DataFrame]:
    """The rows of each folder a command was given (``argument``: its name in the error), every folder checked to be
    a run before any is read: one frame per folder, in order."""
    for d in dirs:
        if not is_run_folder(Path(d)):
            raise ValueError(f"argument {argument}: {d} is not a run folder (results.parquet / results.csv / parts/)")
    return [load_run(d) for d in dirs]


def load_runs(root: Any = None, pattern: Optional[str] = None, *, allow_empty: bool = False) -> pd.DataFrame:
    """Concatenate the runs under ``root`` (default ``data/runs``): every sub-folder that is a run (CSV-only runs
    included), or the folders holding the files ``pattern`` matches (e.g. ``"*/results.parquet"``); ``root``
    itself when it is a run.  A missing ``root`` -> ValueError; no runs -> ValueError naming ``root``, or an empty
    frame when ``allow_empty`` (the notebooks, which then make a local run).  The one loader of many runs
    (:mod:`fp4moe_diag.run_folder` exports this same function)."""
    root = Path(root) if root is not None else default_runs_root()
    if not root.is_dir():
        raise ValueError(f"root: {root} does not exist or is not a directory")
    if pattern is not None:
        dirs = sorted({p.parent for p in root.glob(pattern)})
    elif is_run_folder(root) and not any(is_run_folder(c) for c in root.iterdir()):
        dirs = [root]
    else:
        dirs = sorted(c for c in root.iterdir() if is_run_folder(c))
    frames = [load_run(d) for d in dirs]
    if not frames:
        if not allow_empty:
            raise ValueError(f"root: no run folders under {root}" + (f" matching {pattern!r}" if pattern else ""))
        return to_frame([])
    return coerce(pd.concat(frames, ignore_index=True))


MODES = ("new", "resume", "overwrite")
_RUN_FILES = (RUN_JSON, MANIFEST, "results.parquet", "results.csv")
_MAX_KEY = 180  # quoted case keys longer than this would not fit a file name


def config_hash(config: dict) -> str:
    """16 hex digits of the sha256 of ``config`` as sorted JSON."""
    if not isinstance(config, dict):
        raise ValueError(f"config: expected a dict, got {type(config).__name__}")
    try:
        text = json.dumps(config, sort_keys=True, default=str)
    except (TypeError, ValueError) as e:
        raise ValueError(f"config: cannot be written as JSON: {e}") from None
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _key_file(case_key: str, chash: str) -> str:
    if not isinstance(case_key, str) or not case_key:
        raise ValueError(f"case_key: expected a non-empty str, got {case_key!r}")
    q = urllib.parse.quote(case_key, safe="")
    if len(q) > _MAX_KEY:
        raise ValueError(f"case_key: too long for a file name ({len(q)} characters quoted, limit {_MAX_KEY})")
    return f"{q}@{chash}.parquet"


def _key_of(part: Path) -> str:
    return urllib.parse.unquote(part.stem.rpartition("@")[0])


def _has_run(d: Path) -> bool:
    return is_run_folder(d) or (d / RUN_JSON).exists()


class RunFolder:
    """See the module docstring.  Use as a context manager (or call :meth:`close`) to release the lock."""

    def __init__(self, path: Any, config: dict, mode: str = "new") -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
        self.path = Path(path)
        self.config = dict(config) if isinstance(config, dict) else config
        self.config_hash = config_hash(config)
        self.mode = mode
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"--out: {self.path} exists and is not a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd: Optional[int] = None
        self._lock()
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ---- lock ----------------------------------------------------------------------------------------------
    def _lock(self) -> None:
        p = self.path / LOCK
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            try:
                holder = json.loads(p.read_text() or "{}")
            except (OSError, ValueError):
                holder = {}
            raise ValueError(
                f"--out: {self.path} is being written by another sweep (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}, since {holder.get('since', '?')}); wait for it or choose another --out"
            ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        os.fsync(fd)
        self._lock_fd = fd

    def close(self) -> None:
        """Release the lock (the ``.lock`` file stays; a lock not held is no lock)."""
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - a forgotten close
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ---- start ---------------------------------------------------------------------------------------------
    def _start(self) -> None:
        self.cleanup_temp_files()
        exists = _has_run(self.path)
        if exists and self.mode == "new":
            raise ValueError(f"--out: {self.path} already holds a run; pass --resume to continue it (finished cases "
                             "are skipped) or --overwrite to replace it, or choose another --out")
        if self.mode == "overwrite":
            for name in _RUN_FILES:
                (self.path / name).unlink(missing_ok=True)
            for p in part_files(self.path):
                p.unlink()
        if self.mode == "new" and any(p.name not in (LOCK,) for p in self.path.iterdir()):
            raise ValueError(f"--out: {self.path} is a non-empty folder that is not a run; choose an empty or new "
                             "--out")
        (self.path / PARTS_DIR).mkdir(exist_ok=True)
        run = {"config": self.config, "config_hash": self.config_hash, "mode": self.mode,
               "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        atomic_write(self.path / RUN_JSON, lambda f: f.write(json.dumps(run, indent=1, default=str).encode()))

    def cleanup_temp_files(self) -> list[Path]:
        """Remove ``.tmp-*`` files of killed writers (only safe under the lock, which this object holds)."""
        gone = []
        for d in (self.path, self.path / PARTS_DIR):
            if d.is_dir():
                for p in d.glob(f"{TMP_PREFIX}*"):
                    p.unlink(missing_ok=True)
                    gone.append(p)
        return gone

    # ---- writing -------------------------------------------------------------------------------------------
    def _require_lock(self) -> None:
        if self._lock_fd is None:
            raise ValueError(f"run folder {self.path}: closed (the lock was released); open a new RunFolder")

    def done_cases(self) -> set[str]:
        """Case keys with a part file written under the current configuration (what a resume skips)."""
        return {_key_of(p) for p in part_files(self.path, self.config_hash)}

    def append_case(self, case_key: str, rows_df: pd.DataFrame) -> Path:
        """Write ``rows_df`` (schema frame) as the part of ``case_key`` (replacing an earlier one of the same
        configuration), atomically."""
        self._require_lock()
        if not isinstance(rows_df, pd.DataFrame):
            raise ValueError(f"rows_df: expected a DataFrame, got {type(rows_df).__name__}")
        validate_frame(rows_df)
        df = coerce(rows_df)
        return atomic_write(self.path / PARTS_DIR / _key_file(case_key, self.config_hash),
                            lambda f: df.to_parquet(f, index=False))

    def rows(self) -> pd.DataFrame:
        """Every row of the current configuration's parts."""
        return read_parts(self.path, self.config_hash)

    def merge(self) -> dict[str, Any]:
        """Write ``results.parquet``, ``results.csv`` and the manifest from the parts; returns paths and rows."""
        self._require_lock()
        df = self.rows()
        if df["run_id"].isna().any():
            df["run_id"] = df["run_id"].fillna(self.path.name)
        parts = [p.name for p in part_files(self.path, self.config_hash)]
        out = save_run(df, self.path, extra={"config_hash": self.config_hash, "parts": parts})
        return {**out, "rows": len(df)}

    def load(self) -> pd.DataFrame:
        return load_run(self.path)


__all__ = ["MODES", "RunFolder", "config_hash", "load_run", "load_runs"]
