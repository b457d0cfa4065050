"""Nothing of the suite inside the timed window: a timed call runs the backend's launcher and no other Python of
this package.  On CPU, ``time_fn`` reads its clock right before and right after each timed call; the clock here
opens and closes a window on those reads, and ``sys.setprofile`` records every Python function called inside."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Optional

import pytest
import torch

import fp4moe_diag
from fp4moe_diag import MoECase
from fp4moe_diag.backends.base import Backend, Tactic, launch_sequence
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.measure.timing import time_fn
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.tune import tune

PKG = str(Path(fp4moe_diag.__file__).resolve().parent)
CASE = MoECase(num_tokens=4, hidden_size=64, intermediate_size=32, num_experts=4, top_k=2, seed=3)


class WindowClock:
    """A clock whose reads alternately open and close the timed window; :meth:`profile` records the code objects
    of the Python functions called while it is open."""

    def __init__(self) -> None:
        self.open = False
        self.now = 0.0
        self.windows = 0
        self.codes: list = []

    def __call__(self) -> float:
        self.open = not self.open
        self.windows += self.open
        self.now += 1e-3
        return self.now

    def profile(self, frame, event, arg) -> None:
        if self.open and event == "call":
            self.codes.append(frame.f_code)

    def ours(self, allowed=(), allowed_files=()) -> list[str]:
        """Functions of this package called in the window, but ``allowed`` code objects and ``allowed_files``."""
        return [f"{c.co_filename}:{c.co_name}" for c in self.codes
                if c.co_filename.startswith(PKG) and c not in allowed and c.co_filename not in allowed_files]


def profiled(window: WindowClock, fn, *args, **kwargs):
    sys.setprofile(window.profile)
    try:
        return fn(*args, **kwargs)
    finally:
        sys.setprofile(None)


class BoundBackend(Backend):
    """Its launcher is a bound torch call: nothing of ours runs when it is called."""

    name = "bound"
    device_types = ("cpu",)

    def __init__(self) -> None:
        self.run_calls = 0

    def tactics(self, case, prepared=None):
        return [Tactic(id=i, label=f"t{i}", is_default=i == 0) for i in range(3)]

    def prepare(self, inputs):
        return reference_moe(inputs).to(torch.bfloat16)

    def run(self, prepared, tactic, output: Optional[torch.Tensor] = None):
        self.run_calls += 1
        return output.copy_(prepared)

    def launcher(self, prepared, tactic, output=None):
        return functools.partial(output.copy_, prepared)


def test_the_tuner_times_only_the_launcher():
    b = BoundBackend()
    clock = WindowClock()
    opts = MeasureOptions(warmup=1, repeats=4, screen=2, screen_top=1)
    res = profiled(clock, tune, CASE, b, "cpu", options=opts, clock=clock)
    assert list(res.rows["status"]) == ["ok"] * 3 and b.run_calls == 0  # checked and timed through the launcher
    # every timed call lasts one clock step, so all tie and t0 is both the fastest and the default: 3 tactics
    # screened (2 each), t0 in full (4), the best (t0) repeated (4)
    assert clock.windows == 3 * 2 + 4 + 4 and res.best.id == 0
    assert clock.codes and clock.ours() == []  # torch's Python ran in the window, none of ours


def test_the_window_sees_the_suite_when_a_backend_times_its_own_python():
    """The same measurement over the reference backend (its launcher is run: float32 torch code of this package)
    finds our frames: the check above can fail."""
    from fp4moe_diag.backends import get_backend

    clock = WindowClock()
    profiled(clock, tune, CASE, get_backend("reference"), "cpu", options=MeasureOptions(warmup=0, repeats=2),
             clock=clock)
    assert any(name.endswith(":reference_moe") for name in clock.ours())


def test_a_sequence_launcher_is_the_only_frame_of_ours():
    out = torch.zeros(4)
    ones = torch.ones(4)
    launch = launch_sequence([functools.partial(out.add_, ones), functools.partial(out.mul_, 2.0)], out)
    clock = WindowClock()
    profiled(clock, time_fn, launch, "cpu", warmup=0, repeats=3, clock=clock)
    assert clock.windows == 3 and torch.equal(out, torch.full((4,), 14.0))  # ((0+1)*2+1)*2+1)*2
    assert clock.ours(allowed={launch.__code__}) == []
    assert sum(c is launch.__code__ for c in clock.codes) == 3


@pytest.fixture
def cutlass():
    pytest.importorskip("flashinfer")
    from fp4moe_diag.backends.flashinfer import api
    from fp4moe_diag.backends.flashinfer.cutlass import CutlassBackend
    from fp4moe_diag.backends.flashinfer.stubs import stub_cutlass_module
    from fp4moe_diag.problem.inputs import build_inputs

    case = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2,
                   local_num_experts=8, model="small")
    b = CutlassBackend(scale_layout="raw")  # the stub computes nothing: any byte layout will do
    with stub_cutlass_module() as stub:
        p = b.prepare(build_inputs(case))
        p.kwargs["enable_pdl"] = False
        out = torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16)
        g2 = 3 if api.get_api().name == "v05" else 6 + 3
        yield b, p, out, stub, Tactic(id=(1, g2), label="g1:1+g2:x")


def _stub_allowed() -> tuple[set, set]:
    """The CPU stand-ins of the kernel module and the CUDA queries (they replace what a GPU would run)."""
    from fp4moe_diag.backends.flashinfer import stubs

    codes = {getattr(torch.cuda, n).__code__ for n in ("is_current_stream_capturing", "get_device_capability")
             if hasattr(getattr(torch.cuda, n), "__code__")}
    return codes, {stubs.__file__}


def test_cutlass_launcher_runs_only_flashinfer(cutlass):
    b, p, out, stub, tactic = cutlass
    launch = b.launcher(p, tactic, out)
    clock = WindowClock()
    try:
        profiled(clock, time_fn, launch, "cpu", warmup=1, repeats=3, clock=clock)
    finally:
        b.end_launches(p)
    codes, files = _stub_allowed()
    assert stub.tactics_run == [tactic.id] * 4  # the forced tactic reached run_moe on every call
    assert clock.windows == 3 and any("flashinfer" in c.co_filename for c in clock.codes)
    assert clock.ours(codes, files) == []


def test_cutlass_run_has_per_call_work_of_ours(cutlass):
    """Timing ``run`` (the untimed convenience: launcher made on every call) shows our frames: the launcher is what
    keeps them out."""
    b, p, out, stub, tactic = cutlass
    clock = WindowClock()
    profiled(clock, time_fn, lambda: b.run(p, tactic, out), "cpu", warmup=0, repeats=2, clock=clock)
    codes, files = _stub_allowed()
    assert stub.tactics_run == [tactic.id] * 2
    assert any(name.endswith(":checked_kwargs") for name in clock.ours(codes, files))
