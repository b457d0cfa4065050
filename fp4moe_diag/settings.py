"""Every ``FP4MOE_*`` environment variable fp4moe-diag reads: the name, what it does, and :func:`read`, the one
place that reads them (each module that uses one names it through the constant here)."""

from __future__ import annotations

import os
from typing import Any, Mapping

CUTLASS_MODULE = "FP4MOE_CUTLASS_MODULE"
FP4QUANT_MODULE = "FP4MOE_FP4QUANT_MODULE"
TRITON_KERNELS_DIR = "FP4MOE_TRITON_KERNELS_DIR"
TUNE_SETTINGS = "FP4MOE_TUNE_SETTINGS"
MAX_INPUT_BYTES = "FP4MOE_MAX_INPUT_BYTES"
FLASHINFER_API = "FP4MOE_FLASHINFER_API"
GIT_COMMIT = "FP4MOE_GIT_COMMIT"
TNF_PTXAS = "FP4MOE_TNF_PTXAS"

VARIABLES: dict[str, str] = {
    CUTLASS_MODULE: "a prebuilt FlashInfer SM90 CUTLASS fused-MoE module (.so or .so.xz) to load instead of a JIT build; "
                    "its file name is the rows' flashinfer_build",
    FP4QUANT_MODULE: "a prebuilt FlashInfer SM90 fp4 quantization module (GPU tests)",
    TRITON_KERNELS_DIR: "the folder holding OpenAI's triton_kernels package (e.g. extracted from a vLLM wheel)",
    TUNE_SETTINGS: "cutlass_autotune's tuning settings: 'max=N' and 'cache=FILE' entries, comma-separated",
    MAX_INPUT_BYTES: "the inputs a case may allocate (bytes, or e.g. 200G); default 64 GiB",
    FLASHINFER_API: "force a FlashInfer API adapter (v05 or v07) for a version the suite does not cover",
    GIT_COMMIT: "the commit recorded in the rows when the tree is not a git checkout (a GPU machine's copy)",
    TNF_PTXAS: "the ptxas that assembles our -tNf kernels on sm_90 (default: where the one Triton calls serialises "
               "their wgmmas, from 13.3 on, the older ptxas Triton ships; backends.triton.assembler)",
}


def read(name: str) -> str:
    """The value of ``name`` (one of :data:`VARIABLES`), stripped; '' when unset."""
    if name not in VARIABLES:
        raise ValueError(f"name: {name!r} is not a setting of fp4moe-diag; expected one of {sorted(VARIABLES)}")
    return os.environ.get(name, "").strip()


#: settings that belong to one FlashInfer install: a child process running another install does not inherit them
#: (it detects its own API adapter; a CUTLASS module is built for one FlashInfer generation)
PER_FLASHINFER = (FLASHINFER_API, CUTLASS_MODULE)


def child_environ(env: Mapping[str, str], cutlass_module: Any = None) -> dict:
    """``env`` for a child process running another FlashInfer install: without :data:`PER_FLASHINFER`, then
    :data:`CUTLASS_MODULE` set to ``cutlass_module`` when one is given (a path; '' is a ValueError)."""
    out = {k: v for k, v in env.items() if k not in PER_FLASHINFER}
    if cutlass_module is not None:
        if not str(cutlass_module).strip():
            raise ValueError(f"cutlass_module: expected the path of a CUTLASS module, got {cutlass_module!r}")
        out[CUTLASS_MODULE] = str(cutlass_module)
    return out
