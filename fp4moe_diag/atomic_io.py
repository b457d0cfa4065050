"""Files written whole or not at all: a temp file beside the target, fsynced, then ``os.replace``d."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

#: temp files of :func:`atomic_write` start with this (a killed writer's are removed by the next run-folder writer)
TMP_PREFIX = ".tmp-"


def atomic_write(path: Path, write: Any) -> Path:
    """``write(fileobj)`` into a temp file next to ``path`` (``.tmp-<pid>-<name>``), fsync, ``os.replace``, fsync
    the folder.  The file gets normal permissions (0666 less the umask, 0644 by default), not mkstemp's 0600; a
    kill leaves ``path`` as it was plus at most a temp file, which the next :class:`RunFolder` start removes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}-{path.name}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)
    return path


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
