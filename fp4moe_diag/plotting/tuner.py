"""Figure: FlashInfer's autotuner regret (its pick's time / the best tactic's) per shape and tuning setting."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ..analysis.tuner import tuner_regret

MARKERS = {"max=8192": "o", "max=1": "v", "cache": "s"}


def tuner_regret_figure(df: pd.DataFrame) -> Figure:
    """One panel per model x EP: x = tokens (log), y = regret (log, 1 = FlashInfer found the best tactic), one line
    per setting, the untuned default dashed.  ``df``: results with ``cutlass`` and ``cutlass_autotune`` rows, or
    :func:`~fp4moe_diag.analysis.tuner.tuner_regret`'s table.  A matplotlib Figure of its own (no pyplot state), as
    the other figures of :mod:`fp4moe_diag.plotting`."""
    t = df if "regret" in df.columns else tuner_regret(df)
    t = t.dropna(subset=["regret"])
    if t.empty:
        raise ValueError("df: no autotuner pick has a best cutlass tactic of the same shape to compare with")
    panels = list(dict.fromkeys(zip(t["model"], t["ep_size"])))
    fig = Figure(figsize=(4.2 * len(panels), 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)
    for ax, (model, ep) in zip(axes[0], panels):
        p = t[(t["model"] == model) & (t["ep_size"] == ep)].sort_values("num_tokens")
        for setting, g in p.groupby("setting", sort=False):
            ax.plot(g["num_tokens"], g["regret"], marker=MARKERS.get(setting, "x"), label=f"autotune {setting}")
        d = p.drop_duplicates("num_tokens")
        ax.plot(d["num_tokens"], d["default_x"], "k--", lw=1, label="default tactic (untuned)")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{model} EP{int(ep)}", fontsize=9)
        ax.set_xlabel("tokens")
    axes[0][0].set_ylabel("time / best tactic's (1 = best)")
    axes[0][-1].legend(fontsize=7)
    fv = ", ".join(sorted(set(t["flashinfer_version"].astype(str))))
    fig.suptitle(f"FlashInfer {fv} CUTLASS MoE: what its AutoTuner picks, against every tactic measured", fontsize=10)
    return fig
