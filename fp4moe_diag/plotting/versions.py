"""Figure: 'version B / version A' time ratio per shape, for the best, default and tuned tactic."""

from __future__ import annotations

from typing import Optional

import pandas as pd

from ..analysis.versions import KINDS, version_ratio_table

MARKERS = {"best": "o", "default": "s", "tuned": "^"}


def _shape_label(row: pd.Series) -> str:
    model = str(row.get("model", "")) or "?"
    ep = row.get("ep_size")
    ep_txt = f" EP{int(ep)}" if pd.notna(ep) else ""
    return f"{model}{ep_txt} T={int(row['num_tokens'])}"


def version_ratio_figure(df: pd.DataFrame, base: Optional[str] = None, other: Optional[str] = None):
    """One panel per backend: x = shape, y = time(other) / time(base) (log scale, 1 = same), one marker
    per kind.  ``df``: a multi-version results frame (or an already computed
    :func:`~fp4moe_diag.analysis.versions.version_ratio_table`).  Returns the matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    table = df if "ratio" in df.columns else version_ratio_table(df, base, other)
    base, other = table.attrs.get("base", base), table.attrs.get("other", other)
    backends = list(dict.fromkeys(table["backend"]))
    fig, axes = plt.subplots(len(backends), 1, figsize=(max(6.0, 0.5 * table["num_tokens"].nunique() * 3), 3.2 * max(1, len(backends))),
                             squeeze=False)
    for ax, be in zip(axes[:, 0], backends):
        t = table[table["backend"] == be]
        shapes = t.drop_duplicates([c for c in t.columns if c in ("model", "ep_size", "ep_rank", "num_tokens")])
        labels = [_shape_label(r) for _, r in shapes.iterrows()]
        pos = {lab: i for i, lab in enumerate(labels)}
        for kind in KINDS:
            k = t[(t["kind"] == kind) & t["ratio"].notna()]
            if k.empty:
                continue
            xs = [pos[_shape_label(r)] for _, r in k.iterrows()]
            ax.plot(xs, k["ratio"].to_numpy(), MARKERS[kind], label=kind, linestyle="none")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel(f"{other} / {base}")
        ax.set_title(f"{be}: flashinfer {other} vs {base} (< 1: {other} faster)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
