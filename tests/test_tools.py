"""tools/: no sys.path inserts or hard-coded /tmp paths in the Python kit, every helper a script calls on a sibling
module exists, and tools/device/gpu_session.sh runs only files that are there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
KITS = (TOOLS / "cutlass_slim", TOOLS / "device")  # the slim-build kit; the device-session kit
SCRIPTS = sorted(p for kit in KITS for p in kit.glob("*.py"))


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_sibling_attributes(path: Path) -> list[str]:
    """``alias.name`` uses of a sibling tools module (``import cutlass_slim_common as common``) that it lacks."""
    tree = ast.parse(path.read_text())
    kit = path.parent
    aliases = {(a.asname or a.name): kit / f"{a.name}.py" for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if (kit / f"{a.name}.py").is_file()}
    bad = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
            if n.attr not in top_level_names(aliases[n.value.id]):
                bad.append(f"{path.name}:{n.lineno}: {aliases[n.value.id].stem} has no {n.attr}")
    return bad


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_path_hacks_or_tmp_paths(path: Path):
    text = path.read_text()
    assert not re.search(r"sys\.path\.(insert|append)", text), path.name
    assert not re.search(r"""["']/tmp/""", text), path.name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_helpers_called_on_sibling_modules_exist(path: Path):
    assert missing_sibling_attributes(path) == []


def test_the_sibling_checker_finds_a_missing_helper(tmp_path, monkeypatch):
    (tmp_path / "kit.py").write_text("def setup_env(args):\n    pass\n")
    (tmp_path / "script.py").write_text("import kit as k\nk.setup_env(1)\nk._setup_env(1)\n")
    assert missing_sibling_attributes(tmp_path / "script.py") == ["script.py:3: kit has no _setup_env"]


def test_gpu_session_runs_only_files_that_exist():
    text = (TOOLS / "device" / "gpu_session.sh").read_text()
    used = set(re.findall(r"tools/([\w./]+\.(?:py|sh))", text))
    assert used and sorted(u for u in used if not (TOOLS / u).is_file()) == []
    assert "debug_cutlass" not in text and not (TOOLS / "debug_cutlass.py").exists()


def test_tools_is_two_kits():
    assert sorted(p.name for p in TOOLS.iterdir()) == ["cutlass_slim", "device"]
