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
from typing import Any, Callable, Iterator, Optional

import torch

from .hooks import InputInfo, _describe



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


# --------------------------------------------------------------------------- trtllm-gen stand-in
# --------------------------------------------------------------------------- stub module
class TvmFfiPackingStub:
    """Stands in for FlashInfer's trtllm-gen JIT module on machines without SM100.

    Every entry point passes all its arguments through TVM-FFI's real argument packer
    (``tvm_ffi.get_global_func("testing.nop")``), so tensors are converted exactly as for the
    real kernel (DLPack exchange): meta tensors fail with TVM-FFI's own error.  Nothing is
    computed; calls are recorded in ``self.calls`` as ``(name, [InputInfo...])``.
    """

    #: tactics reported by the stub's ``trtllm_get_valid_moe_configs``: [tile_tokens_dim, config]
    STUB_TACTICS = [[8, 0], [16, 0], [32, 0], [64, 0]]

    def __init__(self) -> None:
        import tvm_ffi

        self._nop: Callable = tvm_ffi.get_global_func("testing.nop")
        self.calls: list[tuple[str, list[InputInfo]]] = []
        #: the non-tensor argument values of each call (tensors as None), e.g. the tactic
        self.scalars: list[tuple[str, list]] = []

    def _pack(self, name: str, args: tuple) -> None:
        self.calls.append((name, [_describe(i, f"arg{i}", a) for i, a in enumerate(args)]))
        self.scalars.append((name, [None if isinstance(a, torch.Tensor) else a for a in args]))
        self._nop(*args)

    def kernel_tactics(self, name: str = "trtllm_fp4_block_scale_moe") -> list[Optional[list]]:
        """The ``[tile_tokens_dim, config]`` tactic argument of every ``name`` call, in order (its position
        in the argument list differs between FlashInfer versions: it is the only 2-int list)."""
        out = []
        for n, vals in self.scalars:
            if n == name:
                pair = next((list(v) for v in vals if isinstance(v, (list, tuple)) and len(v) == 2
                             and all(isinstance(x, int) for x in v)), None)
                out.append(pair)
        return out

    def trtllm_get_valid_moe_configs(self, *args: Any) -> list:
        self.calls.append(("trtllm_get_valid_moe_configs", [_describe(i, f"arg{i}", a) for i, a in enumerate(args)]))
        return [list(t) for t in self.STUB_TACTICS]

    def __getattr__(self, name: str) -> Callable:
        if name.startswith("_"):
            raise AttributeError(name)

        def entry(*args: Any) -> None:
            self._pack(name, args)
            return None

        return entry


class _StubSpec:
    def __init__(self, module: TvmFfiPackingStub):
        self._module = module

    def build_and_load(self) -> TvmFfiPackingStub:
        return self._module

    def get_library_path(self) -> str:
        return "<fp4moe_diag stub: no trtllm-gen library>"

    def get_library_paths(self) -> list:  # flashinfer >= 0.7
        return []


def _clear_module_caches(core: Any) -> None:
    for name in ("get_trtllm_moe_sm100_module", "_get_trtllm_moe_sm100_module_impl"):
        fn = getattr(core, name, None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


@contextlib.contextmanager
def cpu_safe_cuda_queries() -> Iterator[None]:
    """On a machine without CUDA, ``torch.cuda.is_current_stream_capturing()`` answers False instead of
    raising (FlashInfer 0.7's ``AutoTuner.choose_one`` asks it in tuning mode).  No-op with CUDA."""
    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.is_current_stream_capturing
    torch.cuda.is_current_stream_capturing = lambda: False
    try:
        yield
    finally:
        torch.cuda.is_current_stream_capturing = saved


@contextlib.contextmanager
def stub_trtllm_gen_module() -> Iterator[TvmFfiPackingStub]:
    """Run FlashInfer's trtllm-gen MoE Python with :class:`TvmFfiPackingStub` as its module.

    Works across FlashInfer 0.5 - 0.7: the JIT spec generator is replaced (0.5: cached
    ``get_trtllm_moe_sm100_module``; 0.7: cached ``_get_trtllm_moe_sm100_module_impl``, and the
    uncached getter that queries the current CUDA device is pointed at the impl so it also runs
    on machines without CUDA).
    """
    core = importlib.import_module("flashinfer.fused_moe.core")
    stub = TvmFfiPackingStub()
    names = ("gen_trtllm_gen_fused_moe_sm100_module", "setup_cubin_loader", "get_trtllm_moe_sm100_module")
    saved = {n: getattr(core, n) for n in names if hasattr(core, n)}
    if "gen_trtllm_gen_fused_moe_sm100_module" not in saved:
        raise RuntimeError("this flashinfer has no gen_trtllm_gen_fused_moe_sm100_module to stub")
    _clear_module_caches(core)
    core.gen_trtllm_gen_fused_moe_sm100_module = lambda *a, **k: _StubSpec(stub)
    if "setup_cubin_loader" in saved:
        core.setup_cubin_loader = lambda *a, **k: None
    impl = getattr(core, "_get_trtllm_moe_sm100_module_impl", None)
    if impl is not None:
        core.get_trtllm_moe_sm100_module = lambda: impl(False)
    try:
        with cpu_safe_cuda_queries():
            yield stub
    finally:
        for n, v in saved.items():
            setattr(core, n, v)
        _clear_module_caches(core)  # never leave the stub cached for a real call

