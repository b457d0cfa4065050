"""The device-safe tuner: every tactic of a backend, no meta tensor ever reaches a kernel.

:func:`tune_case` measures one case x backend in named steps -- :func:`support_row`, :func:`prepare_step`,
:func:`reference_step` (a backend's own reference), :func:`tactic_step`, :func:`measure_tactic` (each tactic), :func:`combined_step`, :func:`reverse_screen` and
:func:`second_pass` (after ``screen``, :mod:`.tune_passes`), :func:`pick_best` (and the noise repeat), :func:`commit_step` -- over a :class:`TuneState`;
:func:`fp4moe_diag.runs.run_sweep` calls it for every case x backend, :func:`tune` for one case.  The timed
callable is the backend's :meth:`~fp4moe_diag.backends.base.Backend.launcher`, made once per tactic.

:func:`tune` (a) checks every tensor a backend will receive before anything launches: meta
tensors, tensors on another device than the case's, wrong dtypes -> ``ValueError`` naming the
argument; (b) runs **every** tactic, each with a correctness check against the float32 reference
(a backend's own where it has one: :meth:`~fp4moe_diag.backends.base.Backend.reference`; poisoned output, fresh
activations) and warm-up + timed repeats (the best one is re-timed at
the end: ``noise_ratio``); (c) turns a tactic that raises
into a row (exception type and message) and carries on; after a failure on a GPU it checks that
the CUDA context still works and, if not, marks the remaining tactics ``aborted`` and stops
cleanly; (d) picks the fastest correct tactic and, for FlashInfer backends, can hand it to
FlashInfer's own ``AutoTuner`` cache so a following ``autotune(False)`` call uses it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional

import torch

from .backends.base import Backend
from .problem.case import MoECase
from .problem.inputs import MoEInputs, build_inputs, fresh_activations, resolve_device
from .measure.ceilings import Ceilings, moe_work
from .measure.options import MeasureOptions
from .problem.reference import reference_moe
from .environment import environment_info
from .results import to_frame
from .tune_passes import reverse_screen, second_pass
from .tune_steps import (SweepContext, TuneResult, TuneState, base_row, combined_step, commit_step, measure_tactic,
                         pick_best, prepare_step, reference_step, support_row, tactic_step)
from .validate import validate_launch_inputs


#: the correctness check's activations come from this seed offset (tune and sweep must agree)
CHECK_SEED_OFFSET = 1_000_003


def correctness_inputs(inputs: MoEInputs) -> MoEInputs:
    """Same weights and routing as ``inputs``, fresh random activations for the correctness check (recorded
    inputs, ``inputs.recorded``, are checked as they are)."""
    if inputs.recorded:
        return inputs
    return fresh_activations(inputs, seed=inputs.case.seed + CHECK_SEED_OFFSET)


class CaseInputs:
    """One case's inputs and float32 reference, validated and built once, on first use (a case no backend takes
    builds nothing); every backend of the case shares them.  With ``check_correctness`` the activations are fresh
    (:func:`correctness_inputs`): one prepared set serves the check and the timing."""

    def __init__(self, case: MoECase, device: torch.device, check_correctness: bool,
                 inputs: Optional[MoEInputs] = None,
                 make_inputs: Optional[Callable[[MoECase, Any], MoEInputs]] = None) -> None:
        if inputs is not None and inputs.case != case:
            raise ValueError("inputs: built for a different case than the one given")
        self.case, self.device, self.check = case, device, check_correctness
        self._given, self._make = inputs, make_inputs or build_inputs
        self._built: Optional[tuple[MoEInputs, Optional[torch.Tensor]]] = None

    def get(self) -> tuple[MoEInputs, Optional[torch.Tensor]]:
        """``(inputs, reference or None)``; a ValueError naming the tensor before any kernel (meta, wrong device)."""
        if self._built is None:
            inputs = self._given if self._given is not None else self._make(self.case, self.device)
            validate_launch_inputs(inputs, self.device)  # every tensor the kernels receive
            if self.check:  # same weights and routing, new activations generated here: nothing left to check
                inputs = correctness_inputs(inputs)
            self._built = (inputs, reference_moe(inputs, torch.float32) if self.check else None)
        return self._built


def _on_device(dev: torch.device) -> Any:
    """The case's CUDA device current while its launchers run (set once, not per launch)."""
    return torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext()


def tune_case(case: MoECase, backend: Backend, data: CaseInputs, ctx: SweepContext,
              options: MeasureOptions) -> TuneResult:
    """Every tactic of ``backend`` on ``case``: one row per tactic (or one row saying why none ran).

    Each tactic is checked against the reference and timed.  With ``options.screen`` the timing is two-pass:
    every tactic gets ``screen`` timed runs (its correctness run is the warm-up), then the ``screen_top`` fastest
    correct ones, the default tactic and the backend's combined tactic (if any) are timed in full
    (``warmup``/``repeats``); ``timing_pass`` says which.  With ``interleave`` the screen is taken again in the
    reverse order before the pick and the finalists are timed in alternating rounds (:mod:`.tune_passes`).  The best tactic is chosen among the fully timed rows."""
    st = TuneState(case, backend, options, ctx, base_row(case, backend, ctx), TuneResult(case, backend.name, to_frame([])))
    if not support_row(st):
        return st.finish()
    inputs, st.reference = data.get()
    st.recorded_output = inputs.recorded_output  # a dump's recorded output: each row is compared with it too
    if not prepare_step(st, inputs) or not reference_step(st, inputs) or not tactic_step(st):
        return st.finish()
    st.work = moe_work(case, inputs.local_topk_ids)
    st.out = torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=ctx.device)
    with _on_device(ctx.device):
        alive = all(measure_tactic(st, i, options.screen is not None) for i in range(len(st.tactics)))
        alive = alive and combined_step(st)
        if alive and options.screen is not None:
            if options.interleave:  # the screen again, last-screened first: the finalists picked drift-free
                reverse_screen(st)
            second_pass(st)
        df = pick_best(st)
        commit_step(st)
    return st.finish(df)


def tune(case: MoECase, backend: Backend, device: Any = None, *, options: MeasureOptions = MeasureOptions(),
         inputs: Optional[MoEInputs] = None, ceilings: Optional[Ceilings] = None, env: Optional[dict] = None,
         clock: Optional[Callable[[], float]] = None) -> TuneResult:
    """:func:`tune_case` for one case (a convenience; sweeps go through :func:`fp4moe_diag.runs.run_sweep`).
    ``device`` None: that of ``inputs``, else the default device."""
    if not isinstance(backend, Backend):
        raise ValueError(f"backend: expected a Backend instance, got {type(backend).__name__}")
    if not isinstance(options, MeasureOptions):
        raise ValueError(f"options: expected a MeasureOptions, got {type(options).__name__}")
    dev = resolve_device(device if device is not None or inputs is None else inputs.device)
    ctx = SweepContext(dev, env if env is not None else environment_info(dev), ceilings, None, clock)
    return tune_case(case, backend, CaseInputs(case, dev, options.check_correctness, inputs), ctx, options)
