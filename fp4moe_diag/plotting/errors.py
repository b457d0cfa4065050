"""Correctness figures: error per tactic, per-token error."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..measure.correctness import REL_L2_TOL
from ..analysis.per_shape import (provenance, require_frame)
from .common import (_backend_color, _short, _title)


# --------------------------------------------------------------------------- 5. error boxplot
def error_boxplot(df: pd.DataFrame, *, tol: float = REL_L2_TOL, max_groups: int = 80) -> Figure:
    """rel. L2 error vs the float32 reference, one box per backend x tactic over all shapes.

    Points: individual shapes (red x = incorrect); red triangles at the top: NaN/Inf outputs.
    Dashed line: the pass tolerance (:data:`fp4moe_diag.measure.correctness.REL_L2_TOL`).  With more than
    ``max_groups`` tactics the boxes are per backend instead.
    """
    require_frame(df, "error_boxplot", ["backend", "tactic_label", "rel_l2", "status"])
    d = df[df["status"].isin(["ok", "incorrect"]) & df["tactic_label"].notna()].copy()
    d = d[d["rel_l2"].notna()]
    if d.empty:
        raise ValueError("df: error_boxplot needs rows with a rel_l2 (status ok or incorrect); there are none")
    d["rel_l2"] = d["rel_l2"].astype(float)
    d["group"] = d["backend"].astype(str) + ": " + d["tactic_label"].astype(str)
    per_backend = d["group"].nunique() > max_groups
    if per_backend:
        d["group"] = d["backend"].astype(str) + ": all tactics"
    # order: backend, then median error
    med = d.groupby("group")["rel_l2"].median()
    bk = d.groupby("group")["backend"].first()
    groups = sorted(med.index, key=lambda gname: (str(bk[gname]), med[gname]))
    finite = d[np.isfinite(d["rel_l2"]) & (d["rel_l2"] > 0)]
    lo = float(finite["rel_l2"].min()) if len(finite) else tol / 100
    hi = float(finite["rel_l2"].max()) if len(finite) else tol
    top = max(hi, tol) * 3
    n = len(groups)
    fig = Figure(figsize=(min(max(6.5, 1.8 + 0.38 * n), 28), 5.8), layout="constrained")
    ax = fig.add_subplot()
    backends = sorted(d["backend"].astype(str).unique())
    rng = np.random.default_rng(0)
    for i, gname in enumerate(groups):
        g = d[d["group"] == gname]
        color = _backend_color(str(bk[gname]), backends.index(str(bk[gname])))
        vals = g["rel_l2"].to_numpy()
        fin = vals[np.isfinite(vals) & (vals > 0)]
        if len(fin):
            bp = ax.boxplot([fin], positions=[i], widths=0.6, patch_artist=True, showfliers=False,
                            medianprops={"color": "black"})
            for box in bp["boxes"]:
                box.set_facecolor(color)
                box.set_alpha(0.45)
        ok_mask = np.isfinite(vals) & (vals > 0)
        xs = i + rng.uniform(-0.18, 0.18, size=len(vals))
        bad = ~g["correct"].fillna(False).astype(bool).to_numpy() if "correct" in g else np.zeros(len(g), bool)
        ax.plot(xs[ok_mask & ~bad], vals[ok_mask & ~bad], ls="none", marker="o", ms=3, color=color, alpha=0.8)
        ax.plot(xs[ok_mask & bad], vals[ok_mask & bad], ls="none", marker="x", ms=6, color="#a00000")
        nonfin = ~np.isfinite(vals)
        if nonfin.any():
            ax.plot(xs[nonfin], np.full(nonfin.sum(), top * 0.8), ls="none", marker="^", ms=7, color="#a00000")
    ax.set_yscale("log")
    ax.set_ylim(min(lo, tol) / 3, top)
    ax.axhline(tol, color="#d62728", ls="--", lw=1.5)
    ax.set_xticks(range(n))
    ax.set_xticklabels([_short(gname, 34) for gname in groups], rotation=55 if n > 3 else 0,
                       ha="right" if n > 3 else "center", rotation_mode="anchor", fontsize=8 if n > 24 else 9)
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_xlabel("backend: tactic" + (" (too many tactics: pooled per backend)" if per_backend else ""))
    ax.set_ylabel("relative L2 error ‖out − ref‖ / ‖ref‖ (ratio, log scale)")
    ax.grid(True, axis="y", which="major", alpha=0.35)
    handles = [Patch(facecolor=_backend_color(b, i), alpha=0.45, label=f"backend: {b}") for i, b in enumerate(backends)]
    handles += [Line2D([], [], color="#d62728", ls="--", label=f"tolerance rel_l2 ≤ {tol:g}"),
                Line2D([], [], ls="none", marker="x", color="#a00000", label="incorrect shape"),
                Line2D([], [], ls="none", marker="^", color="#a00000", label="NaN/Inf output")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    _title(fig, "Error vs the float32 reference (same FP4 weights), per tactic over all shapes", d)
    return fig


# --------------------------------------------------------------------------- 7. per-token errors
def token_error_plot(tokens: pd.DataFrame, *, tol: Optional[float] = None, title_df: Optional[pd.DataFrame] = None) -> Figure:
    """Per-token relative error of one tactic (a :func:`fp4moe_diag.report.token_errors` frame), log y.

    Red: tokens over the per-token tolerance (:data:`fp4moe_diag.measure.correctness.TOKEN_REL_TOL`); the
    worst token is annotated.
    """
    from ..measure.correctness import TOKEN_REL_TOL

    require_frame(tokens, "token_error_plot", ["token", "rel_err"])
    tol = TOKEN_REL_TOL if tol is None else tol
    x = tokens["token"].to_numpy()
    y = tokens["rel_err"].to_numpy(dtype=float)
    fin = np.isfinite(y)
    fig = Figure(figsize=(9.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    over = fin & (y > tol)
    floor = max(float(np.nanmin(y[fin & (y > 0)])) / 3 if (fin & (y > 0)).any() else tol / 1e3, 1e-9)
    yy = np.where(y > 0, y, floor)
    ax.vlines(x[fin], floor, yy[fin], color="#1f77b4", lw=0.8, alpha=0.6)
    ax.plot(x[fin & ~over], yy[fin & ~over], ls="none", marker="o", ms=3, color="#1f77b4",
            label="token within tolerance")
    ax.plot(x[over], yy[over], ls="none", marker="o", ms=5, color="#d62728", label="token over tolerance")
    if (~fin).any():
        top = max(float(np.nanmax(yy[fin])) if fin.any() else tol, tol) * 3
        ax.plot(x[~fin], np.full((~fin).sum(), top), ls="none", marker="^", ms=7, color="#a00000",
                label="NaN/Inf token")
    ax.axhline(tol, color="#d62728", ls="--", lw=1.4, label=f"per-token tolerance {tol:g}")
    if fin.any():
        w = int(np.nanargmax(np.where(fin, y, -np.inf)))
        right = x[w] > (x.min() + x.max()) / 2
        ax.annotate(f"worst: token {int(x[w])} ({y[w]:.2e})", (x[w], yy[w]), xytext=(-8 if right else 8, 6),
                    textcoords="offset points", ha="right" if right else "left", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("token index in the batch (row of the output)")
    ax.set_ylabel("per-token relative L2 error (ratio, log scale)")
    ax.grid(True, axis="y", alpha=0.35)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    label = ""
    if "backend" in tokens and "tactic_label" in tokens and len(tokens):
        label = f"{tokens['backend'].iloc[0]}: {tokens['tactic_label'].iloc[0]} — "
    fig.suptitle(f"{label}per-token error vs the float32 reference"
                 + (f"\n{provenance(title_df)}" if title_df is not None else ""), fontsize=12)
    return fig
