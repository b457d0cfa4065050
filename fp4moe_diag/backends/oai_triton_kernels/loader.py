"""Find and import OpenAI's ``triton_kernels`` lazily, as vLLM's ``import_triton_kernels()`` does.

Order: a ``triton_kernels`` already imported in this process; the directory named by
``FP4MOE_TRITON_KERNELS_DIR`` (explicit choice: the folder that *contains* the ``triton_kernels``
package, e.g. ``.carry/triton_kernels``, or the package folder itself); an installed
``triton_kernels``; vLLM's bundled copy ``vllm.third_party.triton_kernels`` (aliased as
``triton_kernels`` in ``sys.modules``, as vLLM does, because the package imports itself by that
absolute name).  Only the "3.5.1" API generation (``matmul_ogs`` + ``routing``, no
``SparseMatrix``) is supported: that is the copy vLLM 0.33.0 ships.

Nothing here imports triton or the package at module import time.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Optional

from ... import settings

ENV_DIR = settings.TRITON_KERNELS_DIR
SUPPORTED_GENERATION = "3.5.1"

HOW_TO_GET = (
    "get OpenAI's triton_kernels: the standalone package python/triton_kernels of the Triton repository "
    "(`pip install 'git+https://github.com/triton-lang/triton.git@<ref>#subdirectory=python/triton_kernels'`, "
    "a ref whose API still has matmul_ogs and routing, the 3.5 generation), or install vLLM "
    "(its wheel carries a copy at vllm/third_party/triton_kernels), or extract that folder from a vLLM "
    f"wheel and set {ENV_DIR} to the folder that contains it"
)


@dataclass
class TritonKernels:
    """The imported package and the submodules the backend uses."""

    package: ModuleType
    source: str  # where it came from (path + how it was found)
    generation: str
    matmul_ogs: ModuleType
    opt_flags: ModuleType
    routing: ModuleType
    tensor: ModuleType
    layout: ModuleType
    numerics: ModuleType
    swiglu: ModuleType


_CACHE: dict[str, object] = {}


def _load_from_dir(path: str) -> ModuleType:
    p = Path(path).expanduser()
    pkg = p / "triton_kernels" if (p / "triton_kernels" / "__init__.py").is_file() else p
    if not (pkg / "__init__.py").is_file() or not ((pkg / "matmul_ogs.py").is_file() or (pkg / "matmul.py").is_file()):
        raise ImportError(f"{ENV_DIR}={path!r}: no triton_kernels package there (expected {pkg}/__init__.py "
                          "and matmul_ogs.py)")
    spec = importlib.util.spec_from_file_location("triton_kernels", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    if spec is None or spec.loader is None:
        raise ImportError(f"{ENV_DIR}={path!r}: cannot make an import spec for {pkg}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["triton_kernels"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop("triton_kernels", None)
        raise
    return mod


def _find_package() -> tuple[ModuleType, str]:
    if "triton_kernels" in sys.modules:
        mod = sys.modules["triton_kernels"]
        return mod, f"{getattr(mod, '__file__', '?')} (already imported)"
    env = settings.read(ENV_DIR)
    if env:
        return _load_from_dir(env), f"{env} ({ENV_DIR})"
    if importlib.util.find_spec("triton_kernels") is not None:
        mod = importlib.import_module("triton_kernels")
        return mod, f"{mod.__file__} (installed)"
    try:
        has_vllm = importlib.util.find_spec("vllm.third_party.triton_kernels") is not None
    except (ImportError, ValueError):
        has_vllm = False
    if has_vllm:
        mod = importlib.import_module("vllm.third_party.triton_kernels")
        sys.modules["triton_kernels"] = mod  # what vllm.utils.import_utils.import_triton_kernels does
        return mod, f"{mod.__file__} (vllm.third_party)"
    raise ImportError("no triton_kernels package found (not installed, no vllm, "
                      f"{ENV_DIR} not set)")


def api_generation() -> str:
    """"3.5.1" / "3.6" / "3.8", inferred the way vLLM's ``get_triton_kernels_version`` does."""
    try:
        importlib.import_module("triton_kernels.matmul_ogs")
    except ImportError:
        return "3.8"
    try:
        from triton_kernels.tensor import SparseMatrix  # noqa: F401
    except ImportError:
        return "3.5.1"
    return "3.6"


def load() -> TritonKernels:
    """Import triton_kernels (once); raises ImportError with the reason and how to get it."""
    if "tk" in _CACHE:
        return _CACHE["tk"]  # type: ignore[return-value]
    if "error" in _CACHE:
        raise ImportError(_CACHE["error"])
    try:
        import triton  # noqa: F401
    except Exception as e:  # noqa: BLE001
        msg = f"triton is not importable ({type(e).__name__}: {e}); triton_kernels needs it"
        _CACHE["error"] = msg
        raise ImportError(msg) from None
    try:
        pkg, source = _find_package()
        gen = api_generation()
        if gen != SUPPORTED_GENERATION:
            raise ImportError(f"triton_kernels at {source} has the {gen} API; this backend drives the "
                              f"{SUPPORTED_GENERATION} one (matmul_ogs + routing, as in vLLM 0.33.0's copy)")
        im = importlib.import_module
        tk = TritonKernels(
            package=pkg, source=source, generation=gen,
            matmul_ogs=im("triton_kernels.matmul_ogs"),
            opt_flags=im("triton_kernels.matmul_ogs_details.opt_flags"),
            routing=im("triton_kernels.routing"),
            tensor=im("triton_kernels.tensor"),
            layout=im("triton_kernels.tensor_details.layout"),
            numerics=im("triton_kernels.numerics"),
            swiglu=im("triton_kernels.swiglu"),
        )
    except Exception as e:  # noqa: BLE001 -- a broken copy must not crash supports()
        msg = f"triton_kernels not importable ({type(e).__name__}: {e}); {HOW_TO_GET}"
        _CACHE["error"] = msg
        raise ImportError(msg) from None
    _CACHE["tk"] = tk
    return tk


def import_error() -> Optional[str]:
    """None when triton_kernels loads, else the reason (with how to get it)."""
    try:
        load()
    except ImportError as e:
        return str(e)
    return None


def _reset_for_tests() -> None:
    _CACHE.clear()
