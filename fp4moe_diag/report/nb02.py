"""Notebook 02 (tactic sweep): the data (committed runs or a fresh sweep), an overview per run, the per-shape
tactic figures, what tuning buys, the roofline and how far each backend is from the best."""

from __future__ import annotations

from ..analysis import plot_targets, run_overview, x_of_best
from ..plotting import (best_vs_default, roofline_fraction, tactic_heatmap, time_vs_tokens, version_ratio_figure,
                        x_of_best_figure)
from .context import CPU_HIDDEN_SCALE, TUNE_COLUMNS, ReportContext, context, environment_table, load_report_data  # noqa: F401 (re-exported)
from .display import fmt, show_figure, show_markdown, try_figure  # noqa: F401 (re-exported)

__all__ = ["best_vs_default", "context", "environment_table", "fmt", "load_report_data", "plot_targets",
           "roofline_fraction", "run_overview", "tactic_heatmap", "time_vs_tokens", "try_figure", "version_ratio_figure", "x_of_best",
           "x_of_best_figure"]
