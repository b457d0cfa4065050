"""The ``-tN`` tactics of mode ps (:class:`.configs.KernelConfig` ``tail_m``): each expert's last ``r = n mod block_m``
pairs, when ``0 < r <= N``, run as one block of N rows in a second gemm1 / gemm2 launch pair instead of a block of
``block_m`` rows that is mostly padding (:func:`.grouping.split_tail_pairs`; the backend's ``calls``).  Imports nothing
of ours but :mod:`.configs`, no triton.

32-row tails of the 16-warp ``-gu`` tile (session 33, ``configs_warps.PS_GU16_CONFIGS``, ``configs_tm``; their
``-pdl``, ``-pdlt`` and ``-pdltt`` twins follow).  Where a local expert gets about 128 pairs (120b EP4 T=4096, goal 4's
farthest shape: 98-153; 20b EP1 and EP2 T=1024) the 128-row tile's tail launches hold 0.247 / 0.266 / 0.314 padded
rows per routed pair with 64-row tails, half that with 32-row tails, its main launches the same rows
(``tests/test_triton_tail.py``, the cases' own routings).  At 120b EP4 T=4096 the two tail launches took 101 (gemm1)
and 65 us (gemm2) of a 591 us call (H200 ``-s29a``, Nsight Compute, the ``-pdl`` tile, each kernel alone).  At 20b
T >= 4096 fewer tails fit in 32 rows (EP1 T=4096: main launches 1.000 -> 1.008 rows per pair, tails 0.062 -> 0.029).
Timed on the H100 (session 34, ``docs/evidence-s34.md``, ``-pdltt``): 0.944x of the 64-row tails at 20b EP1 T=1024 and
120b EP4 T=4096, 0.891x at 20b EP2 T=1024 (``-s34a``); there the tail launches 83 / 54 us against 102 / 66, the main
launches level (``-s34b``).  1.04x at 20b EP2 T=4096 (5 experts' tails, each kernel alone faster) and 1.14x at 120b
EP4 T=1024 (experts of 33-64 pairs go back to 128-row blocks).

``-tNf`` (``tail_fused``, session 34, :mod:`._kernels_over`): the tail rows in the program of the expert's last block
instead, a second dot on the same upcast weight tile, one launch per GEMM (no tail launch, so no ``-pdlt`` /
``-pdltt`` twins).  H100 (``-s34g``): 0.909x / 0.956x / 0.929x / 0.917x of ``-t32`` at 20b EP1 / EP2 T=1024, EP2
T=4096 and 120b EP4 T=4096; ``defaults.py`` takes it up to 512 pairs per expert."""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig

#: the prefill winners of s12d with tail blocks of half their BLOCK_M, offered above the decode sizes.  Padding rows
#: per routed pair at the gpt-oss routings (simulated, router logits of the case's seed): 20b EP1 T=4096 1.141 in
#: blocks of 128, 1.281 of 256, 1.141 of 256 with 128-row tails, 1.07 of 128 with 64-row tails; 120b EP4 T=1024 1.39
#: in blocks of 128.  On the H200 (s12b) the 256-token -gu tile ran 8.5 % faster per padded product than the
#: two-dot m128 tile at 20b EP1 T=4096 and lost on its padding.  H200, s12e (every bf16 backend in the run): each the
#: fastest of ours somewhere -- the -gu tile with 128-row tails at 20b EP1 T=4096 (1952 -> 1812 us) / T=16384 and EP2
#: T=4096, the two-dot m128 tile with 64-row tails at 120b EP4 T=4096 (661 -> 594), 20b EP1 / EP2 T=1024 (655 -> 587),
#: m64n128k64w8s4 with 32-row tails at 120b EP4 T=1024 (265 -> 255; triton_kernels 260).  The tail launches cost where
#: they save little: 20b EP2 T=4096 m128 941 -> 954 us.
PS_TAIL_CONFIGS: tuple[KernelConfig, ...] = (
    KernelConfig(256, 64, 64, 8, 3, "ps", block_n2=128, gate_up=True, tail_m=128),
    KernelConfig(128, 128, 64, 8, 3, "ps", block_n2=256, tail_m=64),
    KernelConfig(64, 128, 64, 8, 4, "ps", tail_m=32),
)

#: the same with programmatic dependent launch (``-pdl``; GPU only): the five kernels of a call (gemm1, its tails,
#: gemm2, its tails, the top-k sum) chained, each waiting at its top for the one before
#: (:func:`._kernels_ps._pdl_enter`), so the next kernel's programs are resident when one ends.  s12e at 20b EP1
#: T=4096: the -t128 call's replay took 1812 us against 1784 us of kernel time; triton_kernels' three kernels 1769
#: against 1776.  H200, s12f / s12g (same run as without): 0.5-1 % faster at T <= 4096 (20b EP1 T=1024
#: m128n128k64w8s3-ps-g2n256-t64 586 -> 579 us), within the spread at T=16384.
PS_TAIL_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(c, pdl=1) for c in PS_TAIL_CONFIGS)


def pdlt_twins(configs: tuple[KernelConfig, ...]) -> tuple[KernelConfig, ...]:
    """The ``-pdlt`` twins (``pdl`` 5) of the ``-pdl`` tactics of ``configs`` with tail blocks: gemm1's tail launch
    runs its blocks as soon as it is resident, in the main gemm1 launch's last wave, and waits for that launch only
    before it exits (:func:`._kernels_ps._pdl_exit`), where ``-pdl`` has it wait first.  Why (session 28, H100
    ``-s28c``, Nsight Compute at 20b EP1 T=16384, each kernel alone): ours' main gemm1 and gemm2 launches ran 2.2 % and
    2.8 % faster than triton_kernels' two GEMMs (3926 / 4013 us, 1989 / 2046), the two 64-row tail launches after them
    (103 and 66 us) made the call level (6247 / 6220 us).  Only gemm1's tail can start early: it reads only the call's
    inputs; gemm2's tail reads gemm1's rows.  Timed (H100 ``-s28d``, against the ``-pdl`` twins, interleaved): 30
    pairs, 9 faster, 21 level, none slower, median 0.989; 20b EP2 T=4096 902 / 939 us, and against triton_kernels'
    winner in 30 alternating rounds 0.982, ahead (``-s28e``): goal 1's last H100 shape."""
    return _late_twins(configs, 5)


def pdltt_twins(configs: tuple[KernelConfig, ...]) -> tuple[KernelConfig, ...]:
    """The ``-pdltt`` twins (``pdl`` 6) of the ``-pdl`` tactics of ``configs`` with tail blocks: as ``-pdlt``, and
    gemm2's tail launch too works before its wait and waits before it exits.  Why (session 32, H100 ``-s32a``, Nsight
    Compute of the ``-pdlt`` tile, each kernel alone): gemm2's 64-row tail launch took 66 us at 120b EP4 T=4096 (of a
    584 us call) and 20b EP1 T=4096, 35-36 us at 20b EP2 T=4096 and T=16384, at 32-39 % SM throughput, after gemm2's
    main launch.  It may start early: it reads the intermediate rows of gemm1's tail launch, and it becomes resident
    only after every program of gemm2's main launch has passed its wait (which returns once both gemm1 launches have
    ended, their writes visible) and then let it launch; it reads those rows past L1 (``.cg``).  Its pairs are not
    the main launch's, so the two write disjoint rows; the top-k sum waits for it, and it for the main launch."""
    return _late_twins(configs, 6)


def _late_twins(configs: tuple[KernelConfig, ...], pdl: int) -> tuple[KernelConfig, ...]:
    """The twins with ``pdl`` (5: ``-pdlt``, 6: ``-pdltt``) of the ``-pdl`` tactics of ``configs`` with tail launches
    (not ``-tNf``: one launch per GEMM)."""
    return tuple(dataclasses.replace(c, pdl=pdl) for c in configs if c.tail_m and c.pdl == 1 and not c.tail_fused)


def launch_pdl(pdl: int, gemm: str, tail: bool, after_main: bool) -> int:
    """The ``PDL`` constexpr one launch of a ``pdl`` tactic gets (``gemm`` "gemm1" / "gemm2"; ``tail``: its tail-block
    launch; ``after_main``: a main launch with blocks runs before it, so it has a grid to end after): 5 (work before
    the wait, wait last: :func:`._kernels_ps._pdl_enter`) for gemm1's tail under ``-pdlt`` and ``-pdltt``, and for
    gemm2's under ``-pdltt``; 1 for every other launch of those two; ``pdl`` itself for the other modes."""
    if gemm not in ("gemm1", "gemm2"):
        raise ValueError(f"gemm: expected 'gemm1' or 'gemm2', got {gemm!r}")
    if pdl not in (5, 6):
        return pdl
    early = tail and after_main and (gemm == "gemm1" or pdl == 6)
    return 5 if early else 1
