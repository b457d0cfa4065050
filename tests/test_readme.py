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


def test_the_h200_headline_table_is_its_runs_headline_line_for_line():
    """The README's H200 table is rebuilt from committed runs, not typed: its decode rows (T <= 256) are the headline
    of -s26c, its prefill rows (T >= 1024) that of -s32b (session 32: -pdlt and -pdltt among ours) but at T = 1024,
    4096, which are -s37b's (session 37: -t32f among ours), line for line."""
    from fp4moe_diag.analysis.headline import headline_markdown, headline_table
    from fp4moe_diag.run_folder import load_runs

    backends = ["triton", "triton_kernels", "cutlass@0.7.4"]
    want = {}
    for run, prefill in (("2026-12-06-nvidia-h200-s26c", False), ("2026-12-07-nvidia-h200-s32b", True),
                         ("2026-12-07-nvidia-h200-s37b", True)):  # a later run's line replaces an earlier one's
        md = headline_markdown(headline_table(load_runs(ROOT / "data" / "runs" / run), backends), backends)
        for line in md.splitlines():
            if line.startswith("| gpt-oss") and (int(line.split("|")[3]) >= 1024) == prefill:
                want[tuple(c.strip() for c in line.split("|")[1:4])] = line
    section = README.split("## Measured on the H200", 1)[1].split("\n## ", 1)[0]
    got = {tuple(c.strip() for c in ln.split("|")[1:4]): ln for ln in section.splitlines() if ln.startswith("| gpt-oss")}
    assert len(got) == len(want) == 23
    assert got == want
