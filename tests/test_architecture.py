"""The package's shape: no import cycle (module- or function-level), no module over 400 lines but kernel source,
each notebook imports one helper module named after it."""

from __future__ import annotations

import ast
import json
import re
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


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(mod, is_pkg, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:  # fp4moe_diag.x.y.name -> the module that defines it
                    t = t.rpartition(".")[0]
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
