"""The package's shape: no import cycle (module- or function-level), no module over 400 lines but kernel source,
each notebook imports one helper module named after it."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "fp4moe_diag"
#: modules allowed past the size limit: Triton kernel source
KERNEL_SOURCE = {"fp4moe_diag.backends.triton._kernels"}
MAX_LINES = 400


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(mod: str, path: Path) -> list[tuple[str, str, int]]:
    """``(module, name or '', line)`` of every import of ``mod``, relative ones resolved; ``name`` is the
    imported name of a ``from X import name``."""
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out += [(resolve(mod, is_pkg, node), a.name, node.lineno) for a in node.names]
    return out


def _top_level_names(path: Path) -> set[str] | None:
    """Names a module defines at its top level (defs, classes, assignments, imports); None when it has a module
    ``__getattr__`` (lazy names: anything may resolve)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):  # TYPE_CHECKING / optional imports
            names |= {(a.asname or a.name).split(".")[0] for n in ast.walk(node)
                      if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
            names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            names |= {t.id for n in ast.walk(node) if isinstance(n, ast.Assign) for t in n.targets
                      if isinstance(t, ast.Name)}
    return names


def unresolvable_imports() -> list[str]:
    """Imports of the package's own modules that name a module or a name that does not exist."""
    mods = modules()
    bad = []
    for mod, path in mods.items():
        for target, name, line in _imports(mod, path):
            if not target.startswith("fp4moe_diag"):
                continue
            where = f"{mods[mod].relative_to(ROOT)}:{line}"
            if target not in mods:
                bad.append(f"{where}: no module {target}")
                continue
            if name and name != "*" and f"{target}.{name}" not in mods:
                defined = _top_level_names(mods[target])
                if defined is not None and name not in defined:
                    bad.append(f"{where}: {target} defines no {name}")
    return bad


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for base, name, _line in _imports(mod, path):
            t = f"{base}.{name}" if name and f"{base}.{name}" in mods else base
            if t.startswith("fp4moe_diag") and t not in mods:
                continue  # reported by test_every_import_resolves
            if t.startswith("fp4moe_diag") and t != mod and not mod.startswith(t + "."):
                graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return []

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return []


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert not cycle, " -> ".join(cycle)


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
    g = import_graph()
    assert "fp4moe_diag.measure.timing" in g["fp4moe_diag.measure.ceilings"]  # relative imports resolved
    assert "fp4moe_diag.runs" in g["fp4moe_diag.report.context"]  # function-level imports count too


def test_every_import_resolves():
    bad = unresolvable_imports()
    assert not bad, "\n".join(bad)


def test_the_import_checker_finds_unresolvable_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "fp4moe_diag"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from .plotting import save_figure\nfrom ..b import there, missing\n"
                                      "import fp4moe_diag.nope\n")
    (pkg / "b.py").write_text("there = 1\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PKG", pkg)
    assert unresolvable_imports() == ["fp4moe_diag/sub/a.py:1: no module fp4moe_diag.sub.plotting",
                                      "fp4moe_diag/sub/a.py:2: fp4moe_diag.b defines no missing",
                                      "fp4moe_diag/sub/a.py:3: no module fp4moe_diag.nope"]


@pytest.mark.parametrize("mod", sorted(set(modules()) - KERNEL_SOURCE))
def test_module_size(mod: str):
    n = len(modules()[mod].read_text().splitlines())
    assert n <= MAX_LINES, f"{mod} has {n} lines (limit {MAX_LINES}): split it by concern"


def test_each_notebook_imports_its_own_helper_module():
    for nb in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        imports = set(re.findall(r"^\s*(?:from|import)\s+(fp4moe_diag[\w.]*)(?:\s+import\s+([\w, ]+))?", code, re.M))
        assert imports == {("fp4moe_diag.report", f"nb{nb.name[:2]} as R")}, (nb.name, imports)
        assert (PKG / "report" / f"nb{nb.name[:2]}.py").is_file()
