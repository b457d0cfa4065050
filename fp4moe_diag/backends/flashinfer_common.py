"""Shared helpers of the FlashInfer backends: lazy import, support checks, tactic capture."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional

from ..flashinfer_hooks import (
    ChooseOneCall,
    TunerCallStopped,
    call_with_supported_kwargs,
    flashinfer_status,
    intercept_choose_one,
)
from .base import Support


def flashinfer_support() -> Support:
    st = flashinfer_status()
    if not st.importable:
        return Support(False, st.reason)
    return Support(True)


def capture_tuner_calls(fn: Callable, kwargs: dict, ops: list[str]) -> list[ChooseOneCall]:
    """Call ``fn(**kwargs)`` until FlashInfer's AutoTuner is asked for a tactic; return the calls.

    Nothing is launched: the first ``choose_one`` for one of ``ops`` stops the call.  For ops
    that ask the tuner more than once (CUTLASS: gemm1 then gemm2), the first call is forced to
    the fallback and recording continues until the last op has been seen.
    """
    calls: list[ChooseOneCall] = []
    remaining = list(ops)
    while remaining:
        target = remaining[0]
        force = {c.custom_op: -1 for c in calls}
        with _intercept_until(target, force) as rec:
            try:
                call_with_supported_kwargs(fn, kwargs)
            except TunerCallStopped as stop:
                calls.append(stop.call)
        remaining.pop(0)
        del rec
    return calls


@contextlib.contextmanager
def _intercept_until(target: str, force: dict):
    """Force earlier ops to their fallback, stop at ``target``."""
    from flashinfer.autotuner import AutoTuner

    original = AutoTuner.choose_one
    rec: list = []

    def patched(self, custom_op, runners, tuning_config, inputs, **kwargs):
        if custom_op == target:
            raise TunerCallStopped(ChooseOneCall(custom_op, list(runners), tuning_config, list(inputs),
                                                 dict(kwargs), self.is_tuning_mode))
        if custom_op in force:
            return runners[0], force[custom_op]
        return original(self, custom_op, runners, tuning_config, inputs, **kwargs)

    AutoTuner.choose_one = patched
    try:
        yield rec
    finally:
        AutoTuner.choose_one = original


def forced_call(fn: Callable, kwargs: dict, tactics: dict[str, Any]) -> Any:
    """Call ``fn`` with FlashInfer's tuner answering ``tactics[op]`` (no profiling, no meta tensors)."""
    with intercept_choose_one("force", tactic=tactics, ops=list(tactics)):
        return call_with_supported_kwargs(fn, kwargs)


def valid_tactics(call: ChooseOneCall, profile: Optional[Any] = None) -> list:
    """The runner's own ``get_valid_tactics`` for the recorded inputs (shapes only, no launch)."""
    runner = call.runners[0]
    return list(runner.get_valid_tactics(call.inputs, profile))
