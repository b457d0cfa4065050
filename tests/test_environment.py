"""The set-up files agree with the lock (constraints-cpu.txt): environment.yml, pyproject.toml and
requirements-cpu.txt name nothing the lock's versions do not satisfy, and environment.yml leaves nothing out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
#: conda package names of pip packages
CONDA_NAMES = {"pytorch": "torch"}


def lock() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "constraints-cpu.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints-cpu.txt: {line!r} is not a name==version pin"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def requirements_txt() -> list[Requirement]:
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "requirements-cpu.txt").read_text().splitlines()]
    return [Requirement(ln) for ln in lines if ln]


def environment_yml() -> list[Requirement]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    reqs = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            reqs += [Requirement(d) for d in dep["pip"] if not d.startswith("-")]
        else:  # conda: name, name=1.2 or name>=1.2
            name, op, version = re.fullmatch(r"([\w.-]+)\s*(==|=|>=|<=|<|>)?\s*([\w.*+-]*)", dep).groups()
            spec = (f"=={version}.*" if op == "=" else f"{op}{version}") if op else ""  # conda's = is a prefix
            reqs.append(Requirement(CONDA_NAMES.get(name, name) + spec))
    return reqs


def pyproject() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + sum(project["optional-dependencies"].values(), [])]


def disagreements(reqs: list[Requirement], pins: dict[str, Version]) -> list[str]:
    """Requirements whose version range the lock's pin does not satisfy."""
    out = []
    for r in reqs:
        v = pins.get(canonicalize_name(r.name))
        if v is not None and r.specifier and not r.specifier.contains(v, prereleases=True):
            out.append(f"{r} (the lock has {v})")
    return out


@pytest.mark.parametrize("source", [environment_yml, pyproject, requirements_txt])
def test_pins_agree_with_the_lock(source):
    assert disagreements(source(), lock()) == []


def test_the_checker_finds_a_disagreeing_pin():
    pins = {"flashinfer-python": Version("0.7.4"), "torch": Version("2.13.0+cpu")}
    reqs = [Requirement("flashinfer-python==0.5.2"), Requirement("torch>=2.4"), Requirement("triton")]
    assert disagreements(reqs, pins) == ["flashinfer-python==0.5.2 (the lock has 0.7.4)"]


def test_everything_needed_is_locked_and_in_environment_yml():
    pins = lock()
    needed = {canonicalize_name(r.name) for r in requirements_txt()} | {"flashinfer-python", "triton"}
    assert "jupyterlab" in needed  # bootstrap.sh installs JupyterLab: jupyter lab notebooks/
    assert sorted(needed - set(pins)) == []
    in_env = {canonicalize_name(r.name) for r in environment_yml()}
    assert sorted(needed - in_env) == []


def test_environment_yml_pins_exactly_what_the_lock_pins():
    """Besides torch and triton (ranges: a GPU machine's CUDA build), environment.yml pins the lock's version."""
    pins = lock()
    loose = []
    for r in environment_yml():
        name = canonicalize_name(r.name)
        if name in pins and name not in ("torch", "triton"):
            if str(r.specifier) != f"=={pins[name]}":
                loose.append(f"{r} (the lock has {pins[name]})")
    assert loose == []


def test_bootstrap_installs_jupyterlab_and_says_how_to_open_the_notebooks():
    text = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert "pip_q -r requirements-cpu.txt -c constraints-cpu.txt" in text
    assert re.search(r'^echo ".*jupyter lab notebooks/"$', text, re.M)
