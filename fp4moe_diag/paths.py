"""Where things are: the repository root, the committed runs, the shape table, the bug report's seed.
Imports nothing of ours."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
DATA_DIR = REPO_ROOT / "data"
RUNS_ROOT = DATA_DIR / "runs"
SHAPES_CSV = DATA_DIR / "vllm_shapes.csv"
VERSION_MATRIX_CSV = DATA_DIR / "flashinfer_version_matrix.csv"
SEED_FILE = REPO_ROOT.parent / "shared" / "seeds" / "flashinfer-routed-moe-autotune-bug.txt"


def repo_path(p: "str | Path") -> Path:
    """``p`` as an absolute path, relative ones taken from the repository root (not the working directory)."""
    q = Path(p)
    return q if q.is_absolute() else REPO_ROOT / q


def run_folders(root: "str | Path | None" = None) -> list:
    """The folders directly under ``root`` (default :data:`RUNS_ROOT`), sorted: the committed runs a table of
    every run's ablations, duels, ... reads."""
    return sorted(p for p in Path(root if root is not None else RUNS_ROOT).glob("*") if p.is_dir())


def subprocess_env(front: "tuple | list" = (), back: "tuple | list" = ()) -> dict:
    """``os.environ`` for a child Python that imports ``fp4moe_diag`` from this checkout: PYTHONPATH is
    ``front`` (e.g. a FlashInfer version's site dir, which then shadows the installed one), the repository
    root, the current PYTHONPATH, then ``back``."""
    import os

    env = dict(os.environ)
    parts = [str(p) for p in front if p] + [str(REPO_ROOT)]
    parts += [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    parts += [str(p) for p in back if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env
