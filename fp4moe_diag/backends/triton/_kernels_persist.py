"""Persistent tile loops of the ps kernels (tactic suffixes ``-pt`` / ``-ptf``, :mod:`.configs_persist`).

A ``-pt`` or ``-ptf`` gemm1 / gemm2 launches as many programs as the SMs hold at once (the launcher reads the
build's registers and shared memory: :func:`.launch_bind._persistent`), and each program runs the tiles ``pid, pid +
programs, ...`` of the same ``(M blocks, N tiles, splits)`` order the plain grid has (:func:`_tile_ids`). ``-pt``
pipelines each tile's K loop as the plain kernel does; ``-ptf``'s loop is ``tl.range(..., flatten=True)``: Triton
fuses the tile loop with the K loop into one, so the cp.async pipeline runs across tiles and the next tile's first
weight chunks are in flight while this tile stores its result. What they take away is what each plain program pays
alone: its launch, the wait for its routing tables and first weights (the serial memory latencies of a short
program, session 18's SASS) and, ``-ptf``, the pipeline's fill per tile.

SASS (sm_90a, triton 3.6.0, K = 3072, m16n128k128w4s3): ``-ptf``'s one loop holds each tile's set-up and store under
predicates, and waits for its wgmmas every step: gemm2 6.5 instructions per weight against the plain loop's 3.5, the
same 7 cp.async a step; ``-pt`` keeps the plain K loop but one program an SM fewer (gemm1 216 registers, gemm2
152).  Measured slower than the plain grid on the H100 (``-pt`` by a median 2.5 %, ``-ptf`` 9.4 %;
:mod:`.configs_persist`): not offered."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile_ids(t, m_blocks, n_tiles, N_FASTEST: tl.constexpr):
    """(M block, N tile, split) of tile ``t`` in the plain grid's order: ``(M blocks, N tiles, splits)``, or with
    ``N_FASTEST`` ``(N tiles, M blocks, splits)`` (the first axis fastest, as the hardware hands out a grid)."""
    if N_FASTEST:
        return (t // n_tiles) % m_blocks, t % n_tiles, t // (n_tiles * m_blocks)
    else:
        return t % m_blocks, (t // m_blocks) % n_tiles, t // (m_blocks * n_tiles)
