"""fp4moe_diag.backends.flashinfer.prebuilt: argument checks and the .so.xz unpacking (loading needs a GPU host)."""

import lzma
import os

import pytest

from fp4moe_diag.backends.flashinfer import prebuilt


def test_unknown_target_is_a_value_error_naming_the_targets(tmp_path):
    with pytest.raises(ValueError, match="target: expected one of .*fp4_quantization_sm90"):
        prebuilt.install("fused_moe_sm42", tmp_path / "x.so")


def test_missing_file_names_the_env_variable(tmp_path):
    with pytest.raises(ValueError, match="FP4MOE_FP4QUANT_MODULE / so_path: no file at"):
        prebuilt.install("fp4_quantization_sm90", tmp_path / "missing.so")


def test_materialise_unpacks_xz_once_and_refreshes_when_newer(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    src = tmp_path / "mod.so.xz"
    src.write_bytes(lzma.compress(b"first"))
    out = prebuilt.materialise(src)
    assert out == tmp_path / "t" / "mod.so" and out.read_bytes() == b"first"
    src.write_bytes(lzma.compress(b"second"))
    st = out.stat()
    os.utime(src, (st.st_atime + 10, st.st_mtime + 10))
    assert prebuilt.materialise(src).read_bytes() == b"second"
    plain = tmp_path / "plain.so"
    plain.write_bytes(b"x")
    assert prebuilt.materialise(plain) == plain


def test_install_from_env_ignores_unset_variables(monkeypatch):
    for t in prebuilt.TARGETS.values():
        monkeypatch.delenv(t.env, raising=False)
    assert prebuilt.install_from_env() == {}


def test_targets_match_flashinfer_globals():
    """The factory and getter names exist in the installed FlashInfer (skips without it)."""
    import importlib

    pytest.importorskip("flashinfer")
    for t in prebuilt.TARGETS.values():
        mod = importlib.import_module(t.module)
        assert callable(getattr(mod, t.factory))
        assert hasattr(getattr(mod, t.getter), "cache_clear")
