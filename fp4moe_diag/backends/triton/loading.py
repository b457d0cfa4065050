"""Loading our Triton kernels lazily: whether the interpreter is asked for, whether triton imports, the launchers'
module on first use, and whether the kernels already imported run interpreted.  Imports no triton at import time."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Optional

_LAUNCH = "fp4moe_diag.backends.triton.launch"
_KERNELS = "fp4moe_diag.backends.triton._kernels"


def interpret_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` asks for Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def triton_import_error() -> Optional[str]:
    """``None`` when triton imports, else the reason."""
    try:
        import triton  # noqa: F401
    except Exception as e:  # noqa: BLE001 -- a broken install must not crash supports()
        return f"{type(e).__name__}: {e}"
    return None


def load_kernels() -> ModuleType:
    """Import the launchers (and with them the kernels and triton) on first use."""
    return importlib.import_module(_LAUNCH)


def load_over_kernels() -> ModuleType:
    """The launchers of the ``-tNf`` blocks (:mod:`.launch_over`), imported on first use."""
    return importlib.import_module(_LAUNCH + "_over")


def kernels_interpreted() -> Optional[bool]:
    """Whether the already-imported kernels run in the interpreter; ``None`` if not imported yet."""
    mod = sys.modules.get(_KERNELS)
    if mod is None:
        return None
    return bool(mod.INTERPRETED)
