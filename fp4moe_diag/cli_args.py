"""argparse ``type=`` functions and post-parse checks for every flag of ``python -m fp4moe_diag``.

A ``type=`` function raises ``argparse.ArgumentTypeError``: argparse then prints the usage and one line
``fp4moe-diag <cmd>: error: argument --flag: <message>`` and exits with code 2, never a traceback.  Checks that
need several flags (``check_*``) call ``parser.error`` the same way, naming the flag.  Everything here runs at
parse time, before any case is computed.

=========================================  ==================================================================
flag                                       type / check
=========================================  ==================================================================
``--tokens`` (sweep)                       :func:`token_list`
``--tokens`` (reproduce, profile)          :func:`positive_int`
``--ep`` (sweep) / (profile)               :func:`ep_list` / :func:`positive_int`, then :func:`check_sweep_args`
``--models`` / ``--model``                 :func:`model_entries` / :func:`model_name` (shape table names)
``shapes --model``                         :func:`model_names`
``--backends`` / ``--backend``             :func:`backend_names` / :func:`backend_name`
``--device``                               :func:`device`
``--screen``, ``--screen-top``,            :func:`positive_int`
``--max-tokens``, ``--hidden-scale``,
``--max-table-rows``, ``--runs``
``--repeats``                              :func:`positive_int` (>= 1)
``--warmup``                               :func:`non_negative_int`
``--max-seconds-per-tactic``               :func:`positive_float` (finite, > 0)
``--out`` (sweep, report, profile)         :func:`out_dir` (a writable directory or creatable path, not a file)
``--resume`` / ``--overwrite``             :func:`check_sweep_args` (not both; an existing run needs one)
``--json``, ``--csv``                      :func:`out_file`
``report --only``                          :func:`notebook_prefixes`
``report --param``                         :func:`report_param` (``key=value``, JSON values) -> ``(key, value)``
``reproduce --log``                        :func:`log_file`, then :func:`check_reproduce_args` (parses it)
``versions DIR``                           :func:`existing_dir`
``profile --tactics``                      :func:`non_empty_list`
``sweep --tactics``                        :func:`tactic_filter` (``BACKEND=REGEX``), then :func:`checked_spec`
``compare-versions --flashinfer``          :func:`version_dir` (``NAME=DIR`` holding ``flashinfer/``)
``compare-versions --cutlass-module``      :func:`version_file` (``NAME=FILE``)
=========================================  ==================================================================
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Optional

Err = argparse.ArgumentTypeError
_KEY = re.compile(r"[A-Za-z_]\w*")
#: a bigger ``--log`` is no kwargs log (the seed's is 2 KB)
MAX_LOG_BYTES = 16 * 2**20


def _int(text: str, what: str) -> int:
    t = str(text).strip()
    if not re.fullmatch(r"[+-]?\d+", t):
        raise Err(f"expected {what}, got {text!r}")
    return int(t)


def positive_int(text: str) -> int:
    v = _int(text, "an integer >= 1")
    if v < 1:
        raise Err(f"expected an integer >= 1, got {v}")
    return v


def non_negative_int(text: str) -> int:
    v = _int(text, "an integer >= 0")
    if v < 0:
        raise Err(f"expected an integer >= 0, got {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(str(text).strip())
    except ValueError:
        raise Err(f"expected a number > 0, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise Err(f"expected a finite number > 0, got {text!r}")
    return v


def non_negative_float(text: str) -> float:
    try:
        v = float(str(text).strip())
    except ValueError:
        raise Err(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise Err(f"expected a finite number >= 0, got {text!r}")
    return v


def _items(text: str) -> list[str]:
    items = [x.strip() for x in str(text).split(",")]
    if not any(items) or any(not x for x in items):
        raise Err(f"expected a comma list without empty items, got {text!r}")
    return items


def int_list(text: str) -> tuple[int, ...]:
    """Comma list of integers >= 1, e.g. ``1,16,256`` (duplicates dropped, order kept)."""
    out: list[int] = []
    for x in _items(text):
        v = positive_int(x)
        if v not in out:
            out.append(v)
    return tuple(out)


token_list = int_list
ep_list = int_list


def non_empty_list(text: str) -> list[str]:
    return _items(text)


def tactic_filter(text: str) -> str:
    """``sweep --tactics BACKEND=REGEX``: a backend name and a valid regular expression."""
    name, sep, rx = str(text).partition("=")
    name = name.strip()
    if not sep or not name or not rx:
        raise Err(f"expected BACKEND=REGEX (e.g. triton=-ps), got {text!r}")
    backend_name(name)
    try:
        re.compile(rx)
    except re.error as e:
        raise Err(f"{rx!r} is not a valid regular expression ({e})") from None
    return f"{name}={rx}"


def _table_models() -> list[str]:
    from .problem.shapes import load_shape_table  # noqa: PLC0415

    return sorted(set(load_shape_table()["model"].astype(str)))


def model_name(text: str) -> str:
    models = _table_models()
    t = str(text).strip()
    if t not in models:
        raise Err(f"unknown model {text!r}; the shape table has {', '.join(models)}")
    return t


def model_names(text: str) -> list[str]:
    return [model_name(x) for x in _items(text)]


def model_entries(text: str) -> tuple[str, ...]:
    """``sweep --models``: comma list of ``model``, ``model:ep`` or ``model:ep:max_tokens``."""
    out = []
    for entry in _items(text):
        parts = entry.split(":")
        if len(parts) > 3:
            raise Err(f"expected 'model', 'model:ep' or 'model:ep:max_tokens', got {entry!r}")
        model_name(parts[0])
        for p, what in zip(parts[1:], ("ep", "max_tokens")):
            try:
                positive_int(p)
            except Err:
                raise Err(f"{entry!r}: the {what} must be an integer >= 1, got {p!r}") from None
        out.append(entry)
    return tuple(out)


def backend_name(text: str) -> str:
    from .backends import available_backends  # noqa: PLC0415

    names = available_backends()
    t = str(text).strip()
    if t not in names:
        raise Err(f"unknown backend {text!r}; expected one of {', '.join(names)}")
    return t


def backend_names(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(backend_name(x) for x in _items(text)))


def device(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` of a GPU this machine has (:func:`fp4moe_diag.problem.inputs.resolve_device`)."""
    from .problem.inputs import resolve_device  # noqa: PLC0415

    t = str(text).strip()
    try:
        resolve_device(t or "?")
    except ValueError as e:
        raise Err(str(e).removeprefix("device: ")) from None
    return t


def _can_write_in(d: Path) -> bool:
    """os.access, then a real probe file (root passes os.access on read-only mounts)."""
    if not os.access(d, os.W_OK | os.X_OK):
        return False
    probe = d / f".fp4moe-write-probe-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
        return True
    except OSError:
        return False


def _writable_dir_or_creatable(p: Path) -> None:
    if p.exists():
        if not p.is_dir():
            raise Err(f"{p} exists and is not a directory")
        if not _can_write_in(p):
            raise Err(f"{p} is not writable")
        return
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise Err(f"{p}: {parent} is a file, so the folder cannot be created")
    if not _can_write_in(parent):
        raise Err(f"{p} cannot be created: {parent} is not writable")


def out_dir(text: str) -> Path:
    """An output folder: an existing writable directory, or one that can be created (checked, not created)."""
    if not str(text).strip():
        raise Err("expected a folder path, got ''")
    p = Path(text).expanduser()
    _writable_dir_or_creatable(p)
    return p


def out_file(text: str) -> Path:
    """An output file (``--json``, ``--csv``): not a directory, its folder writable or creatable."""
    if not str(text).strip():
        raise Err("expected a file path, got ''")
    p = Path(text).expanduser()
    if p.is_dir():
        raise Err(f"{p} is a directory; expected a file path")
    if p.exists() and not os.access(p, os.W_OK):
        raise Err(f"{p} is not writable")
    _writable_dir_or_creatable(p.parent if str(p.parent) else Path("."))
    return p


def existing_dir(text: str) -> Path:
    p = Path(text).expanduser()
    if not p.is_dir():
        raise Err(f"{text!r} does not exist or is not a directory")
    return p


def _named(text: str, what: str) -> tuple[str, str]:
    name, sep, value = str(text).partition("=")
    if not sep or not _KEY.fullmatch(name.replace(".", "_")) or not value:
        raise Err(f"expected NAME={what}, got {text!r}")
    return name, value


def version_dir(text: str) -> tuple[str, Path]:
    """``NAME=DIR``: a FlashInfer install folder (``pip --target``), holding a ``flashinfer`` package."""
    name, value = _named(text, "DIR")
    d = existing_dir(value)
    if not (d / "flashinfer" / "__init__.py").is_file():
        raise Err(f"{value!r} holds no flashinfer package (expected {d / 'flashinfer' / '__init__.py'})")
    return name, d


def version_file(text: str) -> tuple[str, Path]:
    """``NAME=FILE``: an existing file (a version's prebuilt CUTLASS module)."""
    name, value = _named(text, "FILE")
    p = Path(value).expanduser()
    if not p.is_file():
        raise Err(f"{value!r} is not a file")
    return name, p


def log_file(text: str) -> Path:
    """A readable UTF-8 text file of at most 16 MiB holding vLLM kwarg lines (parsed by check_reproduce_args)."""
    p = Path(text).expanduser()
    if not p.is_file():
        raise Err(f"{text!r} does not exist or is not a file")
    if p.stat().st_size > MAX_LOG_BYTES:
        raise Err(f"{text!r} is {p.stat().st_size} bytes; a kwargs log is a few KB (limit {MAX_LOG_BYTES})")
    try:
        p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise Err(f"{text!r} cannot be read as UTF-8 text: {type(e).__name__}") from None
    return p


def notebook_prefixes(text: str) -> list[str]:
    """``report --only``: comma list of notebook name prefixes, each matching one of ``notebooks/*.ipynb``."""
    from .paths import NOTEBOOK_DIR  # noqa: PLC0415

    names = sorted(p.name for p in NOTEBOOK_DIR.glob("[0-9]*.ipynb"))
    items = _items(text)
    for x in items:
        if not any(n.startswith(x) for n in names):
            raise Err(f"no notebook starts with {x!r}; the notebooks are {', '.join(names)}")
    return items


def report_param(text: str) -> tuple[str, Any]:
    """``report --param key=value``: ``value`` is JSON when it looks like JSON (a number, list, object, true,
    false, null, or a quoted string), else the plain string.  Returns ``(key, value)``."""
    if "=" not in str(text):
        raise Err(f"expected key=value, got {text!r}")
    key, value = str(text).split("=", 1)
    key = key.strip()
    if not _KEY.fullmatch(key):
        raise Err(f"expected a parameter name (letters, digits, _) before '=', got {key!r}")
    if value[:1] in '[{"0123456789-.' or value in ("true", "false", "null"):
        try:
            return key, json.loads(value)
        except json.JSONDecodeError as e:
            raise Err(f"{key}: the value {value!r} is not valid JSON ({e.msg} at column {e.colno})") from None
    return key, value


# ---- checks after parsing ---------------------------------------------------------------------------------
def check_sweep_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Cross-flag checks of ``sweep`` (call right after ``parse_args``): ``--ep`` sizes in the table for the
    ``--models``, ``--resume`` xor ``--overwrite``, and an existing run at ``--out`` needs one of them.  What the
    spec itself checks (``--tactics`` against ``--backends``, input sizes) is :func:`checked_spec`'s."""
    from .run_folder import is_run_folder  # noqa: PLC0415
    from .problem.shapes import load_shape_table  # noqa: PLC0415

    eps = getattr(args, "ep", None)
    models = getattr(args, "models", None)
    if eps and models:
        table = load_shape_table()
        for entry in models:
            name = entry.split(":")[0]
            have = sorted(set(int(e) for e in table[table["model"] == name]["ep_size"]))
            if ":" not in entry and not set(eps) & set(have):
                parser.error(f"argument --ep: {name} has EP sizes {have} in the shape table, got {list(eps)}")
    if getattr(args, "resume", False) and getattr(args, "overwrite", False):
        parser.error("argument --resume: not allowed with --overwrite (choose one)")
    out = getattr(args, "out", None)
    if out is not None and is_run_folder(Path(out)) and not (getattr(args, "resume", False)
                                                            or getattr(args, "overwrite", False)):
        parser.error(f"argument --out: {out} already holds a run; pass --resume to continue it or --overwrite to "
                     "replace it")


#: SweepSpec / MeasureOptions field -> the flag that sets it: a spec's ValueError ("field: why") names the flag
FIELD_FLAGS = {f: "--" + f.replace("_", "-") for f in ("models", "backends", "tokens", "max_tokens", "hidden_scale",
                                                      "device", "warmup", "repeats", "max_seconds_per_tactic",
                                                      "screen", "screen_top", "shapes_file")}
FIELD_FLAGS.update(ep_sizes="--ep", tactic_filters="--tactics", out_dir="--out")


def flag_message(e: ValueError) -> str:
    """A ``"field: why"`` error of a spec, options or run as ``"argument --flag: why"`` (other errors unchanged)."""
    name, sep, why = str(e).partition(": ")
    return f"argument {FIELD_FLAGS[name]}: {why}" if sep and name in FIELD_FLAGS else str(e)


def checked_spec(parser: argparse.ArgumentParser, build: Callable[[], Any]) -> Any:
    """``build()`` (a :class:`~fp4moe_diag.runs.SweepSpec`), its ValueError turned into one ``argument --flag: why``
    line and exit 2 (``parser.error``).  Its cases and input sizes are checked by ``run_sweep``, first thing."""
    try:
        return build()
    except ValueError as e:
        parser.error(flag_message(e))


def check_reproduce_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Optional[Any]:
    """Parse ``reproduce --log`` (with ``--process`` when the parser has it); a bad log is ``argument --log:``.
    Returns the :class:`~fp4moe_diag.problem.case.MoECase`, or None without ``--log``."""
    if not getattr(args, "log", None):
        return None
    from .problem.vllm_log import parse_vllm_kwargs_log  # noqa: PLC0415

    try:
        case = parse_vllm_kwargs_log(Path(args.log).read_text(encoding="utf-8"), process=getattr(args, "process", None))
        if getattr(args, "tokens", None):
            case = case.with_tokens(args.tokens)
    except ValueError as e:
        parser.error(f"argument --log: {args.log}: {str(e).splitlines()[0]}")
    return case


def type_error_line(fn: Callable[[str], Any], text: str) -> Optional[str]:
    """The message ``fn`` gives ``text`` (None when accepted): for tests and for callers outside argparse."""
    try:
        fn(text)
    except Err as e:
        return str(e)
    return None


def in_file(text: str) -> str:
    """An existing readable file (``--shapes-file``)."""
    p = Path(str(text)).expanduser()
    if not str(text).strip() or not p.is_file():
        raise Err(f"expected an existing file, got {text!r}")
    return str(p)
