"""Where a row was measured: GPU, driver, library versions, FlashInfer's CUTLASS build and the commit (every row
of a run carries :func:`environment_info`; the columns are in :data:`fp4moe_diag.results.SCHEMA`)."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

import torch

from .problem.inputs import resolve_device
from .paths import REPO_ROOT
from . import settings


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out.splitlines()[0] if out else ""
    except Exception:  # noqa: BLE001
        return ""


def flashinfer_build_name(module_path: str) -> str:
    """``flashinfer_build`` of a row: the CUTLASS module file's name without ``.so``/``.xz``, or 'stock'."""
    if not module_path:
        return "stock"
    name = os.path.basename(str(module_path))
    for ext in (".xz", ".so"):
        name = name[: -len(ext)] if name.endswith(ext) else name
    return name


def triton_bin_dir() -> str:
    """The folder of the CUDA tools (ptxas, nvdisasm, cuobjdump) the installed Triton's wheel ships, resolved; ''
    without Triton."""
    try:
        import triton  # noqa: PLC0415
    except ImportError:
        return ""
    return os.path.realpath(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin"))


def triton_ptxas_tool(arch: int) -> tuple[str, str, bool]:
    """(path, version, overridden) of the ptxas that the installed Triton calls for ``sm_<arch>``; ``overridden``:
    ``TRITON_PTXAS_PATH`` / ``TRITON_PTXAS_BLACKWELL_PATH`` points Triton at a ptxas other than the one its wheel ships
    for that target.  ``("", "", False)`` without Triton's NVIDIA backend."""
    try:
        from triton.backends.nvidia import compiler  # noqa: PLC0415

        tool = compiler.get_ptxas(int(arch))
        return tool.path, str(tool.version), os.path.dirname(os.path.realpath(tool.path)) != triton_bin_dir()
    except Exception:  # noqa: BLE001
        return "", "", False


def triton_ptxas(arch: int) -> tuple[str, bool]:
    """(version, overridden) of the ptxas that the installed Triton calls for ``sm_<arch>`` (e.g. ``("13.4", False)``,
    :func:`triton_ptxas_tool`): Triton 3.9 calls the CUDA 13.4 ptxas it ships as ``ptxas-blackwell`` from sm_90 on,
    3.6 and 3.7 their 12.8 ``ptxas`` below sm_100.  The ptxas decides the machine code: the same PTX pipelines the
    ``-tNf`` kernels' wgmmas under ptxas 12.8-13.2 and serialises them under 13.3-13.4 (docs/evidence-s37.md), so
    our backend builds those kernels with an older one there (``backends.triton.assembler``; their rows record it)."""
    _, version, overridden = triton_ptxas_tool(arch)
    return version, overridden


def triton_build(version: str, arch: int) -> tuple[str, str]:
    """(``triton_version``, ``triton_ptxas``) of a row measured on ``sm_<arch>`` (0: no GPU, no ptxas): the release,
    with ``+ptxasX.Y`` where the ptxas it calls is not the one it ships (:func:`triton_ptxas`), so tables tell such a
    build apart from the release as shipped (``triton@3.9.0+ptxas12.9``)."""
    if not version or not arch:
        return version, ""
    ptxas, overridden = triton_ptxas(arch)
    return (f"{version}+ptxas{ptxas}" if overridden and ptxas else version), ptxas


def environment_info(device: Any = None) -> dict[str, str]:
    """GPU, driver and library versions for every row of a run."""
    dev = resolve_device(device, must_exist=False)
    info = {
        "git_commit": settings.read(settings.GIT_COMMIT) or _git_commit(),
        "torch_version": torch.__version__,
        "cuda_version": str(torch.version.cuda or ""),
        "gpu_name": "cpu",
        "compute_capability": "",
        "driver_version": "",
        "flashinfer_version": "",
        "flashinfer_build": "",
        "triton_version": "",
        "triton_ptxas": "",
        "host": platform.node(),
    }
    if dev.type == "cuda" and torch.cuda.is_available():
        cc = torch.cuda.get_device_capability(dev)
        info.update(gpu_name=torch.cuda.get_device_name(dev), compute_capability=f"{cc[0]}.{cc[1]}",
                    driver_version=_driver_version())
    try:
        import flashinfer  # noqa: PLC0415

        info["flashinfer_version"] = str(getattr(flashinfer, "__version__", ""))
        info["flashinfer_build"] = flashinfer_build_name(settings.read(settings.CUTLASS_MODULE))
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton  # noqa: PLC0415

        arch = int(info["compute_capability"].replace(".", "") or 0)
        info["triton_version"], info["triton_ptxas"] = triton_build(str(triton.__version__), arch)
    except Exception:  # noqa: BLE001
        pass
    return info
