"""Hooks into FlashInfer's Python layer: see what its AutoTuner would hand a kernel.

* (:func:`.status.flashinfer_status`: is flashinfer importable, which version, which MoE APIs.)
* :func:`intercept_choose_one` -- patch ``flashinfer.autotuner.AutoTuner.choose_one`` to record
  every call (op name, runners, the input tensors and their devices) and, on request, stop before
  any kernel runs, or force a tactic without profiling.
* (:func:`.stubs.stub_trtllm_gen_module`, beside the CUTLASS stub) -- run the *real* Python of the trtllm-gen
  MoE ops on a machine without Blackwell (H200, CPU): the JIT module is replaced by a stand-in whose entry points pack
  their arguments through TVM-FFI's own argument packer (``testing.nop``) and do nothing else.
  So the stock op, the stock AutoTuner and the stock TVM-FFI argument setter all run; only the
  kernel is missing.  A meta tensor then fails exactly as on a B200:
  ``RuntimeError: Cannot pack tensors on meta``.
* :func:`find_meta_tensors` -- which argument of a recorded call is on ``meta`` (or elsewhere).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from ...problem.inputs import same_device

#: Names of the AutoTuner input list for the ops we know (FlashInfer 0.5.x order; the adapter of the
#: installed version, :mod:`.api`, has the authoritative list).
INPUT_NAMES: dict[str, list[str]] = {
    "flashinfer::trtllm_fp4_block_scale_moe": [
        "output",
        "routing_logits",
        "topk_ids",
        "expert_weights",
        "hidden_states",
        "hidden_states_scale",
    ],
    "trtllm::fused_moe::gemm1": ["input", "fc1_expert_weights", "fc1_expert_biases", "fc2_expert_weights",
                                 "fc2_expert_biases"],
    "trtllm::fused_moe::gemm2": ["input", "fc1_expert_weights", "fc1_expert_biases", "fc2_expert_weights",
                                 "fc2_expert_biases"],
}


def input_names_for(custom_op: str) -> list[str]:
    """The tuner input names of ``custom_op`` for the installed flashinfer (0.5 names if it has no adapter)."""
    from .api import UnsupportedFlashInferVersion, get_api  # noqa: PLC0415

    try:
        return get_api().input_names.get(custom_op, [])
    except (UnsupportedFlashInferVersion, ImportError):
        return INPUT_NAMES.get(custom_op, [])


TRTLLM_FP4_OP = "flashinfer::trtllm_fp4_block_scale_moe"


# --------------------------------------------------------------------------- recording
@dataclass(frozen=True)
class InputInfo:
    """One entry of a tuner input list, as the kernel would receive it."""

    index: int
    name: str
    kind: str  # "tensor", "none", or a type name
    device: Optional[str]
    dtype: Optional[str]
    shape: Optional[tuple]

    @property
    def is_meta(self) -> bool:
        return self.device == "meta"


@dataclass
class ChooseOneCall:
    """One ``AutoTuner.choose_one`` call as FlashInfer made it."""

    custom_op: str
    runners: list
    tuning_config: Any
    inputs: list
    kwargs: dict
    tuning_mode: bool
    #: what ``choose_one`` returned (``(runner, tactic)``), in ``"record"`` mode once the stock method answered
    answer: Any = None

    @property
    def input_names(self) -> list[str]:
        names = input_names_for(self.custom_op)
        return [names[i] if i < len(names) else f"inputs[{i}]" for i in range(len(self.inputs))]

    def describe_inputs(self) -> list[InputInfo]:
        return [_describe(i, n, t) for i, (n, t) in enumerate(zip(self.input_names, self.inputs))]


def _describe(index: int, name: str, t: Any) -> InputInfo:
    if isinstance(t, torch.Tensor):
        return InputInfo(index, name, "tensor", str(t.device.type if t.device.type == "meta" else t.device),
                         str(t.dtype).replace("torch.", ""), tuple(t.shape))
    if t is None:
        return InputInfo(index, name, "none", None, None, None)
    return InputInfo(index, name, type(t).__name__, None, None, None)


class TunerCallStopped(Exception):
    """Raised by :func:`intercept_choose_one` in ``stop`` mode, carrying the recorded call."""

    def __init__(self, call: ChooseOneCall):
        super().__init__(f"stopped at AutoTuner.choose_one({call.custom_op!r}) before any kernel ran")
        self.call = call


@dataclass
class ChooseOneRecorder:
    calls: list = field(default_factory=list)

    @property
    def last(self) -> Optional[ChooseOneCall]:
        return self.calls[-1] if self.calls else None


@contextlib.contextmanager
def intercept_choose_one(
    mode: str = "record",
    tactic: Any = None,
    ops: Optional[Sequence[str]] = None,
    force: Optional[dict] = None,
) -> Iterator[ChooseOneRecorder]:
    """Patch ``AutoTuner.choose_one`` for the duration of the block.

    ``mode``: ``"record"`` (record, then call the stock method; its answer is the call's ``answer``),
    ``"stop"`` (record, then raise :class:`TunerCallStopped` so no kernel runs), ``"force"`` (record, then return
    ``(runners[0], tactic)`` without profiling: the kernel call that follows uses ``tactic``;
    ``tactic`` may be a dict op name -> tactic, ops missing from it get -1, the fallback).
    ``ops`` limits the interception to those op names; other ops pass through to the stock
    method, or, if named in ``force`` (op -> tactic), are answered with that tactic.
    """
    if mode not in ("record", "stop", "force"):
        raise ValueError(f"mode: expected 'record', 'stop' or 'force', got {mode!r}")
    from flashinfer.autotuner import AutoTuner

    original = AutoTuner.choose_one
    rec = ChooseOneRecorder()

    @functools.wraps(original)
    def patched(self, custom_op, runners, tuning_config, inputs, **kwargs):
        if ops is not None and custom_op not in ops:
            if force and custom_op in force:
                return runners[0], force[custom_op]
            return original(self, custom_op, runners, tuning_config, inputs, **kwargs)
        call = ChooseOneCall(custom_op, list(runners), tuning_config, list(inputs), dict(kwargs), self.is_tuning_mode)
        rec.calls.append(call)
        if mode == "stop":
            raise TunerCallStopped(call)
        if mode == "force":
            chosen = tactic.get(custom_op, -1) if isinstance(tactic, dict) else tactic
            return runners[0], chosen
        call.answer = original(self, custom_op, runners, tuning_config, inputs, **kwargs)
        return call.answer

    AutoTuner.choose_one = patched
    try:
        yield rec
    finally:
        AutoTuner.choose_one = original


def winner_cache(tuner: Any) -> dict:
    """The AutoTuner's in-memory winners (0.7: ``_winner_cache()``, the active partition; 0.5: ``profiling_cache``)."""
    return tuner._winner_cache() if hasattr(tuner, "_winner_cache") else tuner.profiling_cache


def find_meta_tensors(call_or_inputs: Any, expected_device: Optional[Any] = None) -> list[InputInfo]:
    """Entries of a tuner input list that no kernel can take.

    Accepts a :class:`ChooseOneCall`, a list of tensors, or a dict name -> tensor.  Returns the
    entries on ``meta``, plus (when ``expected_device`` is given) tensors on another device.
    """
    if isinstance(call_or_inputs, ChooseOneCall):
        infos = call_or_inputs.describe_inputs()
    elif isinstance(call_or_inputs, dict):
        infos = [_describe(i, str(k), v) for i, (k, v) in enumerate(call_or_inputs.items())]
    else:
        infos = [_describe(i, f"inputs[{i}]", v) for i, v in enumerate(call_or_inputs)]
    bad = []
    exp = None if expected_device is None else str(torch.device(expected_device))
    for info in infos:
        if info.kind != "tensor":
            continue
        if info.is_meta:
            bad.append(info)
        elif exp is not None and not same_device(info.device, exp):
            bad.append(info)
    return bad


def routed_moe_function() -> Callable:
    fm = importlib.import_module("flashinfer.fused_moe")
    fn = getattr(fm, "trtllm_fp4_block_scale_routed_moe", None)
    if fn is None:
        fn = getattr(importlib.import_module("flashinfer"), "trtllm_fp4_block_scale_routed_moe")
    return fn


def call_with_supported_kwargs(fn: Callable, kwargs: dict, mapped: Sequence[str] = ()) -> Any:
    """``fn(**kwargs)``.  An argument ``fn`` does not take is a ``ValueError`` naming it, unless it is in
    ``mapped`` (an argument an adapter of :mod:`.api` drops on purpose): nothing is dropped silently."""
    from .api import checked_kwargs  # noqa: PLC0415

    return fn(**checked_kwargs(fn, kwargs, mapped))


# --------------------------------------------------------------------------- tuner cache
def install_tactic_in_autotuner(call: ChooseOneCall, tactic: Any) -> Any:
    """Commit ``tactic`` to FlashInfer's ``AutoTuner`` for the recorded call's op and shape bucket.

    A following call of the same op and shape bucket under ``autotune(False)`` then runs ``tactic``,
    exactly as if FlashInfer's own profiling had chosen it.  How depends on the FlashInfer generation
    (:meth:`.api.FlashInferApi.commit`: 0.5 writes its ``profiling_cache``, 0.7 goes through
    ``AutoTuner.load_configs``).  Returns the cache key.
    """
    from .api import get_api  # noqa: PLC0415

    return get_api().commit([(call, tactic)])[0]
