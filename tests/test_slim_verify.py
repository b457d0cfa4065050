"""tools/cutlass_slim/cutlass_slim_symbols.verify: weak undefined symbols (libstdc++'s transactional-memory clones
``_ZGTtnam`` / ``_ZGTtdlPv``, which a libstdc++ without TM support lacks) are allowed; a strong undefined
symbol that no library provides is an error (issue #22: the H200 build was refused for the weak ones)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("nm") is None, reason="needs cc and nm")


def _symbols():
    spec = importlib.util.spec_from_file_location("cutlass_slim_symbols", ROOT / "tools" / "cutlass_slim" / "cutlass_slim_symbols.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _so(tmp_path: Path, body: str) -> Path:
    src, so = tmp_path / "m.c", tmp_path / "libm_test.so"
    src.write_text(body)
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    return so


WEAK = ("extern void _ZGTtnam(void) __attribute__((weak));\n"
        "void __tvm_ffi_init(void) { if (_ZGTtnam) _ZGTtnam(); }\n")


def test_weak_undefined_are_told_apart(tmp_path):
    strong, weak = _symbols().undefined_dynamic(_so(tmp_path, WEAK))
    assert "_ZGTtnam" in weak
    assert "_ZGTtnam" not in strong


def test_verify_accepts_unresolved_weak_symbols(tmp_path, capsys):
    bad = _symbols().verify(_so(tmp_path, WEAK), exports=("init",))
    assert bad == []
    assert "_ZGTtnam" in capsys.readouterr().out  # reported, not refused


def test_verify_refuses_an_unresolved_strong_symbol(tmp_path):
    so = _so(tmp_path, "extern void fp4moe_no_such_symbol(void);\n"
                       "void __tvm_ffi_init(void) { fp4moe_no_such_symbol(); }\n")
    bad = _symbols().verify(so, exports=("init",))
    assert "fp4moe_no_such_symbol" in " ".join(map(str, bad))
