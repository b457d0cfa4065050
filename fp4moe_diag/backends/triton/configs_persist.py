"""The ``-pt`` / ``-ptf`` tactics of mode ps (:class:`.configs.KernelConfig` ``persist``): the decode winners with
persistent gemm1 / gemm2 grids (:mod:`._kernels_persist`): as many programs as an SM holds, each looping over tiles
(``-ptf``: in one flattened loop, so that the cp.async pipeline streams the next tile's weights while a tile ends).

Why: at decode the ablations (H100, data/runs/2026-12-05-nvidia-h100-s17a / -s17b) put the weight loads alone of the
winners' grids at 82 % of the read ceiling (20b EP1 T=64) and 47-70 % at T <= 4, against the 95-100 % a streaming
kernel reaches: each short program waits for its routing tables and first weights alone, and a grid of 1.5-3 waves
ends in a partial one.

SASS (sm_90a, triton 3.6.0, K = 3072, the suite's gpt-oss as vLLM pads it; ``python -m fp4moe_diag.profiling.sass``):
``-pt``'s K loop is the plain one (gemm2 of m16n128k128w4s3 427 instructions against 445) but it holds more registers:
gemm1 216 against 168 (2 programs an SM, not 3), gemm2 152 against 123 (3, not 4); ``-ptf``'s one loop carries each
tile's set-up and store under predicates and waits for its wgmmas every step: 6.5 instructions a weight against 3.5
(gemm2; gemm1 5.8 against 3.0), with 128 / 121 registers.  At 3.1 TB/s an H100 SM takes about 24 weights a cycle: the
plain loop issues at most 35 (4 warp instructions a cycle), ``-ptf``'s about 19, so ``-ptf`` is issue-bound where the
plain loop is not.
Measured (H100, data/runs/2026-12-05-nvidia-h100-s20a: the 20 twins below against their plain twins at 20b EP1 and
120b EP4, T = 1, 4, 16, 64, one sweep, every tactic timed in full, all correct; ``python -m fp4moe_diag twins RUN
--variant=-pt``): ``-pt`` 80 pairs, 4 faster, 43 level, 33 slower, median ratio 1.025 (1-16 % slower at T = 4..16,
faster by 4-8 % only where the plain twin is far from the best (m16n128k128 -pdl at T <= 4, 19-34 % behind the
shape's best), level to 2 % faster with m16n128k128 at 20b T=64); ``-ptf`` 80 pairs, none faster, 64 slower, median
1.094 (up to 1.66x at T <= 4), as its instruction count said.  No shape's best tactic is a persistent one.  Why
``-pt`` loses: its programs take their tiles in a fixed stride, where the plain grid hands the next tile to whichever
SM frees first (expert blocks of uneven rows, split K steps), and its builds hold one program an SM fewer.  Not
offered (:meth:`.backend.TritonMXFP4Backend.tactics`); kept for that run's labels and run by label.  Imports nothing
of ours but :mod:`.configs`, no triton."""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig, parse_config

_BASES = ("m16n64k256w4s3-ps-sk2", "m16n128k128w4s3-ps", "m16n128k128w4s3-ps-g2sk2", "m16n128k128w4s4-ps")
#: decode: the s15 / s17-s19 winners at T = 1..64 and a deeper pipeline, each as -pt and -ptf (s20a timed them beside
#: their plain twins; not offered since)
PS_PT_DECODE_CONFIGS: tuple[KernelConfig, ...] = tuple(dataclasses.replace(parse_config(lab), persist=p)
                                                       for p in (1, 2) for lab in _BASES)
#: the same with programmatic dependent launch (compiled only), and the EP2 winners at T <= 4
PS_PT_DECODE_PDL_CONFIGS: tuple[KernelConfig, ...] = (
    tuple(dataclasses.replace(c, pdl=1) for c in PS_PT_DECODE_CONFIGS)
    + tuple(dataclasses.replace(parse_config(lab), persist=p, pdl=1)
            for p in (1, 2) for lab in ("m16n64k256w4s3-ps-sk4", "m16n128k256w8s3-ps-sk2")))
