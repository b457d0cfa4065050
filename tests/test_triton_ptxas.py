"""Which ptxas Triton calls for the GPU is part of the build a row records (``environment.triton_build``): the same
Triton's PTX pipelines the ``-tNf`` kernels' wgmmas under ptxas 12.8-13.2 and serialises them under 13.3-13.4
(tests/test_triton_over.py, docs/evidence-s37.md).  A row built with a ptxas other than the one the release ships
reads ``triton_version`` ``X.Y.Z+ptxasA.B``, and ``triton_ptxas`` always holds the version."""

from __future__ import annotations

import os

import pytest

from fp4moe_diag.environment import environment_info, triton_build, triton_ptxas
from fp4moe_diag.results import COLUMNS
from interpreter import HAS_TRITON, SM90_PTXAS

needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")


def fake_ptxas(folder, release: str) -> str:
    """An executable that answers ``--version`` as ptxas ``release`` does."""
    p = folder / "ptxas"
    p.write_text(f"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                 f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n")
    p.chmod(0o755)
    return str(p)


@needs_triton
def test_the_installed_release_calls_its_own_ptxas(monkeypatch):
    import triton

    from fp4moe_diag.release import release_tuple

    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH", raising=False)
    version, overridden = triton_ptxas(90)
    assert not overridden
    want = SM90_PTXAS.get(release_tuple(triton.__version__, 2))
    if want is None:
        pytest.skip(f"no recorded sm_90 ptxas for Triton {triton.__version__}")
    assert version == want
    assert triton_build(triton.__version__, 90) == (triton.__version__, want)


@needs_triton
def test_another_ptxas_is_named_in_the_rows_version(monkeypatch, tmp_path):
    path = fake_ptxas(tmp_path, "12.8")
    monkeypatch.setenv("TRITON_PTXAS_PATH", path)
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", path)
    assert triton_ptxas(90) == ("12.8", True)
    assert triton_build("3.9.0", 90) == ("3.9.0+ptxas12.8", "12.8")
    assert triton_build("3.9.0", 0) == ("3.9.0", "")  # no GPU: no ptxas built the row
    assert triton_build("", 90) == ("", "")  # no Triton


@needs_triton
def test_pointing_at_the_bundled_ptxas_is_no_override(monkeypatch):
    from triton.backends.nvidia.compiler import get_ptxas

    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH", raising=False)
    bundled = get_ptxas(90).path
    monkeypatch.setenv("TRITON_PTXAS_PATH", bundled)
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", bundled)
    version, overridden = triton_ptxas(90)
    assert not overridden and version


def test_every_environment_column_is_in_the_schema():
    info = environment_info("cpu")
    assert set(info) - {"host"} <= set(COLUMNS), set(info) - set(COLUMNS)
    assert info["triton_ptxas"] == ""  # CPU rows: the interpreter, no ptxas


def test_sass_over_refuses_a_ptxas_that_is_no_executable(tmp_path):
    from fp4moe_diag.profiling.sass_over import main, use_ptxas

    with pytest.raises(ValueError, match="ptxas: expected an executable ptxas"):
        use_ptxas(str(tmp_path / "missing"))
    (tmp_path / "plain").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["--tactic", "m128n128k64w16s3-ps-gu-g2n256-t32f", "--ptxas", str(tmp_path / "plain")])
    assert e.value.code == 2
    assert "TRITON_PTXAS_PATH" not in os.environ or os.environ["TRITON_PTXAS_PATH"] != str(tmp_path / "plain")


def test_the_reports_header_names_the_ptxas_a_run_recorded():
    from fp4moe_diag.report.nb05 import report_header
    from fp4moe_diag.results import to_frame
    from frames import _row

    rows = []
    for run, version, ptxas in (("r-a", "3.9.0", "13.4"), ("r-b", "3.9.0+ptxas12.8", "12.8"), ("r-c", "3.6.0", "")):
        r = _row("triton", "tri0", 0, 1024, 1, "ok", 100.0, is_best=True)
        r.update(run_id=run, triton_version=version, triton_ptxas=ptxas)
        rows.append(r)
    head = report_header(to_frame(rows), "test")
    assert "triton 3.9.0 (ptxas 13.4)," in head and "triton 3.9.0+ptxas12.8 (ptxas 12.8)," in head
    assert "triton 3.6.0, commit" in head  # a run from before the column: no ptxas named
