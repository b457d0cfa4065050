"""Binding one kernel launch (:mod:`.launch`): ``kernel[grid]`` with its arguments as a bare callable, with the
register caps some tactics build with (``~nodeq``, ``-pdlw``, ``-pk``) and the persistent grids of ``-pt`` / ``-ptf``
(:mod:`._kernels_persist`: as many programs as the SMs hold with the build's registers and shared memory)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from ._kernels import INTERPRETED
from .tiling import residency, residency_cap


def _bound(fn: Any, grid: tuple, *args: Any, **kwargs: Any) -> Callable[[], None]:
    """``fn[grid](*args, **kwargs)``, bound.  A compiled ``~nodeq`` ablation (ABLATE 1) is built with at most the
    registers of the tactic it ablates (``maxnreg``, read from that tactic's build, compiled here and not run): the
    same programs per SM, so that the two differ by the decode alone (uncapped, m16n128k128w4s3-ps~nodeq's gemm1
    takes 192 registers against the tactic's 168: 2 programs per SM, not 3; sm_90a, triton 3.6.0).  So is a ``-pdlw``
    gemm2 (``W_FIRST``) with those of its ``-pdl`` twin (uncapped, m16n64k256w4s3-ps-sk2-pdlw's takes 136 against
    121: 3 programs per SM, not 4), so that the two differ by the order of the loads alone."""
    if (kwargs.get("ABLATE") == 1 or kwargs.get("W_FIRST")) and not INTERPRETED:
        base = _loaded(fn, grid, *args, **{**kwargs, **{k: 0 for k in ("ABLATE", "W_FIRST") if k in kwargs}})
        kwargs = {**kwargs, "maxnreg": int(base.n_regs)}
    if kwargs.get("PEEL") and not INTERPRETED:  # -pk: capped where one granule buys one more program an SM
        cap = residency_cap(int(_loaded(fn, grid, *args, **kwargs).n_regs), kwargs["num_warps"])
        kwargs = {**kwargs, "maxnreg": cap} if cap else kwargs
    return functools.partial(fn[grid], *args, **kwargs)


def _loaded(fn: Any, grid: tuple, *args: Any, **kwargs: Any) -> Any:
    """``fn``'s build for these arguments, compiled (not run) and loaded, so that ``n_regs`` is the driver's count."""
    build = fn.warmup(*args, grid=grid, **kwargs)
    build._init_handles()
    return build


#: the programs of a ``-pt`` launch under the interpreter (no SMs there): fewer than the tiles of the tests' cases, so
#: that each program loops over several tiles, as on a GPU
INTERPRETED_PROGRAMS = 3


def _sm_limits(device: torch.device) -> tuple[int, dict]:
    """(SMs, :func:`.tiling.residency`'s limits) of a CUDA ``device``, from torch's device properties."""
    props = torch.cuda.get_device_properties(device)
    return props.multi_processor_count, dict(registers=props.regs_per_multiprocessor,
                                             shared_bytes=props.shared_memory_per_multiprocessor,
                                             warps=props.max_threads_per_multi_processor // 32)


def _persistent(fn: Any, grid: tuple, persist: int, *args: Any, **kwargs: Any) -> Callable[[], None]:
    """``fn`` bound as :func:`_bound` does, or with ``persist`` (1 ``-pt``, 2 ``-ptf``; ps only:
    :mod:`._kernels_persist`) on ``(programs,)``: as many programs as the SMs hold at once with this build's registers and shared memory (the
    build is compiled here, not run), at most one per tile, each looping over the tiles of ``grid``."""
    if not persist:
        return _bound(fn, grid, *args, **kwargs)
    tiles = grid[0] * grid[1] * grid[2]
    kwargs = {**kwargs, "PERSIST": persist, "m_blocks": grid[1] if kwargs["N_FASTEST"] else grid[0]}
    if INTERPRETED:  # the loop's bounds as constexprs: the interpreter of Triton 3.6 takes no run-time ones
        programs = INTERPRETED_PROGRAMS
        kwargs |= dict(TILES=tiles, PROGRAMS=programs)
    else:
        build = _loaded(fn, (1,), *args, **kwargs)
        sms, limits = _sm_limits(args[0].device)
        programs = sms * residency(int(build.n_regs), int(build.metadata.shared), kwargs["num_warps"], limits)
    return functools.partial(fn[(min(tiles, programs),)], *args, **kwargs)


def _persist_check(persist: int, ps: bool, **without: Any) -> None:
    """ValueError unless ``persist`` is 0, 1 or 2, not 0 only for the ps kernels and with none of ``without`` (the
    options the tile loop does not take: the fused ends, the ablations, gemm2's prefetch / first weights, -gu) set."""
    if persist not in (0, 1, 2) or isinstance(persist, bool) or (persist and not ps):
        raise ValueError(f"persist: expected 0 (off), 1 (-pt) or 2 (-ptf, flattened), not 0 for the pre-shuffled "
                         f"kernels (ps=True) only; got {persist!r} with ps={ps}")
    taken = sorted(k for k, v in without.items() if v)
    if persist and taken:
        raise ValueError(f"persist: the persistent tile loop (-pt) takes none of {', '.join(taken)}")
