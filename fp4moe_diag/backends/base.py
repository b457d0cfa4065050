"""The backend interface every kernel implementation follows.

A backend says which devices it supports (with the reason when not), lists the real tactics of
its kernels for a case, prepares a case's tensors once (weight re-layout, workspaces: never
timed) and runs one tactic.  The device-safe tuner (:mod:`fp4moe_diag.tune`) drives it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import torch

from ..case import MoECase
from ..inputs import MoEInputs


@dataclass(frozen=True)
class Support:
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Tactic:
    """One kernel configuration. ``id`` is what the kernel takes (int or tuple); ``label`` is for humans."""

    id: Any
    label: str
    params: dict = field(default_factory=dict)
    is_default: bool = False


def device_capability(device: Any) -> Optional[tuple[int, int]]:
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(dev)


class Backend(ABC):
    """Base class. Subclasses set ``name`` and ``capabilities`` (None = any device incl. CPU)."""

    name: str = "?"
    #: compute capabilities (major, minor) the kernels are built for; None means any device
    capabilities: Optional[Sequence[tuple[int, int]]] = None
    #: device types accepted
    device_types: Sequence[str] = ("cuda",)

    def supports(self, device: Any) -> Support:
        dev = torch.device(device)
        if dev.type not in self.device_types:
            return Support(False, f"{self.name} runs on {'/'.join(self.device_types)} devices, not {dev.type}")
        if dev.type == "cuda":
            if not torch.cuda.is_available():
                return Support(False, "no CUDA device is available")
            cc = device_capability(dev)
            if self.capabilities is not None and cc not in self.capabilities:
                want = ", ".join(f"SM{a}{b}" for a, b in self.capabilities)
                name = torch.cuda.get_device_name(dev)
                return Support(False, f"{self.name} needs {want}; {name} is SM{cc[0]}{cc[1]}")
        return self.extra_support(dev)

    def extra_support(self, device: torch.device) -> Support:
        """Hook for library checks (e.g. flashinfer importable)."""
        return Support(True)

    def check_case(self, case: MoECase) -> Support:
        """Whether this backend implements the case's formats (weights, activations, routing)."""
        return Support(True)

    @abstractmethod
    def tactics(self, case: MoECase, prepared: Any = None) -> list[Tactic]:
        """The kernel's own tactic list for ``case`` (``prepared``: from :meth:`prepare`, if at hand)."""

    def bf16_hidden(self, inputs: MoEInputs) -> torch.Tensor:
        """``inputs.hidden_states`` after the checks every bf16-activation kernel needs: the case is one this backend
        implements (:meth:`check_case`) and the activations are a bf16 ``[T, H]`` tensor (a ValueError otherwise)."""
        why = self.check_case(inputs.case)
        if not why:
            raise ValueError(f"case: {why.reason}")
        x = inputs.hidden_states
        if x.dtype != torch.bfloat16 or x.dim() != 2:
            raise ValueError(f"hidden_states: expected a bf16 [T, H] tensor, got {x.dtype} {tuple(x.shape)}")
        return x

    def prepare(self, inputs: MoEInputs) -> Any:
        """Per-case preparation (weight re-layout, workspaces); not timed. Default: the inputs."""
        return inputs

    @abstractmethod
    def run(self, prepared: Any, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Launch one tactic; returns the ``[T, H]`` output (bf16 for kernels)."""

    def combined_tactic(self, timings: list[tuple[Tactic, float]]) -> Optional[Tactic]:
        """A tactic assembled from the per-op winners of ``timings`` ((tactic, median us) of the correct
        tactics), for libraries whose tuner picks each op separately (CUTLASS: gemm1 and gemm2); None here."""
        return None

    def default_tactic(self, case: MoECase) -> Optional[Tactic]:
        """What the library picks with no tuning (tactic -1 / fallback), if it is one of ours."""
        for t in self.tactics(case):
            if t.is_default:
                return t
        return None

    def tactic_by_label(self, case: MoECase, label: str, prepared: Any = None) -> Tactic:
        """The tactic of :meth:`tactics` labelled ``label``; a ValueError listing the labels otherwise."""
        tactics = self.tactics(case, prepared=prepared)
        for t in tactics:
            if t.label == label:
                return t
        raise ValueError(f"tactic: {self.name} has no tactic {label!r} for {case.label}; "
                         f"it has {[t.label for t in tactics]}")

    def commit_tactic(self, prepared: Any, tactic: Tactic) -> Any:
        """Make the library's own tuner pick ``tactic`` for this case's shapes from now on (FlashInfer: its
        AutoTuner cache), so a plain library call runs it.  Backends without a tuner of their own raise
        NotImplementedError."""
        raise NotImplementedError(f"{self.name} has no tuner of its own to commit a tactic to")

    def versions(self) -> dict[str, str]:
        """Library versions this backend runs on, for humans (``fp4moe_diag versions``; result rows record
        the environment's ``flashinfer_version`` / ``triton_version`` columns instead)."""
        return {}
