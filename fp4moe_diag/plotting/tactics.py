"""Per-backend tactic views: heatmap of every tactic, time vs tokens, best vs default."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from ..analysis.per_shape import (CASE_COLUMNS, SHAPE_COLUMNS, best_per_shape, default_by_tokens,
                               describe_defaults, fmt_tokens, latest_per_shape, ok_rows, require_frame,
                               select_run, str_or_empty)
from .common import (_CYCLE, _NAMED, _case_frame,
                     _pick, _short, _time_axis, _title, _tokens_axis)


# --------------------------------------------------------------------------- 1. tactic heatmap
def tactic_heatmap(df: pd.DataFrame, backend: str, model: str, ep_size: int, *, run_id: Optional[str] = None,
                   annotate: Optional[bool] = None) -> Figure:
    """Time of every tactic (columns) per token count (rows), divided by the row's best time.

    Log colour scale: 1x (the fastest correct tactic of the row, outlined) is light; slow tactics
    are dark.  Grey cells: the tactic did not produce a correct timing (failed / incorrect /
    unsupported / aborted; the cell says which).  The default tactic's column is marked.
    """
    require_frame(df, "tactic_heatmap", ["backend", "model", "ep_size", "num_tokens", "tactic_label", "status",
                                    "time_median_us"])
    sub = df[(df["backend"] == backend) & (df["model"] == model) & (df["ep_size"] == int(ep_size))]
    if sub.empty:
        have = sorted({(str(b), str(m), int(e)) for b, m, e in df[["backend", "model", "ep_size"]].dropna().itertuples(index=False)})
        raise ValueError(f"df: no rows for backend={backend!r} model={model!r} ep_size={ep_size}; "
                         f"the frame has (backend, model, ep_size) {have}")
    sub = select_run(sub, run_id)
    sub = sub[sub["tactic_label"].notna()]
    if sub.empty or ok_rows(sub).empty:
        raise ValueError(f"df: backend={backend!r} model={model!r} ep_size={ep_size} has no 'ok' tactic timings")
    sub = sub.copy()
    sub["tactic_label"] = sub["tactic_label"].astype(str)
    tokens = sorted({int(t) for t in sub["num_tokens"].dropna()})
    times = ok_rows(sub).pivot_table(index="num_tokens", columns="tactic_label", values="time_median_us", aggfunc="min")
    times = times.reindex(index=tokens)
    status = sub.drop_duplicates(["num_tokens", "tactic_label"], keep="last").pivot(
        index="num_tokens", columns="tactic_label", values="status").reindex(index=tokens)
    all_tactics = list(status.columns)
    times = times.reindex(columns=all_tactics)
    ratio = times.div(times.min(axis=1), axis=0)
    default_at = default_by_tokens(sub)  # the default can differ per T (e.g. Triton picks by batch size)
    defaults = set(default_at.values())
    first_default = {t: min(T for T, d in default_at.items() if d == t) for t in defaults}
    # defaults first (in token order), then by geometric-mean ratio (fastest overall left); never-ok last
    score = np.exp(np.log(ratio).mean(axis=0, skipna=True)).fillna(np.inf)
    order = sorted(all_tactics, key=lambda t: (t not in defaults, first_default.get(t, 0), score[t], t))
    ratio, status = ratio[order], status[order]

    n_rows, n_cols = ratio.shape
    width = min(max(6.5, 1.8 + 0.42 * n_cols), 28.0)
    height = min(max(4.6, 3.0 + 0.42 * n_rows), 14.0)
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    vmax = float(np.nanmax(ratio.to_numpy())) if np.isfinite(ratio.to_numpy()).any() else 2.0
    norm = LogNorm(vmin=1.0, vmax=max(vmax, 1.05))
    import matplotlib as mpl

    cmap = mpl.colormaps["viridis_r"].with_extremes(bad="#d9d9d9")
    data = np.ma.masked_invalid(ratio.to_numpy(dtype=float))
    im = ax.imshow(data, aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
    ax.set_xticks(range(n_cols))
    labels = [_short(t) for t in order]
    ax.set_xticklabels(labels, rotation=55 if n_cols > 3 else 0, ha="right" if n_cols > 3 else "center",
                       rotation_mode="anchor", fontsize=8 if n_cols > 24 else 9)
    for lab, t in zip(ax.get_xticklabels(), order):
        if t in defaults:
            lab.set_fontweight("bold")
    ax.set_yticks(range(n_rows))
    ax.set_yticklabels([fmt_tokens(t) for t in tokens])
    ax.set_ylabel("tokens per batch T (tokens)")
    ax.set_xlabel("tactic (kernel configuration; bold = library default at some T)\n"
                  "cell: time ÷ fastest correct time of the row · black box: fastest · red dashed box: library "
                  "default at that T · grey: no correct timing")
    if annotate is None:
        annotate = n_rows * n_cols <= 600
    _mark_cells(ax, ratio, status, norm, order, tokens, default_at, annotate)
    _heatmap_colorbar(fig, ax, im, norm, n_cols)
    shape = sub.iloc[0]
    _title(fig, f"{backend} tactics: {model} EP{ep_size} (H{str_or_empty(shape['hidden_size'])}, "
                f"I{str_or_empty(shape['intermediate_size'])}, E{str_or_empty(shape['num_experts'])}, top-{str_or_empty(shape['top_k'])})", sub)
    return fig


def _mark_cells(ax, ratio: pd.DataFrame, status: pd.DataFrame, norm, order: list, tokens: list, default_at: dict,
                annotate: bool) -> None:
    """The heatmap's cell texts, the fastest cell's box and the default's dashed box per row."""
    n_rows, n_cols = ratio.shape
    short_status = {"failed": "fail", "incorrect": "wrong", "unsupported": "n/a", "aborted": "abort"}
    for i in range(n_rows):
        row = ratio.iloc[i]
        best_j = int(np.nanargmin(row.to_numpy())) if row.notna().any() else None
        for j in range(n_cols):
            v = row.iloc[j]
            if pd.notna(v):
                if annotate:
                    light = norm(v) < 0.55
                    ax.text(j, i, f"{v:.2f}" if v < 10 else f"{v:.0f}", ha="center", va="center",
                            fontsize=7 if n_cols > 16 else 8, color="black" if light else "white")
            else:
                st = str_or_empty(status.iloc[i, j])
                if st and annotate:
                    ax.text(j, i, short_status.get(st, st[:5]), ha="center", va="center", fontsize=6.5,
                            color="#a00000" if st in ("failed", "incorrect", "aborted") else "#555555")
        if best_j is not None:
            ax.add_patch(Rectangle((best_j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.8))
        d = default_at.get(int(tokens[i]))
        if d in order:
            j = order.index(d)
            ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False, edgecolor="#d62728",
                                   linewidth=1.4, linestyle="--"))


def _heatmap_colorbar(fig, ax, im, norm, n_cols: int) -> None:
    cbar = fig.colorbar(im, ax=ax, pad=0.01, fraction=0.05 if n_cols > 8 else 0.08)
    ticks = [t for t in (1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= norm.vmax]
    if norm.vmax > ticks[-1] * 1.15:
        ticks.append(math.floor(norm.vmax * 10) / 10 if norm.vmax < 10 else float(math.floor(norm.vmax)))
    cbar.set_ticks(ticks)
    cbar.set_ticklabels([f"{t:g}×" for t in ticks])
    cbar.ax.yaxis.set_minor_formatter(NullFormatter())
    cbar.set_label("time ÷ row's best (×, log)")


# --------------------------------------------------------------------------- 2. time vs tokens
def time_vs_tokens(df: pd.DataFrame, backend: Optional[str] = None, model: Optional[str] = None,
                   ep_size: Optional[int] = None, *, run_id: Optional[str] = None,
                   max_legend_tactics: int = 12) -> Figure:
    """Median time vs tokens (log-log), one line per tactic of one backend and shape.

    The best-per-T envelope (thick black, dashed) and the default tactic (thick, red) are
    highlighted, the default with its p10-p90 band; other tactics are thin.  With more than
    ``max_legend_tactics`` tactics only the highlighted lines and the fastest few are named.
    """
    require_frame(df, "time_vs_tokens", ["backend", "model", "ep_size", "num_tokens", "tactic_label", "status",
                                    "time_median_us"])
    sub, backend = _pick(df, "backend", backend, "time_vs_tokens")
    sub, model = _pick(sub, "model", model, "time_vs_tokens")
    sub, ep_size = _pick(sub, "ep_size", int(ep_size) if ep_size is not None else None, "time_vs_tokens")
    sub = select_run(sub, run_id)
    ok = ok_rows(sub).copy()
    if ok.empty:
        raise ValueError(f"df: backend={backend!r} model={model!r} ep_size={ep_size} has no 'ok' tactic timings")
    ok["tactic_label"] = ok["tactic_label"].astype(str)
    tokens = sorted({int(t) for t in ok["num_tokens"]})
    default_at = default_by_tokens(sub)
    defaults = set(default_at.values())
    single_default = len(defaults) == 1
    per_t_best = ok.groupby("num_tokens")["time_median_us"].min()
    # rank tactics by geometric-mean slowdown vs the per-T best, so the legend names the useful ones
    rel = ok.assign(r=ok["time_median_us"] / ok["num_tokens"].map(per_t_best))
    rank = rel.groupby("tactic_label")["r"].apply(lambda s: float(np.exp(np.log(s).mean()))).sort_values()
    tactics = list(rank.index)
    named = set(tactics[:max_legend_tactics]) | (defaults if single_default else set())

    fig = Figure(figsize=(9.5, 5.8), layout="constrained")
    ax = fig.add_subplot()
    cyc = 0
    for t in tactics:
        g = ok[ok["tactic_label"] == t].sort_values("num_tokens")
        x, y = g["num_tokens"].astype(float).to_numpy(), g["time_median_us"].to_numpy(dtype=float)
        if single_default and t in defaults:
            name = t if "default" in t.lower() else f"{t} (library default)"
            ax.plot(x, y, color="#d62728", lw=2.6, marker="s", ms=5, zorder=4, label=f"{backend}: {name}")
            if "time_p10_us" in g and g["time_p10_us"].notna().any():
                ax.fill_between(x, g["time_p10_us"].to_numpy(dtype=float), g["time_p90_us"].to_numpy(dtype=float),
                                color="#d62728", alpha=0.15, lw=0, zorder=2)
        elif t in named:
            ax.plot(x, y, color=_NAMED[cyc % len(_NAMED)], lw=1.2, marker="o", ms=3, alpha=0.85, zorder=3,
                    label=f"{backend}: {_short(t, 32)}")
            cyc += 1
        else:
            ax.plot(x, y, color="#9a9a9a", lw=0.8, alpha=0.55, zorder=1, label="_nolegend_")
    if defaults and not single_default:  # the default changes with T: draw the default-per-T envelope
        drows = ok[ok["is_default_tactic"].fillna(False).astype(bool)].sort_values("num_tokens")
        x = drows["num_tokens"].astype(float).to_numpy()
        ax.plot(x, drows["time_median_us"].to_numpy(dtype=float), color="#d62728", lw=2.6, marker="s", ms=5,
                zorder=4, label=f"{backend}: library default per T:\n  " + describe_defaults(default_at, "\n  "))
        if drows["time_p10_us"].notna().any():
            ax.fill_between(x, drows["time_p10_us"].to_numpy(dtype=float), drows["time_p90_us"].to_numpy(dtype=float),
                            color="#d62728", alpha=0.15, lw=0, zorder=2)
    bx = per_t_best.index.astype(float).to_numpy()
    ax.plot(bx, per_t_best.to_numpy(dtype=float), color="black", lw=2.2, ls="--", marker="*", ms=9, zorder=5,
            label=f"{backend}: best tactic per T")
    _tokens_axis(ax, tokens)
    _time_axis(ax)
    hidden = len(tactics) - len(named & set(tactics))
    handles, labels = ax.get_legend_handles_labels()
    # highlighted first: best envelope, default, then the named tactics fastest first
    first = [i for i, lab in enumerate(labels) if "best tactic per T" in lab]
    first += [i for i, lab in enumerate(labels) if "default" in lab and i not in first]
    idx = first + [i for i in range(len(labels)) if i not in first]
    handles, labels = [handles[i] for i in idx], [labels[i] for i in idx]
    if hidden > 0:
        handles.append(Line2D([], [], color="#9a9a9a", lw=0.8))
        labels.append(f"{hidden} other tactics (grey, unnamed)")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
              title="backend: tactic", title_fontsize=9)
    _title(fig, f"{backend}: time vs tokens, every tactic — {model} EP{ep_size}", sub)
    return fig


def best_vs_default(df: pd.DataFrame) -> Figure:
    """Per backend (columns): best vs default tactic time per shape (top) and the speedup (bottom).

    Top: solid = best tactic, dashed = the library's default tactic, one colour per shape
    (model x EP).  Bottom: default time / best time; 1x means tuning buys nothing.
    """
    require_frame(df, "best_vs_default", ["status", "time_median_us", "is_default_tactic", *SHAPE_COLUMNS])
    best = latest_per_shape(best_per_shape(df), df)
    best = best[best["best_us"].notna()]
    if best.empty:
        raise ValueError("df: best_vs_default needs at least one shape with an 'ok' tactic timing")
    backends = sorted(best["backend"].unique())
    cases = _case_frame(best)
    multi_gpu = best["gpu_name"].nunique() > 1
    ncol = len(backends)
    fig = Figure(figsize=(max(6.5, 5.2 * ncol), 7.2), layout="constrained")
    axes = fig.subplots(2, ncol, sharex="col", squeeze=False, gridspec_kw={"height_ratios": [2.2, 1]})
    tokens_all = best["num_tokens"].astype(int).tolist()
    for j, b in enumerate(backends):
        top, bot = axes[0, j], axes[1, j]
        bsub = best[best["backend"] == b]
        for ci, c in cases.iterrows():
            m = np.ones(len(bsub), dtype=bool)
            for col in CASE_COLUMNS:
                m &= (bsub[col].astype(str) == str(c[col])).to_numpy()
            for gi, (gpu, g) in enumerate(bsub[m].groupby("gpu_name")):
                g = g.sort_values("num_tokens")
                if g.empty:
                    continue
                color = _CYCLE[(ci + gi * 3) % len(_CYCLE)]
                name = c["case_label"] + (f" · {gpu}" if multi_gpu else "")
                x = g["num_tokens"].astype(float).to_numpy()
                top.plot(x, g["best_us"].to_numpy(dtype=float), color=color, lw=2, marker="o", ms=4,
                         label=f"{name}: best tactic")
                dflts = sorted({str_or_empty(v) for v in g["default_tactic"]} - {""})
                dlabel = f"library default = {_short(dflts[0], 20)}" if len(dflts) == 1 else "library default (per T)"
                top.plot(x, g["default_us"].to_numpy(dtype=float), color=color, lw=1.5, ls="--", marker="s",
                         ms=3.5, alpha=0.9, label=f"{name}: {dlabel}")
                bot.plot(x, g["speedup"].to_numpy(dtype=float), color=color, lw=1.8, marker="o", ms=4,
                         label=name)
                failed = g[g["default_us"].isna()]
                if len(failed):
                    bot.plot(failed["num_tokens"].astype(float), np.ones(len(failed)), ls="none", marker="x",
                             color="#a00000", ms=7, label="_nolegend_")
        top.set_title(f"backend: {b}", fontsize=11)
        _time_axis(top)
        top.set_xlabel("")
        bot.axhline(1.0, color="black", lw=0.8)
        bot.set_ylabel("default ÷ best time (×)")
        bot.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}×"))
        bot.grid(True, alpha=0.35)
        lo, hi = bot.get_ylim()
        bot.set_ylim(min(lo, 0.95), max(hi, 1.1))
        _tokens_axis(bot, tokens_all)
        top.legend(fontsize=7.5, loc="upper left", frameon=False)
    _title(fig, "Best tactic vs the library default per shape (x = default failed or incorrect)", df)
    return fig
