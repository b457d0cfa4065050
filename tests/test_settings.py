"""One module for the FP4MOE_* settings: every FP4MOE_ variable the package names is declared in
fp4moe_diag.settings, and only that module reads the environment for them."""

import re
from pathlib import Path

import pytest

from fp4moe_diag import settings

PKG = Path(__file__).resolve().parents[1] / "fp4moe_diag"


def test_every_variable_named_in_the_package_is_a_declared_setting():
    named = set()
    for p in PKG.rglob("*.py"):
        named |= set(re.findall(r"\bFP4MOE_[A-Z0-9_]*[A-Z0-9]\b", p.read_text()))
    assert named == set(settings.VARIABLES)


def test_only_settings_reads_them():
    readers = [p.relative_to(PKG) for p in PKG.rglob("*.py")
               if re.search(r"(environ\.get|getenv)\(\s*[\"']FP4MOE_", p.read_text())]
    assert readers == [], readers


def test_read(monkeypatch):
    monkeypatch.setenv(settings.TUNE_SETTINGS, "  max=1 ")
    assert settings.read(settings.TUNE_SETTINGS) == "max=1"
    monkeypatch.delenv(settings.TUNE_SETTINGS)
    assert settings.read(settings.TUNE_SETTINGS) == ""
    with pytest.raises(ValueError, match="not a setting"):
        settings.read("FP4MOE_NOPE")
