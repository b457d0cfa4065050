"""Tactics of our Triton kernels: :class:`KernelConfig` (the tactic id itself), the tactic lists, and (re-exported
from :mod:`.tiling`) the split-K arithmetic.  Imports no triton."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .configs_checks import ABLATIONS, PERSIST_LABELS, check_ps_options  # noqa: F401 (re-exported)
from .tiling import (DECODE_MAX_PAIRS, decode_sized, even_k, expected_local_pairs, k_main, k_split,  # noqa: F401
                     ps_n_fastest, ps_scale_words, ps_tiles_first, split_k_fits)

#: KernelConfig.pdl -> label suffix: the three kernels of a call launched with programmatic dependent launch (each
#: waits on the grid before it at its top and lets the next one launch right after: the next grid's programs take the
#: SMs the tail of this one leaves idle, and no launch gap); ``-pdlpf`` / ``-pdlpfe`` add gemm2's L2 prefetch of its
#: first weights (PS_PDL_CONFIGS); -pdlw: gemm2's W_FIRST; -pdlt / -pdltt: tail launches early (configs_tail)
PDL_LABELS = {0: "", 1: "-pdl", 2: "-pdlpf", 3: "-pdlpfe", 4: "-pdlw", 5: "-pdlt", 6: "-pdltt"}
GATE_UP_LABEL = "-gu"  #: KernelConfig.gate_up's label suffix, right after -ps (group gu of _LABEL)
#: KernelConfig.fused -> this label suffix (after the PDL one): the last program to arrive at a tile (an int32 arrival
#: counter per tile, reset by that program) does the pass of the kernel that followed: gemm2 the top-k sum of a
#: token's rows (same fixed order: bit-identical), a split gemm1 the split-K finalize (:mod:`._kernels_fused`)
FUSED_LABEL = "-fs"
MODES = ("bits", "ds", "x2", "sw", "ps", "f8", "p8")  # bit-arithmetic dequant, tl.dot_scaled, packed bf16x2 upcast, x2
# swap-AB, swap-AB on ps_layout's pre-shuffled weights, W4A8 (configs_f8), W4A8 on p8_layout's (configs_p8)


@dataclass(frozen=True)
class KernelConfig:
    """A tactic of our Triton kernels, and its id: tiles, launch parameters, kernel mode, split-K factor.

    ``str()`` is the label (the ``tactic`` column of the results); :func:`parse_config` reads a label,
    a legacy tuple id or a KernelConfig back."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    mode: str = "bits"  # "bits" (bit-arithmetic dequant), "ds" (tl.dot_scaled), "x2" (packed bf16x2 upcast),
    # "sw" (the x2 upcast with the weights as the MMA's A operand: swap-AB), "ps" (swap-AB on pre-shuffled weights)
    split_k: int = 1
    split_k2: int = 0  # gemm2's split-K when it differs from gemm1's (0: the same as split_k)
    pdl: int = 0  # mode ps only: 0 off, 1 programmatic dependent launch (label -pdl), 2 / 3 that and gemm2's first
    # weights prefetched into L2 (-pdlpf / -pdlpfe), 4 loaded (-pdlw) before its grid-dependency wait; PDL_LABELS
    block_n2: int = 0  # mode ps only: gemm2's BLOCK_N when it differs from gemm1's (0: the same; label -g2nN)
    gate_up: bool = False  # mode ps only: gemm1 on gate/up rows interleaved per slab, one dot (-gu; configs_gu.py)
    fused: bool = False  # mode ps only (label -fs, last): gemm2 sums each token's top-k rows (the top-k sum kernel
    # is not launched) and a split gemm1 finalizes its own planes, each in the last program to arrive (FUSED_LABEL)
    tail_m: int = 0  # mode ps only (label -tN): each expert's last <= tail_m pairs run as blocks of tail_m rows (a
    # second gemm1 / gemm2 launch pair), the rest as blocks of block_m (configs_tail.py); with tail_fused (-tNf, -gu)
    tail_fused: bool = False  # they ride in the expert's last block's program, a second dot (_kernels_over.py)
    ablate: str = ""  # mode ps only (label ~nodeq / ~load / ~seq): an ablation of the tactic, see ABLATIONS
    tile_major: bool = False  # mode ps only (label -tm, after -ps / -gu): the weights stored tile by tile (a copy,
    # ps_layout.tile_major): each K step of a program reads one contiguous range
    num_stages2: int = 0  # mode ps only: gemm2's pipeline depth when it differs (0: num_stages; label -g2sN)
    peel: bool = False  # mode ps only (label -pk, after -ps / -gu / -tm): the K loop split into the steps inside K in
    # every split, run without K masks, and the rest, masked (configs_peel.py)
    persist: int = 0  # mode ps only (label PERSIST_LABELS, before the PDL one): persistent gemm1 / gemm2, as many
    # programs as an SM holds, each looping over tiles: 1 (-pt) a K loop pipelined per tile, 2 (-ptf) the tile and K
    # loops flattened into one, pipelined across tiles (configs_persist.py)
    reg_cap: int = 0  # mode ps only (label -rN, after -fs): gemm1 built with maxnreg N (configs_regcap.py)
    unroll: int = 0  # -gu only (label -uN, after -pk): both K loops unrolled N times (configs_unroll.py)

    def __post_init__(self) -> None:
        if not isinstance(self.split_k2, int) or isinstance(self.split_k2, bool) or self.split_k2 < 0:
            raise ValueError(f"tactic: split_k2 must be an int >= 0 (0: as split_k), got {self.split_k2!r}")
        if self.split_k2 == self.split_k:
            object.__setattr__(self, "split_k2", 0)  # one id per tactic
        if self.num_stages2 == self.num_stages:
            object.__setattr__(self, "num_stages2", 0)
        if not isinstance(self.block_n2, int) or isinstance(self.block_n2, bool) or self.block_n2 < 0:
            raise ValueError(f"tactic: block_n2 must be an int >= 0 (0: as block_n), got {self.block_n2!r}")
        if self.block_n2 == self.block_n:
            object.__setattr__(self, "block_n2", 0)
        if self.block_n2 and (self.mode != "ps" or self.block_n2 % 16 or self.block_n2 & (self.block_n2 - 1)):
            raise ValueError(f"tactic: block_n2 (gemm2's own BLOCK_N) is a mode ps option, a power of two >= 16; got "
                             f"block_n2={self.block_n2} in mode {self.mode!r}")
        for f in ("block_m", "block_n", "block_k", "num_warps", "num_stages", "split_k"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"tactic: {f} must be a positive int, got {v!r}")
        if self.mode not in MODES:
            raise ValueError(f"tactic: mode must be one of {MODES}, got {self.mode!r}")
        if self.pdl not in PDL_LABELS or isinstance(self.pdl, bool):
            raise ValueError(f"tactic: pdl must be one of {sorted(PDL_LABELS)}, got {self.pdl!r}")
        if not isinstance(self.fused, bool) or (self.fused and self.mode != "ps"):
            raise ValueError(f"tactic: fused (-fs, the fused top-k sum and split-K finalize) is a mode ps option, a "
                             f"bool; got fused={self.fused!r} in mode {self.mode!r}")
        if self.pdl and self.mode != "ps":
            raise ValueError(f"tactic: pdl (programmatic dependent launch) is a mode ps option, got mode {self.mode!r}")
        if self.mode == "f8" and (self.split_k != 1 or self.split_k2 or self.block_k % 32 or self.block_m < 16):
            raise ValueError(f"tactic: mode f8 has no split-K and needs block_k a multiple of 32 and block_m >= 16, "
                             f"got split_k={self.split_k}, split_k2={self.split_k2}, block_k={self.block_k}, "
                             f"block_m={self.block_m}")
        if self.mode == "p8" and (self.split_k != 1 or self.split_k2 or self.block_k % 64 or self.block_n % 16
                                  or self.block_m < 16):
            raise ValueError(f"tactic: mode p8 has no split-K and needs block_k a multiple of 64, block_n of 16 and "
                             f"block_m >= 16, got split_k={self.split_k}, block_n={self.block_n}, "
                             f"block_k={self.block_k}, block_m={self.block_m}")
        check_ps_options(self)
        if self.mode == "ps":
            pow2 = lambda v: v & (v - 1) == 0  # noqa: E731
            if not (self.block_n % 16 == 0 and self.block_k % 64 == 0 and self.block_m >= 16
                    and all(pow2(v) for v in (self.block_m, self.block_n, self.block_k))):
                raise ValueError(f"tactic: mode ps needs powers of two with block_n >= 16, block_k >= 64 and "
                                 f"block_m >= 16 (16-row slabs, 64-K chunks, wgmma N), got block_m={self.block_m}, "
                                 f"block_n={self.block_n}, block_k={self.block_k}")

    @property
    def dot_scaled(self) -> bool:
        return self.mode == "ds"

    @property
    def x2(self) -> bool:
        """The packed bf16x2 upcast (modes x2 and sw): its scale-byte range applies."""
        return self.mode in ("x2", "sw")

    @property
    def swap(self) -> bool:
        return self.mode == "sw"

    @property
    def ps(self) -> bool:
        """The pre-shuffled kernels (weights in the layout of :mod:`.ps_layout`)."""
        return self.mode == "ps"

    @property
    def x2_scales(self) -> bool:
        """Whether the x2 scale factor (and its scale-byte range) is used: modes x2, sw and ps."""
        return self.mode in ("x2", "sw", "ps")

    @property
    def f8(self) -> bool:
        """The W4A8 kernels of :mod:`._kernels_f8` (backend ``triton_w4a8``)."""
        return self.mode == "f8"

    @property
    def p8(self) -> bool:
        """The W4A8 kernels on the pre-shuffled layout of :mod:`.p8_layout` (:mod:`._kernels_p8`, ``triton_w4a8``)."""
        return self.mode == "p8"

    @property
    def w4a8(self) -> bool:
        """A tactic of backend ``triton_w4a8`` (modes f8 and p8)."""
        return self.mode in ("f8", "p8")

    @property
    def gemm2_split(self) -> int:
        """gemm2's split-K factor (its planes are summed with the top-k sum, so a split there costs no extra pass)."""
        return self.split_k2 or self.split_k

    @property
    def gemm2_stages(self) -> int:
        """gemm2's num_stages: ``num_stages2`` where set, else ``num_stages``."""
        return self.num_stages2 or self.num_stages

    @property
    def gemm2_block_n(self) -> int:
        """gemm2's BLOCK_N (its weight rows per program): ``block_n2`` where set, else ``block_n``."""
        return self.block_n2 or self.block_n

    @property
    def label(self) -> str:
        base = f"m{self.block_m}n{self.block_n}k{self.block_k}w{self.num_warps}s{self.num_stages}"
        return (base + ("" if self.mode == "bits" else f"-{self.mode}") + GATE_UP_LABEL * self.gate_up
                + "-tm" * self.tile_major + "-pk" * self.peel + f"-u{self.unroll}" * bool(self.unroll)
                + (f"-sk{self.split_k}" if self.split_k > 1 else "")
                + (f"-g2sk{self.split_k2}" if self.split_k2 else "") + (f"-g2n{self.block_n2}" if self.block_n2 else "")
                + (f"-g2s{self.num_stages2}" if self.num_stages2 else "")
                + (f"-t{self.tail_m}" if self.tail_m else "") + "f" * self.tail_fused + PERSIST_LABELS[self.persist]
                + PDL_LABELS[self.pdl]
                + FUSED_LABEL * self.fused + f"-r{self.reg_cap}" * bool(self.reg_cap)
                + f"~{self.ablate}" * bool(self.ablate))

    def __str__(self) -> str:
        return self.label

    def params(self) -> dict[str, Any]:
        return dict(block_m=self.block_m, block_n=self.block_n, block_k=self.block_k, num_warps=self.num_warps,
                    num_stages=self.num_stages, dot_scaled=self.dot_scaled, x2=self.x2, swap=self.swap,
                    ps=self.ps, split_k=self.split_k, split_k2=self.gemm2_split, **({"f8": True} if self.f8 else {}),
                    **({"p8": True} if self.p8 else {}),
                    **({"pdl": self.pdl} if self.pdl else {}),  # the keys only where set: older rows unchanged
                    **({"block_n2": self.block_n2} if self.block_n2 else {}),
                    **({"num_stages2": self.num_stages2} if self.num_stages2 else {}),
                    **({"gate_up": True} if self.gate_up else {}),
                    **({"fused": True} if self.fused else {}), **({"tail_m": self.tail_m} if self.tail_m else {}),
                    **({"tail_fused": True} if self.tail_fused else {}),
                    **({"ablate": self.ablate} if self.ablate else {}),
                    **({"tile_major": True} if self.tile_major else {}),
                    **({"unroll": self.unroll} if self.unroll else {}),
                    **({"persist": self.persist} if self.persist else {}), **({"peel": True} if self.peel else {}),
                    **({"reg_cap": self.reg_cap} if self.reg_cap else {}))


#: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); shared by both GEMMs
CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 3),
    (16, 128, 128, 8, 3),
    (16, 128, 64, 4, 4),
    (32, 64, 128, 8, 3),
    (32, 64, 64, 4, 4),
    (32, 128, 64, 8, 4),
    (64, 64, 128, 4, 3),
    (64, 64, 64, 4, 4),
    (64, 128, 64, 4, 3),
    (64, 128, 128, 8, 3),
    (128, 64, 128, 8, 3),
    (128, 128, 64, 8, 3),
))
# gemm1 holds two dequantized weight tiles and two accumulators, so the larger tiles use 8 warps.
#: the same kernels with ``tl.dot_scaled`` (bf16 x e2m1, ue8m0 scales) instead of the bit-arithmetic
#: dequant: mode ``"ds"``, label suffix ``-ds``.
#: GPU only (Triton 3.6's interpreter has no dot_scaled).  Neither GEMM spills on sm_90a at K = 3072 (ptxas -v on
#: Triton 3.6's PTX); small N tiles because decode is latency-bound: more CTAs in flight win (H200 sweep).
DOT_SCALED_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 16, 128, 4, 3, "ds"),
    (16, 16, 256, 4, 3, "ds"),
    (16, 32, 128, 4, 3, "ds"),
    (16, 64, 128, 8, 3, "ds"),
    (32, 64, 128, 8, 3, "ds"),
    (64, 64, 64, 8, 3, "ds"),
))


#: decode-only tactics (offered where :func:`decode_sized`, GPU only), with split-K.  ``split_k`` > 1 spreads the K
#: loop over that many programs (more bytes in flight when few experts are active) and sums the fp32 partial planes
#: in a fixed order (deterministic).  All: <= 160 registers, no spills on sm_90a, cp.async-pipelined operands.
DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 32, 128, 4, 4, "ds", 1),
    (16, 32, 128, 4, 3, "ds", 2),
    (16, 32, 128, 4, 3, "ds", 4),
    (16, 32, 128, 4, 3, "ds", 8),
    (16, 64, 128, 4, 3, "ds", 2),
    (16, 64, 128, 4, 3, "ds", 4),
    (16, 32, 256, 4, 3, "ds", 2),
))
# H200 decode (2026-12-03): m16n64k128-ds-sk2 best from T=4 (32% of the copy roofline), -sk4 at T<=2, BLOCK_N=16 2x
# slower; a register-prefetch dot_scaled loop ("-dsp", s3) 10-15% slower than Triton's cp.async pipeline, dropped.

#: the bit-arithmetic kernels with the packed bf16x2 upcast (mode ``"x2"``, label suffix ``-x2``; issue #16):
#: a 4-bit code becomes the bf16 bit pattern of its value times 2**-126 by shifts and masks (two codes
#: per 32-bit register: prmt, shl, lop3), and one ``mul.bf16x2`` applies the scale and the 2**126 together;
#: about 2 instructions per weight against about 12 for "bits" (fp32 decode, select, cvt) and 7 for
#: dot_scaled's upcast.  Interpreted on CPU through the same bit patterns in fp32 (no inline asm there).
#: Decode rows (:func:`decode_sized`) add the split-K variants.
X2_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 3, "x2"),
    (16, 128, 128, 4, 3, "x2"),
    (32, 64, 128, 4, 3, "x2"),
    (64, 64, 64, 4, 4, "x2"),
    (64, 128, 64, 4, 3, "x2"),
    (64, 128, 128, 8, 3, "x2"),
    (128, 128, 64, 8, 3, "x2"),
))
X2_DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 3, "x2", 2),
    (16, 64, 128, 4, 3, "x2", 4),
    (16, 32, 128, 4, 4, "x2", 2),
    (16, 128, 128, 4, 3, "x2", 2),
))

#: mode ``"sw"`` (label suffix ``-sw``; issue #16): the x2 upcast with the operands swapped, ``acc.T += W @ x.T``,
#: so the weight tile [BLOCK_N, BLOCK_K] is the MMA's A operand: on Hopper, wgmma with A in registers (no
#: shared-memory round trip of the upcast weights) and BLOCK_N weight rows in its M (64 per warpgroup), the
#: tokens in its N; loaded as stored (row n, K contiguous).  BLOCK_M (tokens) stays small: a decode layout.
#: H200, gpt-oss-20b EP1 T=64 (2026-12-03, data/runs/2026-12-03-nvidia-h200-s6, CUDA graphs): m16n128k128w4s3-sw
#: 292 us (38 % of the read ceiling), best x2 308 us, best ds 355 us, triton_kernels 175 us.  gemm2 MMA loop on
#: sm_90a (python -m fp4moe_diag.profiling.sass, triton 3.6.0): sw 6.0 instructions per weight (m16n128: 5.4),
#: x2 4.9 (4.3), ds 7.0, bits 14.2 -- sw issues more and still wins: wgmma is asynchronous, mma.sync is not.
SW_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 3, "sw"),
    (16, 128, 128, 4, 3, "sw"),
    (32, 64, 128, 4, 3, "sw"),
    (64, 128, 64, 4, 3, "sw"),
))
SW_DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 3, "sw", 2),
    (16, 64, 128, 4, 3, "sw", 4),
    (16, 128, 128, 4, 3, "sw", 2),
))


#: mode ``"ps"`` (label suffix ``-ps``; issue #16): swap-AB like sw, on the weights pre-shuffled once in ``prepare``
#: (:mod:`.ps_layout`: each thread's wgmma A fragment is 16 contiguous bytes, the codes bit-placed for a 15-instruction
#: upcast of 8 weights).  gemm2 MMA loop, sm_90a, triton 3.6.0: m16n128k128w4s4 3.5 instructions per weight, no
#: shared-memory shuffle of the weights.  BLOCK_N >= 64 rows (a wgmma M); BLOCK_K a multiple of 64.  H200 (s7c/s7d):
#: best at decode m16n128k128w4s3/s4 (-g2sk2 at T=16, m16n64k256w4s3-sk2 at T<=4), at T>=1024 m64n128k128w4s3.
PS_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 6, "ps"),
    (16, 128, 64, 4, 6, "ps"),
    (16, 128, 128, 4, 3, "ps"),
    (16, 128, 128, 4, 4, "ps"),
    (32, 128, 128, 4, 3, "ps"),
    (64, 64, 64, 4, 5, "ps"),
    (64, 64, 128, 4, 4, "ps"),
    (64, 128, 64, 4, 4, "ps"),
    (64, 128, 128, 4, 3, "ps"),
    (128, 64, 64, 4, 3, "ps"),
    (128, 64, 64, 4, 4, "ps"),
    (256, 64, 64, 4, 3, "ps"),
    (128, 128, 128, 8, 3, "ps"),
    (128, 128, 64, 8, 3, "ps"),
    (128, 128, 64, 8, 4, "ps"),
    (64, 128, 64, 8, 4, "ps"),
)) + tuple(KernelConfig(*c, "ps", block_n2=256) for c in (
    (128, 128, 128, 8, 3),
    (128, 128, 64, 8, 3),
))
# Registers per thread (cuobjdump -res-usage, sm_90a): m16n128k128w4s3 gemm1 168 / gemm2 123 (3 / 4 CTAs per SM),
# m64n128k128w4s3 255 / 226 (2 / 2), every 8-warp tile 1 CTA per SM.  The 8-warp tiles were slow until session 9
# (s7-ps, s9a: m128n128k64w8s3 2954 us against 2127 for m64n128k128w4s3 at 20b EP1 T=4096) because their scale bytes,
# under 4 per thread, were read by a synchronous load in the K loop; loaded as words (configs.ps_scale_words) they are
# the prefill winners: s9d, 20b EP1 T=4096 m128n128k64w8s3-ps-g2n256 1904 us, T=16384 6973 (4-warp best 2092 / 8106;
# triton_kernels 1782 / 6564); -g2n256 runs gemm2 on 256 weight rows per program, as triton_kernels does (gemm2 625
# against 719 us).  (128, 128, 64, 4), (128, 256, 64, 8) and (256, 128, 64, 8) spill gemm1's two accumulators to local
# memory: not offered; m64n128k64w4s5 (2531 us) and m64n256k64w8s3 (3204, before the word load) dropped in s9a.
PS_DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c) for c in (
    (16, 64, 128, 4, 6, "ps", 2),
    (16, 64, 128, 4, 6, "ps", 4),
    (16, 128, 64, 4, 6, "ps", 2),
    (16, 128, 128, 4, 3, "ps", 2),
    (16, 64, 256, 4, 3, "ps", 2),
    (16, 64, 256, 4, 3, "ps", 4),
    (16, 128, 128, 4, 3, "ps", 1, 2),
    (16, 128, 128, 4, 3, "ps", 1, 3),
))
# "-g2skN": gemm2 alone split N ways.  gemm1's split costs a partial-sum round trip and a finalize kernel, gemm2's
# planes are summed by the top-k reduction that runs anyway; m16n128k128w4s3 puts gemm2's 768 programs (20b EP1
# T=64) on 528 slots (4 per SM by registers): 1.45 waves, 2.9 with -g2sk2.

#: mode ps with programmatic dependent launch (``pdl``; GPU only, sm_90+; offered at decode, :func:`decode_sized`):
#: the best decode ps tactics of s7c with -pdl.  At decode a call is three short kernels (20b EP1
#: T=64: gemm1 104 us, gemm2 55 us, top-k sum 3.5 us and ~2 us of gaps, Nsight Compute s7-profile); PDL takes back
#: the launch gaps.  H200, data/runs/2026-12-04-nvidia-h200-s8-triton (CUDA graphs, L2 flushed, the same tactic
#: without PDL in the same run): 20b EP1 T=1 38.4 -> 37.1 us (m16n64k256w4s3-ps-sk2), T=16 159.2 -> 157.6, T=64
#: 165.6 -> 163.8, 120b EP4 T=64 141.0 -> 140.1; at T=4096 m64n128k128w4s3 2148 -> 2164 (not offered there).
#: ``-pdlpf`` (pdl=2: gemm2 also prefetches 32 KB of its first weight chunks into L2 before its wait) was slower in
#: the same run at every shape (T=64 164.4, T=16 160.3, T=4096 2209 us): not offered, kept for that run's labels.
#: Its SASS says why in part: the bulk prefetch (UBLKPF) takes warp-uniform operands, so per-thread addresses made
#: ptxas loop it over up to 32 addresses per warp.  ``-pdlpfe`` (pdl=3: one evict_last bulk prefetch per slab from
#: one thread, 2 UBLKPF per warp) was measured in s9a: within noise of -pdl (see below): not offered.
PS_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(KernelConfig(*c, pdl=1) for c in (
    (16, 128, 128, 4, 3, "ps"),
    (16, 128, 128, 4, 4, "ps"),
    (16, 128, 128, 4, 3, "ps", 1, 2),
    (16, 64, 256, 4, 3, "ps", 2),
    (16, 64, 256, 4, 3, "ps", 4),
))
#: ``-fs`` (fused top-k sum / split-K finalize, :data:`FUSED_LABEL`) variants of the winners above: two kernels
#: per call at decode instead of three or four.  H200 (s10e): correct; faster at the smallest calls, slower from T=16.
PS_PDL_CONFIGS += tuple(KernelConfig(*c, pdl=1, fused=True) for c in (
    (16, 64, 256, 4, 3, "ps", 2),
    (16, 64, 256, 4, 3, "ps", 4),
    (16, 128, 128, 4, 3, "ps"),
    (16, 128, 128, 4, 4, "ps"),
    (16, 128, 128, 4, 3, "ps", 1, 2),
))
# Not offered (s9a): -pdlpfe level with -pdl (120b EP4 T=64 140.1 / 140.6 us); split-K 8 slower at every decode shape.


_LABEL = re.compile(r"^m(?P<m>\d+)n(?P<n>\d+)k(?P<k>\d+)w(?P<w>\d+)s(?P<s>\d+)"
                    r"(?:-(?P<mode>ds|x2|sw|f8|p8)|-(?P<ps>ps)(?P<gu>-gu)?(?P<tm>-tm)?(?P<pk>-pk)?(?:-u(?P<u>\d+))?)?"
                    r"(?:-sk(?P<sk>\d+))?(?:-g2sk(?P<g2sk>\d+))?(?:-g2n(?P<g2n>\d+))?(?:-g2s(?P<g2s>\d+))?"
                    r"(?:-t(?P<t>\d+)(?P<tf>f)?)?(?P<pt>-ptf|-pt)?"
                    r"(?P<pdl>-pdl(?:pfe|pf|w|tt|t)?)?(?P<fs>-fs)?(?:-r(?P<r>\d+))?(?:~(?P<ab>[a-z]+))?$")


def parse_config(cfg: Any) -> KernelConfig:
    """A :class:`KernelConfig`, its label (``m16n64k128w4s3-ds-sk2``) or a legacy tuple id (committed runs:
    a 5-tuple, a 6-tuple ending "ds", or ``(..., mode, split_k)``) -> :class:`KernelConfig`."""
    if isinstance(cfg, KernelConfig):
        return cfg
    if isinstance(cfg, str):
        m = _LABEL.match(cfg)
        if m is None:
            raise ValueError(f"tactic: expected a label like m16n64k128w4s3[-ds|-x2|-sw|-ps[-gu][-tm][-pk][-uN]|-f8"
                             f"|-p8][-skN][-g2skN][-g2nN][-g2sN][-tN[f]][-pt|-ptf][-pdl|-pdlpf|-pdlpfe|-pdlw|-pdlt"
                             f"|-pdltt][-fs][-rN][~nodeq|~load|~seq], got {cfg!r}")
        nums = [int(m[g]) for g in "mnkws"]
        pdl = {v: k for k, v in PDL_LABELS.items()}[m["pdl"] or ""]
        return KernelConfig(*nums, mode=m["mode"] or m["ps"] or "bits", split_k=int(m["sk"] or 1),
                            split_k2=int(m["g2sk"] or 0), pdl=pdl, block_n2=int(m["g2n"] or 0),
                            num_stages2=int(m["g2s"] or 0),
                            gate_up=m["gu"] is not None, fused=m["fs"] is not None, tail_m=int(m["t"] or 0),
                            tail_fused=m["tf"] is not None,
                            ablate=m["ab"] or "", tile_major=m["tm"] is not None,
                            persist={v: k for k, v in PERSIST_LABELS.items()}[m["pt"] or ""], peel=m["pk"] is not None,
                            reg_cap=int(m["r"] or 0), unroll=int(m["u"] or 0))
    if not isinstance(cfg, (tuple, list)):
        raise ValueError(f"tactic: expected a KernelConfig, a label or a tuple, got {type(cfg).__name__}")
    cfg = tuple(cfg)
    if len(cfg) not in (5, 6, 7) or not all(isinstance(v, int) and v > 0 for v in cfg[:5]):
        raise ValueError(f"tactic: expected (block_m, block_n, block_k, num_warps, num_stages[, mode[, split_k]]) "
                         f"with positive ints, got {cfg!r}")
    mode = cfg[5] if len(cfg) > 5 else "bits"
    split = cfg[6] if len(cfg) > 6 else 1
    return KernelConfig(*cfg[:5], mode=mode, split_k=split)

