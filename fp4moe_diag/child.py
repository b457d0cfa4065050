"""One way to run work of this package in a child Python, under another FlashInfer install (``compare-versions``:
a sweep per install; ``versions``: a probe per install).

Parent side, :func:`run_child`: in a folder the caller names, writes ``spec.json`` (the task, a function of this
package named ``"module:function"``, and its keyword arguments), starts ``python -m fp4moe_diag.child
FOLDER/spec.json`` in its own process group with :func:`child_env` (the install's site dir first on PYTHONPATH;
the per-install settings cleared or set through :mod:`.settings`), its stdout to ``FOLDER/log.txt`` and its stderr to
``FOLDER/stderr.txt``, waits up to ``timeout`` seconds (then kills the group) and returns a :class:`ChildResult`:
what the task returned, read from ``FOLDER/result.json``, or why there is none (it exited without writing one, or
timed out), with the tail of its stderr.

Child side, :func:`main`: reads the spec, imports the task, calls ``task(FOLDER, **args)`` and writes the JSON
object it returns to ``FOLDER/result.json`` atomically (:func:`.atomic_io.atomic_write`): a result file is whole or
absent.  A task may also leave a run folder in ``FOLDER`` (:mod:`.run_folder`) for the parent to read.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from . import settings
from .atomic_io import atomic_write
from .paths import subprocess_env

SPEC_JSON = "spec.json"
RESULT_JSON = "result.json"
STDOUT_TXT = "log.txt"
STDERR_TXT = "stderr.txt"
#: the characters of the child's stderr a failure reason carries (its end, where the error is)
STDERR_TAIL_CHARS = 400
PACKAGE = __package__  # "fp4moe_diag", also when run as __main__


@dataclass(frozen=True)
class ChildResult:
    """What one child left: ``result`` (the task's JSON object) or, when it left none, ``error`` saying why (exit
    code or timeout, and the end of its stderr)."""

    result: Optional[dict]
    error: str
    returncode: Optional[int]  # None: timed out
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.result is not None


def child_env(site: Any, cutlass_module: Any = None) -> dict:
    """The environment of a child running the install at ``site``: PYTHONPATH is ``site`` (made absolute), this
    checkout, the current PYTHONPATH (:func:`.paths.subprocess_env`); the per-install settings are the child's own
    (:func:`.settings.child_environ`: ``cutlass_module`` or none)."""
    if not str(site or "").strip():
        raise ValueError(f"site: expected the folder of a FlashInfer install, got {site!r}")
    return settings.child_environ(subprocess_env(front=[Path(site).resolve()]), cutlass_module)


def task_name(task: Callable) -> str:
    """``"module:function"`` of ``task``, a module-level function of this package (what a child can import)."""
    module, qualname = getattr(task, "__module__", ""), getattr(task, "__qualname__", "")
    if not module.startswith(PACKAGE + ".") or not qualname or "." in qualname or "<" in qualname:
        raise ValueError(f"task: expected a module-level function of {PACKAGE}, got {task!r}")
    return f"{module}:{qualname}"


def stderr_tail(text: str, chars: int = STDERR_TAIL_CHARS) -> str:
    """The last ``chars`` characters of ``text``'s non-empty lines, joined by `` | `` (one line for a row)."""
    joined = " | ".join(ln.strip() for ln in text.splitlines() if ln.strip())
    return joined if len(joined) <= chars else "..." + joined[-chars:]


def run_child(task: Callable, args: Mapping[str, Any], folder: Any, *, site: Any, timeout: float,
              cutlass_module: Any = None, python: str = sys.executable) -> ChildResult:
    """``task(folder, **args)`` in a child Python running the install at ``site`` (module docstring)."""
    name = task_name(task)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / SPEC_JSON
    spec.write_text(json.dumps({"task": name, "args": dict(args)}))
    result = folder / RESULT_JSON
    result.unlink(missing_ok=True)
    env = child_env(site, cutlass_module)
    with open(folder / STDOUT_TXT, "w") as out, open(folder / STDERR_TXT, "w") as err:
        proc = subprocess.Popen([python, "-m", f"{PACKAGE}.child", str(spec)], stdout=out, stderr=err, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        code: Optional[int] = None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # timed out, or the parent interrupted: the child's session does not get the parent's Ctrl-C
            if code is None:
                _kill_group(proc)
    tail = stderr_tail((folder / STDERR_TXT).read_text(errors="replace"))
    if code is None:
        return ChildResult(None, f"child timed out after {timeout:g}s; stderr: {tail or '(empty)'}", None, tail)
    if not result.is_file():
        return ChildResult(None, f"child exited {code} without a result; stderr: {tail or '(empty)'}", code, tail)
    return ChildResult(json.loads(result.read_text()), "", code, tail)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (it was started in a session of its own), then reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def main(argv: list[str]) -> int:
    """The child: ``python -m fp4moe_diag.child FOLDER/spec.json``."""
    if len(argv) != 1:
        raise SystemExit(f"usage: python -m {PACKAGE}.child FOLDER/{SPEC_JSON}")
    spec_path = Path(argv[0])
    spec = json.loads(spec_path.read_text())
    module, _, func = str(spec["task"]).partition(":")
    if not module.startswith(PACKAGE + ".") or not func:
        raise ValueError(f"task: expected 'module:function' of {PACKAGE}, got {spec['task']!r}")
    task = getattr(importlib.import_module(module), func)
    out = task(spec_path.parent, **spec["args"])
    if not isinstance(out, dict):
        raise TypeError(f"task {spec['task']} returned {type(out).__name__}, not a JSON object")
    atomic_write(spec_path.parent / RESULT_JSON, lambda f: f.write(json.dumps(out).encode()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
