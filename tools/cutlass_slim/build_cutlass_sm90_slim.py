#!/usr/bin/env python3
"""Slim build of FlashInfer 0.5.2's SM90 CUTLASS fused-MoE module (bf16 x MXFP4 only).

The stock ``flashinfer.fused_moe.core.get_cutlass_fused_moe_module("90")`` compiles
158 nvcc objects (every activation/weight dtype, every tile).  The only path this
project needs on H200 is::

    cutlass_fused_moe(x_bf16, ..., w_uint8 (packed e2m1), ..., torch.bfloat16,
                      quant_scales=[w1_scale.view(int32), w2_scale.view(int32)],
                      use_w4_group_scaling=True)

which the binding maps to ``CutlassMoeFCRunner<__nv_bfloat16, __nv_fp4_e2m1>`` ->
``MoeGemmRunner<bf16, fp4, bf16>`` -> ``sm90_dispatch_moe_mixed_dtype_gemm_to_cutlass``
-> ``sm90_generic_mixed_moe_gemm_kernelLauncher<bf16, fp4, bf16, ...>``.

This script drives the *installed* flashinfer's own JIT machinery (``gen_jit_spec``,
its nvcc flags, ``generate_gemm_operations`` for the kernel instantiations) and keeps
only:

* the unmodified TVM-FFI binding ``flashinfer_cutlass_fused_moe_sm100_binding.cu``;
* a 3-line generated TU that explicitly instantiates only
  ``CutlassMoeFCRunner<__nv_bfloat16, __nv_fp4_e2m1>`` (replaces
  ``cutlass_fused_moe_instantiation.cu``, which instantiates ~20 runners);
* ``moe_gemm_kernels_bf16_fp4.cu`` and ``moe_gemm_tma_warp_specialized_input.cu``;
* the bf16 x fp4 mixed-input launcher instantiations taken verbatim from the
  generator output (``--tactics fast``: the 4 cluster shapes of the 128x128x128B
  pingpong tile that FlashInfer's own FAST_BUILD heuristic offers + the 128x64x256
  cooperative kernel used for workspace sizing = 5 kernels; ``--tactics full``: the
  41 kernels that the non-FAST_BUILD heuristic can select);
* the small common helpers (logger, env utils, memoryUtils, preQuantScale, heuristic, lora).

Every dtype combination that the binding can still *name* but that is not compiled is
resolved by a generated stub TU (``cutlass_slim_common.write_stubs``): each missing
``tensorrt_llm::`` symbol throws ``std::runtime_error("... not compiled in the slim build")``.

Usage (CPU build host, no GPU needed)::

    python tools/cutlass_slim/build_cutlass_sm90_slim.py --only-generate      # ninja file + object count
    python tools/cutlass_slim/build_cutlass_sm90_slim.py --build -j 2         # compile + link + verify

GPU host: see ``use_slim_module`` / ``--install-aot`` and tools/cutlass_slim/README.md.
The FlashInfer 0.7.4 variant is ``tools/cutlass_slim/build_cutlass_sm90_slim_074.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import cutlass_slim_common as common  # tools/ is sys.path[0] when this runs as a script (PYTHONPATH=tools to import)
import cutlass_slim_symbols as symbols  # stubs, the link-only libcuda, verify
import cutlass_slim_sources as slim_sources

DEFAULT_OUT = Path(os.environ.get("FI_SLIM_OUT", "/work/cutlass_slim"))
DEFAULT_NAME = "fused_moe_90_slim"
STOCK_NAME = "fused_moe_90"
DTYPE_PREFIX = "__nv_bfloat16, __nv_fp4_e2m1, __nv_bfloat16,"
LAUNCHER = "sm90_generic_mixed_moe_gemm_kernelLauncher"
EXPORTS = ("init",)
WHAT = "bf16 x fp4 W4-group-scaling on SM90"
SMOKE_INIT = "torch.bfloat16, torch.uint8, torch.bfloat16, False, True, False"  # 6-arg init


def wanted(tactics: str):
    def pred(tile, cluster, sched) -> bool:
        workspace_kernel = tile == (128, 64, 256) and cluster == (1, 1, 1) and sched == "coop"
        if workspace_kernel:  # calcMaxWorkspaceSizeTmaWarpSpecializedMixedInput (Ktile=256)
            return True
        if tactics == "fast":  # cutlass_heuristic.cpp with -DFAST_BUILD: 128x128x128B pingpong
            return tile == (128, 128, 128) and sched == "pingpong"
        # full heuristic: dispatcher uses Ktile=128 for fp4 weights, all 8 tiles x 4 clusters
        return tile[2] == 128
    return pred


# --------------------------------------------------------------------------- GPU side
def use_slim_module(so_path) -> object:
    """Make ``flashinfer.fused_moe.cutlass_fused_moe`` use a prebuilt slim .so (0.5.2).

    Replaces ``flashinfer.fused_moe.core.gen_cutlass_fused_moe_sm90_module`` (looked up as a
    module global by ``get_cutlass_fused_moe_module``) and clears the getter's cache."""
    return common.install_prebuilt(so_path)


def install_aot(so_path: Path) -> Path:
    return common.install_aot(so_path, STOCK_NAME)


# --------------------------------------------------------------------------- build side
def generate_sources(args, generate_gemm_operations):
    _, items, n_gen, kernel_files, runner, stubs = slim_sources.generate_common(
        args, generate_gemm_operations, LAUNCHER, DTYPE_PREFIX, wanted(args.tactics),
        "template class CutlassMoeFCRunner<__nv_bfloat16, __nv_fp4_e2m1>;\n")
    return items, n_gen, kernel_files, runner, stubs


def make_spec(args):
    from flashinfer.jit import env as jit_env
    from flashinfer.jit.core import gen_jit_spec, sm90a_nvcc_flags
    from flashinfer.jit.gemm.cutlass.generate_kernels import generate_gemm_operations

    items, n_gen, kernel_files, runner, stubs = generate_sources(args, generate_gemm_operations)
    C = jit_env.FLASHINFER_CSRC_DIR
    K = C / "nv_internal/tensorrt_llm/kernels"
    # identical to gen_cutlass_fused_moe_sm90_module (CUDA >= 12.8 branch)
    nvcc_flags = sm90a_nvcc_flags + [
        "-DCOMPILE_HOPPER_TMA_GEMMS",
        "-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS",
        "-DENABLE_BF16",
        "-DENABLE_FP8",  # the wfp4a16 dispatch branch sits under #if ENABLE_FP8
        "-DENABLE_FP8_BLOCK_SCALE",
        "-DENABLE_FP4",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
    ]
    sources = [
        K / "cutlass_kernels/moe_gemm/moe_gemm_tma_warp_specialized_input.cu",
        K / "cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_fp4.cu",
        C / "fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_sm100_binding.cu",
        runner,
        *kernel_files,
        stubs,
    ]
    spec = slim_sources.slim_spec(gen_jit_spec, args.name, C, sources, nvcc_flags, args.tactics)
    return spec, items, n_gen, stubs, jit_env


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_cli(ap, DEFAULT_OUT, DEFAULT_NAME, "5 kernels", "41 kernels")
    args = ap.parse_args(argv)
    if args.install_aot:
        print("installed:", install_aot(args.install_aot))
        return 0
    common.finish_args(args, DEFAULT_NAME)
    common.setup_env(args)
    t0 = time.time()
    if args.verify_only:  # do not touch generated sources (a build may be running)
        from flashinfer.jit import env as jit_env

        so = jit_env.FLASHINFER_JIT_DIR / args.name / f"{args.name}.so"
        return 1 if symbols.verify(so, EXPORTS) or common.smoke(so, SMOKE_INIT) else 0
    spec, items, n_gen, stubs, jit_env = make_spec(args)
    # 0.5.2: the dispatcher references 40 Ktile=128 tiles + the workspace kernel
    expected = {"fast": 36, "full": 0}[args.tactics]
    return common.run_build(args, spec, jit_env.FLASHINFER_JIT_DIR, items, n_gen, stubs,
                            LAUNCHER, WHAT, EXPORTS, expected, t0, (SMOKE_INIT,))


if __name__ == "__main__":
    sys.exit(main())
