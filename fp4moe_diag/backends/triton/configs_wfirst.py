"""The ``-pdlw`` tactics of mode ps (:class:`.configs.KernelConfig` ``pdl`` 4): the decode winners with programmatic
dependent launch whose gemm2 loads the routing tables and its first K step's weight and scale bytes **before** its
grid-dependency wait (:func:`._kernels_ps._moe_mxfp4_gemm2_ps_kernel`, ``W_FIRST``).

Why (docs/goals-h100-s17.md, the SASS of a T <= 4 program): a decode program pays about eight serial memory
latencies for 3 K steps of work, and with ``-pdl`` gemm2's programs made resident in gemm1's tail sit idle at their
wait, although nothing they read but the activations comes from gemm1.  Loading the tables and the first weights
before the wait takes two of those latencies out of gemm2 and puts its first weight bytes in flight while gemm1's
last wave leaves DRAM idle.  gemm1 keeps ``-pdl``'s order: its routing tables could come from a kernel of the same
call in a serving engine, so it reads nothing before its wait.  Offered on a GPU only, as the ``-pdl`` ones (at
decode, :func:`.tiling.decode_sized`); not timed yet.  Imports nothing of ours but :mod:`.configs`, no triton."""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig, parse_config

#: the decode winners of the H200 (s15) and H100 (s17, s18) headlines, -pdl -> -pdlw (with and without -fs, -tm)
PS_WFIRST_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(parse_config(lab), pdl=4) for lab in (
    "m16n64k256w4s3-ps-sk2-pdl",
    "m16n64k256w4s3-ps-sk2-pdl-fs",
    "m16n64k256w4s3-ps-sk4-pdl",
    "m16n64k256w4s3-ps-sk4-pdl-fs",
    "m16n128k128w4s3-ps-pdl",
    "m16n128k128w4s3-ps-g2sk2-pdl",
    "m16n128k256w8s3-ps-sk2-pdl",
))
#: the -tm ones of PS_TM_DECODE_PDL_CONFIGS (winners on the H100, s17, s18): offered where the tile-major copy fits (configs_tm.tm_refusal)
PS_TM_WFIRST_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(parse_config(lab), pdl=4) for lab in (
    "m16n64k256w4s3-ps-tm-sk2-pdl",
    "m16n128k128w4s3-ps-tm-pdl",
    "m16n128k128w4s3-ps-tm-g2sk2-pdl",
))
