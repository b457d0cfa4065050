"""Our own Triton MXFP4 routed MoE: :mod:`.backend` (the backend), :mod:`.configs` (tactics: a
:class:`~.configs.KernelConfig` is the tactic id), :mod:`.grouping` (pairs grouped by expert),
:mod:`.launch` (launchers) and :mod:`._kernels` / :mod:`._kernels_ps` (``@triton.jit`` source only); the W4A8
backend ``triton_w4a8`` is :mod:`.backend_w4a8`, :mod:`.launch_f8` and :mod:`._kernels_f8` (mode f8), and
:mod:`.p8_layout`, :mod:`.configs_p8`, :mod:`.launch_p8` and :mod:`._kernels_p8` (mode p8).  Importing this
package never imports triton."""

from .backend import TritonMXFP4Backend
from .configs import KernelConfig, parse_config

__all__ = ["KernelConfig", "TritonMXFP4Backend", "parse_config"]
