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

    pytest.importorskip("flashinfer")
    for t in prebuilt.TARGETS.values():
        mod = prebuilt.owner_module(t)  # the module defining the getter (0.7: flashinfer.quantization.*)
        assert callable(getattr(mod, t.factory))
        assert hasattr(getattr(mod, t.getter), "cache_clear")
    from fp4moe_diag.backends.flashinfer.api import get_api

    owner = prebuilt.owner_module(prebuilt.TARGETS["fp4_quantization_sm90"]).__name__
    assert owner == {"v05": "flashinfer.fp4_quantization",
                     "v07": "flashinfer.quantization.fp4_quantization"}[get_api().name]


class FakeModule:
    def __init__(self, *names):
        self.names = set(names)

    def implements_function(self, name):
        return name in self.names


def test_a_cutlass_module_of_the_other_generation_is_refused():
    pytest.importorskip("flashinfer")
    from fp4moe_diag.backends.flashinfer.api import get_api

    so052 = FakeModule("init")  # what FlashInfer 0.5.2's binding exports
    so074 = FakeModule("init", "set_deepgemm_jit_include_dirs", "interleave_moe_weights_for_sm90_mixed_gemm")
    if get_api().name == "v07":
        prebuilt.check_cutlass_module(so074, "x074.so")
        with pytest.raises(ValueError, match=r"x052.so: this CUTLASS module lacks \['set_deepgemm_jit_include_dirs'"):
            prebuilt.check_cutlass_module(so052, "x052.so")
    else:
        prebuilt.check_cutlass_module(so052, "x052.so")
        with pytest.raises(ValueError, match="x074.so: this CUTLASS module exports"):
            prebuilt.check_cutlass_module(so074, "x074.so")
