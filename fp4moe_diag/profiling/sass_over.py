"""Static SASS of the ``-tNf`` kernels (:mod:`fp4moe_diag.backends.triton._kernels_over`) without a GPU: registers,
spills and each K loop's size, as :mod:`.sass` counts them for the other kernels.  A ``-tNf`` GEMM is one kernel with
two K loops (a block with a tail: two dots per step; a plain block: one); :mod:`.sass` counts one loop per kernel.

The build is the backend's: by the ptxas :func:`..backends.triton.assembler.tail_fused_ptxas` names (under Triton 3.9,
whose CUDA 13.4 ptxas serialises these kernels' wgmmas, the CUDA 12.9 ptxas it ships for older targets).
``--ptxas PATH`` builds with that ptxas instead (Triton's own ``TRITON_PTXAS_PATH`` / ``TRITON_PTXAS_BLACKWELL_PATH``,
set before the first build): the same PTX, another assembler.  With ptxas 13.3-13.4 both K loops wait for every
wgmma; with 12.8-13.2 they keep groups in flight (docs/evidence-s37.md)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Optional, Sequence

from ..backends.triton.configs import KernelConfig, even_k, parse_config, ps_n_fastest, ps_scale_words
from ..backends.triton.assembler import assembled_by, ptxas_version, tail_fused_ptxas
from .sass import (_on_cubin, bundled_tool, mma_sync, opcode, ptxas_advisories, resident_programs,
                   resource_usage)
from .sass_text import kernel_source, loop_bodies

_PTRS = {"gemm1": ({"x_ptr": "*bf16", "w_ptr": "*u8", "ws_ptr": "*u8", "b_ptr": "*fp32", "alpha_ptr": "*fp32",
                    "beta_ptr": "*fp32", "limit_ptr": "*fp32", "out_ptr": "*bf16", "sorted_pair_ptr": "*i32",
                    "block_expert_ptr": "*i32"},
                   ["num_pairs", "top_k", "N", "n_over", "stride_xm", "stride_we", "stride_ws", "stride_se",
                    "stride_ss", "stride_be", "stride_om"]),
         "gemm2": ({"a_ptr": "*bf16", "w_ptr": "*u8", "ws_ptr": "*u8", "b_ptr": "*fp32", "topk_w_ptr": "*fp32",
                    "out_ptr": "*fp32", "sorted_pair_ptr": "*i32", "block_expert_ptr": "*i32"},
                   ["num_pairs", "N", "n_over", "stride_am", "stride_we", "stride_ws", "stride_se", "stride_ss",
                    "stride_be", "stride_om"])}


def compile_over(tactic: str, gemm: str, k: int = 3072, arch: int = 90) -> Any:
    """The sm_<arch>a build of ``tactic``'s (a ``-tNf`` label) ``gemm`` kernel at reduction length ``k``."""
    import triton
    from triton.backends.compiler import GPUTarget

    from ..backends.triton import _kernels as K
    from ..backends.triton import _kernels_over as KO

    kc: KernelConfig = parse_config(tactic)
    if not kc.tail_fused or gemm not in _PTRS:
        raise ValueError(f"tactic, gemm: expected a -tNf label and gemm1 or gemm2, got {tactic!r}, {gemm!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < kc.block_k or k % 64:
        raise ValueError(f"k: expected a multiple of 64 of at least block_k={kc.block_k}, got {k!r}")
    ptrs, ints = _PTRS[gemm]
    bn = kc.gemm2_block_n if gemm == "gemm2" else kc.block_n
    fn = KO._moe_mxfp4_gemm1_ps_gu_over_kernel if gemm == "gemm1" else KO._moe_mxfp4_gemm2_ps_over_kernel
    const = dict(K=k, BLOCK_M=kc.block_m, BLOCK_N=bn, BLOCK_K=kc.block_k, OVER_M=kc.tail_m, HAS_BIAS=True,
                 EVEN_K=even_k(k, kc.block_k, 1), DOT_F32=False, N_FASTEST=ps_n_fastest(kc.block_m), PDL=min(kc.pdl, 1),
                 SCALE_WORDS=ps_scale_words(2 * bn if gemm == "gemm1" else bn, kc.block_k, kc.num_warps),
                 TILE_MAJOR=kc.tile_major, **({"ACTIVATION": 1} if gemm == "gemm1" else {}))
    with assembled_by(tail_fused_ptxas(arch)):
        return triton.compile(kernel_source(fn, ptrs, ints, const), target=GPUTarget("cuda", arch, 32),
                              options=dict(num_warps=kc.num_warps, num_stages=kc.num_stages, **K.BUILD_OPTIONS))


def loops(compiled: Any) -> list[dict]:
    """Each backward-branch loop with a wgmma (the K loops), in address order: its instructions, wgmmas, local
    loads / stores (spills), and wgmma commit groups per iteration with the distinct depths of their waits
    (:func:`.sass.mma_sync`: 0 waits for every wgmma issued)."""
    out = []
    for body in loop_bodies(_on_cubin(bundled_tool("nvdisasm"), ["-c"], compiled.asm["cubin"])):
        ops = [opcode(t) for t in body]
        if "HGMMA" in ops:
            groups, waits = mma_sync(body)
            out.append(dict(instructions=len(ops), wgmma=ops.count("HGMMA"), spills=ops.count("LDL") + ops.count("STL"),
                            groups=groups, waits=waits))
    return out


def summary(tactic: str, gemm: str, k: int = 3072) -> dict:
    """Registers, stack bytes, programs per SM and the K loops of ``tactic``'s ``gemm`` build (sm_90a), with the
    version of the ptxas that built it and its performance advisories."""
    assembler = tail_fused_ptxas(90)
    c = compile_over(tactic, gemm, k)
    use = resource_usage(c)
    with assembled_by(assembler):
        advisories = ptxas_advisories(c, 90)
    return dict(ptxas=assembler.version, registers=use["reg"], stack_bytes=use["stack"],
                shared_bytes=int(c.metadata.shared), resident_programs=resident_programs(c, parse_config(tactic).num_warps),
                loops=loops(c), advisories=advisories)


def use_ptxas(path: str) -> None:
    """Make this process's Triton build with the ptxas at ``path`` (both of Triton's ptxas variables); a ValueError
    when it is no executable file.  Call it before the first build: Triton caches the ptxas version it reads."""
    ptxas_version(path, "ptxas")
    os.environ["TRITON_PTXAS_PATH"] = os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = os.path.abspath(path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.sass_over", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tactic", required=True, help="a -tNf label of our Triton backend")
    ap.add_argument("--gemm", choices=("gemm1", "gemm2"), default="gemm1")
    ap.add_argument("--k", type=int, default=3072, help="reduction length (H for gemm1, I for gemm2)")
    ap.add_argument("--ptxas", help="build with this ptxas (default: the one the installed Triton calls for sm_90a)")
    a = ap.parse_args(argv)
    try:
        if a.ptxas:
            use_ptxas(a.ptxas)
        print(json.dumps(dict(tactic=a.tactic, gemm=a.gemm, k=a.k, **summary(a.tactic, a.gemm, a.k))))
    except ValueError as e:
        ap.exit(2, f"error: {e}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
