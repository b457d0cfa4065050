"""Use prebuilt FlashInfer JIT modules instead of compiling them on the GPU machine.

FlashInfer 0.5.2 JIT-compiles each kernel module on first use.  On the lent H200 that costs
device time the measurements need (the stock SM90 ``fused_moe_90`` is 158 nvcc objects, over
18 minutes), so we build on a CPU host with nvcc and carry the ``.so`` (or ``.so.xz``):

* ``cutlass_fused_moe_sm90``: the slim bf16 x MXFP4 build of
  ``tools/cutlass_slim/build_cutlass_sm90_slim.py`` (``FP4MOE_CUTLASS_MODULE``).  Other dtypes on this
  module raise "not compiled in this slim build" (a Python RuntimeError).
* ``fp4_quantization_sm90``: FlashInfer's own unmodified ``fp4_quantization_90`` module
  (``flashinfer.fp4_quantize`` on SM90), built by ``tools/cutlass_slim/build_fp4_quant_sm90.py``
  (``FP4MOE_FP4QUANT_MODULE``).

:func:`install` replaces the module-global ``gen_*_module`` factory that FlashInfer's cached
``get_*_module`` getter looks up with a spec whose ``build_and_load`` loads the file, and clears
the getter's cache.  :func:`install_from_env` does that for every target whose variable is set.

FlashInfer 0.7 moved the fp4 quantization getter to ``flashinfer.quantization.fp4_quantization``
(``flashinfer.fp4_quantization`` is a re-export there: patching it would do nothing and FlashInfer
would silently JIT-compile); the factory is patched in the module that *defines* the getter.  A CUTLASS
``.so`` built for the other FlashInfer generation is refused before FlashInfer sees it
(:func:`check_cutlass_module`: 0.7's Python calls ``set_deepgemm_jit_include_dirs`` and ``init`` with
9 arguments, which a 0.5.2 build lacks; a 0.7 build exports ``interleave_moe_weights_for_sm90_mixed_gemm``).
"""

from __future__ import annotations

import importlib
import inspect
import lzma
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import settings


@dataclass(frozen=True)
class PrebuiltTarget:
    """Where a FlashInfer JIT module is made: ``module.factory()`` builds the spec, ``module.getter``
    (``functools.cache``'d) loads it; ``env`` names the variable that points at a prebuilt file."""

    #: candidate modules holding the getter, newest FlashInfer layout first
    modules: tuple[str, ...]
    factory: str
    getter: str
    env: str
    #: the factory takes ``use_fast_build`` (cutlass) or nothing (fp4 quantization)
    takes_fast_build: bool = False


TARGETS: dict[str, PrebuiltTarget] = {
    "cutlass_fused_moe_sm90": PrebuiltTarget(
        ("flashinfer.fused_moe.core",), "gen_cutlass_fused_moe_sm90_module", "get_cutlass_fused_moe_module",
        settings.CUTLASS_MODULE, takes_fast_build=True,
    ),
    "fp4_quantization_sm90": PrebuiltTarget(
        ("flashinfer.quantization.fp4_quantization", "flashinfer.fp4_quantization"), "gen_fp4_quantization_sm90_module", "get_fp4_quantization_module",
        settings.FP4QUANT_MODULE,
    ),
}

_INSTALLED: dict[tuple[str, str], Any] = {}


def owner_module(spec_of: PrebuiltTarget) -> Any:
    """The module that defines ``spec_of.getter`` (whose globals the getter reads the factory from)."""
    errors = []
    for name in spec_of.modules:
        try:
            mod = importlib.import_module(name)
        except ImportError as e:
            errors.append(f"{name}: {e}")
            continue
        getter = getattr(mod, spec_of.getter, None)
        if getter is None:
            errors.append(f"{name}: no {spec_of.getter}")
            continue
        owner = importlib.import_module(inspect.unwrap(getter).__module__)
        if not callable(getattr(owner, spec_of.factory, None)):
            raise RuntimeError(f"{owner.__name__} defines {spec_of.getter} but has no {spec_of.factory}: "
                               "this flashinfer makes the module differently; the prebuilt file cannot be used")
        return owner
    raise RuntimeError(f"no flashinfer module holds {spec_of.getter}: " + "; ".join(errors))


def check_cutlass_module(mod: Any, path: Any) -> None:
    """Refuse a CUTLASS ``.so`` built for another FlashInfer generation than the installed one."""
    from .api import get_api  # noqa: PLC0415

    api = get_api()
    has = getattr(mod, "implements_function", None)
    if has is None:
        return
    missing = [f for f in api.cutlass_module_exports if not has(f)]
    foreign = [f for f in api.cutlass_module_foreign if has(f)]
    if missing or foreign:
        what = f"lacks {missing}" if missing else f"exports {foreign}"
        raise ValueError(
            f"{path}: this CUTLASS module {what}, so it was not built from flashinfer {api.version}'s sources "
            f"(adapter {api.name}: {api.versions}); build it with the matching tools/cutlass_slim/build_cutlass_sm90_slim*.py "
            "(0.7.x: tools/cutlass_slim/build_cutlass_sm90_slim_074.py) or unset FP4MOE_CUTLASS_MODULE"
        )


def materialise(path: Path) -> Path:
    """Accept ``.so`` or ``.so.xz`` (decompressed once into ``$TMPDIR``)."""
    if path.suffix == ".xz":
        dst = Path(os.environ.get("TMPDIR", "/tmp")) / path.name[: -len(".xz")]
        if not dst.exists() or dst.stat().st_mtime < path.stat().st_mtime:
            tmp = dst.with_name(dst.name + f".part{os.getpid()}")
            with lzma.open(path) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out)
            os.replace(tmp, dst)
        return dst
    return path


def install(target: str, so_path: str | os.PathLike) -> Any:
    """Load the prebuilt module for ``target`` (a key of :data:`TARGETS`) and make FlashInfer use
    it; idempotent.  Returns the loaded TVM-FFI module."""
    if target not in TARGETS:
        raise ValueError(f"target: expected one of {sorted(TARGETS)}, got {target!r}")
    spec_of = TARGETS[target]
    path = Path(so_path).resolve()
    if not path.is_file():
        raise ValueError(f"{spec_of.env} / so_path: no file at {path}")
    key = (target, str(path))
    if key in _INSTALLED:
        return _INSTALLED[key]
    import tvm_ffi

    owner = owner_module(spec_of)
    so = materialise(path)
    mod = tvm_ffi.load_module(str(so))
    if target == "cutlass_fused_moe_sm90":
        check_cutlass_module(mod, path)

    class _PrebuiltSpec:
        name = f"{target}_prebuilt"

        def build_and_load(self) -> Any:
            return mod

        def get_library_path(self) -> Path:
            return so

    if spec_of.takes_fast_build:
        factory = lambda use_fast_build=False: _PrebuiltSpec()  # noqa: E731
    else:
        factory = lambda: _PrebuiltSpec()  # noqa: E731
    setattr(owner, spec_of.factory, factory)
    getattr(owner, spec_of.getter).cache_clear()
    _INSTALLED[key] = mod
    return mod


def install_from_env() -> dict[str, str]:
    """:func:`install` every target whose environment variable is set; returns target -> path."""
    done = {}
    for target, spec_of in TARGETS.items():
        path = settings.read(spec_of.env)
        if path:
            install(target, path)
            done[target] = path
    return done
