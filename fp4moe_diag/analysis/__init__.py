"""Tables from the tidy results frame (pure pandas, no drawing): :mod:`.shapes` (best / default tactic per
shape, one run per shape, provenance), :mod:`.tables` (report tables, how far from the best),
:mod:`.correctness` (correctness tables)."""

from .correctness import correctness_summary, correctness_table, worst_tokens
from .per_shape import (CASE_COLUMNS, DECODE_MAX_TOKENS, SHAPE_COLUMNS, best_per_shape, default_by_tokens,
                     describe_defaults, latest_per_shape, provenance, select_run)
from .versions import ratio_summary, version_ratio_table
from .tables import (plot_targets, provenance_table, run_overview, summary_table, summary_tables, worst_measurement,
                     x_of_best)

__all__ = ["CASE_COLUMNS", "DECODE_MAX_TOKENS", "SHAPE_COLUMNS", "best_per_shape", "correctness_summary",
           "correctness_table", "default_by_tokens", "describe_defaults", "latest_per_shape", "plot_targets",
           "provenance", "provenance_table", "ratio_summary", "version_ratio_table", "run_overview", "select_run", "summary_table", "summary_tables",
           "worst_measurement", "worst_tokens", "x_of_best"]
