"""The process ncu profiles for ``profile --source``: one fused-MoE call of one tactic, run three times.

``python -m fp4moe_diag.profiling.source_driver BACKEND MODEL EP TOKENS TACTIC`` -- the vLLM shape of
``MODEL`` at ``EP`` and ``TOKENS`` (the shape table of :mod:`fp4moe_diag.problem.shapes`), inputs built as the
sweep builds them; ncu (:mod:`.source`) profiles the second launch of the kernel it is told to."""

from __future__ import annotations

import sys
from typing import Sequence


def parse_argv(argv: Sequence[str]) -> tuple[str, str, int, int, str]:
    """``BACKEND MODEL EP TOKENS TACTIC`` -> typed; ``ValueError`` naming the argument otherwise."""
    if len(argv) != 5:
        raise ValueError(f"source_driver: expected BACKEND MODEL EP TOKENS TACTIC, got {len(argv)} arguments")
    backend, model, ep, tokens, tactic = argv
    for name, v in (("EP", ep), ("TOKENS", tokens)):
        if not v.isdigit() or int(v) < 1:
            raise ValueError(f"source_driver: {name} must be a positive integer, got {v!r}")
    return backend, model, int(ep), int(tokens), tactic


def main(argv: Sequence[str]) -> None:  # pragma: no cover - needs a GPU (run under ncu)
    from ..problem.shapes import load_vllm_cases
    from .call_setup import prepare_call

    backend, model, ep, tokens, label = parse_argv(argv)
    cases = load_vllm_cases(models=[model], ep_sizes=[ep], token_counts=[tokens])
    if not cases:
        raise ValueError(f"source_driver: no shape {model} EP{ep} T={tokens} in the shape table")
    call = prepare_call(backend, cases[0], {"t0": label}, "cuda")  # one launch already (the warm-up)
    launch = call.bind(call.tactics["t0"])
    for _ in range(2):
        launch()
    call.synchronize()


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
