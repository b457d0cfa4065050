"""Notebook 05 (the shareable report): where the data comes from, every report figure saved and shown, the
summary tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd

from .. import plotting as P
from ..analysis.headline import (ceiling_note, clock_note, headline_markdown, headline_table,  # noqa: F401
                                 release_note)  # (re-exported)
from ..analysis.tuner import regret_summary, tuner_regret
from ..analysis import plot_targets, provenance, provenance_table, ratio_summary, summary_tables, version_ratio_table, x_of_best  # noqa: F401 (re-exported for the notebook)
from .context import CPU_HIDDEN_SCALE, TUNE_COLUMNS, ReportContext, context, environment_table, load_report_data  # noqa: F401 (re-exported)
from .display import fmt, show_figure, show_markdown, try_figure  # noqa: F401 (re-exported)
from .context import slug


def _ptxas(r: pd.Series) -> str:
    """`` (ptxas 13.4)`` where the run records the ptxas that built its Triton kernels (``12.9, 13.4``: our ``-tNf``
    kernels by another, ``backends.triton.assembler``), else ''."""
    v = r.get("triton_ptxas", "")
    return f" (ptxas {v})" if isinstance(v, str) and v else ""


def report_header(df: pd.DataFrame, note: str) -> str:
    """Markdown: where the data comes from and what it was measured on."""
    prov = provenance_table(df)
    lines = [f"**Data:** {note}", "", f"**Measured on:** {provenance(df)}", ""]
    for _, r in prov.iterrows():
        lines.append(f"- `{r['run_id']}`: {r.get('gpu_name', '')} (CC {r.get('compute_capability', '') or 'n/a'}), "
                     f"driver {r.get('driver_version', '') or 'n/a'}, torch {r.get('torch_version', '')}, "
                     f"CUDA {r.get('cuda_version', '') or 'n/a'}, flashinfer {r.get('flashinfer_version', '') or 'n/a'}, "
                     f"triton {r.get('triton_version', '') or 'n/a'}{_ptxas(r)}, commit {r.get('git_commit', '') or 'n/a'}, "
                     f"timing {r.get('time_method', '')}, {r['rows']} rows")
    return "\n".join(lines)


REPORT_FIGURES = [
    ("backend_comparison", "Backends compared (best tactic per shape; a line is one run, its commit in the legend)"),
    ("x_of_best_figure", "How far from the best kernel on this GPU"),
    ("version_ratio_figure", "FlashInfer versions compared (version B / version A per shape, like builds only)"),
    ("tuner_regret_figure", "FlashInfer's own autotuner: its pick / the best tactic, per tuning setting"),
    ("best_vs_default", "Best vs default tactic"),
    ("roofline_fraction", "Memory-bandwidth roofline fraction"),
    ("error_boxplot", "Correctness: error per tactic"),
]


def build_report_figures(df: pd.DataFrame, fig_dir: Any, max_shape_figures: int = 4,
                         show: bool = True) -> list[dict[str, Any]]:
    """Every report figure: saved as PNG + SVG under ``fig_dir``, shown inline when ``show``.

    Returns one dict per figure: ``name``, ``title``, ``paths`` (png/svg) or ``skipped`` (why).
    """
    fig_dir = Path(fig_dir)
    items: list[tuple[str, str, Callable[[], Any]]] = [
        (name, title, (lambda n=name: getattr(P, n)(df))) for name, title in REPORT_FIGURES]
    for b, m, e in plot_targets(df, max_shape_figures):
        items.append((f"heatmap_{slug(b, m, 'ep', e)}", f"Tactic heatmap: {b}, {m} EP{e}",
                      lambda b=b, m=m, e=e: P.tactic_heatmap(df, b, m, e)))
        items.append((f"time_vs_tokens_{slug(b, m, 'ep', e)}", f"Time vs tokens: {b}, {m} EP{e}",
                      lambda b=b, m=m, e=e: P.time_vs_tokens(df, b, m, e)))
    out = []
    for name, title, make in items:
        try:
            fig = make()
        except ValueError as e:
            out.append({"name": name, "title": title, "skipped": str(e)})
            if show:
                show_markdown(f"#### {title}\n_Skipped: {e}_")
            continue
        paths = P.save_figure(fig, fig_dir / name)
        out.append({"name": name, "title": title, "paths": paths})
        if show:
            show_markdown(f"#### {title}\n`{paths['png'].name}` / `{paths['svg'].name}` in `{fig_dir}`")
            show_figure(fig)
    return out


def comparison_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The report's comparison tables, each empty with the reason in ``notes`` when the data cannot make it:
    ``headline`` (one line per shape, a column group per backend: the README's table; render it with
    :func:`headline_markdown`), ``x_of_best`` (every backend's best against the best of all, and the roofline) and ``versions``
    (FlashInfer version B / A per shape for the best, default and tuned tactic, like builds only) with its
    ``versions_summary`` and ``versions_refused`` (shapes whose two versions ran different builds: left out, why),
    ``tuner_regret`` (FlashInfer's autotuner pick per shape and setting against the best tactic) and its summary;
    ``notes``: why a table is empty, and the headline's :func:`.headline.release_note` and
    :func:`.headline.clock_note` where it is not like for like, and :func:`.headline.ceiling_note` (the bf16 ceiling
    from cold and sustained)."""
    out: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    for name, make in (("headline", lambda: headline_table(df)), ("x_of_best", lambda: x_of_best(df)),
                       ("versions", lambda: version_ratio_table(df)), ("tuner_regret", lambda: tuner_regret(df))):
        try:
            out[name] = make()
        except ValueError as e:
            out[name] = pd.DataFrame()
            notes.append(f"{name}: {e}")
    # not like for like: Triton releases given different tactics, best rows timed at clocks > 5 % apart
    notes += ["headline: " + n for n in (release_note(df), clock_note(out["headline"]), ceiling_note(df)) if n]
    out["versions_summary"] = ratio_summary(out["versions"]) if len(out["versions"]) else pd.DataFrame()
    out["versions_refused"] = out["versions"].attrs.get("refused", pd.DataFrame())
    out["tuner_regret_summary"] = regret_summary(out["tuner_regret"]) if len(out["tuner_regret"]) else pd.DataFrame()
    out["notes"] = pd.DataFrame({"note": notes})
    return out

