"""What both FlashInfer generations' slim SM90 CUTLASS builds generate and compile: the launcher and runner TUs
(:func:`generate_common`), the common helper sources, include dirs and JitSpec (:func:`slim_spec`).  The
version-specific parts stay in ``build_cutlass_sm90_slim.py`` (0.5.2) and ``build_cutlass_sm90_slim_074.py``."""

from __future__ import annotations

import cutlass_slim_common as common



#: the small common helpers both FlashInfer generations' slim builds compile (paths under csrc/)
COMMON_SOURCES = ("nv_internal/cpp/common/envUtils.cpp", "nv_internal/cpp/common/logger.cpp",
                  "nv_internal/cpp/common/stringUtils.cpp", "nv_internal/cpp/common/tllmException.cpp",
                  "nv_internal/cpp/common/memoryUtils.cu", "nv_internal/tensorrt_llm/kernels/preQuantScaleKernel.cu",
                  "nv_internal/tensorrt_llm/kernels/cutlass_kernels/cutlass_heuristic.cpp",
                  "nv_internal/tensorrt_llm/kernels/lora/lora.cpp")
#: include paths (under csrc/) of the CUTLASS MoE sources, as the stock SM90 JitSpec has them
INCLUDE_DIRS = ("nv_internal", "nv_internal/include", "nv_internal/tensorrt_llm/cutlass_extensions/include",
                "nv_internal/tensorrt_llm/kernels/cutlass_kernels/include",
                "nv_internal/tensorrt_llm/kernels/cutlass_kernels")


def slim_spec(gen_jit_spec, name: str, csrc, sources: list, nvcc_flags: list, tactics: str, extra_includes=()):
    """The JitSpec of a slim build: ``sources`` (version-specific) + :data:`COMMON_SOURCES`, the stock nvcc flags,
    ``-DFAST_BUILD`` for the fast tactic set, no -lnvrtc (only deep_gemm, the fp8 block-scale path, needs it)."""
    return gen_jit_spec(
        name,
        [*sources, *(csrc / s for s in COMMON_SOURCES)],
        extra_cuda_cflags=nvcc_flags,
        extra_cflags=["-DFAST_BUILD"] if tactics == "fast" else [],
        extra_ldflags=[],
        extra_include_paths=[*(csrc / d for d in INCLUDE_DIRS), *extra_includes],
    )

def generate_common(args, generate_gemm_operations, launcher: str, dtype_prefix: str, wanted, runner_body: str):
    """What both generations' slim builds generate under ``<out>/gen/<name>/``: the launcher instantiations the
    tactic set needs (one kernel per file), the runner TU with ``runner_body`` inside the cutlass_kernels
    namespace, and a placeholder stub file (regenerated after the first compile phase).
    Returns ``(gen, items, n_gen, kernel_files, runner, stubs)``."""
    gen = gen_dir(args)
    probe = common.run_generator(gen, generate_gemm_operations)
    items, n_gen, kernel_files = write_kernels(gen, probe, launcher, dtype_prefix, wanted,
                                               "slim_sm90_bf16_fp4_mixed", args.per_file)
    runner = write_runner(gen, "slim_moe_runner_bf16_fp4_instantiation.cu", runner_body)
    return gen, items, n_gen, kernel_files, runner, placeholder_stubs(gen)


def gen_dir(args):
    gen = args.out / "gen" / args.name  # per spec name: variants must not share sources
    gen.mkdir(parents=True, exist_ok=True)
    return gen


def write_kernels(gen, probe, launcher: str, dtype_prefix: str, wanted, stem: str, per_file: int):
    """The ``launcher`` (a regex) instantiations for ``dtype_prefix`` in the generator output ``probe`` that
    ``wanted(tile, cluster, sched)`` keeps, ``per_file`` per ``<stem>_NN.generated.cu``.
    Returns ``(items, n_generated, files)``."""
    header, ns, items, n_gen = common.collect_instantiations(probe, launcher, dtype_prefix, wanted)
    return items, n_gen, common.write_kernel_files(gen, stem, header, ns, items, per_file)


def write_runner(gen, name: str, body: str, include: str = "moe_kernels.h"):
    """A TU ``name`` with ``body`` inside namespace ``tensorrt_llm::kernels::cutlass_kernels``."""
    runner = gen / name
    head = ('#include "fused_moe/cutlass_backend/cutlass_fused_moe_kernels.cuh"\n'
            if include == "moe_kernels.h" else "")
    common.write_if_different(
        runner,
        head + f'#include "{include}"\n'
        "namespace tensorrt_llm::kernels::cutlass_kernels {\n" + body + "}\n",
    )
    return runner


def placeholder_stubs(gen):
    stubs = gen / "slim_missing_symbol_stubs.cpp"
    if not stubs.exists():
        stubs.write_text("// regenerated after the first compile phase\n")
    return stubs
