"""The README a newcomer reads: under ~300 lines, wrapped, and its Modules table lists every package and top-level
module of fp4moe_diag and nothing that does not exist (the schema table is checked in test_shapes.py)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def modules_in_tree() -> set[str]:
    pkg = ROOT / "fp4moe_diag"
    mods = {p.name for p in pkg.glob("*.py")}
    mods |= {p.name + "/" for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return mods


def modules_in_table() -> set[str]:
    section = README.split("## Modules", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return names


def test_modules_table_matches_the_tree():
    tree, table = modules_in_tree(), modules_in_table()
    assert not tree - table, f"README Modules table lacks {sorted(tree - table)}"
    assert not table - tree, f"README Modules table names what does not exist: {sorted(table - tree)}"


def test_readme_is_short_and_wrapped():
    lines = README.splitlines()
    assert len(lines) <= 300
    prose = [ln for ln in lines if not ln.startswith("|")]
    assert max(map(len, prose)) <= 120, max(prose, key=len)
