"""Figures over the results DataFrame (:data:`fp4moe_diag.results.SCHEMA`), one function per view.

Every function takes the tidy frame (one row per case x backend x tactic) and returns a
:class:`matplotlib.figure.Figure` built without ``pyplot`` (no global state, no ``plt.show``, safe
under Agg and in notebooks).  Each raises ``ValueError`` naming what is missing when the frame has
no rows it can draw.  Titles name the GPU(s) and the flashinfer version(s) found in the frame.

* :func:`tactic_heatmap` -- time of every tactic per token count, normalised to the row's best.
* :func:`time_vs_tokens` -- log-log time vs tokens, one line per tactic, best envelope + default.
* :func:`best_vs_default` -- what tuning buys: best vs default tactic per shape and backend.
* :func:`roofline_fraction` -- achieved fraction of the measured copy bandwidth (best tactic).
* :func:`error_boxplot` -- rel. L2 error per backend/tactic against the tolerance.
* :func:`backend_comparison` -- best time of each backend vs tokens, one panel per shape.

:func:`save_figure` writes PNG + SVG.  :func:`best_per_shape` is the selection the figures and
:mod:`fp4moe_diag.report` tables share.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from .measure.correctness import REL_L2_TOL

#: Token counts at or below this are "decode" shapes (highlighted in :func:`roofline_fraction`; the
#: decode-roofline goal of issue #4 is stated for <= 64 tokens).
DECODE_MAX_TOKENS = 64
#: The bandwidth goal drawn in :func:`roofline_fraction` (fraction of the measured copy ceiling).
ROOFLINE_GOAL = 0.6

#: Columns that identify a shape apart from the token count.
CASE_COLUMNS = ["model", "ep_size", "hidden_size", "intermediate_size", "num_experts", "local_num_experts",
                "top_k", "weight_format"]
#: Columns that identify one measured shape (a row group holding the tactics of one backend).
SHAPE_COLUMNS = ["run_id", "gpu_name", "backend", *CASE_COLUMNS, "num_tokens"]

TIME_LABEL = "time per MoE call, median (µs)"
TOKENS_LABEL = "tokens per batch T (tokens, log scale)"

_BACKEND_COLORS = {"reference": "#7f7f7f", "cutlass": "#1f77b4", "trtllm": "#2ca02c", "triton": "#9467bd"}
_CASE_STYLES = ["-", "--", ":", "-."]
_CASE_MARKERS = ["o", "s", "^", "D", "v", "P"]
_NAMED = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79",
          "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1"]
_CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
          "#7f7f7f"]


# --------------------------------------------------------------------------- frame helpers
def _require(df: Optional[pd.DataFrame], what: str, columns: Iterable[str] = ()) -> pd.DataFrame:
    if df is None or not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: expected a results DataFrame for {what}, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"df: {what} needs column(s) {missing} (see fp4moe_diag.results.SCHEMA)")
    if df.empty:
        raise ValueError(f"df: {what} needs measured rows, got an empty DataFrame")
    return df


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    t = pd.to_numeric(df["time_median_us"], errors="coerce")
    return df[(df["status"] == "ok") & t.notna() & (t > 0)]


def _str(v: Any) -> str:
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def provenance(df: pd.DataFrame) -> str:
    """``"NVIDIA H200 · flashinfer 0.5.2"`` from the frame's own columns (several joined by ', ')."""
    def uniq(col: str) -> list[str]:
        if col not in df:
            return []
        return sorted({_str(v) for v in df[col].tolist()} - {""})

    gpus = ["CPU" if g.lower() == "cpu" else g for g in uniq("gpu_name")]
    fi = uniq("flashinfer_version")
    return f"{', '.join(gpus) or 'unknown device'} · flashinfer {', '.join(fi) or 'not installed'}"


def _title(fig: Figure, what: str, df: pd.DataFrame) -> None:
    fig.suptitle(f"{what}\n{provenance(df)}", fontsize=12)


def case_label(row: Any, with_dims: bool = False) -> str:
    """``gpt-oss-20b EP2`` (plus ``H/I`` when ``with_dims``) for a row or a dict of the case columns."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    label = f"{_str(get('model')) or 'moe'} EP{_str(get('ep_size')) or '?'}"
    if with_dims:
        label += f" H{_str(get('hidden_size'))}/I{_str(get('intermediate_size'))}"
    return label


def _case_labels(cases: pd.DataFrame) -> list[str]:
    """Short labels for distinct case rows; dims are added only where the short ones collide."""
    short = [case_label(r) for _, r in cases.iterrows()]
    dup = {s for s in short if short.count(s) > 1}
    return [case_label(r, with_dims=s in dup) for s, (_, r) in zip(short, cases.iterrows())]


def select_run(df: pd.DataFrame, run_id: Optional[str] = None) -> pd.DataFrame:
    """Rows of ``run_id``; by default the latest run (run ids start with the date) when there are several."""
    if "run_id" not in df or df.empty:
        return df
    ids = sorted({_str(v) for v in df["run_id"].tolist()})
    if run_id is not None:
        if run_id not in ids:
            raise ValueError(f"run_id: {run_id!r} is not in the frame; it has {ids}")
        return df[df["run_id"] == run_id]
    if len(ids) <= 1:
        return df
    return df[df["run_id"].fillna("") == ids[-1]]


def _pick(df: pd.DataFrame, col: str, value: Any, what: str) -> tuple[pd.DataFrame, Any]:
    have = sorted({v for v in df[col].dropna().tolist()}, key=str)
    if value is None:
        if len(have) == 1:
            return df, have[0]
        raise ValueError(f"{col}: {what} draws one {col}; the frame has {have}, pass one of them")
    sub = df[df[col] == value]
    if sub.empty:
        raise ValueError(f"{col}: no rows with {col}={value!r} for {what}; the frame has {have}")
    return sub, value


def best_per_shape(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured shape (run x GPU x backend x case x T): the best and the default tactic.

    Columns: the shape columns, ``best_tactic``, ``best_us``, ``best_p10_us``, ``best_p90_us``,
    ``default_tactic``, ``default_us``, ``default_status``, ``speedup`` (default / best),
    ``frac_bw_roofline`` and ``achieved_GBps`` of the best tactic, ``best_rel_l2``, ``n_tactics``
    and ``n_ok``.  The best is the ``is_best`` row when the tuner marked one, else the fastest ``ok`` row.
    """
    _require(df, "best_per_shape", ["status", "time_median_us", *SHAPE_COLUMNS])
    d = df.copy()
    keys = [c for c in SHAPE_COLUMNS]
    for c in keys:
        if pd.api.types.is_string_dtype(d[c]) or pd.api.types.is_object_dtype(d[c]):
            d[c] = d[c].astype("string").fillna("")
    out = []
    for key, g in d.groupby(keys, dropna=False, sort=True):
        ok = _ok(g)
        rec = dict(zip(keys, key))
        rec["n_tactics"] = len(g)
        rec["n_ok"] = len(ok)
        best = None
        if len(ok):
            flagged = ok[ok["is_best"].fillna(False).astype(bool)] if "is_best" in ok else ok.iloc[:0]
            best = flagged.iloc[0] if len(flagged) else ok.loc[pd.to_numeric(ok["time_median_us"]).idxmin()]
        dflt = g[g["is_default_tactic"].fillna(False).astype(bool)] if "is_default_tactic" in g else g.iloc[:0]
        d0 = dflt.iloc[0] if len(dflt) else None
        rec.update(
            best_tactic=_str(best["tactic_label"]) if best is not None else "",
            best_us=float(best["time_median_us"]) if best is not None else math.nan,
            best_p10_us=float(best["time_p10_us"]) if best is not None and "time_p10_us" in g else math.nan,
            best_p90_us=float(best["time_p90_us"]) if best is not None and "time_p90_us" in g else math.nan,
            frac_bw_roofline=float(best["frac_bw_roofline"]) if best is not None and pd.notna(best.get("frac_bw_roofline")) else math.nan,
            achieved_GBps=float(best["achieved_GBps"]) if best is not None and pd.notna(best.get("achieved_GBps")) else math.nan,
            best_rel_l2=float(best["rel_l2"]) if best is not None and pd.notna(best.get("rel_l2")) else math.nan,
            default_tactic=_str(d0["tactic_label"]) if d0 is not None else "",
            default_status=_str(d0["status"]) if d0 is not None else "",
            default_us=(float(d0["time_median_us"]) if d0 is not None and _str(d0["status"]) == "ok"
                        and pd.notna(d0["time_median_us"]) else math.nan),
        )
        rec["speedup"] = rec["default_us"] / rec["best_us"] if rec["best_us"] > 0 else math.nan
        out.append(rec)
    res = pd.DataFrame(out)
    if len(res):
        res["num_tokens"] = res["num_tokens"].astype("Int64")
        res["ep_size"] = res["ep_size"].astype("Int64")
    return res


def latest_per_shape(best: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`best_per_shape` with, for a shape measured in several runs (same GPU, backend,
    case, T), only one run's row: a run timed with CUDA graphs (no host launch gaps) before one timed
    eagerly, then the most recent (last row ``timestamp``, then run id).  Gives one line per backend
    across runs that each cover part of the tokens."""
    if best.empty or "run_id" not in best or best["run_id"].nunique() < 2:
        return best
    runs = df.assign(run_id=df["run_id"].astype("string").fillna(""))
    g = runs.groupby("run_id")
    graph = (g["time_method"].agg(lambda s: (s.astype("string") == "cuda-graph").mean() > 0.5)
             if "time_method" in runs else pd.Series(False, index=g.size().index))
    when = (g["timestamp"].max().astype("string").fillna("") if "timestamp" in runs
            else pd.Series("", index=g.size().index))
    order = {rid: (bool(graph.get(rid, False)), str(when.get(rid, "")), str(rid)) for rid in g.size().index}
    pos = {rid: i for i, rid in enumerate(sorted(order, key=order.get))}
    ranked = best.assign(_rank=best["run_id"].astype("string").fillna("").map(pos).fillna(-1))
    keys = [c for c in SHAPE_COLUMNS if c != "run_id"]
    out = ranked.sort_values("_rank", kind="stable").groupby(keys, dropna=False, sort=False).tail(1)
    return out.drop(columns="_rank").sort_index()


def default_by_tokens(rows: pd.DataFrame) -> dict[int, str]:
    """``{T: tactic_label}`` of the library's default tactic at each token count (it can change with T)."""
    d = rows[rows["is_default_tactic"].fillna(False).astype(bool) & rows["tactic_label"].notna()]
    return {int(t): str(g["tactic_label"].iloc[0]) for t, g in d.groupby("num_tokens")}


def describe_defaults(by_t: dict[int, str], sep: str = "; ") -> str:
    """``"m16 (T 1-16); m64 (T 4k)"``: runs of token counts that share a default tactic."""
    runs: list[list] = []
    for t in sorted(by_t):
        if runs and runs[-1][0] == by_t[t]:
            runs[-1][2] = t
        else:
            runs.append([by_t[t], t, t])
    parts = [f"{name} (T {_fmt_tokens(a)}" + (f"–{_fmt_tokens(b)})" if b != a else ")") for name, a, b in runs]
    return sep.join(parts)


# --------------------------------------------------------------------------- axis helpers
def _fmt_tokens(x: float, _pos: Any = None) -> str:
    if x <= 0:
        return ""
    if x >= 1024 and x % 1024 == 0:
        return f"{int(x // 1024)}k"
    return f"{x:g}"


def _tokens_axis(ax: Any, tokens: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ts = sorted({int(t) for t in tokens if t and t > 0})
    if ts:
        ax.xaxis.set_major_locator(FixedLocator(ts))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(_fmt_tokens))
        if len(ts) > 10:
            for lab in ax.get_xticklabels():
                lab.set_rotation(45)
        lo, hi = ts[0], ts[-1]
        ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xlabel(TOKENS_LABEL)


def _fmt_us(y: float, _pos: Any = None) -> str:
    if y >= 1e4:
        return f"{y:.0e}".replace("e+0", "e").replace("e+", "e")
    return f"{y:g}"


def _time_axis(ax: Any) -> None:
    """Log time axis with readable labels (1-2-5 ticks when the data span under ~3 decades)."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 10
    subs = (1.0, 2.0, 5.0) if decades < 3.2 else (1.0,)
    if decades < 0.8:
        subs = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(_fmt_us))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(TIME_LABEL)
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", axis="y", alpha=0.12)


def _backend_color(name: str, i: int) -> str:
    return _BACKEND_COLORS.get(name, _CYCLE[i % len(_CYCLE)])


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --------------------------------------------------------------------------- 1. tactic heatmap
def tactic_heatmap(df: pd.DataFrame, backend: str, model: str, ep_size: int, *, run_id: Optional[str] = None,
                   annotate: Optional[bool] = None) -> Figure:
    """Time of every tactic (columns) per token count (rows), divided by the row's best time.

    Log colour scale: 1x (the fastest correct tactic of the row, outlined) is light; slow tactics
    are dark.  Grey cells: the tactic did not produce a correct timing (failed / incorrect /
    unsupported / aborted; the cell says which).  The default tactic's column is marked.
    """
    _require(df, "tactic_heatmap", ["backend", "model", "ep_size", "num_tokens", "tactic_label", "status",
                                    "time_median_us"])
    sub = df[(df["backend"] == backend) & (df["model"] == model) & (df["ep_size"] == int(ep_size))]
    if sub.empty:
        have = sorted({(str(b), str(m), int(e)) for b, m, e in df[["backend", "model", "ep_size"]].dropna().itertuples(index=False)})
        raise ValueError(f"df: no rows for backend={backend!r} model={model!r} ep_size={ep_size}; "
                         f"the frame has (backend, model, ep_size) {have}")
    sub = select_run(sub, run_id)
    sub = sub[sub["tactic_label"].notna()]
    if sub.empty or _ok(sub).empty:
        raise ValueError(f"df: backend={backend!r} model={model!r} ep_size={ep_size} has no 'ok' tactic timings")
    sub = sub.copy()
    sub["tactic_label"] = sub["tactic_label"].astype(str)
    tokens = sorted({int(t) for t in sub["num_tokens"].dropna()})
    times = _ok(sub).pivot_table(index="num_tokens", columns="tactic_label", values="time_median_us", aggfunc="min")
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
    ax.set_yticklabels([_fmt_tokens(t) for t in tokens])
    ax.set_ylabel("tokens per batch T (tokens)")
    ax.set_xlabel("tactic (kernel configuration; bold = library default at some T)\n"
                  "cell: time ÷ fastest correct time of the row · black box: fastest · red dashed box: library "
                  "default at that T · grey: no correct timing")
    if annotate is None:
        annotate = n_rows * n_cols <= 600
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
                st = _str(status.iloc[i, j])
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
    cbar = fig.colorbar(im, ax=ax, pad=0.01, fraction=0.05 if n_cols > 8 else 0.08)
    ticks = [t for t in (1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= norm.vmax]
    if norm.vmax > ticks[-1] * 1.15:
        ticks.append(math.floor(norm.vmax * 10) / 10 if norm.vmax < 10 else float(math.floor(norm.vmax)))
    cbar.set_ticks(ticks)
    cbar.set_ticklabels([f"{t:g}×" for t in ticks])
    cbar.ax.yaxis.set_minor_formatter(NullFormatter())
    cbar.set_label("time ÷ row's best (×, log)")
    shape = sub.iloc[0]
    _title(fig, f"{backend} tactics: {model} EP{ep_size} (H{_str(shape['hidden_size'])}, "
                f"I{_str(shape['intermediate_size'])}, E{_str(shape['num_experts'])}, top-{_str(shape['top_k'])})", sub)
    return fig


# --------------------------------------------------------------------------- 2. time vs tokens
def time_vs_tokens(df: pd.DataFrame, backend: Optional[str] = None, model: Optional[str] = None,
                   ep_size: Optional[int] = None, *, run_id: Optional[str] = None,
                   max_legend_tactics: int = 12) -> Figure:
    """Median time vs tokens (log-log), one line per tactic of one backend and shape.

    The best-per-T envelope (thick black, dashed) and the default tactic (thick, red) are
    highlighted, the default with its p10-p90 band; other tactics are thin.  With more than
    ``max_legend_tactics`` tactics only the highlighted lines and the fastest few are named.
    """
    _require(df, "time_vs_tokens", ["backend", "model", "ep_size", "num_tokens", "tactic_label", "status",
                                    "time_median_us"])
    sub, backend = _pick(df, "backend", backend, "time_vs_tokens")
    sub, model = _pick(sub, "model", model, "time_vs_tokens")
    sub, ep_size = _pick(sub, "ep_size", int(ep_size) if ep_size is not None else None, "time_vs_tokens")
    sub = select_run(sub, run_id)
    ok = _ok(sub).copy()
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


# --------------------------------------------------------------------------- 3. best vs default
def _case_frame(best: pd.DataFrame) -> pd.DataFrame:
    cases = best[CASE_COLUMNS].drop_duplicates().reset_index(drop=True)
    cases["case_label"] = _case_labels(cases)
    return cases


def best_vs_default(df: pd.DataFrame) -> Figure:
    """Per backend (columns): best vs default tactic time per shape (top) and the speedup (bottom).

    Top: solid = best tactic, dashed = the library's default tactic, one colour per shape
    (model x EP).  Bottom: default time / best time; 1x means tuning buys nothing.
    """
    _require(df, "best_vs_default", ["status", "time_median_us", "is_default_tactic", *SHAPE_COLUMNS])
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
                dflts = sorted({_str(v) for v in g["default_tactic"]} - {""})
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


# --------------------------------------------------------------------------- 4. roofline fraction
def roofline_fraction(df: pd.DataFrame, *, goal: float = ROOFLINE_GOAL,
                      decode_max_tokens: int = DECODE_MAX_TOKENS) -> Figure:
    """``frac_bw_roofline`` of the best tactic per shape vs tokens, one line per backend x shape.

    Shaded: decode shapes (T <= ``decode_max_tokens``), whose points are drawn larger; red dashed:
    the goal (default 60 % of the copy bandwidth measured in the same run).
    """
    _require(df, "roofline_fraction", ["frac_bw_roofline", "status", "time_median_us", *SHAPE_COLUMNS])
    best = latest_per_shape(best_per_shape(df), df)
    best = best[best["frac_bw_roofline"].notna() & np.isfinite(best["frac_bw_roofline"].astype(float))]
    if best.empty:
        raise ValueError("df: roofline_fraction needs rows with frac_bw_roofline; none of the best tactics has "
                         "one (runs without measured ceilings, e.g. CPU runs or --no-ceilings, leave it empty)")
    cases = _case_frame(best)
    multi_gpu = best["gpu_name"].nunique() > 1
    fig = Figure(figsize=(10, 5.8), layout="constrained")
    ax = fig.add_subplot()
    tokens = best["num_tokens"].astype(int).tolist()
    ax.axvspan(min(tokens) / 1.3, min(decode_max_tokens * 1.15, max(tokens) * 1.3), color="#fff2cc", alpha=0.8,
               zorder=0, label=f"decode shapes (T ≤ {decode_max_tokens} tokens)")
    ax.axhline(goal, color="#d62728", ls="--", lw=1.6, zorder=2, label=f"goal: {goal:.0%} of measured copy bandwidth")
    backends = sorted(best["backend"].unique())
    gpus = sorted(best["gpu_name"].unique())
    for (b, gpu), g0 in best.groupby(["backend", "gpu_name"]):
        for ci, c in cases.iterrows():
            m = np.ones(len(g0), dtype=bool)
            for col in CASE_COLUMNS:
                m &= (g0[col].astype(str) == str(c[col])).to_numpy()
            g = g0[m].sort_values("num_tokens")
            if g.empty:
                continue
            color = _backend_color(b, backends.index(b))
            k = ci + len(cases) * gpus.index(gpu)
            marker = _CASE_MARKERS[k % len(_CASE_MARKERS)]
            x = g["num_tokens"].astype(float).to_numpy()
            y = g["frac_bw_roofline"].to_numpy(dtype=float)
            name = f"{b}: {c['case_label']}" + (f" · {gpu}" if multi_gpu else "") + " (best tactic)"
            ax.plot(x, y, color=color, lw=1.6, ls=_CASE_STYLES[k % len(_CASE_STYLES)], marker=marker, ms=3.5,
                    zorder=3, label=name)
            dec = x <= decode_max_tokens
            ax.plot(x[dec], y[dec], ls="none", marker=marker, ms=8, mfc=color, mec="black", mew=0.9, zorder=4,
                    label="_nolegend_")
    _tokens_axis(ax, tokens)
    vals = best["frac_bw_roofline"].astype(float)
    ymax, ymin = float(vals.max()), float(vals[vals > 0].min()) if (vals > 0).any() else 1e-3
    if ymax < goal / 2 or ymin < ymax / 20:  # small fractions: a log axis keeps them readable next to the goal
        ax.set_yscale("log")
        ax.set_ylim(max(ymin / 2, 1e-4), max(1.0, ymax * 1.3))
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        scale = "log scale"
    else:
        ax.set_ylim(0, max(1.0, ymax * 1.08))
        scale = "linear"
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v * 100:.3g}%"))
    if len(best) <= 40:
        for _, r in best.iterrows():
            ax.annotate(f"{r['frac_bw_roofline']:.1%}", (float(r["num_tokens"]), float(r["frac_bw_roofline"])),
                        xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7, color="#333333")
    ax.set_ylabel(f"achieved ÷ measured copy bandwidth (% of ceiling, {scale})")
    ax.grid(True, alpha=0.35)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ceil = pd.to_numeric(df.get("ceiling_copy_GBps"), errors="coerce").dropna() if "ceiling_copy_GBps" in df else pd.Series(dtype=float)
    cap = f" (ceiling: {ceil.median():.0f} GB/s device copy)" if len(ceil) else ""
    _title(fig, f"Memory-bandwidth roofline fraction of the best tactic{cap}", df)
    return fig


# --------------------------------------------------------------------------- 5. error boxplot
def error_boxplot(df: pd.DataFrame, *, tol: float = REL_L2_TOL, max_groups: int = 80) -> Figure:
    """rel. L2 error vs the float32 reference, one box per backend x tactic over all shapes.

    Points: individual shapes (red x = incorrect); red triangles at the top: NaN/Inf outputs.
    Dashed line: the pass tolerance (:data:`fp4moe_diag.measure.correctness.REL_L2_TOL`).  With more than
    ``max_groups`` tactics the boxes are per backend instead.
    """
    _require(df, "error_boxplot", ["backend", "tactic_label", "rel_l2", "status"])
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


# --------------------------------------------------------------------------- 6. backend comparison
def backend_comparison(df: pd.DataFrame, *, max_panels: int = 12) -> Figure:
    """Best time of each backend vs tokens, one panel per shape (model x EP), log-log."""
    _require(df, "backend_comparison", ["status", "time_median_us", *SHAPE_COLUMNS])
    best = latest_per_shape(best_per_shape(df), df)
    best = best[best["best_us"].notna()]
    if best.empty:
        raise ValueError("df: backend_comparison needs at least one shape with an 'ok' tactic timing")
    cases = _case_frame(best).head(max_panels)
    n = len(cases)
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    fig = Figure(figsize=(max(6.5, 4.9 * ncol), 3.9 * nrow + 1.0), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False)
    backends = sorted(best["backend"].unique())
    multi_gpu = best["gpu_name"].nunique() > 1
    gpus = sorted(best["gpu_name"].unique())
    styles = ["-", "--", ":", "-."]
    for k, (_, c) in enumerate(cases.iterrows()):
        ax = axes[k // ncol, k % ncol]
        m = np.ones(len(best), dtype=bool)
        for col in CASE_COLUMNS:
            m &= (best[col].astype(str) == str(c[col])).to_numpy()
        g0 = best[m]
        for (b, gpu), g in g0.groupby(["backend", "gpu_name"]):
            g = g.sort_values("num_tokens")
            label = f"{b} (best tactic)" + (f" · {gpu}" if multi_gpu else "")
            ax.plot(g["num_tokens"].astype(float), g["best_us"].astype(float), marker="o", ms=4, lw=1.8,
                    color=_backend_color(b, backends.index(b)), ls=styles[gpus.index(gpu) % len(styles)], label=label)
        _tokens_axis(ax, g0["num_tokens"].astype(int).tolist())
        _time_axis(ax)
        ax.set_title(f"{c['case_label']} (E{c['num_experts']}, top-{c['top_k']}, {c['weight_format']})", fontsize=10)
        ax.legend(fontsize=8, frameon=False)
    for k in range(n, nrow * ncol):
        axes[k // ncol, k % ncol].set_visible(False)
    _title(fig, "Backends compared: fastest correct tactic of each backend per shape", df)
    return fig


# --------------------------------------------------------------------------- 7. per-token errors
def token_error_plot(tokens: pd.DataFrame, *, tol: Optional[float] = None, title_df: Optional[pd.DataFrame] = None) -> Figure:
    """Per-token relative error of one tactic (a :func:`fp4moe_diag.report.token_errors` frame), log y.

    Red: tokens over the per-token tolerance (:data:`fp4moe_diag.measure.correctness.TOKEN_REL_TOL`); the
    worst token is annotated.
    """
    from .measure.correctness import TOKEN_REL_TOL

    _require(tokens, "token_error_plot", ["token", "rel_err"])
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


# --------------------------------------------------------------------------- saving
def save_figure(fig: Figure, path_without_ext: Any, dpi: int = 150) -> dict[str, Path]:
    """Write ``<path>.png`` and ``<path>.svg`` (parents created); returns both paths."""
    if not isinstance(fig, Figure):
        raise ValueError(f"fig: expected a matplotlib Figure, got {type(fig).__name__}")
    base = Path(path_without_ext)
    if base.suffix.lower() in (".png", ".svg"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    png, svg = base.with_name(base.name + ".png"), base.with_name(base.name + ".svg")
    fig.savefig(png, dpi=dpi, bbox_inches="tight", facecolor="white")
    fig.savefig(svg, bbox_inches="tight", facecolor="white")
    return {"png": png, "svg": svg}
