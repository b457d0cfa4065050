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
