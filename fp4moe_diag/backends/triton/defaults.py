"""The tactic our Triton backend runs with no tuning: on Hopper, the winners the H200 measured (one rule, session
34's, on the H100 alone); elsewhere the old heuristic (:func:`default_config`).  Imports nothing of ours but
:mod:`.configs` (and ``triton_release``), no triton.

``Backend.run`` without a tactic, a sweep's ``default`` row and a caller that does not tune get this tactic.  The old
heuristic (session 1, three shapes, before the pre-shuffled layout) was 1.5-2.5x slower than the best tactic at most
shapes (``speedup`` in every run since s2).  The rules below are the session-15 winners (H200, triton 3.6.0,
``data/runs/2026-12-05-nvidia-h200-s15b``..``d``, median of the three samples; 20b EP1 / EP2, 120b EP4): per regime of
``pairs = T * top_k`` and ``avg = pairs / num_experts`` the tactic with the smallest geometric mean of time over the
best across the regime's shapes, each rule's worst shape in its comment; a later session's rule says what measured
it.  Each rule names the programmatic-dependent-launch tactic first and its plain twin after it (``-pdl`` is offered
compiled only); the first one offered wins.  On a GPU that is not SM90 (the 16-warp and tail tiles were sized for the
H200's shared memory and registers), under the interpreter, or where the weights have no pre-shuffled layout, none is
offered or chosen and the old heuristic holds.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .configs import KernelConfig, parse_config
from .configs_regcap import triton_release

#: ptxas from 13.3 on (13.3 and 13.4 built here) serialises the ``-tNf`` kernels' wgmmas (``C7512 ... serialized due to
#: insufficient register resources``; 12.8-13.2 keep groups in flight: ``docs/evidence-s37.md``), which made them
#: 1.20-1.27x slower (Triton 3.9.0 with its 13.4, ``-s36a``): where the ptxas that builds them is one of them, no rule
#: takes a ``-tNf`` tile.  Triton 3.6 / 3.7 call 12.8 for sm_90 unless ``TRITON_PTXAS_PATH`` points elsewhere, as
#: images that pin the system CUDA's ptxas do; under 3.9 the backend builds them with the 12.9 it ships
#: (:mod:`.assembler`).
SERIALISING_PTXAS = (13, 3)

#: (max pairs, max avg pairs per expert, tactic labels in order of preference); the first rule that holds applies
MEASURED_DEFAULTS: tuple[tuple[float, float, tuple[str, ...]], ...] = (
    # T <= 4 at top_k 4: at most 1.05x the best (20b EP2 T=1, where -sk4 wins)
    (16, float("inf"), ("m16n64k256w4s3-ps-sk2-pdl-fs", "m16n64k256w4s3-ps-sk2-pdl", "m16n64k256w4s3-ps-sk2")),
    # T = 16 .. 64: at most 1.01x (-pdl), 1.02x (plain)
    (256, float("inf"), ("m16n128k128w4s3-ps-g2sk2-pdl", "m16n128k128w4s3-ps-g2sk2")),
    # 120b EP4 T=256 (8 pairs per expert): the best
    (float("inf"), 16, ("m16n128k128w4s3-ps",)),
    # 20b T=256: the best at EP1, 1.20x at EP2
    (1024, float("inf"), ("m32n128k128w4s3-ps",)),
    # 120b EP4 T=1024 (32 pairs per expert): the best
    (4096, 32, ("m64n128k64w8s4-ps-t32",)),
    # From session 34, at most 512 pairs per expert (20b T = 1024, 4096; 120b EP4 T=4096): the 16-warp tile with each
    # expert's tail (<= 32 pairs) in its last block's program, one launch per GEMM (-t32f, _kernels_over).  Measured on
    # the H100 only (Triton 3.6.0): in -s34h (the prefill headline) at most 1.012x the best ours timed in full at those
    # five shapes (the -tm twin), where the rules before it took 1.04-1.11x; against the 32-row tails, -t32-pdltt,
    # 0.909x, 0.956x, 0.929x and 0.917x at 20b EP1 / EP2 T=1024, EP2 T=4096 and 120b EP4 T=4096, level at 20b EP1
    # T=4096 (-s34g).  Nsight Compute at 120b (-s34h): gemm1 313 / gemm2 182 us against 270 + 83 / 142 + 54 in two
    # launches each (-s34b).  Not at T=16384 (2048 pairs per expert): level there (-s34g).  Under Triton 3.7.1
    # (vLLM 0.34's, -s35b, H100, beside 3.6.0 in one call): a -t32f tile still ours' best at the five shapes, this
    # label 1.010-1.044x of it (its -tm twin); ours' best 0.8-3.6 % slower than under 3.6.0
    (float("inf"), 512, ("m128n128k64w16s3-ps-gu-g2n256-t32f-pdl", "m128n128k64w16s3-ps-gu-g2n256-t32f")),
    # 20b T=1024 (the H200's s15 rule; from session 34 it holds there under Triton 3.9 only): at most 1.01x (-pdl)
    (4096, float("inf"), ("m128n128k64w8s3-ps-g2n256-t64-pdl", "m128n128k64w8s3-ps-g2n256-t64")),
    # T >= 4096: at most 1.05x (20b EP1 T=16384); from session 29 its -pdlt twin first (gemm1's tail launch before
    # its wait, configs_tail.pdlt_twins): faster than the plain tile at the four 20b shapes on the H200 (-s29b, their
    # finalists: 0.959x at EP2 T=4096, 0.994-0.999x at the other three); on the H100 never slower than its -pdl twin
    # (-s28d, 30 pairs, median 0.989).  From session 32 its -pdltt twin before that (gemm2's tail launch too): on the
    # H200 (-s32b, both finalists) 0.990-0.998x of -pdlt at four of the five shapes, 1.007x within the 4-5 % spreads
    # at 20b EP2 T=4096; 54 twin pairs of three tail tiles on both cards none slower (-s32c, -s32d)
    (float("inf"), float("inf"), ("m128n128k64w16s3-ps-gu-g2n256-t64-pdltt", "m128n128k64w16s3-ps-gu-g2n256-t64-pdlt",
                                  "m128n128k64w16s3-ps-gu-g2n256-t64")),
)


#: the rules from Triton 3.9 on: :data:`MEASURED_DEFAULTS` with one more after T <= 4 (3.9's sm_90a builds keep fewer
#: wgmma groups in flight and build the k128 decode tiles with 240-243 registers, 2 programs per SM;
#: ``m16n128k64w4s6-ps-sk2`` keeps 3 with 130: ``docs/triton39-h200-s23.md``), and the 64-row tile with its gemm1
#: capped at 128 registers (``-r128``, 2 programs an SM again: ``configs_regcap``).  Measured under 3.9.0 on the H200
#: (``-s23d``, ``-s24b``) and the H100 (``-s22a``, ``-s24d``).  Session 34's ``-t32f`` rule is not among them: under
#: 3.9.0 the ``-t32f`` tiles run 1.19-1.25x slower than under 3.6.0 (H100 ``-s36a``, both releases in one call; each
#: ``-tNf`` kernel 1.20-1.27x, its two K loops waiting for every wgmma: ``profiling.sass_over``; the ptxas 13.4 that
#: Triton 3.9 calls for sm_90 serialises them, 12.8-13.2 do not: ``docs/evidence-s37.md``), the plain 16-warp
#: ``-gu`` tile 0-5 %, so 3.9's best at four of the five ``-t32f`` shapes is another tile and these rules stay within
#: 1.054x of it at the six prefill shapes.
MEASURED_DEFAULTS_TRITON39: tuple[tuple[float, float, tuple[str, ...]], ...] = MEASURED_DEFAULTS[:1] + (
    # 120b EP4 T=16 (at most 1 pair per expert): the best on the H200, 1.01x on the H100 (the 3.6 rule: 1.07x, 1.15x)
    (256, 1, ("m16n128k64w4s6-ps-sk2",)),
) + MEASURED_DEFAULTS[1:4] + (
    # 120b EP4 T=1024: the capped twin first (H100, gemm1 capped: 0.96x of the uncapped; H200, both capped: 0.985x)
    (4096, 32, ("m64n128k64w8s4-ps-t32-r128", "m64n128k64w8s4-ps-t32")),
) + MEASURED_DEFAULTS[6:7] + (
    # T >= 4096: the plain tail tile (-pdlt is measured under 3.6.0 only)
    (float("inf"), float("inf"), ("m128n128k64w16s3-ps-gu-g2n256-t64",)),
)


#: Triton 3.9 with our ``-tNf`` kernels built by a ptxas older than 13.3 (as the backend builds them there since
#: session 38: its 12.9, :mod:`.assembler`; or Triton pointed at one, ``TRITON_PTXAS_BLACKWELL_PATH``, rows
#: ``3.9.0+ptxas12.8``): its rules with session 34's ``-t32f`` rule back, before the 20b T=1024 one.  Measured on the
#: H200 (``-s37a``: 3.9.0 with the image Triton's ptxas 12.8, beside 3.9.0 as shipped and 3.6.0 in one call): a
#: ``-t32f`` tile is that build's best at the five shapes with 128-512 pairs an expert, the rule's label within 1.012x
#: of it, where the rules without it take 1.07-1.21x; on the H100 (``-s38a``, the backend's own build) within 1.012x.
MEASURED_DEFAULTS_TRITON39_OLDER_PTXAS: tuple[tuple[float, float, tuple[str, ...]], ...] = (
    MEASURED_DEFAULTS_TRITON39[:6] + MEASURED_DEFAULTS[5:6] + MEASURED_DEFAULTS_TRITON39[6:])


def measured_default(case: Any, offered: Sequence[KernelConfig], capability: Optional[tuple[int, int]],
                     triton_version: Optional[str] = None, ptxas: Optional[str] = None) -> KernelConfig:
    """The default tactic of ``case`` (a MoECase) among ``offered`` (what :meth:`TritonBackend.tactics` offers there)
    on a GPU of compute ``capability`` (None: no GPU), built by ``triton_version``, its ``-tNf`` kernels by ``ptxas``
    (:func:`.assembler.tail_fused_ptxas`' version; None: not known): on SM90 the first label of the first rule that
    holds and is offered (:data:`MEASURED_DEFAULTS`; from Triton 3.9 on :data:`MEASURED_DEFAULTS_TRITON39`; without
    the ``-tNf`` rule where the ptxas is :data:`SERIALISING_PTXAS` or later), else :func:`default_config`."""
    if capability is None or capability[0] != 9:
        return default_config(case)
    pairs = case.num_tokens * case.top_k
    avg = pairs / case.num_experts
    by_label = {kc.label: kc for kc in offered}
    rules = MEASURED_DEFAULTS_TRITON39 if triton_release(triton_version) >= (3, 9) else MEASURED_DEFAULTS
    if ptxas and triton_release(ptxas) >= SERIALISING_PTXAS:
        rules = tuple(r for r in rules if not any(parse_config(label).tail_fused for label in r[2]))
    elif ptxas and rules is MEASURED_DEFAULTS_TRITON39:
        rules = MEASURED_DEFAULTS_TRITON39_OLDER_PTXAS
    for max_pairs, max_avg, labels in rules:
        if pairs <= max_pairs and avg <= max_avg:
            for label in labels:
                if label in by_label:
                    return by_label[label]
            break
    return default_config(case)


def default_config(case: Any) -> KernelConfig:
    """Heuristic default (``case``: a MoECase) from the expected pairs per expert (``T * k / E``); picked from H200
    timings at the gpt-oss-20b shape (T = 1, 37, 1024)."""
    avg = case.num_tokens * case.top_k / case.num_experts
    if avg <= 16:
        return KernelConfig(16, 64, 128, 4, 3)
    if avg <= 32:
        return KernelConfig(32, 64, 64, 4, 4)
    return KernelConfig(64, 64, 64, 4, 4)
