"""The torch reference as a backend: any device, one tactic (float32, the correctness truth)."""

from __future__ import annotations

from typing import Optional

import torch

from ..problem.case import MoECase
from ..problem.inputs import MoEInputs
from ..problem.reference import reference_moe
from .base import Backend, Tactic


class ReferenceBackend(Backend):
    name = "reference"
    kernel_precision = "fp32"
    capabilities = None
    device_types = ("cpu", "cuda")

    def tactics(self, case: MoECase, prepared=None) -> list[Tactic]:
        return [Tactic(id="fp32", label="torch fp32", params={"dtype": "float32"}, is_default=True)]

    def run(self, prepared: MoEInputs, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        y = reference_moe(prepared, torch.float32)
        if output is not None:
            output.copy_(y.to(output.dtype))
            return output
        return y
