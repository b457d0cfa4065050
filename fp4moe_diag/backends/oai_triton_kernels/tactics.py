"""Tactics of the triton_kernels backend: :class:`OptFlagsConfig` (the tactic id) and the list per case.

A tactic is a set of triton_kernels ``opt_flags`` *constraints*, applied to both ``matmul_ogs``
calls of one MoE (gemm1 and gemm2) with ``update_opt_flags_constraints`` and removed with
``reset_opt_flags_constraints`` after the call; fields left ``None`` are chosen by
``make_default_opt_flags_nvidia`` as usual.  The default tactic constrains nothing but
``split_k = 1``, which vLLM sets globally on SM90 in ``_swizzle_mxfp4`` (the K-padded Hopper scale
layout needs it): that is what ``matmul_ogs`` picks by itself in vLLM on Hopper.

What can vary on SM90 with bf16 x MXFP4 in the Hopper layouts (triton_kernels 3.5.1 sources):

* ``block_m`` in {16, 32, 64, 128}: the tile sizes the routing metadata is built for
  (``ExptData.block_pid_map``); default ``next_pow2(tokens per expert)`` clamped to [16, 128].
* ``block_k`` in {64, 128}: ``compute_block_k`` picks 128 for 4-bit weights before SM100; the
  Hopper scale unswizzle needs ``BLOCK_K / 32`` even, and the (unmasked) scale loads of the last K
  step stay inside vLLM's 4-group padding only for ``block_k <= 128``.
* ``num_warps`` in {4, 8}: not a constraint key; ``compute_num_warps`` returns the scale layout's
  ``num_warps``, so it selects the ``HopperMXScaleLayout(num_warps=...)`` tensor prepared for it.
  It also fixes ``block_n`` (``compute_block_n``): 128 with 4 warps, 256 with 8 for N > 128
  (the kernel asserts ``BLOCK_N % (32 * num_warps) == 0``).  vLLM uses 8.
* ``num_stages``: default ``min(4, smem // stage bytes)``; a smaller value may be forced.
* ``split_k`` stays 1 and ``is_persistent`` False: on SM90 ``matmul_ogs`` disables TMA for 4-bit
  weights (``can_use_tma``), so ``is_persistent=True`` raises ``InapplicableConstraint``, and the
  persistent kernel is the only one with native MXFP; ``fused_scatter`` needs ``n_expts_act == 1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

BLOCK_MS = (16, 32, 64, 128)
BLOCK_KS = (64, 128)
NUM_WARPS = (4, 8)
VLLM_NUM_WARPS = 8


@dataclass(frozen=True)
class OptFlagsConfig:
    """One tactic: opt_flags constraints for both GEMMs (``None`` = matmul_ogs's own choice)."""

    num_warps: int = VLLM_NUM_WARPS  # selects the HopperMXScaleLayout; fixes block_n
    block_m: Optional[int] = None
    block_k: Optional[int] = None
    num_stages: Optional[int] = None
    split_k: int = 1
    is_persistent: bool = False

    def __post_init__(self) -> None:
        if self.num_warps not in NUM_WARPS:
            raise ValueError(f"tactic: num_warps must be one of {NUM_WARPS}, got {self.num_warps!r}")
        if self.block_m is not None and self.block_m not in BLOCK_MS:
            raise ValueError(f"tactic: block_m must be None or one of {BLOCK_MS}, got {self.block_m!r}")
        if self.block_k is not None and self.block_k not in BLOCK_KS:
            raise ValueError(f"tactic: block_k must be None or one of {BLOCK_KS}, got {self.block_k!r}")
        if self.num_stages is not None and not (isinstance(self.num_stages, int) and 1 <= self.num_stages <= 4):
            raise ValueError(f"tactic: num_stages must be None or 1..4, got {self.num_stages!r}")
        if self.split_k != 1:
            raise ValueError("tactic: split_k must be 1 with the K-padded Hopper scale layout (vLLM sets it on SM90)")
        if self.is_persistent:
            raise ValueError("tactic: is_persistent=True is not available for MXFP4 weights on SM90 (no TMA)")

    @property
    def block_n(self) -> int:
        """What ``compute_block_n`` derives for N > 128 from the scale layout's warps."""
        return 128 if self.num_warps == 4 else 256

    def constraints(self) -> dict[str, Any]:
        """The dict handed to ``update_opt_flags_constraints``."""
        c: dict[str, Any] = {"split_k": self.split_k}
        for k in ("block_m", "block_k", "num_stages"):
            v = getattr(self, k)
            if v is not None:
                c[k] = v
        return c

    @property
    def is_default(self) -> bool:
        return self == OptFlagsConfig()

    @property
    def label(self) -> str:
        m = "auto" if self.block_m is None else str(self.block_m)
        k = "auto" if self.block_k is None else str(self.block_k)
        s = "" if self.num_stages is None else f"s{self.num_stages}"
        return f"tk-m{m}k{k}w{self.num_warps}{s}"

    def __str__(self) -> str:
        return self.label

    def params(self) -> dict[str, Any]:
        return dict(block_m=self.block_m, block_n=self.block_n, block_k=self.block_k, num_warps=self.num_warps,
                    num_stages=self.num_stages, split_k=self.split_k, is_persistent=self.is_persistent,
                    constraints=self.constraints())


_LABEL = re.compile(r"^tk-m(auto|\d+)k(auto|\d+)w(\d+)(?:s(\d+))?$")


def parse_config(cfg: Any) -> OptFlagsConfig:
    """An :class:`OptFlagsConfig` or its label (``tk-m16kautow8``) -> :class:`OptFlagsConfig`."""
    if isinstance(cfg, OptFlagsConfig):
        return cfg
    if isinstance(cfg, str):
        m = _LABEL.match(cfg)
        if m is None:
            raise ValueError(f"tactic: expected a label like tk-m16k128w8[s3], got {cfg!r}")
        num = lambda v: None if v in (None, "auto") else int(v)  # noqa: E731
        return OptFlagsConfig(num_warps=int(m.group(3)), block_m=num(m.group(1)), block_k=num(m.group(2)),
                              num_stages=num(m.group(4)))
    raise ValueError(f"tactic: expected an OptFlagsConfig or its label, got {type(cfg).__name__}")


def default_block_m(case: Any) -> int:
    """``make_default_opt_flags_nvidia``'s block_m for gemm1: next_pow2(T * k // L) clamped to [16, 128]."""
    tpe = max(1, case.num_tokens * case.top_k // case.local_num_experts)
    p = 1 << (tpe - 1).bit_length()
    return max(16, min(p, 128))


def tactic_configs(case: Any) -> list[OptFlagsConfig]:
    """The default first, then 16 explicit configurations valid on SM90.

    Every block_m x both warp counts (block_k 128, the library's choice), block_k 64 at the default
    block_m and its neighbours, and fewer pipeline stages at the default block_m."""
    dm = default_block_m(case)
    out = [OptFlagsConfig(), OptFlagsConfig(num_warps=4)]
    for w in NUM_WARPS:
        out += [OptFlagsConfig(num_warps=w, block_m=bm, block_k=128) for bm in BLOCK_MS]
    near = [bm for bm in BLOCK_MS if bm in (dm, dm // 2, dm * 2)]
    out += [OptFlagsConfig(num_warps=w, block_m=bm, block_k=64) for bm in near[:2] for w in NUM_WARPS]
    out += [OptFlagsConfig(block_m=dm, num_stages=s) for s in (2, 3)]
    seen: list[OptFlagsConfig] = []
    for c in out:
        if c not in seen:
            seen.append(c)
    return seen
