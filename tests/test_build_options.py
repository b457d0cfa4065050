"""Every launch of our Triton kernels asks for the same compile options (``_kernels.BUILD_OPTIONS``: FP contraction on,
Triton's default through 3.9, which warns that 3.10 turns it off), so that every Triton release builds the same
arithmetic.  Checked on the launches a call binds (no kernel runs here)."""

from __future__ import annotations

import functools

import pytest

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends.base import Tactic
from interpreter import HAS_TRITON

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")


def _launches(calls: list) -> list[functools.partial]:
    """The kernel launches among a call's steps (a copy into the caller's output is a step too)."""
    return [c for c in calls if isinstance(c, functools.partial) and "num_warps" in c.keywords]


@pytest.mark.parametrize("backend, labels", [
    ("triton", ["m16n128k128w4s3-ps", "m16n64k256w4s3-ps-sk2", "m16n64k256w4s3-ps-sk2-fs", "m64n128k64w4s3-ps-gu",
                "m64n64k128w4s3-x2", "m16n128k128w4s3-ps~load"]),
    ("triton_w4a8", ["m128n64k128w4s3-p8", "m64n64k128w4s3-f8"]),
])
def test_every_launch_asks_for_fp_fusion(backend, labels, monkeypatch):
    from fp4moe_diag.backends import get_backend
    from fp4moe_diag.backends.triton import backend as bf16, backend_w4a8
    from fp4moe_diag.backends.triton._kernels import BUILD_OPTIONS

    for m in (bf16, backend_w4a8):  # the launcher's bound steps, not a callable that runs them
        monkeypatch.setattr(m, "launch_sequence", lambda calls, out: calls)
    assert BUILD_OPTIONS == {"enable_fp_fusion": True}
    b = get_backend(backend)
    prep = b.prepare(build_inputs(MoECase(num_tokens=8, hidden_size=320, intermediate_size=320, num_experts=4,
                                          top_k=2)))
    for lab in labels:
        launches = _launches(b.launcher(prep, Tactic(id=lab, label=lab)))
        assert len(launches) >= 2, (lab, len(launches))  # gemm1 and gemm2 at least
        assert all(c.keywords.get("enable_fp_fusion") is True for c in launches), lab
