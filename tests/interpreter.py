"""Shared by the Triton interpreter tests: whether triton imports, the environment of a child process that imports
this checkout, and running a script in a fresh interpreter (``TRITON_INTERPRET=1`` fixes the mode at import) that
prints one ``RESULT <json>`` line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]


def _has_triton() -> bool:
    try:  # importing triton here is harmless: only importing the kernels module fixes interpret mode
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


HAS_TRITON = _has_triton()

#: the ptxas each Triton release (major, minor) calls for sm_90, its wheel's own: 3.6 and 3.7 their CUDA 12.8 ``ptxas``,
#: 3.9 its 13.4 ``ptxas-blackwell`` (``environment.triton_ptxas``; docs/evidence-s37.md)
SM90_PTXAS = {(3, 6): "12.8", (3, 7): "12.8", (3, 9): "13.4"}
#: the ptxas our backend builds its -tNf kernels with on sm_90 under each release (backends.triton.assembler): Triton's
#: own where it does not serialise them, else the older one the release ships (3.9.0: 12.9)
TNF_PTXAS = {(3, 6): "12.8", (3, 7): "12.8", (3, 9): "12.9"}

#: CI's second Triton leg (``.ci/run`` sets ``FP4MOE_SECOND_TRITON=1`` when it runs the interpreter tests again under
#: the GPU image's Triton 3.6.0): the heaviest interpreter scripts run every tactic family there but fewer tiles and
#: cases of each, which the main leg (the newest Triton) runs in full.  Scripts see it as ``SECOND_TRITON``.
SECOND_TRITON = os.environ.get("FP4MOE_SECOND_TRITON", "0") == "1"


def sub_env(**extra: str) -> dict[str, str]:
    """This process's environment with the checkout first on ``PYTHONPATH``, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def run_result_script(script: str, timeout: int = 1200) -> dict:
    """Run ``script`` under the Triton interpreter in a child process; the JSON of its last ``RESULT`` line."""
    script = f"SECOND_TRITON = {SECOND_TRITON}\n" + script
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=sub_env(TRITON_INTERPRET="1"), cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, f"interpreter run failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def interpreted_results(script: str) -> dict:
    """The module-scoped fixture body of an interpreter test file: skip without triton, else :func:`run_result_script`."""
    import pytest

    if not HAS_TRITON:
        pytest.skip("triton is not installed")
    return run_result_script(script)


#: the last lines of every interpreter script (which fills ``out`` and imports json and its backend's
#: ``kernels_interpreted``): whether the kernels ran interpreted, then the results as one RESULT line
RESULT_TAIL = '\nout["interpreted"] = kernels_interpreted()\nprint("RESULT " + json.dumps(out))\n'


def interpreter_fixture(script: str):
    """The module-scoped fixture ``interp_results`` of an interpreter test file: ``script`` and :data:`RESULT_TAIL`
    run under the interpreter in a child process (:func:`interpreted_results`), once per module."""
    import pytest

    @pytest.fixture(scope="module")
    def interp_results() -> dict:
        return interpreted_results(script + RESULT_TAIL)

    return interp_results


def needs_sass_tools():
    """The skip mark of a test of the sm_90a builds (:mod:`fp4moe_diag.profiling.sass`): it needs triton with its
    bundled ptxas, nvdisasm and cuobjdump."""
    import pytest

    return pytest.mark.skipif(not bundled_tools("ptxas", "nvdisasm", "cuobjdump"),
                              reason="triton with its bundled CUDA tools is not installed")


def bundled_tools(*tools: str) -> bool:
    """Whether triton imports and bundles every CUDA tool of ``tools`` (ptxas, nvdisasm, cuobjdump): the sm_90a
    build tests run on a CPU host with them."""
    if not HAS_TRITON:
        return False
    from fp4moe_diag.profiling.sass import bundled_tool

    try:
        return all(bundled_tool(t) for t in tools)
    except ValueError:
        return False


def check_twins(results: dict, errors: int, twins: int, tol: float) -> None:
    """An interpreter run of a tactic family against its plain twins (``<label>/err``: relative L2 against the fp32
    reference, ``<label>/same_bits``: the output equals the twin's): ``errors`` errors all under ``tol``, ``twins``
    comparisons all bit-identical."""
    assert results["interpreted"] is True
    errs = {k: v for k, v in results.items() if k.endswith("/err")}
    assert len(errs) == errors and not {k: v for k, v in errs.items() if not v < tol}, errs
    same = {k: v for k, v in results.items() if k.endswith("/same_bits")}
    assert len(same) == twins and all(same.values()), same


_TWIN_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
out = {{}}
for name, kw in {cases}.items():
    inp = build_inputs(MoECase(**{{**dict(num_tokens=6, top_k=2, num_experts=8, local_num_experts=4,
                                          local_expert_offset=4), **kw}}))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    for base, lab in {pairs}:
        y0 = b.run(prep, Tactic(id=base, label=base))
        y = b.run(prep, Tactic(id=lab, label=lab))
        out[f"{{name}}/{{lab}}/err"] = float((y.float() - ref).norm() / ref.norm())
        out[f"{{name}}/{{lab}}/same_bits"] = bool(torch.equal(y, y0))
"""


def one_per_family(labels: Sequence[str]) -> list[str]:
    """The first label of each tactic family in ``labels``: a family is a label without its tile
    (``m16n64k128w4s3``), e.g. ``-ps-sk2-pdl``."""
    seen: dict[str, str] = {}
    for lab in labels:
        seen.setdefault(re.sub(r"^m\d+n\d+k\d+w\d+s\d+", "", lab), lab)
    return list(seen.values())


def twin_script(cases: dict[str, dict], pairs: Sequence[tuple[str, str]]) -> str:
    """The interpreter script of a tactic family against its plain twins (for :func:`interpreter_fixture`, read by
    :func:`check_twins`): per case (MoECase keywords over 6 tokens, top_k 2, 8 experts of which this rank holds 4..7)
    and per ``(plain label, variant label)``, ``<case>/<variant>/err`` (relative L2 against the fp32 reference) and
    ``<case>/<variant>/same_bits`` (the variant's output equals the plain one's)."""
    return _TWIN_SCRIPT.format(cases=repr(dict(cases)), pairs=repr([tuple(p) for p in pairs]))
