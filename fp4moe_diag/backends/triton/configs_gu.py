"""The ``-gu`` tactics of mode ps (:class:`.configs.KernelConfig` ``gate_up``): gemm1 on the copy of w13 with gate and
up rows interleaved in every 16-row slab (:mod:`._kernels_ps_gu`).  Imports nothing of ours but :mod:`.configs`, no
triton."""

from __future__ import annotations

from .configs import KernelConfig

#: mode ps with ``gate_up`` (label suffix ``-gu`` right after ``-ps``; :mod:`._kernels_ps_gu`): gemm1 reads a copy of
#: w13 whose rows are interleaved in every 16-row slab (rows 0..7 lin, 8..15 the gate rows of the same 8 output
#: columns: ``ps_layout.gate_up_rows``), made on the first -gu run of a prepared case (not timed; the w13 bytes once
#: more), and runs ONE tile of 2 x BLOCK_N weight rows and ONE dot per K step into one accumulator, split into lin
#: and gate in the epilogue, as triton_kernels' gemm1 runs one dot over its 256-row tile (H200, 20b EP1 T=4096:
#: our two-dot gemm1 1268 us, triton_kernels' 1145; Nsight Compute puts ours in the upcast, theirs in the HGMMA).
#: gemm2 is unchanged.  The prefill winners of s9d and the decode winner of s7c with -gu.  H200, run of record s10f
#: (same run as the tiles without -gu): correct everywhere and 1-15 % slower at every shape (20b EP1 T=4096
#: m128n128k64w8s3-ps-gu-g2n256 1907 against 1879 us; m64n128k128w4s3-ps-gu 2290 against 2083); offered so that a
#: sweep on another GPU measures them, not a winner here.
PS_GU_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c, "ps", block_n2=n2, gate_up=True) for *c, n2 in (
    (128, 128, 64, 8, 3, 256),
    (128, 128, 128, 8, 3, 256),
    (64, 128, 64, 8, 4, 0),
    (64, 128, 128, 4, 3, 0),
    (16, 128, 128, 4, 3, 0),
))
# gemm1 sm_90a, K = 2880, triton 3.6.0 (python -m fp4moe_diag.profiling.sass; ptxas -v on the PTX): loop instructions
# per weight / registers / spill bytes, -gu against the same tile without: m128n128k64w8s3 4.27 / 255 / 8 (4.36 / 255 /
# 12), m128n128k128w8s3 4.16 / 255 / 0 (4.18 / 255 / 0), m64n128k64w8s4 4.11 / 190 / 0 (4.27 / 128 / 0: 1 program per
# SM by registers instead of 2), m64n128k128w4s3 3.34 / 255 / 0 (3.39 / 255 / 28), m16n128k128w4s3 2.96 / 205 / 0
# (3.12 / 218 / 0); the last two with one dot per 64-K chunk (ps_gu_chunk_dots).  The lin / gate split after the loop
# is register-local (no layout conversion of the accumulator in the TTGIR; tests/test_triton_gu.py).
#: the decode winner with -gu and programmatic dependent launch, offered with PS_PDL_CONFIGS (s10f: 20b EP1 T=64 169.5
#: against 164.9 us without -gu)
PS_GU_PDL_CONFIGS: tuple[KernelConfig, ...] = (KernelConfig(16, 128, 128, 4, 3, "ps", pdl=1, gate_up=True),)

#: decode (offered where PS_DECODE_CONFIGS are; -pdl with PS_PDL_CONFIGS): the gate/up tile at BLOCK_K 64, one dot of
#: 256 weight rows per K step, for the Triton releases users run (docs/static-h200-s14.md).  From Triton 3.7 on the
#: k128 decode winner's gemm1 holds 229-243 registers, 2 programs per SM; this tile 136 (3.7.1) / 156 (3.9.0), 3
#: programs, at 3.23 / 3.38 loop instructions per weight against 2.94 / 3.14 (sm_90a, K = 3072, profiling.sass).
#: Under 3.6.0, the H200 image's: 132 registers, 3 programs, 3.26 against the winner's 3.02 at the same residency.
#: Measured (s15a, H200): it does not win under 3.7.1 either (a median 1.12x of the best decode tactic; 3.6.0: 1.20x);
#: kept as the 3-program decode candidate for 3.8 / 3.9, which were never on the GPU.
PS_GU_DECODE_CONFIGS: tuple[KernelConfig, ...] = (KernelConfig(16, 128, 64, 4, 6, "ps", gate_up=True),)
PS_GU_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = (KernelConfig(16, 128, 64, 4, 6, "ps", pdl=1, gate_up=True),)


#: BLOCK_M 256 (the tokens: wgmma N = 256), 8 warps, 64 output columns = 128 gate/up-interleaved weight rows, one m64
#: per warpgroup: each upcast weight feeds 256 tokens instead of 128, so the upcast (most of the loop) costs half as
#: much per product; one fp32 accumulator of 64 x 256 per warpgroup (128 registers per thread, as the two of
#: m128n128k64w8s3).  gemm2 on 128 weight rows (-g2n128: 128 x 256 over 8 warps).  No plain twin: without -gu the two
#: warpgroups would split the tokens and upcast the same 64 rows each.  sm_90a, K = 2880, triton 3.6.0
#: (profiling.sass): loop instructions per 1000 weight-token products, gemm1 / gemm2, 25.0 / 26.1 against 33.1 / 34.1
#: for m128n128k64w8s3-ps-g2n256 (the prefill winner); 255 / 232 registers, no spills; 107 KB of shared memory at 3
#: stages, 144 KB at 4.  (A 4-warp m256n32 tile: 34.4 / 34.9, its activation loads twice as many per thread.)
#: Offered above the decode sizes (a 256-token block pads most at small T).
PS_GU_WIDE_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(256, 64, 64, 8, s, "ps", block_n2=128, gate_up=True)
                                                     for s in (3, 4))
# H200 (s12b, s12d, every bf16 backend in the run): the s3 tile the fastest of ours at 20b EP2 T=16384 (3236 us,
# triton_kernels 3222; m128n128k64w8s3-ps-g2n256 3501) and at 20b EP1 T=16384 (6687 against 6849); slower at T <= 4096
# (blocks of 256 pad 1.28 rows per pair at 20b EP1 T=4096 against 1.14 for 128: configs_tail); s4 slower than s3.


def ps_gu_chunk_dots(block_k: int, num_warps: int) -> bool:
    """Whether the -gu gemm1 (:mod:`._kernels_ps_gu`) runs one dot per 64-K chunk of its tile instead of one per K
    step: 4-warp tiles with BLOCK_K > 64, where the one dot's upcast tile made ptxas spill (sm_90a SASS, not timed)."""
    return num_warps == 4 and block_k > 64
