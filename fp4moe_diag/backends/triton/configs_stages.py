"""The ``-g2sN`` tactics of mode ps (:class:`.configs.KernelConfig` ``num_stages2``): the decode winners with gemm2's
cp.async pipeline deeper than gemm1's.

Why: Nsight Compute of the H100's 20b EP1 T=64 winner (data/runs/2026-12-05-nvidia-h100-s20c) puts gemm2 at 77 % of
DRAM peak against gemm1's 82 %, with long-scoreboard stalls 31 % against 22 %: gemm2's programs (one 128 x 128 weight
tile, 8 KB a K step, 3 stages: two steps in flight) hold half the bytes in flight of gemm1's (two tiles a step).  One
more or two more stages cost gemm2 shared memory only (sm_90a, Triton 3.6.0, K = 3072, ``python -m
fp4moe_diag.profiling.sass``: m16n128k128w4s3-ps-g2sk2's gemm2 123 registers and 4 programs an SM at 3, 4 and 5
stages, 30 / 42 / 55 KB), so an SM keeps its four programs with up to twice the bytes in flight.

Measured (H100, data/runs/2026-12-05-nvidia-h100-s20d: the 9 twins below beside their 3-stage twins at 20b EP1, 20b
EP2 and 120b EP4, T = 1, 4, 16, 64, one sweep, every tactic timed in full, all correct; ``python -m fp4moe_diag twins
RUN --variant=-g2s4``): ``-g2s4`` 72 pairs, 5 faster, 50 level, 17 slower, median 1.014; ``-g2s5`` 36 pairs, 2
faster, 21 level, 13 slower, median 1.012.  The best tactic of a shape moves by at most 1.5 % either way (20b EP1 T=64
193.3 us with ``-g2s5`` against 194.7, T=1 43.3 against 44.0), within the samples' spread.  Bytes in flight are not
what holds gemm2 back on the H100.  Not offered (:meth:`.backend.TritonMXFP4Backend.tactics`); kept for that run's
labels and run by label.  Imports nothing of ours but :mod:`.configs`, no triton."""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig, parse_config

#: decode, -pdl: the winners of s15 / s17-s20 with gemm2 at 4 and 5 stages (4 only where 5 would cost a program an
#: SM: the 64-row k256 tiles, 42 KB at 3 stages); s20d timed them, not offered since
PS_G2S_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = tuple(
    dataclasses.replace(parse_config(lab), num_stages2=s)
    for lab, stages in (("m16n128k128w4s3-ps-g2sk2-pdl", (4, 5)), ("m16n128k128w4s3-ps-pdl", (4, 5)),
                        ("m16n128k128w4s3-ps-pk-g2sk2-pdl", (4, 5)), ("m16n64k256w4s3-ps-sk2-pdl", (4,)),
                        ("m16n64k256w4s3-ps-sk2-pdl-fs", (4,)), ("m16n64k256w4s3-ps-sk4-pdl-fs", (4,)))
    for s in stages)
