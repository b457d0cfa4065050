"""Correctness of one kernel output against the float32 reference on the same quantized weights.

Tolerances (documented in the README): both sides use identical dequantized FP4 weights, so the
differences are the kernel's bf16 rounding of activations/intermediates and accumulation order.
A tactic *passes* when ``rel_l2 <= REL_L2_TOL``, ``cosine >= COSINE_TOL``, there are no NaN/Inf
and no unwritten rows.  The output buffer is poisoned with NaN before each run, so rows a kernel
never wrote show up as NaN rows (``unwritten_rows``).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

REL_L2_TOL = 2e-2
COSINE_TOL = 0.999
TOKEN_REL_TOL = 5e-2


def poison_(t: torch.Tensor) -> torch.Tensor:
    return t.fill_(float("nan"))


def error_metrics(out: torch.Tensor, ref: torch.Tensor, token_tol: float = TOKEN_REL_TOL,
                  rel_l2_tol: Optional[float] = None) -> dict[str, Any]:
    """Error of ``out`` against ``ref``; ``correct`` needs ``rel_l2 <= rel_l2_tol`` (None: :data:`REL_L2_TOL`; a
    backend checked against a reference of its own quantization passes its own tolerance).  Where the reference is
    exactly zero (rows of tokens routed only to other EP ranks, or a rank with no tokens at all) the output must be
    exactly zero too."""
    if out.shape != ref.shape:
        raise ValueError(f"out: expected shape {tuple(ref.shape)} (the reference's), got {tuple(out.shape)}")
    if ref.numel() == 0:
        raise ValueError("ref: the reference is empty; a correctness check needs real data")
    if not torch.isfinite(ref).all():
        raise ValueError("ref: the reference has NaN/Inf; fix the reference before comparing")
    o = out.double()
    r = ref.double().to(o.device)
    nan_rows = torch.isnan(o).all(dim=-1)
    nan = int(torch.isnan(o).sum())
    inf = int(torch.isinf(o).sum())
    finite = torch.isfinite(o)
    d = torch.where(finite, o - r, torch.zeros_like(o))
    ref_norm = float(r.norm())
    o0 = torch.where(finite, o, torch.zeros_like(o))
    if ref_norm > 0:
        rel_l2 = float(d.norm()) / ref_norm
        cos = float(torch.nn.functional.cosine_similarity(o0.reshape(1, -1), r.reshape(1, -1)).item())
    else:
        # an EP rank that received no tokens: the right answer is exactly zero everywhere
        exact = float(d.norm()) == 0.0
        rel_l2 = 0.0 if exact else float("inf")
        cos = 1.0 if exact else 0.0
    tok_ref = r.norm(dim=-1)
    tok_err = torch.where(tok_ref > 0, d.norm(dim=-1) / tok_ref.clamp(min=1e-12),
                          torch.where(d.norm(dim=-1) > 0, torch.full_like(tok_ref, float("inf")),
                                      torch.zeros_like(tok_ref)))
    bad_tokens = (tok_err > token_tol) | ~finite.all(dim=-1)
    if nan or inf:
        rel_l2 = max(rel_l2, float("inf")) if nan_rows.any() else rel_l2
    passed = (
        rel_l2 <= (REL_L2_TOL if rel_l2_tol is None else rel_l2_tol) and cos >= COSINE_TOL and nan == 0 and inf == 0
        and not bool(nan_rows.any())
    )
    return {
        "rel_l2": rel_l2,
        "max_abs_err": float(d.abs().max()),
        "mean_abs_err": float(d.abs().mean()),
        "cosine": cos,
        "frac_tokens_over_tol": float(bad_tokens.double().mean()),
        "worst_token": int(torch.argmax(torch.where(torch.isfinite(tok_err), tok_err, torch.full_like(tok_err, 1e300)))),
        "nan_count": nan,
        "inf_count": inf,
        "unwritten_rows": int(nan_rows.sum()),
        "ref_abs_mean": float(r.abs().mean()),
        "correct": bool(passed),
    }


def per_token_errors(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    o, r = out.double(), ref.double().to(out.device)
    return ((o - r).norm(dim=-1) / r.norm(dim=-1).clamp(min=1e-12)).cpu()
