"""Shared helpers of the FlashInfer backends: lazy import, support checks, tactic capture, committing a tactic to
FlashInfer's AutoTuner for the launches of a launcher (and giving the tuner back its cache after them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .hooks import ChooseOneCall, TunerCallStopped, call_with_supported_kwargs, intercept_choose_one
from .status import flashinfer_status
from ...problem.inputs import MoEInputs
from ..base import Support


@dataclass
class FlashInferPrepared:
    """A case's inputs and the keyword arguments of the FlashInfer entry point, laid out for it."""

    inputs: MoEInputs
    kwargs: dict
    #: FlashInfer's AutoTuner cache before a launcher committed a tactic to it (trtllm; 0.5 CUTLASS), restored after
    tuner_snapshot: Any = None


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


def commit_for_launches(prepared: FlashInferPrepared, calls_and_tactics: list[tuple[ChooseOneCall, Any]]) -> None:
    """Commit each recorded call's tactic to FlashInfer's AutoTuner cache (:meth:`.api.FlashInferApi.commit`) for the
    launches to come, so the plain entry point, called with nothing patched, runs it.  The first commit of a series
    keeps the cache as it was in ``prepared.tuner_snapshot``, for :func:`restore_after_launches`.  Refused while
    FlashInfer's tuner is in tuning mode (``autotune(True)``): it would profile instead of answering from the cache."""
    from flashinfer.autotuner import AutoTuner  # noqa: PLC0415

    from .api import get_api  # noqa: PLC0415

    if AutoTuner.get().is_tuning_mode:
        raise RuntimeError("FlashInfer's AutoTuner is in tuning mode (inside autotune(True)): a committed tactic "
                           "would be profiled over, not run; launch outside autotune(True)")
    api = get_api()
    if prepared.tuner_snapshot is None:
        prepared.tuner_snapshot = api.tuner_snapshot()
    api.commit(calls_and_tactics)


def restore_after_launches(prepared: FlashInferPrepared) -> None:
    """FlashInfer's AutoTuner cache as it was before the first :func:`commit_for_launches` on ``prepared`` (nothing
    to do when none committed)."""
    if prepared.tuner_snapshot is not None:
        from .api import get_api  # noqa: PLC0415

        snapshot, prepared.tuner_snapshot = prepared.tuner_snapshot, None
        get_api().tuner_restore(snapshot)


def valid_tactics(call: ChooseOneCall, profile: Optional[Any] = None) -> list:
    """The runner's own ``get_valid_tactics`` for the recorded inputs (shapes only, no launch)."""
    runner = call.runners[0]
    return list(runner.get_valid_tactics(call.inputs, profile))
