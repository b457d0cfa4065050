"""Tile arithmetic of our Triton kernels that needs no tactic object: the ps kernels' grid order, scale-load width and
gemm1 order, the split-K arithmetic (``EVEN_K``, K per split, whether a split is empty), which cases are
decode-sized and how many programs an SM holds (:func:`residency`).  Imports nothing; :mod:`.configs` re-exports
it."""

from __future__ import annotations

from typing import Any, Optional

#: the most (token, expert) pairs a rank expects for the decode-only tactics to be offered (:func:`decode_sized`)
DECODE_MAX_PAIRS = 256


def expected_local_pairs(case: Any) -> float:
    """The (token, expert) pairs a rank of ``case`` (a MoECase) expects under even routing: ``T * top_k`` times the
    share of the experts it holds (all of them at EP 1)."""
    return case.num_tokens * case.top_k * case.local_num_experts / case.num_experts


def decode_sized(case: Any) -> bool:
    """Whether the decode-only tactics are offered: a rank expects at most DECODE_MAX_PAIRS pairs.  The pairs of this
    rank, not of the whole call: 120b EP4 T=256 (1024 pairs, 256 on a rank) streams its weights like 20b EP1 T=64
    (256 pairs), where the decode tiles win."""
    return expected_local_pairs(case) <= DECODE_MAX_PAIRS


def ps_n_fastest(block_m: int) -> bool:
    """Grid order of the ps kernels: an M block's N tiles side by side from BLOCK_M 32 up (prefill: its activations
    come from DRAM once), M blocks fastest below (decode: many experts streamed at once); :mod:`._kernels_ps`."""
    return block_m >= 32


def ps_scale_words(block_n: int, block_k: int, num_warps: int) -> bool:
    """Whether the ps kernels load a tile's scale bytes as 32-bit words (:func:`._kernels_ps_tile._ps_scale_bytes`):
    when the tile has fewer than 4 scale bytes per thread (``BLOCK_N / 16`` slabs x ``BLOCK_K / 64`` chunks x 32 bytes),
    which as bytes Triton reads with a synchronous load inside the K loop instead of cp.async (every 8-warp tile
    offered).  Above that, bytes: the byte split of the words costs shifts that the byte load does not."""
    return (block_n // 16) * (block_k // 64) * 32 < 4 * 32 * num_warps


def ps_tiles_first(block_m: int, block_n: int, block_k: int, num_warps: int) -> bool:
    """Whether the ps gemm1 (two weight tiles per K step, :mod:`._kernels_ps`) upcasts both tiles before its two
    dots: when a tile is at most 32 bf16 values (16 registers) per thread and the two fp32 accumulators at most 64
    registers per thread.  H200 (s12c, A/B/A/B in four processes, the commit before): m64n128k64w8s4 gemm1 2.6-3.3 %
    faster at four shapes, 0.7 % at the fifth (120b EP4 T=1024 172 -> 166 us); m128n128k64w8s3 (128 accumulator
    registers, 255 in all) 1.0-1.5 % slower;
    at BLOCK_K 128 with 4 warps ptxas spills (m64n128k128w4s3 gemm1: 168 bytes of stack, sm_90a)."""
    threads = 32 * num_warps
    return block_n * block_k <= 32 * threads and 2 * block_m * block_n <= 64 * threads


def even_k(k: int, block_k: int, split_k: int) -> bool:
    """The kernels' ``EVEN_K``: every split is whole ``block_k`` steps, so the K loop needs no masks."""
    return k % (block_k * split_k) == 0


def k_split(k: int, block_k: int, split_k: int) -> int:
    """K elements per split: a whole number of ``block_k`` steps (the last split may be shorter)."""
    per = -(-k // split_k)
    return -(-per // block_k) * block_k


def k_main(k: int, block_k: int, split_k: int) -> int:
    """The K steps (a multiple of ``block_k``) that lie inside K in every one of ``split_k`` splits of ``k``: the
    first ones of a split, which a ``-pk`` kernel runs without K masks (the rest of the split's ``k_split`` masked)."""
    per = k_split(k, block_k, split_k)
    return min(per, k - (split_k - 1) * per) // block_k * block_k


def split_k_fits(k: int, block_k: int, split_k: int) -> bool:
    """Whether ``split_k`` splits of ``k`` in ``block_k`` steps leave no split empty."""
    return split_k >= 1 and k_split(k, block_k, split_k) * (split_k - 1) < k


#: per SM of compute capability 9.0 (Hopper; 10.0 has the same): the register file, shared memory (228 KB; 1 KB of
#: it reserved per block), resident warps and blocks; registers are allocated per warp in units of 256 (8 per thread)
SM90_LIMITS = dict(registers=65536, shared_bytes=233472, reserved_per_block=1024, warps=64, blocks=32)


def residency(registers: int, shared_bytes: int, num_warps: int, limits: Optional[dict] = None) -> int:
    """Programs (CTAs) of ``num_warps`` warps one SM holds at once with ``registers`` per thread and ``shared_bytes``
    of shared memory per program: the least of what the register file, shared memory and the warp and block limits
    allow (CUDA's occupancy rules at sm_90's granularities; ``limits``: :data:`SM90_LIMITS`' keys, those of the
    device at hand; ValueError on non-positive sizes)."""
    if registers < 1 or registers > 255 or shared_bytes < 0 or num_warps < 1:
        raise ValueError(f"residency: expected 1..255 registers, >= 0 shared bytes and >= 1 warps, got {registers}, "
                         f"{shared_bytes}, {num_warps}")
    lim = {**SM90_LIMITS, **(limits or {})}
    by_smem = lim["shared_bytes"] // (shared_bytes + lim["reserved_per_block"])
    return min(_by_registers(registers, num_warps, lim), by_smem, lim["warps"] // num_warps, lim["blocks"])


def _by_registers(registers: int, num_warps: int, lim: dict) -> int:
    """Programs of ``num_warps`` warps the register file ``lim["registers"]`` holds at ``registers`` a thread
    (allocated per warp in units of 256: 8 a thread)."""
    return lim["registers"] // (-(-registers // 8) * 8 * 32 * num_warps)


def residency_cap(registers: int, num_warps: int, limits: Optional[dict] = None, slack: int = 8) -> Optional[int]:
    """The register cap (``maxnreg``) at which an SM holds one more program of ``num_warps`` warps than with
    ``registers`` a thread, when that takes at most ``slack`` registers away (one allocation granule: nothing to
    spill, or almost); None when it would take more, or when registers are not what limits the residency."""
    lim = {**SM90_LIMITS, **(limits or {})}
    now = _by_registers(registers, num_warps, lim)
    cap = lim["registers"] // ((now + 1) * 32 * num_warps) // 8 * 8
    return cap if 0 < registers - cap <= slack and now + 1 <= lim["warps"] // num_warps else None
