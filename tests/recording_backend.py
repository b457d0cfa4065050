"""A backend that records the MeasureOptions it is measured with, for tests/test_entry_points.py.

Each :meth:`RecordingBackend.launcher` call finds the tuner's state (``st``, a ``TuneState``) among its callers'
frames and appends one JSON line ``{"pid", "case", "tactic", "options"}`` to the file named by
``$FP4MOE_TEST_RECORD``.  Run as a script (``python tests/recording_backend.py -m MODULE ARGS...``) it registers
itself as backend ``recorder`` and runs ``python -m MODULE ARGS...``: how subprocess entry points (compare-versions
children, torchrun ranks) get it."""

from __future__ import annotations

import functools
import json
import os
import runpy
import sys
from typing import Any, Optional

import torch

from fp4moe_diag.backends.base import Backend, Tactic
from fp4moe_diag.problem.reference import reference_moe

RECORD_ENV = "FP4MOE_TEST_RECORD"


def _tuner_state() -> Any:
    f = sys._getframe(2)
    while f is not None:
        st = f.f_locals.get("st")
        if st is not None and hasattr(st, "options") and hasattr(st, "tactics"):
            return st
        f = f.f_back
    raise AssertionError("launcher called outside the tuner (no TuneState among the callers)")


class RecordingBackend(Backend):
    name = "recorder"
    device_types = ("cpu", "cuda")

    def tactics(self, case, prepared=None) -> list[Tactic]:
        return [Tactic(id="a", label="rec-a", is_default=True), Tactic(id="b", label="rec-b"),
                Tactic(id="c", label="other-c")]

    def prepare(self, inputs):
        return inputs, reference_moe(inputs).to(torch.bfloat16)

    def run(self, prepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        return prepared[1].clone() if output is None else output.copy_(prepared[1])

    def launcher(self, prepared, tactic: Tactic, output: Optional[torch.Tensor] = None):
        st = _tuner_state()
        line = {"pid": os.getpid(), "case": st.case.label, "tactic": tactic.label, "options": st.options.to_dict()}
        with open(os.environ[RECORD_ENV], "a") as f:
            f.write(json.dumps(line) + "\n")
        return functools.partial(output.copy_, prepared[1])


def read_records(path: Any) -> list[dict]:
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


if __name__ == "__main__":
    from fp4moe_diag.backends import REGISTRY

    REGISTRY["recorder"] = "recording_backend:RecordingBackend"
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        raise SystemExit("usage: recording_backend.py -m MODULE ARGS...")
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
