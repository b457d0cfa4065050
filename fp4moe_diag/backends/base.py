"""The backend interface every kernel implementation follows.

A backend says which devices it supports (with the reason when not), lists the real tactics of
its kernels for a case, prepares a case's tensors once (weight re-layout, workspaces: never
timed) and runs one tactic.  The device-safe tuner (:mod:`fp4moe_diag.tune`) drives it.

What is timed is a **launcher**: :meth:`Backend.launcher` returns, per (prepared inputs, tactic), a bare callable
with the tactic forced and every argument checked before, so a timed call is the kernel entry point and nothing of
this suite (:meth:`Backend.run` checks and forces on every call; it is the untimed convenience).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

from ..problem.case import MoECase
from ..problem.inputs import MoEInputs


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


def launch_sequence(calls: Sequence[Callable[[], Any]], result: Any) -> Callable[[], Any]:
    """A launcher of several bound launches (``functools.partial`` of kernel entry points): calls them in order and
    returns ``result`` (the output they write).  Its own loop is the only Python of ours in the timed call."""
    bound = tuple(calls)

    def launch() -> Any:
        for call in bound:
            call()
        return result

    return launch


class Backend(ABC):
    """Base class. Subclasses set ``name`` and ``capabilities`` (None = any device incl. CPU)."""

    name: str = "?"
    #: compute capabilities (major, minor) the kernels are built for; None means any device
    capabilities: Optional[Sequence[tuple[int, int]]] = None
    #: device types accepted
    device_types: Sequence[str] = ("cuda",)
    #: the precision the kernels compute in (results column ``kernel_precision``): "w4a16" (bf16 activations),
    #: "w4a8" (FP8 activations), "fp32" (the reference)
    kernel_precision: str = "w4a16"
    #: the relative-L2 tolerance of the correctness check (None: measure.correctness.REL_L2_TOL)
    rel_l2_tol: Optional[float] = None

    def tactic_columns(self, tactic: Tactic) -> dict:
        """Columns of ``tactic``'s rows that differ from the run's (e.g. ``triton_ptxas`` where another ptxas
        builds its kernels); none by default."""
        return {}

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

    def reference(self, inputs: MoEInputs, prepared: Any) -> Optional[torch.Tensor]:
        """The float32 ``[T, H]`` output this backend's rows are checked against, when it is not the standard
        reference (:func:`~fp4moe_diag.problem.reference.reference_moe` of the bf16 activations): a kernel that
        quantizes its activations is compared with a reference that quantizes the same way (``rel_l2``), and with
        the standard one in ``rel_l2_bf16_ref``.  Default: None (the standard reference)."""
        return None

    def prepare(self, inputs: MoEInputs) -> Any:
        """Per-case preparation (weight re-layout, workspaces); not timed. Default: the inputs."""
        return inputs

    @abstractmethod
    def run(self, prepared: Any, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Launch one tactic; returns the ``[T, H]`` output (bf16 for kernels)."""

    def launcher(self, prepared: Any, tactic: Tactic, output: Optional[torch.Tensor] = None) -> Callable[[], Any]:
        """A callable that launches ``tactic`` on ``prepared`` into ``output`` each time it is called and returns
        the result (the ``[T, H]`` output, or a list/tuple whose first item it is).  Forcing the tactic and checking
        the arguments happen here, once; the callable is what :mod:`fp4moe_diag.measure` times, so a backend should
        return the kernel entry point itself with its arguments bound (``functools.partial``), not Python of its own.
        It stays valid until the next :meth:`launcher` of this backend or :meth:`end_launches`.  This default wraps
        :meth:`run` (so a backend with only ``run`` works, its checks then inside the timed window)."""
        run = self.run
        return functools.partial(run, prepared, tactic, output)

    def launch_once(self, prepared: Any, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One call through :meth:`launcher`, then :meth:`end_launches`: the ``[T, H]`` output (the first item where
        the entry point returns a list or tuple).  The :meth:`run` of a backend whose launcher is the whole call."""
        try:
            res = self.launcher(prepared, tactic, output)()
        finally:
            self.end_launches(prepared)
        return res[0] if isinstance(res, (list, tuple)) else res

    def end_launches(self, prepared: Any) -> None:
        """Undo what :meth:`launcher` set up in a library's global state (a forced tactic), after the last call of
        a launcher; the tuner calls it after each tactic's measurement.  Default: nothing to undo."""

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
