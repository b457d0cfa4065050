"""Our own Triton MXFP4 routed MoE: :mod:`.backend` (the backend), :mod:`.configs` (tactics: a
:class:`~.configs.KernelConfig` is the tactic id), :mod:`.grouping` (pairs grouped by expert),
:mod:`.launch` (launchers) and :mod:`._kernels` (``@triton.jit`` source only).  Importing this
package never imports triton."""

from .backend import TritonMXFP4Backend
from .configs import KernelConfig, parse_config

__all__ = ["KernelConfig", "TritonMXFP4Backend", "parse_config"]
