"""What every figure shares: colours, labels, titles with provenance, log axes, saving PNG + SVG."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from ..analysis.per_shape import (CASE_COLUMNS, fmt_tokens, provenance, str_or_empty)

#: The bandwidth goal drawn in :func:`roofline_fraction` (fraction of the measured read-only streaming ceiling).
ROOFLINE_GOAL = 0.6


TIME_LABEL = "time per MoE call, median (µs)"


TOKENS_LABEL = "tokens per batch T (tokens, log scale)"


_BACKEND_COLORS = {"reference": "#7f7f7f", "cutlass": "#1f77b4", "trtllm": "#2ca02c", "triton": "#9467bd"}


_CASE_STYLES = ["-", "--", ":", "-."]


_CASE_MARKERS = ["o", "s", "^", "D", "v", "P"]


_NAMED = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79",
          "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1"]


_CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
          "#7f7f7f"]


def _title(fig: Figure, what: str, df: pd.DataFrame) -> None:
    fig.suptitle(f"{what}\n{provenance(df)}", fontsize=12)


def case_label(row: Any, with_dims: bool = False) -> str:
    """``gpt-oss-20b EP2`` (plus ``H/I`` when ``with_dims``) for a row or a dict of the case columns."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    label = f"{str_or_empty(get('model')) or 'moe'} EP{str_or_empty(get('ep_size')) or '?'}"
    if with_dims:
        label += f" H{str_or_empty(get('hidden_size'))}/I{str_or_empty(get('intermediate_size'))}"
    return label


def _case_labels(cases: pd.DataFrame) -> list[str]:
    """Short labels for distinct case rows; dims are added only where the short ones collide."""
    short = [case_label(r) for _, r in cases.iterrows()]
    dup = {s for s in short if short.count(s) > 1}
    return [case_label(r, with_dims=s in dup) for s, (_, r) in zip(short, cases.iterrows())]


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


def _tokens_axis(ax: Any, tokens: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ts = sorted({int(t) for t in tokens if t and t > 0})
    if ts:
        ax.xaxis.set_major_locator(FixedLocator(ts))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(fmt_tokens))
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


# --------------------------------------------------------------------------- 3. best vs default
def _case_frame(best: pd.DataFrame) -> pd.DataFrame:
    cases = best[CASE_COLUMNS].drop_duplicates().reset_index(drop=True)
    cases["case_label"] = _case_labels(cases)
    return cases


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
