"""Use a prebuilt slim SM90 CUTLASS fused-MoE module (``scripts/build_cutlass_sm90_slim.py``).

FlashInfer 0.5.2's stock ``fused_moe_90`` JIT build is 158 nvcc objects (more than a session's
device time); the slim build holds only the bf16 x MXFP4 (``use_w4_group_scaling``) path.
:func:`install` makes ``flashinfer.fused_moe.cutlass_fused_moe`` load it instead of compiling:
it replaces ``flashinfer.fused_moe.core.gen_cutlass_fused_moe_sm90_module`` (a module global that
``get_cutlass_fused_moe_module`` looks up) with a spec whose ``build_and_load`` loads the file.
Other dtypes on this module raise "not compiled in this slim build" (a Python RuntimeError).
"""

from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path
from typing import Any

_INSTALLED: dict[str, Any] = {}


def _materialise(path: Path) -> Path:
    """Accept ``.so`` or ``.so.xz`` (decompressed next to a temp copy)."""
    if path.suffix == ".xz":
        dst = Path(os.environ.get("TMPDIR", "/tmp")) / path.name[: -len(".xz")]
        if not dst.exists() or dst.stat().st_mtime < path.stat().st_mtime:
            with lzma.open(path) as src, open(dst, "wb") as out:
                shutil.copyfileobj(src, out)
        return dst
    return path


def install(so_path: str | os.PathLike) -> Any:
    """Load the slim module and make FlashInfer's CUTLASS MoE use it; idempotent."""
    path = Path(so_path).resolve()
    if not path.is_file():
        raise ValueError(f"FP4MOE_CUTLASS_MODULE / so_path: no file at {path}")
    key = str(path)
    if key in _INSTALLED:
        return _INSTALLED[key]
    import flashinfer.fused_moe.core as core
    import tvm_ffi

    so = _materialise(path)
    mod = tvm_ffi.load_module(str(so))

    class _PrebuiltSpec:
        name = "fused_moe_90_slim"

        def build_and_load(self) -> Any:
            return mod

        def get_library_path(self) -> Path:
            return so

    core.gen_cutlass_fused_moe_sm90_module = lambda use_fast_build=False: _PrebuiltSpec()
    core.get_cutlass_fused_moe_module.cache_clear()
    _INSTALLED[key] = mod
    return mod
