"""A stand-in for FlashInfer's CUTLASS fused-MoE JIT module, to run its real Python on a CPU machine.

:func:`stub_cutlass_module` makes ``flashinfer.fused_moe.cutlass_fused_moe`` (0.5.x and 0.7.x) run
FlashInfer's own op wrapper, ``MoERunner``, ``AutoTuner`` lookups and tactic filtering over
:class:`CutlassStubModule`, whose runner computes nothing and records the ``[gemm1, gemm2]`` tactic
pair every ``run_moe`` receives (``stub.tactics_run``).  Used to prove that a committed tactic is what
a plain ``autotune(False)`` call runs.  On machines without CUDA the device queries of the op wrapper
answer SM90 while the stub is installed.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator, Optional

import torch

from .hooks import cpu_safe_cuda_queries


class CutlassStubRunner:
    """What ``module.init(...)`` returns: the methods ``MoERunner`` calls on ``fused_moe_runner``."""

    def __init__(self, module: "CutlassStubModule"):
        self._m = module

    # 0.5.x: one config list for both GEMMs
    def get_tactic_num(self) -> int:
        return self._m.n_gemm1

    # 0.7.x: per-stage counts, gemm2 ids absolute
    def get_gemm1_tactic_count(self) -> int:
        return self._m.n_gemm1

    def get_gemm2_tactic_count(self) -> int:
        return self._m.n_gemm2

    def get_tactic_occupancy(self, tactic: int) -> int:
        return 0 if tactic in self._m.zero_occupancy else 1

    def get_valid_tactics_for_shape(self, stage: int, n: int, k: int) -> list:
        return [t for t in range(self._m.n_gemm1 + self._m.n_gemm2) if t not in self._m.shape_invalid]

    def run_gemm_profile(self, *args: Any) -> None:
        self._m.calls.append(("run_gemm_profile", args))

    def _run(self, name: str, args: tuple) -> None:
        self._m.calls.append((name, args))
        pair = next((a for a in args if isinstance(a, (list, tuple)) and len(a) == 2
                     and all(isinstance(v, int) for v in a)), None)
        self._m.tactics_run.append(None if pair is None else tuple(int(v) for v in pair))

    def run_moe(self, *args: Any) -> None:
        self._run("run_moe", args)

    def run_moe_min_latency(self, *args: Any) -> None:
        self._run("run_moe_min_latency", args)


class CutlassStubModule:
    """The loaded-module side: ``init``, ``set_deepgemm_jit_include_dirs`` (0.7), nothing computed."""

    def __init__(self, n_gemm1: int = 6, n_gemm2: int = 6, zero_occupancy=(), shape_invalid=()):
        self.n_gemm1, self.n_gemm2 = n_gemm1, n_gemm2
        self.zero_occupancy, self.shape_invalid = set(zero_occupancy), set(shape_invalid)
        self.calls: list = []
        #: the (gemm1, gemm2) tactic pair of every run_moe call, in order
        self.tactics_run: list[Optional[tuple]] = []

    def init(self, *args: Any) -> CutlassStubRunner:
        self.calls.append(("init", args))
        return CutlassStubRunner(self)

    def set_deepgemm_jit_include_dirs(self, dirs: Any) -> None:
        self.calls.append(("set_deepgemm_jit_include_dirs", (dirs,)))

    def interleave_moe_weights_for_sm90_mixed_gemm(self, weight: torch.Tensor, out: torch.Tensor, qtype: int) -> None:
        """0.7: the real one is a CUDA byte interleave; the stub copies (nothing is computed anyway)."""
        self.calls.append(("interleave_moe_weights_for_sm90_mixed_gemm", (qtype,)))
        out.copy_(weight)


class _Spec:
    def __init__(self, module: CutlassStubModule):
        self._module = module

    def build_and_load(self) -> CutlassStubModule:
        return self._module


class _NoDevice:
    """``torch.cuda.device(...)`` on a machine without CUDA: does nothing."""

    def __init__(self, *a: Any, **k: Any):
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


@contextlib.contextmanager
def stub_cutlass_module(**module_kwargs: Any) -> Iterator[CutlassStubModule]:
    """Run FlashInfer's CUTLASS fused-MoE Python over :class:`CutlassStubModule` (SM90 factory)."""
    core = importlib.import_module("flashinfer.fused_moe.core")
    stub = CutlassStubModule(**module_kwargs)
    saved_core = {n: getattr(core, n) for n in ("gen_cutlass_fused_moe_sm90_module", "get_compute_capability")
                  if hasattr(core, n)}
    saved_cuda = {n: getattr(torch.cuda, n) for n in ("get_device_capability", "device")}
    core.get_cutlass_fused_moe_module.cache_clear()
    core.gen_cutlass_fused_moe_sm90_module = lambda *a, **k: _Spec(stub)
    if not torch.cuda.is_available():
        if "get_compute_capability" in saved_core:
            core.get_compute_capability = lambda *a, **k: (9, 0)
        torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
        torch.cuda.device = _NoDevice
    try:
        with cpu_safe_cuda_queries():
            yield stub
    finally:
        for n, v in saved_core.items():
            setattr(core, n, v)
        for n, v in saved_cuda.items():
            setattr(torch.cuda, n, v)
        core.get_cutlass_fused_moe_module.cache_clear()  # never leave the stub cached for a real call
