#!/usr/bin/env python3
"""Slim build of FlashInfer 0.7.4's SM90 CUTLASS fused-MoE module (bf16 x MXFP4, and/or MXFP4 x FP8 Humming).

Stock ``flashinfer.fused_moe.core.get_cutlass_fused_moe_module("90")`` builds
``flashinfer.jit.fused_moe.gen_cutlass_fused_moe_sm90_module`` (JitSpec ``fused_moe_90``):
15 ``moe_gemm_kernels_*.cu``, fp8_blockscale_gemm.cu (deep_gemm, needs nvrtc), ~20 runner
specialisations and all 172 generated SM90 kernel files.  The only path this project needs::

    cutlass_fused_moe(x_bf16, topk_ids, topk_w, w1_u8, w2_u8, torch.bfloat16,
                      quant_scales=[w1_scale_folded, w2_scale_folded],
                      use_w4_group_scaling=True)     # weights: interleave_moe_weights_..("fp4")

``FusedMoeRunner(bf16, uint8, bf16, ..., use_w4_group_scaling=True)`` -> ``isWFP4A16Quant`` ->
``CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>`` -> ``MoeGemmRunner<bf16, Fp4Type, bf16>`` ->
``cutlass_kernels_oss::sm90_dispatch_moe_mixed_dtype_gemm_to_cutlass`` (ScaleMode kPostMma)
-> ``sm90_generic_mixed_moe_gemm_kernelLauncher<__nv_bfloat16, SafeFP4, __nv_bfloat16, ...>``.

Kept (everything else is resolved by the generated throwing stubs, see cutlass_slim_common):

* unmodified ``flashinfer_cutlass_fused_moe_binding.cu`` (exports ``init`` (9 args) and
  ``interleave_moe_weights_for_sm90_mixed_gemm``) and ``moe_gemm_mixed_utils.cu`` (the
  interleave kernels it calls);
* generated runner TU: ``CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>`` + the bf16
  ``finalizeMoeRoutingKernelLauncher`` (what ``cutlass_fused_moe_instantiation.cu`` has for it);
* generated ``set_deepgemm_jit_include_dirs`` no-op export: ``get_cutlass_fused_moe_module``
  calls it right after loading; the real one (``deepgemm_jit_setup.cu``) needs nvrtc.h and
  only serves the fp8 block-scale runner, which is a stub here;
* ``moe_gemm_kernels_bf16_fp4.cu``, ``moe_gemm_tma_warp_specialized_input.cu`` and the small
  common helpers, compiled with the stock SM90 nvcc flags;
* the bf16 x fp4 launcher instantiations, verbatim from ``generate_gemm_operations``:
  ``--tactics full``: the 116 tactics of ``get_candidate_configs_sm90(GROUPED_GEMM|WEIGHT_ONLY)``
  (29 tiles, one schedule each, 4 clusters; the workspace kernel 128x64x256 coop 1x1 is one of
  them); ``--tactics fast`` (``-DFAST_BUILD``): 128x128x128 pingpong x 4 clusters + the
  workspace kernel = 5.  The generator emits 184 for this dtype; the dispatcher references
  all 184, so 68 (full) / 179 (fast) launcher symbols become stubs.

``--paths both`` (JitSpec ``fused_moe_90_humming074``) / ``--paths humming`` (``..._only``) add the Humming
path of the same ``fused_moe_90`` module (``cutlass_fused_moe(..., use_w4_group_scaling=True,
use_wfp4afp8_humming=True)``, ``CutlassHummingRunner``): ``isWMxfp4AFp8HummingQuant`` ->
``CutlassMoeFCRunner<__nv_fp8_e4m3, Fp4Type, bf16, bf16, bf16, false, kHummingPreMmaE8M0>`` (bf16 in,
online FP8 quantisation) -> ``MoeGemmRunner<__nv_fp8_e4m3, Fp4Type, bf16, bf16, false, kHummingPreMmaE8M0>``
(a generated one-line TU instead of ``moe_gemm_kernels_fp8_fp4.cu``'s 8 runners) -> ScaleMode kPreMmaE8M0
launchers ``sm90_generic_mixed_moe_gemm_kernelLauncher<__nv_fp8_e4m3, SafeFP4, __nv_bfloat16, ...>`` (the same
tile/schedule/cluster set as bf16: 116 full, 5 fast) + the 10 single-warpgroup
``sm90_generic_mixed_moe_small_k_kernelLauncher`` tactics SM90 always appends (15 fast, 126 full).

Usage (CPU build host)::

    PYTHONPATH=/work/fi/074 python tools/cutlass_slim/build_cutlass_sm90_slim_074.py --only-generate
    PYTHONPATH=/work/fi/074 python tools/cutlass_slim/build_cutlass_sm90_slim_074.py --build [--tactics full]
    PYTHONPATH=/work/fi/074 python tools/cutlass_slim/build_cutlass_sm90_slim_074.py --build --paths both -j 1

GPU host: :func:`use_slim_module` or ``--install-aot``; see tools/cutlass_slim/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cutlass_slim_common as common  # tools/ is sys.path[0] when this runs as a script (PYTHONPATH=tools to import)
import cutlass_slim_symbols as symbols  # stubs, the link-only libcuda, verify
import cutlass_slim_sources as slim_sources

DEFAULT_OUT = Path(os.environ.get("FI_SLIM_OUT", "/work/cutlass_slim_074"))
STOCK_NAME = "fused_moe_90"  # H200/H100; H20 (78 SMs) uses fused_moe_90_h20_prebuilt_d
#: both mixed-input launchers of 0.7.4 (the small-K one only exists for the Humming FP8 x FP4 path)
LAUNCHER = "sm90_generic_mixed_moe_(?:gemm|small_k)_kernelLauncher"
LAUNCHER_PREFIX = "sm90_generic_mixed_moe_"  # what counts as a launcher symbol among the stubs
EXPORTS = ("init", "interleave_moe_weights_for_sm90_mixed_gemm", "set_deepgemm_jit_include_dirs")
HUMMING_MODE = "Sm90Wfp4Afp8ScaleMode::kHummingPreMmaE8M0"


@dataclass(frozen=True)
class SlimPath:
    """One runner path a slim 0.7.4 module holds (``--paths``)."""

    dtype_prefix: str  # first template arguments of its launcher instantiations
    stem: str  # generated kernel files
    runner: str  # CutlassMoeFCRunner explicit instantiation (runner TU)
    moe_gemm: str  # csrc file (under the kernels dir) or a generated MoeGemmRunner instantiation
    dispatched: int  # launcher instantiations its dispatcher references (the rest of the tactics are stubs)
    what: str


PATHS = {
    # FusedMoeRunner(bf16, uint8, bf16, use_w4_group_scaling=True): isWFP4A16Quant
    "bf16": SlimPath("__nv_bfloat16, SafeFP4, __nv_bfloat16,", "slim_sm90_bf16_fp4_mixed",
                     "template class CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>;\n",
                     "cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_fp4.cu", 184, "bf16 x MXFP4 W4A16"),
    # FusedMoeRunner(bf16, uint8, bf16, use_w4_group_scaling=True, use_wfp4afp8_humming=True):
    # isWMxfp4AFp8HummingQuant -> switch_output_type<__nv_fp8_e4m3, Fp4Type, NeedQuant=true, false, Humming>
    # (bf16 in, online FP8 quantisation, bf16 out); its MoeGemmRunner is one of the 8 in moe_gemm_kernels_fp8_fp4.cu
    "humming": SlimPath("__nv_fp8_e4m3, SafeFP4, __nv_bfloat16,", "slim_sm90_fp8_fp4_humming",
                        "template class CutlassMoeFCRunner<__nv_fp8_e4m3, Fp4Type, __nv_bfloat16, __nv_bfloat16, "
                        f"__nv_bfloat16, false, {HUMMING_MODE}>;\n",
                        "template class MoeGemmRunner<__nv_fp8_e4m3, Fp4Type, __nv_bfloat16, __nv_bfloat16, false, "
                        f"{HUMMING_MODE}>;\n", 194, "MXFP4 x FP8 Humming"),
}
#: --paths -> (paths, default JitSpec name; "_full" is appended for --tactics full)
PATH_SETS = {"bf16": (("bf16",), "fused_moe_90_slim074"),
             "both": (("bf16", "humming"), "fused_moe_90_humming074"),
             "humming": (("humming",), "fused_moe_90_humming074_only")}
DEFAULT_NAME = PATH_SETS["bf16"][1]
FINALIZE = "INSTANTIATE_FINALIZE_MOE_ROUTING(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16);\n"
# FusedMoeRunner(act, weight, out, deepseek_fp8, w4_group, mxfp8_act, packed_w, fused_finalize,
# wfp4afp8_humming); the constructor's first CUDA call is common::getSMVersion()
SMOKE_INIT = ("torch.bfloat16, torch.uint8, torch.bfloat16, False, True, False, False, True, "
              "False")
SMOKE_EXTRA = """
m.set_deepgemm_jit_include_dirs(["/nonexistent"])
print("smoke: set_deepgemm_jit_include_dirs OK")
import build_cutlass_sm90_slim_074 as b  # common.smoke puts tools/ on the child's PYTHONPATH
b.use_slim_module(%r)
import flashinfer.fused_moe.core as core
ns = core.get_cutlass_fused_moe_module("90")
print("smoke: get_cutlass_fused_moe_module('90') ->", sorted(vars(ns)))
"""

# cutlass_heuristic.cpp get_candidate_tiles_sm90, GROUPED_GEMM && WEIGHT_ONLY branch (no FAST_BUILD)
HEURISTIC_TILES = [(m, n, k) for m, n in ((64, 16), (64, 32), (64, 64), (64, 128), (128, 16),
                                          (128, 32), (128, 64), (128, 128)) for k in (128, 256, 512)]
HEURISTIC_TILES += [(128, 256, 128), (128, 256, 256), (256, 128, 128), (256, 128, 256),
                    (256, 256, 128)]
# SlimPath.dispatched: moe_gemm_template_dispatch_tma_ws_mixed_dtype.h references, per path, 29 DISPATCH tiles x 4
# clusters x {pingpong, cooperative if tile M >= 128} = 12*4 + 17*4*2 = 184 launcher instantiations (ScaleMode
# kPostMma for bf16, kPreMmaE8M0 for Humming), and for Humming the 10 single-warpgroup small-K ones
WORKSPACE_KERNEL = ((128, 64, 256), (1, 1, 1), "coop")  # calcMaxWorkspaceSize...MixedInput, Fp4 (both paths)


def sm90_supports_coop(tile) -> bool:
    """cutlass_heuristic.cpp ``sm90_supports_coop`` (non-FAST_BUILD)."""
    m, n, k = tile
    if m == 128 and n in (16, 32, 64):
        return k in (128, 256, 512)
    if (m == 128 and n in (128, 256)) or (m == 256 and n == 128):
        return k in (128, 256)
    return m == 256 and n == 256 and k == 128


def wanted(tactics: str, path: str = "bf16"):
    """Which launcher instantiations of ``path`` the ``tactics`` set compiles.  Humming adds, whatever the set,
    the 10 single-warpgroup small-K tactics ``getTmaWarpSpecializedConfigs`` appends on SM90 (tiles
    128x{8,16,32,40,64}x128, PREFILL and ROLLING, cluster 1x1; not under FAST_BUILD)."""
    def pred(tile, cluster, sched) -> bool:
        if sched.startswith("single_warpgroup"):
            return path == "humming"
        if (tile, cluster, sched) == WORKSPACE_KERNEL:
            return True
        if tactics == "fast":  # FAST_BUILD: one tile, sm90_supports_coop() == false
            return tile == (128, 128, 128) and sched == "pingpong"
        # get_candidate_configs_sm90 w4afp8 branch: COOPERATIVE if supported else PINGPONG,
        # clusters 1x1 2x1 1x2 2x2
        return tile in HEURISTIC_TILES and sched == ("coop" if sm90_supports_coop(tile)
                                                     else "pingpong")
    return pred


# --------------------------------------------------------------------------- GPU side
def use_slim_module(so_path) -> object:
    """Make ``flashinfer.fused_moe.cutlass_fused_moe`` (0.7.4) use a prebuilt slim .so.

    ``get_cutlass_fused_moe_module`` (flashinfer/fused_moe/core.py) looks up
    ``gen_cutlass_fused_moe_sm90_module(use_fast_build)`` as a global of
    ``flashinfer.fused_moe.core`` and only calls ``.build_and_load()`` on it."""
    return common.install_prebuilt(so_path)


# --------------------------------------------------------------------------- build side
def generate_sources(args, generate_gemm_operations):
    """Per path of ``args.paths``: its kernel files (and, for Humming, the MoeGemmRunner TU); one runner TU with
    every path's ``CutlassMoeFCRunner`` and the bf16 finalize instantiation (one TU: cutlass_fused_moe_kernels.cuh
    defines non-inline functions, e.g. ``GemmProfilerBackend::prepare``, so two TUs including it do not link);
    the deep_gemm no-op export; the stub placeholder.  Returns ``(gen, sources, items, n_gen, stubs, expected_stubs)``."""
    gen = slim_sources.gen_dir(args)
    probe = common.run_generator(gen, generate_gemm_operations)
    sources, items, n_gen, expected = [], [], 0, 0
    for key in args.paths:
        path = PATHS[key]
        its, n, files = slim_sources.write_kernels(gen, probe, LAUNCHER, path.dtype_prefix,
                                                   wanted(args.tactics, key), path.stem, args.per_file)
        moe_gemm = path.moe_gemm
        if moe_gemm.startswith("template"):
            moe_gemm = slim_sources.write_runner(gen, f"slim_moe_gemm_runner_{key}.cu", moe_gemm,
                                                 include="moe_gemm/moe_gemm_template_dispatch.h")
        sources += [moe_gemm, *files]
        items += its
        n_gen += n
        expected += path.dispatched - len(its)
    runner = slim_sources.write_runner(gen, f"slim_moe_runner_{'_'.join(args.paths)}_instantiation.cu",
                                       "".join(PATHS[k].runner for k in args.paths) + FINALIZE)
    deepgemm = gen / "slim_deepgemm_jit_setup_noop.cu"
    common.write_if_different(deepgemm, DEEPGEMM_NOOP)
    return gen, [deepgemm, runner, *sources], items, n_gen, slim_sources.placeholder_stubs(gen), expected


DEEPGEMM_NOOP = (
    "// get_cutlass_fused_moe_module() calls set_deepgemm_jit_include_dirs after loading.\n"
    "// deep_gemm only serves the fp8 block-scale runner, which is not compiled here.\n"
    "#include <tvm/ffi/extra/module.h>\n"
    "namespace flashinfer_slim {\n"
    "void set_deepgemm_jit_include_dirs(tvm::ffi::Array<tvm::ffi::String> include_dirs) {\n"
    "  (void)include_dirs;\n"
    "}\n"
    "}  // namespace flashinfer_slim\n"
    "TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_deepgemm_jit_include_dirs,\n"
    "                              flashinfer_slim::set_deepgemm_jit_include_dirs);\n"
)


def make_spec(args):
    from flashinfer.jit import env as jit_env
    from flashinfer.jit.core import gen_jit_spec, sm90a_nvcc_flags
    from flashinfer.jit.cpp_ext import is_cuda_version_at_least
    from flashinfer.jit.gemm.cutlass.generate_kernels import generate_gemm_operations

    gen, generated, items, n_gen, stubs, expected = generate_sources(args, generate_gemm_operations)
    C = jit_env.FLASHINFER_CSRC_DIR
    K = C / "nv_internal/tensorrt_llm/kernels"
    # identical to flashinfer/jit/fused_moe.py gen_cutlass_fused_moe_sm90_module (non-H20)
    nvcc_flags = sm90a_nvcc_flags + [
        "-DCOMPILE_HOPPER_TMA_GEMMS",
        "-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS",
        "-DENABLE_BF16",
        "-DENABLE_FP8",
        "-DENABLE_FP8_BLOCK_SCALE" if is_cuda_version_at_least("12.8") else "",
        "-DENABLE_FP4",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
        "-DCUTLASS_ENABLE_GDC_FOR_SM90=1",
        "-DCUTLASS_MIXED_GEMM_FP4_FP8_PREPROCESSED_SIGNS=1",
    ]
    sources = [
        K / "cutlass_kernels/moe_gemm/moe_gemm_tma_warp_specialized_input.cu",
        K / "cutlass_kernels/moe_gemm/moe_gemm_mixed_utils.cu",
        C / "fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu",
        *(K / g if isinstance(g, str) else g for g in generated),
        stubs,
    ]
    spec = slim_sources.slim_spec(gen_jit_spec, args.name, C, sources, nvcc_flags, args.tactics, extra_includes=[gen])
    return spec, items, n_gen, stubs, jit_env, expected


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_cli(ap, DEFAULT_OUT, DEFAULT_NAME, "bf16: 5 kernels, 4 tactics per GEMM; Humming: 15 kernels, "
                   "14 tactics per GEMM", "bf16: 116 kernels = 116 tactics per GEMM; Humming: 126")
    ap.add_argument("--paths", choices=sorted(PATH_SETS), default="bf16",
                    help="runner paths the module holds: bf16 (bf16 x MXFP4, default), humming (MXFP4 x FP8 "
                         "Humming, use_wfp4afp8_humming=True) or both; default names "
                         + ", ".join(f"{k}: {v[1]}" for k, v in sorted(PATH_SETS.items())))
    args = ap.parse_args(argv)
    if args.install_aot:
        print("installed:", common.install_aot(args.install_aot, STOCK_NAME))
        return 0
    args.paths, default_name = PATH_SETS[args.paths]
    common.finish_args(args, default_name)
    common.setup_env(args)
    import flashinfer

    if not flashinfer.__version__.startswith("0.7."):
        raise SystemExit(f"flashinfer {flashinfer.__version__} at {flashinfer.__file__}: "
                         "this script is for 0.7.4 (PYTHONPATH=/work/fi/074)")
    t0 = time.time()
    if args.verify_only:  # do not touch generated sources (a build may be running)
        from flashinfer.jit import env as jit_env

        so = jit_env.FLASHINFER_JIT_DIR / args.name / f"{args.name}.so"
        return 1 if symbols.verify(so, EXPORTS) or common.smoke(so, *smoke_args(so)) else 0
    spec, items, n_gen, stubs, jit_env, expected = make_spec(args)
    what = " + ".join(PATHS[k].what for k in args.paths) + " on SM90"
    return common.run_build(args, spec, jit_env.FLASHINFER_JIT_DIR, items, n_gen, stubs,
                            LAUNCHER_PREFIX, what, EXPORTS, expected, t0, smoke_args(spec.jit_library_path))


def smoke_args(so: Path):
    return SMOKE_INIT, SMOKE_EXTRA % (str(so),)


if __name__ == "__main__":
    sys.exit(main())
