"""The checks of :class:`.configs.KernelConfig`'s mode-ps options (``-g2sN``, ``-tN``, ``~ablation``, ``-tm``,
``-gu``, ``-pt`` / ``-ptf``, ``-pk``, ``-rN``, ``-uN``), the ablations' names and the persistent loops' labels.  Imports
nothing of ours, no triton."""

from __future__ import annotations

from typing import Any

#: KernelConfig.ablate -> the kernels' ABLATE constexpr (label suffix ``~name``, last): a part of the K loop taken out,
#: to be timed beside the tactic (profiling.ablate; outputs wrong by design, never offered; _kernels_ablate.py)
ABLATIONS = {"": 0, "nodeq": 1, "load": 2, "seq": 3}
#: KernelConfig.persist -> label suffix (:mod:`.configs_persist`): persistent tile loops, the K loop pipelined per tile
#: (``-pt``) or the two loops flattened into one pipelined across tiles (``-ptf``)
PERSIST_LABELS = {0: "", 1: "-pt", 2: "-ptf"}


def _check_tail(kc: Any) -> None:
    t = kc.tail_m
    if t and (isinstance(t, bool) or not isinstance(t, int) or kc.mode != "ps" or t & (t - 1) or not 16 <= t
              < kc.block_m or kc.split_k > 1 or kc.split_k2 or kc.pdl not in (0, 1, 5, 6) or kc.fused):
        raise ValueError(f"tactic: tail_m (-tN, blocks of N rows for each expert's last pairs) is a mode ps option "
                         f"without split-K, -pdlpf(e), -pdlw or -fs, a power of two from 16 below "
                         f"block_m={kc.block_m}; got tail_m={t!r} in {kc.mode!r}")
    f = kc.tail_fused
    if not isinstance(f, bool) or (f and (not t or not kc.gate_up or kc.persist or kc.peel or kc.unroll or kc.reg_cap
                                          or kc.ablate or kc.num_warps < 8)):
        raise ValueError(f"tactic: tail_fused (-tNf: each expert's tail in its last block's program, _kernels_over) "
                         f"needs -tN and -gu, 8 or 16 warps, no -pt / -pk / -uN / -rN / ablation; got "
                         f"tail_fused={f!r} in {kc.mode!r}")
    if kc.pdl in (5, 6) and not t:
        raise ValueError(f"tactic: -pdlt / -pdltt (tail launches working before their grid-dependency wait) need "
                         f"tail blocks (-tN); got {kc.label if kc.mode == 'ps' else kc.mode!r}")


def _check_ablation(kc: Any) -> None:
    if kc.ablate not in ABLATIONS or (kc.ablate and kc.mode != "ps"):
        raise ValueError(f"tactic: ablate is a mode ps option, one of {sorted(a for a in ABLATIONS if a)}; got "
                         f"{kc.ablate!r} in mode {kc.mode!r}")
    if kc.pdl == 4 and kc.ablate in ("load", "seq"):  # their loop reads every K step, the first one too
        raise ValueError(f"tactic: ~{kc.ablate} of a -pdlw tactic would read its first K step twice; ablate the "
                         f"-pdl twin")
    if kc.tile_major and kc.ablate in ("load", "seq"):  # their loads take the ps addresses, not -tm's
        raise ValueError(f"tactic: ~{kc.ablate} reads the ps layout's tiles, not the tile-major copy; ablate the "
                         f"ps twin (its ~seq reads each program's bytes as -tm does)")


def _check_persist(kc: Any) -> None:
    """``-pt`` / ``-ptf`` (:mod:`.configs_persist`): the plain ps kernels' tile loop; not the ``-gu`` gemm1, the fused
    ends, the tail launches, gemm2's prefetch or first-weights variants (``pdl`` 2-4), nor an ablation."""
    if kc.persist not in PERSIST_LABELS or isinstance(kc.persist, bool):
        raise ValueError(f"tactic: persist must be one of {sorted(PERSIST_LABELS)} (off, -pt, -ptf), got "
                         f"{kc.persist!r}")
    if kc.persist and (kc.mode != "ps" or kc.gate_up or kc.fused or kc.tail_m or kc.pdl > 1 or kc.ablate):
        raise ValueError(f"tactic: persist (-pt / -ptf, persistent tile loops) is a mode ps option without -gu, -fs, "
                         f"-tN, -pdlpf / -pdlpfe / -pdlw or an ablation; got "
                         f"{kc.label if kc.mode == 'ps' else kc.mode!r}")


def _check_stages2(kc: Any) -> None:
    """``-g2sN`` (:mod:`.configs_stages`): gemm2's own pipeline depth, a mode ps option (equal to ``num_stages``,
    :class:`.configs.KernelConfig` has already dropped it: one id per tactic)."""
    s2 = kc.num_stages2
    if not isinstance(s2, int) or isinstance(s2, bool) or s2 < 0:
        raise ValueError(f"tactic: num_stages2 must be an int >= 0 (0: as num_stages), got {s2!r}")
    if s2 and kc.mode != "ps":
        raise ValueError(f"tactic: num_stages2 (-g2sN, gemm2's own pipeline depth) is a mode ps option, got mode "
                         f"{kc.mode!r}")


def check_ps_options(kc: Any) -> None:
    """ValueError naming the option unless ``kc``'s mode-ps options are valid and fit together."""
    _check_stages2(kc)
    _check_tail(kc)
    _check_ablation(kc)
    if not isinstance(kc.tile_major, bool) or (kc.tile_major and kc.mode != "ps"):
        raise ValueError(f"tactic: tile_major (-tm) is a mode ps option, a bool; got {kc.tile_major!r} in "
                         f"{kc.mode!r}")
    if not isinstance(kc.gate_up, bool) or (kc.gate_up and kc.mode != "ps"):
        raise ValueError(f"tactic: gate_up (-gu) is a mode ps option, a bool; got {kc.gate_up!r} in {kc.mode!r}")
    _check_persist(kc)
    if not isinstance(kc.peel, bool) or (kc.peel and (kc.mode != "ps" or kc.gate_up or kc.persist or kc.ablate
                                                      or kc.pdl == 4)):
        raise ValueError(f"tactic: peel (-pk, whole K steps without K masks) is a mode ps option, a bool, without -gu, "
                         f"-pt / -ptf, -pdlw or an ablation; got {kc.peel!r} in "
                         f"{kc.label if kc.mode == 'ps' and isinstance(kc.peel, bool) else kc.mode!r}")
    _check_reg_cap(kc)
    _check_unroll(kc)


def _check_reg_cap(kc: Any) -> None:
    """``-rN`` (:mod:`.configs_regcap`): a register cap, a multiple of 8 from 24 to 256 (ptxas' range, allocated in
    granules of 8), in mode ps; not with ``-pk`` or an ablation, which set their own caps (``launch_bind``)."""
    r = kc.reg_cap
    if isinstance(r, bool) or not isinstance(r, int) or (r and (kc.mode != "ps" or r % 8 or not 24 <= r <= 256
                                                               or kc.peel or kc.ablate)):
        raise ValueError(f"tactic: reg_cap (-rN, at most N registers a thread) is a mode ps option, a multiple of 8 "
                         f"from 24 to 256, without -pk or an ablation; got {r!r} in "
                         f"{kc.label if kc.mode == 'ps' and type(r) is int else kc.mode!r}")


def _check_unroll(kc: Any) -> None:
    """``-uN`` (:mod:`.configs_unroll`): both K loops unrolled N times (2 to 8), with the ``-gu`` gemm1 of mode ps; not
    with an ablation (its loop is :mod:`._kernels_ablate`'s, not unrolled)."""
    u = kc.unroll
    if isinstance(u, bool) or not isinstance(u, int) or (u and (not 2 <= u <= 8 or kc.mode != "ps" or not kc.gate_up
                                                               or kc.ablate)):
        raise ValueError(f"tactic: unroll (-uN, both K loops unrolled N times) is an option of the -gu tactics of mode "
                         f"ps, an int from 2 to 8, without an ablation; got {u!r} in "
                         f"{kc.label if kc.mode == 'ps' and type(u) is int else kc.mode!r}")
