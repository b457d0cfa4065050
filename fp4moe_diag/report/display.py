"""What the notebooks show: inline PNG figures (so the HTML export holds an <img>), markdown, readable tables."""

from __future__ import annotations

import io
from typing import Any, Callable, Optional

import pandas as pd


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def show_figure(fig: Any, save_as: Any = None, dpi: int = 110) -> Optional[dict]:
    """Display a Figure as an inline PNG (so HTML exports hold an <img>); optionally save PNG + SVG."""
    from IPython.display import Image, display

    paths = None
    if save_as is not None:
        from ..plotting import save_figure

        paths = save_figure(fig, save_as)
    display(Image(data=figure_png(fig, dpi=dpi), format="png"))
    return paths


def try_figure(make: Callable[..., Any], *args: Any, save_as: Any = None, **kwargs: Any) -> None:
    """Build and show a figure; a ValueError (no rows to draw) is printed instead of raised.

    Returns None on purpose, so a notebook cell ending with it shows no ``<Figure ...>`` repr.
    """
    try:
        fig = make(*args, **kwargs)
    except ValueError as e:
        print(f"[skipped] {getattr(make, '__name__', 'figure')}: {e}")
        return None
    show_figure(fig, save_as=save_as)
    return None


def show_markdown(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def fmt(df: pd.DataFrame, precision: int = 4, max_chars: int = 90) -> Any:
    """A Styler with fixed precision, no index and long strings cut to ``max_chars`` (readable HTML tables)."""
    d = df.copy()
    for c in d.columns:
        if pd.api.types.is_object_dtype(d[c]) or pd.api.types.is_string_dtype(d[c]):
            d[c] = d[c].map(lambda v: v if not isinstance(v, str) or len(v) <= max_chars else v[: max_chars - 1] + "…")
    return d.style.format(precision=precision, na_rep="", thousands=None).hide(axis="index")
