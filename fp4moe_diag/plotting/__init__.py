"""Figures over the results DataFrame (:data:`fp4moe_diag.results.SCHEMA`), one function per view; the
tables they draw come from :mod:`fp4moe_diag.analysis`.

Every function takes the tidy frame (one row per case x backend x tactic) and returns a
:class:`matplotlib.figure.Figure` built without ``pyplot`` (no global state, no ``plt.show``, safe
under Agg and in notebooks).  Each raises ``ValueError`` naming what is missing when the frame has
no rows it can draw.  Titles name the GPU(s) and the flashinfer version(s) found in the frame.

* :func:`tactic_heatmap` -- time of every tactic per token count, normalised to the row's best.
* :func:`time_vs_tokens` -- log-log time vs tokens, one line per tactic, best envelope + default.
* :func:`best_vs_default` -- what tuning buys: best vs default tactic per shape and backend.
* :func:`roofline_fraction` -- achieved fraction of the measured read bandwidth (best tactic).
* :func:`x_of_best_figure` -- each backend's best over the best of all backends, and its roofline fraction.
* :func:`error_boxplot` -- rel. L2 error per backend/tactic against the tolerance.
* :func:`backend_comparison` -- best time of each backend vs tokens, one panel per shape.
* :func:`version_ratio_figure` -- FlashInfer version B / version A per shape (best, default, tuned).

:func:`save_figure` writes PNG + SVG.
"""

from .backends import backend_comparison, roofline_fraction, x_of_best_figure
from .common import case_label, save_figure
from .errors import error_boxplot, token_error_plot
from .tactics import best_vs_default, tactic_heatmap, time_vs_tokens
from .tuner import tuner_regret_figure
from .versions import version_ratio_figure

__all__ = ["backend_comparison", "best_vs_default", "case_label", "error_boxplot", "roofline_fraction", "save_figure",
           "tactic_heatmap", "time_vs_tokens", "token_error_plot", "version_ratio_figure", "x_of_best_figure", "tuner_regret_figure"]
