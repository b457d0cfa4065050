"""Run the notebooks headless: papermill executes ``notebooks/*.ipynb`` in order (parameters injected,
kernel ``python3``, cwd = repo root) into ``out_dir/<name>.ipynb``; nbconvert exports each to HTML, and
``05_report`` also to the shareable ``out_dir/report.html`` (code hidden).  A failing notebook does not stop
the others; :class:`NotebookError` lists each failure as the exception's name and value."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from ..paths import NOTEBOOK_DIR, REPO_ROOT, subprocess_env

REPORT_NOTEBOOK_PREFIX = "05"


class NotebookError(RuntimeError):
    """One or more notebooks raised; ``failures`` maps the output notebook to the error's first line."""

    def __init__(self, failures: dict[Path, str], outputs: list[Path]):
        self.failures = failures
        self.outputs = outputs
        lines = [f"  {p}: {msg}" for p, msg in failures.items()]
        super().__init__(f"{len(failures)} notebook(s) failed:\n" + "\n".join(lines))


def list_notebooks(only: Optional[Iterable[str]] = None, notebooks_dir: Any = None) -> list[Path]:
    """``notebooks/NN_*.ipynb`` in order; ``only`` keeps names starting with any of the prefixes."""
    nb_dir = Path(notebooks_dir) if notebooks_dir is not None else NOTEBOOK_DIR
    nbs = sorted(p for p in nb_dir.glob("[0-9]*.ipynb") if not p.name.startswith("."))
    if only:
        prefixes = [str(o).strip() for o in only if str(o).strip()]
        nbs = [p for p in nbs if any(p.name.startswith(pre) for pre in prefixes)]
        if not nbs:
            raise ValueError(f"only: no notebook in {nb_dir} starts with {prefixes}")
    if not nbs:
        raise ValueError(f"notebooks_dir: no NN_*.ipynb notebooks in {nb_dir}")
    return nbs


def ensure_kernel(name: str = "python3") -> str:
    """Make sure a Jupyter kernel ``name`` exists (registers this interpreter's ipykernel if not)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
        return name
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(user=True, kernel_name=name, display_name=f"Python 3 ({name})")
    return name


def export_html(ipynb: Any, html: Any, hide_code: bool = False) -> Path:
    """nbconvert an executed notebook to a self-contained HTML file (figures inlined as <img>)."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter()
    exporter.exclude_input = hide_code
    exporter.exclude_input_prompt = hide_code
    exporter.exclude_output_prompt = hide_code
    nb = nbformat.read(str(ipynb), as_version=4)
    body, _ = exporter.from_notebook_node(nb)
    out = Path(html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body, encoding="utf-8")
    return out


def notebook_errors(ipynb: Any) -> list[str]:
    """``ename: evalue`` of every error output in an executed notebook (empty when it ran clean)."""
    import nbformat

    nb = nbformat.read(str(ipynb), as_version=4)
    errs = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errs.append(f"{out.get('ename')}: {out.get('evalue')}")
    return errs


def execution_error(e: BaseException) -> str:
    """One line for a failed notebook: papermill's ``ename: evalue`` of the cell that raised (its message
    starts with a banner such as 'Exception encountered at "In [5]":'), else the exception's own."""
    ename, evalue = getattr(e, "ename", None), getattr(e, "evalue", None)
    if ename:
        cell = getattr(e, "exec_count", None)
        return f"{ename}: {evalue}" + (f" (cell In [{cell}])" if cell is not None else "")
    first = [ln for ln in str(e).strip().splitlines() if ln.strip() and not set(ln.strip()) <= {"-"}]
    return f"{type(e).__name__}: {first[0]}" if first else type(e).__name__


@contextlib.contextmanager
def _pythonpath(root: Path):
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = subprocess_env()["PYTHONPATH"]
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def run_notebooks(out_dir: Any = "reports", quick: bool = False, backend: Optional[str] = None,
                  device: Optional[str] = None, only: Optional[Iterable[str]] = None, html: bool = True, *,
                  shapes_file: Optional[str] = None, notebooks_dir: Any = None,
                  extra_parameters: Optional[dict] = None, kernel_name: str = "python3",
                  cell_timeout: Optional[int] = None, raise_on_error: bool = True) -> list[Path]:
    """Execute the notebooks headless; returns the written paths (``.ipynb``, ``.html``, ``report.html``).

    Each notebook gets the papermill parameters ``backend, shapes_file, device, out_dir, quick``
    (``extra_parameters`` are added to all).  A failing notebook does not stop the others; at the
    end :class:`NotebookError` lists the failures (the failed notebooks are still written, with
    the traceback in the failing cell).
    """
    import papermill as pm

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    nbs = list_notebooks(only, notebooks_dir)
    ensure_kernel(kernel_name)
    params = {
        "backend": backend,
        "shapes_file": str(shapes_file) if shapes_file else "data/vllm_shapes.csv",
        "device": device,
        "out_dir": str(out),
        "quick": bool(quick),
    }
    params.update(extra_parameters or {})
    written: list[Path] = []
    failures: dict[Path, str] = {}
    with _pythonpath(REPO_ROOT):
        for nb in nbs:
            target = out / nb.name
            try:
                pm.execute_notebook(str(nb), str(target), parameters=params, kernel_name=kernel_name,
                                    cwd=str(REPO_ROOT), progress_bar=False, log_output=False,
                                    execution_timeout=cell_timeout)
            except Exception as e:  # noqa: BLE001 - papermill's execution error or a kernel failure
                failures[target] = execution_error(e)
            if target.exists():
                written.append(target)
                if html:
                    try:  # an HTML export problem (missing nbconvert templates) must not lose the notebook
                        written.append(export_html(target, target.with_suffix(".html")))
                        if nb.name.startswith(REPORT_NOTEBOOK_PREFIX):
                            written.append(export_html(target, out / "report.html", hide_code=True))
                    except Exception as e:  # noqa: BLE001
                        failures[target.with_suffix(".html")] = f"HTML export failed: {type(e).__name__}: {e}"
    if failures and raise_on_error:
        raise NotebookError(failures, written)
    return written
