"""Which ptxas builds our ``-tNf`` kernels (:mod:`fp4moe_diag.backends.triton.assembler`): the choice (fake ptxas
scripts and a stubbed Triton choice), the setting's refusals, the build's environment, the rows' ``triton_ptxas``
(a fake backend through the real tuner), and the sm_90a builds of the installed Triton both ways."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from typing import Optional

import pytest
import torch

from fp4moe_diag import settings
from fp4moe_diag.backends.base import Backend, Tactic
from fp4moe_diag.backends.triton import assembler
from fp4moe_diag.backends.triton.assembler import (Assembler, assembled_by, launch_assembler, ptx_isa,
                                                  tail_fused_ptxas)
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.problem.case import MoECase
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.tune import tune
from interpreter import needs_sass_tools, sub_env

TNF = "m128n128k64w16s3-ps-gu-g2n256-t32f-pdl"


def _fake_ptxas(folder, name: str, release: str) -> str:
    """An executable that prints ptxas' ``--version`` text for ``release`` ('' prints something else)."""
    path = os.path.join(folder, name)
    text = f"Cuda compilation tools, release {release}, V{release}.1" if release else "not a ptxas"
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\necho '{text}'\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def triton_choice(monkeypatch, tmp_path):
    """Stub Triton's sm_90 choice (13.4 as shipped) and its ptxas for older targets (12.9); returns a setter."""
    legacy = _fake_ptxas(tmp_path, "ptxas", "12.9")
    state = {"choice": ("/triton/bin/ptxas-blackwell", "13.4", False), "legacy": legacy}
    monkeypatch.setattr(assembler, "triton_ptxas_tool", lambda arch: state["choice"])
    monkeypatch.setattr(assembler, "_legacy_ptxas", lambda: state["legacy"])
    monkeypatch.delenv(settings.TNF_PTXAS, raising=False)
    return state


def test_the_older_ptxas_builds_the_tnf_kernels_where_tritons_serialises(triton_choice, tmp_path, monkeypatch):
    legacy = triton_choice["legacy"]
    assert tail_fused_ptxas(90) == Assembler(legacy, "12.9")  # Triton 3.9: 13.4 for sm_90, 12.9 below
    assert tail_fused_ptxas(100) == Assembler("", "13.4")  # no wgmma on Blackwell: Triton's own
    triton_choice["choice"] = ("/triton/bin/ptxas", "12.8", False)  # Triton 3.6 / 3.7: 12.8 for sm_90
    assert tail_fused_ptxas(90) == Assembler("", "12.8")
    triton_choice["choice"] = ("/usr/local/cuda/bin/ptxas", "13.4", True)  # the user pointed Triton at one
    assert tail_fused_ptxas(90) == Assembler("", "13.4")
    triton_choice["choice"] = ("/triton/bin/ptxas-blackwell", "13.4", False)
    triton_choice["legacy"] = _fake_ptxas(tmp_path, "ptxas-13.3", "13.3")  # an older ptxas that serialises too
    assert tail_fused_ptxas(90) == Assembler("", "13.4")
    triton_choice["legacy"] = ""  # a Triton that ships no other ptxas
    assert tail_fused_ptxas(90) == Assembler("", "13.4")
    own = _fake_ptxas(tmp_path, "my-ptxas", "13.1")
    monkeypatch.setenv(settings.TNF_PTXAS, own)  # the setting wins on sm_90, whatever its release
    assert tail_fused_ptxas(90) == Assembler(own, "13.1")
    assert tail_fused_ptxas(100) == Assembler("", "13.4")


def test_launches_and_rows_ask_the_same_question(triton_choice):
    """:func:`launch_assembler` (the ``-tNf`` launchers and the rows' ``triton_ptxas`` both ask it): none off a GPU or
    under the interpreter, else :func:`tail_fused_ptxas` of the capability."""
    legacy = triton_choice["legacy"]
    assert launch_assembler((9, 0), interpreted=False) == Assembler(legacy, "12.9")
    assert launch_assembler((9, 0), interpreted=True) == Assembler("", "")
    assert launch_assembler(None, interpreted=False) == Assembler("", "")
    assert launch_assembler((10, 0), interpreted=False) == Assembler("", "13.4")


def test_the_setting_is_refused_when_it_names_no_ptxas(triton_choice, tmp_path, monkeypatch):
    plain = tmp_path / "notes.txt"
    plain.write_text("x")
    for bad, why in ((str(tmp_path / "missing"), "expected an executable ptxas"),
                     (str(plain), "expected an executable ptxas"),
                     (_fake_ptxas(tmp_path, "other", ""), "printed no 'release X.Y'")):
        monkeypatch.setenv(settings.TNF_PTXAS, bad)
        with pytest.raises(ValueError, match=f"^{settings.TNF_PTXAS}: .*{why}"):
            assembler.check_setting()
        with pytest.raises(ValueError, match=f"^{settings.TNF_PTXAS}: "):
            tail_fused_ptxas(90)
    monkeypatch.delenv(settings.TNF_PTXAS)
    assembler.check_setting()  # unset: nothing to check


def test_a_sweep_refuses_a_bad_setting_before_its_folder(tmp_path, monkeypatch):
    from fp4moe_diag.runs import SweepSpec, run_sweep

    monkeypatch.setenv(settings.TNF_PTXAS, str(tmp_path / "missing"))
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=f"^{settings.TNF_PTXAS}: expected an executable ptxas"):
        run_sweep(SweepSpec(models=("gpt-oss-20b",), tokens=(1,), backends=("reference",), device="cpu",
                            hidden_scale=16), out, progress_bar=False, log=lambda s: None)
    assert not out.exists()


@needs_sass_tools()
def test_the_build_environment_is_set_inside_and_restored_after(tmp_path, monkeypatch):
    from triton import knobs

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH", raising=False)
    legacy = _fake_ptxas(tmp_path, "ptxas", "12.9")
    with assembled_by(Assembler(legacy, "12.9")):
        assert os.environ["TRITON_PTXAS_BLACKWELL_PATH"] == legacy
        assert knobs.cache.dir == str(tmp_path / "cache" / "fp4moe-ptxas12.9")
    assert "TRITON_PTXAS_BLACKWELL_PATH" not in os.environ and os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "cache")
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", "/elsewhere/ptxas")
    with pytest.raises(RuntimeError, match="inside"):
        with assembled_by(Assembler(legacy, "12.9")):
            raise RuntimeError("inside")
    assert os.environ["TRITON_PTXAS_BLACKWELL_PATH"] == "/elsewhere/ptxas"
    with assembled_by(Assembler("", "13.4")):  # Triton's own choice: nothing set
        assert os.environ["TRITON_PTXAS_BLACKWELL_PATH"] == "/elsewhere/ptxas"


def test_ptx_isa_reads_the_version_directive():
    assert ptx_isa("//\n// Generated by LLVM NVPTX\n\n.version 8.8\n.target sm_90a\n") == "8.8"
    assert ptx_isa(".target sm_90a\n") == ""


CASE = MoECase(num_tokens=4, hidden_size=64, intermediate_size=32, num_experts=4, top_k=2, seed=3)


class AssembledBackend(Backend):
    """Two tactics; the second's rows say another ptxas built it (what the Triton backend says of ``-tNf``)."""

    name = "assembled"
    device_types = ("cpu",)

    def tactics(self, case, prepared=None):
        return [Tactic(id=0, label="plain", is_default=True), Tactic(id=1, label="tnf")]

    def tactic_columns(self, tactic):
        return {"triton_ptxas": "12.9"} if tactic.id == 1 else {}

    def run(self, prepared, tactic, output: Optional[torch.Tensor] = None):
        y = reference_moe(prepared).to(torch.bfloat16)
        return output.copy_(y) if output is not None else y


def test_a_tactics_own_columns_reach_its_row_over_the_runs():
    env = {"triton_ptxas": "13.4", "triton_version": "3.9.0"}
    res = tune(CASE, AssembledBackend(), "cpu", options=MeasureOptions(warmup=1, repeats=2), env=env)
    df = res.rows.set_index("tactic_label")
    assert dict(df["triton_ptxas"]) == {"plain": "13.4", "tnf": "12.9"}
    assert set(df["triton_version"]) == {"3.9.0"} and (df["status"] == "ok").all()


def _summary(tmp_path, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "fp4moe_diag.profiling.sass_over", "--tactic", TNF, "--gemm", "gemm2"],
                         capture_output=True, text=True, timeout=600,
                         env=sub_env(TRITON_CACHE_DIR=str(tmp_path), **env))
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@needs_sass_tools()
def test_the_backends_build_keeps_groups_in_flight_and_a_serialising_ptxas_does_not(tmp_path):
    """sm_90a, the installed Triton, gemm2 of the offered ``-t32f`` tile: built as the backend builds it (under 3.9,
    by the 12.9 ptxas Triton ships for older targets; under 3.6, by its own 12.8) both K loops keep wgmma groups in
    flight, no advisory.  With ``FP4MOE_TNF_PTXAS`` naming the ptxas Triton calls for sm_90 (3.9: 13.4) the loops
    wait for every wgmma where that one is 13.3 or later, ptxas' C7512 saying why (docs/evidence-s37.md)."""
    from fp4moe_diag.backends.triton.defaults import SERIALISING_PTXAS
    from fp4moe_diag.environment import triton_ptxas_tool
    from fp4moe_diag.release import release_tuple

    own = _summary(tmp_path / "own")
    assert release_tuple(own["ptxas"], 2) < SERIALISING_PTXAS and not own["advisories"], own
    assert [lp["wgmma"] for lp in own["loops"]] == [8, 4]
    assert all(lp["waits"] and min(lp["waits"]) >= 1 for lp in own["loops"]), own["loops"]
    path, version, _ = triton_ptxas_tool(90)
    theirs = _summary(tmp_path / "theirs", **{settings.TNF_PTXAS: path})
    assert theirs["ptxas"] == version
    if release_tuple(version, 2) >= SERIALISING_PTXAS:
        assert [lp["waits"] for lp in theirs["loops"]] == [[0], [0]]
        assert any(a.startswith("C7512: wgmma.mma_async instructions are serialized") for a in theirs["advisories"])
    else:
        assert theirs["loops"] == own["loops"] and not theirs["advisories"]
