"""What both profiled processes (:mod:`.driver` for ``profile``, :mod:`.source_driver` for ``profile --source``) do
before ncu looks: build the case's inputs as the sweep builds them, prepare the backend, look up the tactics, and
warm each one up (JIT, autotuner) outside the profiled ranges.

A tactic is launched through the backend's ``launcher``, bound right before its profiled range (:meth:`ProfiledCall.
bind`): the bind-time work of a backend (argument checks; a ``-fs`` tactic's routing tables, made with torch) then
runs outside the range, as it runs outside the timed window of a sweep.  Until session 11 the drivers called
``Backend.run``, which binds inside the range: the profiles of ``-fs`` tactics listed ~20 torch kernels of that
setup beside the MoE kernels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..backends import get_backend
from ..backends.base import Backend, Tactic
from ..problem.case import MoECase
from ..problem.inputs import build_inputs


@dataclass
class ProfiledCall:
    """One case prepared on one backend, the tactics to profile (role -> tactic) and the output buffer."""

    backend: Backend
    case: MoECase
    prepared: Any
    tactics: dict[str, Tactic]
    out: torch.Tensor

    def bind(self, tactic: Tactic) -> Callable[[], Any]:
        """The bare launch of ``tactic`` (valid until the next :meth:`bind`: bind right before the profiled range)."""
        return self.backend.launcher(self.prepared, tactic, self.out)

    def synchronize(self) -> None:
        if self.out.device.type == "cuda":
            torch.cuda.synchronize(self.out.device)


def prepare_call(backend: str, case: MoECase, labels: dict[str, str], device: Any) -> ProfiledCall:
    """Inputs of ``case`` on ``device``, ``backend`` prepared, the tactics of ``labels`` (role -> tactic label) looked
    up and each launched once (warm-up); a ValueError from the backend names an unknown label before any kernel."""
    if not labels:
        raise ValueError("labels: expected at least one role -> tactic label, got none")
    be = get_backend(backend)
    dev = torch.device(device)
    prepared = be.prepare(build_inputs(case, dev))
    tactics = {role: be.tactic_by_label(case, label, prepared) for role, label in labels.items()}
    call = ProfiledCall(backend=be, case=case, prepared=prepared, tactics=tactics,
                        out=torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=dev))
    for t in tactics.values():
        call.bind(t)()
    call.synchronize()
    return call


def prepare_pair(case: MoECase, a: tuple[str, str], b: tuple[str, str],
                 device: Any) -> tuple[dict[str, ProfiledCall], dict[str, Callable[[], Any]]]:
    """The two sides of a comparison (:mod:`.duel`, :mod:`.energy`; ``a`` / ``b``: (backend, tactic label)) prepared
    on ``case`` (:func:`prepare_call`, role ``a`` / ``b``) and their launches.  The caller keeps the prepared calls
    while the launches, or graphs captured from them, run: a graph holds the addresses of its tensors, not the
    tensors (``profiling.energy``'s first GPU run freed side a's when it prepared b: an illegal memory access)."""
    prepared = {side: prepare_call(backend, case, {side: tactic}, device) for side, (backend, tactic) in
                (("a", a), ("b", b))}
    return prepared, {side: p.bind(p.tactics[side]) for side, p in prepared.items()}
