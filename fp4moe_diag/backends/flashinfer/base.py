"""Shared helpers of the FlashInfer backends: lazy import, support checks, tactic capture."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from .hooks import ChooseOneCall, TunerCallStopped, call_with_supported_kwargs, intercept_choose_one
from .status import flashinfer_status
from ...problem.inputs import MoEInputs
from ..base import Support


@dataclass
class FlashInferPrepared:
    """A case's inputs and the keyword arguments of the FlashInfer entry point, laid out for it."""

    inputs: MoEInputs
    kwargs: dict
    #: FlashInfer's AutoTuner cache before a launcher committed a tactic to it (0.5 CUTLASS), restored after
    tuner_snapshot: Any = None


def call_with_output(fn: Callable, prepared: FlashInferPrepared, tactics: dict[str, Any],
                     output: Optional[torch.Tensor]) -> torch.Tensor:
    """``fn(**prepared.kwargs, output=output)`` with ``tactics`` forced; the output tensor."""
    kw = dict(prepared.kwargs)
    if output is not None:
        kw["output"] = output
    res = forced_call(fn, kw, tactics)
    return res[0] if isinstance(res, (list, tuple)) else res


def flashinfer_support() -> Support:
    """flashinfer importable and covered by an API adapter (:mod:`.api`), with the reason when not."""
    st = flashinfer_status()
    if not st.importable:
        return Support(False, st.reason)
    from .api import api_support_reason  # noqa: PLC0415

    reason = api_support_reason()
    return Support(not reason, reason)


def capture_tuner_calls(fn: Callable, kwargs: dict, ops: list[str]) -> list[ChooseOneCall]:
    """Call ``fn(**kwargs)`` until FlashInfer's AutoTuner is asked for a tactic; return the calls.

    Nothing is launched: the first ``choose_one`` for ``ops[0]`` stops the call.  For ops that ask
    the tuner more than once (CUTLASS: gemm1 then gemm2), the ops already recorded are answered
    with the fallback (-1) and the call is repeated until every op in ``ops`` has been seen.
    """
    calls: list[ChooseOneCall] = []
    for target in ops:
        force = {c.custom_op: -1 for c in calls}
        with intercept_choose_one("stop", ops=[target], force=force):
            try:
                call_with_supported_kwargs(fn, kwargs)
            except TunerCallStopped as stop:
                calls.append(stop.call)
    return calls


def forced_call(fn: Callable, kwargs: dict, tactics: dict[str, Any]) -> Any:
    """Call ``fn`` with FlashInfer's tuner answering ``tactics[op]`` (no profiling, no meta tensors)."""
    with intercept_choose_one("force", tactic=tactics, ops=list(tactics)):
        return call_with_supported_kwargs(fn, kwargs)


def valid_tactics(call: ChooseOneCall, profile: Optional[Any] = None) -> list:
    """The runner's own ``get_valid_tactics`` for the recorded inputs (shapes only, no launch)."""
    runner = call.runners[0]
    return list(runner.get_valid_tactics(call.inputs, profile))
