"""OpenAI's ``triton_kernels`` (``matmul_ogs`` with the Hopper MXFP4 layouts) as a backend, run as vLLM
runs gpt-oss on Hopper.  Registered as ``triton_kernels`` (not to be confused with our own Triton
kernels, backend ``triton``).

=================  ===========================================================================
module             what
=================  ===========================================================================
:mod:`.loader`     lazy import: already imported / ``FP4MOE_TRITON_KERNELS_DIR`` / installed /
                   ``vllm.third_party.triton_kernels``; 3.5.1 API only
:mod:`.layout`     gate/linear row interleave, scale K padding, Hopper value/scale layouts
:mod:`.routing`    routing data from our top-k ids and weights (EP: local experts only)
:mod:`.tactics`    :class:`OptFlagsConfig` (tactic id): opt_flags constraints per call
:mod:`.backend`    :class:`TritonKernelsBackend`
=================  ===========================================================================

Importing this package imports neither triton nor triton_kernels.
"""

from .tactics import OptFlagsConfig, parse_config, tactic_configs

__all__ = ["OptFlagsConfig", "parse_config", "tactic_configs"]
