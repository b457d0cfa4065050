"""Which ptxas assembles our ``-tNf`` kernels (:mod:`._kernels_over`) on Hopper, and the build under it.

From CUDA 13.3 on, ptxas serialises those kernels' wgmmas (``C7512 ... serialized due to insufficient register
resources``: both K loops wait for every wgmma), and Triton 3.9 assembles sm_90 code with the CUDA 13.4 ptxas it
ships (``ptxas-blackwell``).  The same PTX assembled by ptxas 12.8-13.2 keeps 3 and 1 wgmma groups in flight
(``docs/evidence-s37.md``).  On the H200 (``-s37a``) the ``-t32f`` tiles ran 1.21-1.28x of their Triton 3.6.0 time
under 3.9.0 as shipped, 1.01-1.06x with ptxas 12.8; the other tiles and triton_kernels were 0-6 % faster with 13.4.

So the ``-tNf`` kernels alone are assembled by an older ptxas where Triton's own choice serialises them
(:func:`tail_fused_ptxas`): the one ``FP4MOE_TNF_PTXAS`` names, else the ``ptxas`` Triton ships for targets below
sm_90 (3.9.0: CUDA 12.9), when it is older than 13.3.  :func:`assembled_by` builds a kernel under it, once, before
anything is timed (:func:`prebuild`), into a cache folder of its own; each row records the ptxas that built its
kernels (``triton_ptxas``).  Where a user points Triton itself at a ptxas (``TRITON_PTXAS_BLACKWELL_PATH``), that one
builds every kernel and nothing here changes it."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from ... import settings
from ...environment import triton_bin_dir, triton_ptxas_tool
from .configs_regcap import triton_release
from .defaults import SERIALISING_PTXAS

_BLACKWELL_VAR = "TRITON_PTXAS_BLACKWELL_PATH"
_CACHE_VAR = "TRITON_CACHE_DIR"


@dataclass(frozen=True)
class Assembler:
    """The ptxas of a build: its ``path`` ('' where Triton's own choice builds it) and ``version`` ('13.4')."""

    path: str
    version: str


def ptxas_version(path: str, what: str = settings.TNF_PTXAS) -> str:
    """``X.Y`` of the ptxas at ``path`` (its ``--version``, run once per file); a ValueError naming ``what`` (the
    setting or argument that gave ``path``) and ``path`` when it is none."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ValueError(f"{what}: expected an executable ptxas, got {path!r}")
    version = _release(os.path.realpath(path))
    if not version:
        raise ValueError(f"{what}: {path!r} printed no 'release X.Y' for --version")
    return version


@functools.lru_cache(maxsize=None)
def _release(path: str) -> str:
    """``X.Y`` from the ``--version`` text of the executable at ``path`` ('' when it prints none)."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else ""


def check_setting() -> None:
    """A ValueError naming ``FP4MOE_TNF_PTXAS`` when it is set to no ptxas (a sweep checks it before it starts)."""
    chosen = settings.read(settings.TNF_PTXAS)
    if chosen:
        ptxas_version(chosen)


def _legacy_ptxas() -> str:
    """The ``ptxas`` Triton ships for targets below sm_90 ('' when this install has none)."""
    folder = triton_bin_dir()
    path = os.path.join(folder, "ptxas")
    return path if folder and os.path.isfile(path) and os.access(path, os.X_OK) else ""


def tail_fused_ptxas(arch: int) -> Assembler:
    """The ptxas that builds the ``-tNf`` kernels on ``sm_<arch>``: ``FP4MOE_TNF_PTXAS`` where set (a ValueError
    when it names no ptxas); else, on sm_90 where the one Triton calls is :data:`SERIALISING_PTXAS` or later and the
    user has not pointed Triton at another, Triton's own ``ptxas`` for older targets when that one is older; else
    Triton's choice (``path`` '').  Not on sm_90 (no wgmma): Triton's choice."""
    path, version, overridden = triton_ptxas_tool(arch)
    if int(arch) != 90:
        return Assembler("", version)
    chosen = settings.read(settings.TNF_PTXAS)
    if chosen:
        return Assembler(os.path.abspath(chosen), ptxas_version(chosen))
    if overridden or not version or triton_release(version) < SERIALISING_PTXAS:
        return Assembler("", version)
    legacy = _legacy_ptxas()
    if legacy and os.path.realpath(legacy) != os.path.realpath(path):
        legacy_version = ptxas_version(legacy)
        if triton_release(legacy_version) < SERIALISING_PTXAS:
            return Assembler(legacy, legacy_version)
    return Assembler("", version)


def launch_assembler(capability: Optional[tuple[int, int]], interpreted: bool) -> Assembler:
    """The ptxas that builds the ``-tNf`` kernels of a launch on a GPU of compute ``capability`` (``None``: not on a
    GPU): :func:`tail_fused_ptxas`, or none (``Assembler("", "")``) off a GPU or under the interpreter.  The launchers
    and the rows' ``triton_ptxas`` both ask here, so that a row records the ptxas that built its kernels."""
    if interpreted or not capability:
        return Assembler("", "")
    return tail_fused_ptxas(capability[0] * 10 + capability[1])


@contextlib.contextmanager
def assembled_by(assembler: Assembler) -> Iterator[None]:
    """Triton builds with ``assembler`` inside the block (nothing changes where its ``path`` is ''): the ptxas Triton
    calls from sm_90 on, and a cache folder of that ptxas' own under Triton's (Triton's cache key counts the ptxas
    version it read first in the process, so a build by another ptxas must not share its folder)."""
    if not assembler.path:
        yield
        return
    from triton import knobs  # noqa: PLC0415

    saved = {k: os.environ.get(k) for k in (_BLACKWELL_VAR, _CACHE_VAR)}
    cache = os.path.join(knobs.cache.dir, f"fp4moe-ptxas{assembler.version}")
    os.environ[_BLACKWELL_VAR], os.environ[_CACHE_VAR] = assembler.path, cache
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ptx_isa(ptx: str) -> str:
    """The ``.version`` (PTX ISA) a PTX text declares ('' when none)."""
    m = re.search(r"^\s*\.version\s+(\d+\.\d+)", ptx, re.MULTILINE)
    return m.group(1) if m else ""


def prebuild(kernel: Any, grid: Any, args: tuple, kwargs: dict, assembler: Assembler) -> None:
    """Build ``kernel`` for ``args`` / ``kwargs`` (a launch's, on the current GPU) under ``assembler``, without
    launching it, so that the launch finds it built; a RuntimeError when the build's PTX ISA is not the one Triton
    writes for that ptxas (the build came from a cache or a ptxas other than ``assembler``)."""
    if not assembler.path:
        return
    from triton.backends.nvidia.compiler import ptx_get_version  # noqa: PLC0415

    with assembled_by(assembler):
        compiled = kernel.warmup(*args, grid=grid, **kwargs)
    isa = ptx_get_version(assembler.version)
    want, got = f"{isa // 10}.{isa % 10}", ptx_isa(compiled.asm["ptx"])
    if got != want:
        raise RuntimeError(f"{getattr(kernel, '__name__', kernel)}: built with PTX ISA {got}, expected {want} "
                           f"(ptxas {assembler.version} at {assembler.path})")


def bound_launch(kernel: Any, grid: Any, args: tuple, kwargs: dict, assembler: Assembler) -> Callable[[], None]:
    """The launch of ``kernel[grid](*args, **kwargs)`` as a bare callable, built first under ``assembler``
    (:func:`prebuild`; with Triton's own ptxas, or under the interpreter, nothing is built here)."""
    prebuild(kernel, grid, args, kwargs, assembler)
    return functools.partial(kernel[grid], *args, **kwargs)
