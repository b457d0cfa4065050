"""The vLLM shape table: real FP4 MoE configurations as :class:`MoECase` lists.

``data/vllm_shapes.csv`` has one row per (model, ep_size) configuration of EP
rank 0 (``local_expert_offset`` 0).  Each row names the token counts to sweep
(``token_counts``, e.g. ``"1-16384 pow2"``); :func:`load_vllm_cases` expands
rows x token counts into cases.  The ``source`` column says which public
config each row comes from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd

from .case import MoECase
from ..paths import SHAPES_CSV

#: Token counts swept by default: powers of two 1 .. 16384.
TOKEN_COUNTS: list[int] = [2**i for i in range(15)]

#: Columns the shape table must have.
REQUIRED_COLUMNS: tuple[str, ...] = (
    "model", "hidden_size", "intermediate_size", "num_experts", "top_k", "ep_size",
    "local_num_experts", "local_expert_offset", "routing_method", "n_group", "topk_group",
    "routed_scaling_factor", "weight_format", "activation", "has_bias", "swiglu_alpha",
    "swiglu_beta", "swiglu_limit", "token_counts", "source",
)

PathLike = Union[str, Path]


def default_table_path() -> Path:
    """``<repo>/data/vllm_shapes.csv``, resolved from this file (not the working directory)."""
    return SHAPES_CSV


def load_shape_table(path: Optional[PathLike] = None) -> pd.DataFrame:
    """Read the shape table; raise ``ValueError`` naming any missing required column."""
    p = Path(path) if path is not None else default_table_path()
    if not p.is_file():
        raise FileNotFoundError(f"shape table not found: {p}")
    df = pd.read_csv(p)
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"shape table {p}: missing required column(s): {', '.join(missing)}")
    return df


def parse_token_counts(spec: Any) -> list[int]:
    """Parse a ``token_counts`` cell: ``"LO-HI pow2"`` or a list such as ``"1;8;64"`` / ``"1 8 64"``."""
    if _is_missing(spec):
        return list(TOKEN_COUNTS)
    text = str(spec).strip()
    parts = text.split()
    if len(parts) == 2 and parts[1].lower() == "pow2" and "-" in parts[0]:
        lo_s, hi_s = parts[0].split("-", 1)
        lo, hi = int(lo_s), int(hi_s)
        if lo < 1 or hi < lo:
            raise ValueError(f"token_counts: bad range {text!r}")
        out, t = [], 1
        while t <= hi:
            if t >= lo:
                out.append(t)
            t *= 2
        return out
    try:
        return [int(x) for x in text.replace(";", " ").replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"token_counts: expected 'LO-HI pow2' or a list of ints, got {text!r}") from None


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _to_bool(v: Any) -> bool:
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1", "yes"):
            return True
        if s in ("false", "0", "no", ""):
            return False
        raise ValueError(f"has_bias: expected a boolean, got {v!r}")
    return bool(v)


def _row_case(row: dict[str, Any], num_tokens: int) -> MoECase:
    record = {k: (None if _is_missing(v) else v) for k, v in row.items()}
    record["has_bias"] = _to_bool(record.get("has_bias") or False)
    record["num_tokens"] = num_tokens
    case = MoECase.from_record(record)
    if int(row["ep_size"]) != case.ep_size:
        raise ValueError(
            f"shape table row {row['model']!r}: ep_size {row['ep_size']} does not match "
            f"num_experts/local_num_experts = {case.num_experts}/{case.local_num_experts}"
        )
    return case


def load_vllm_cases(
    path: Optional[PathLike] = None,
    models: Optional[Iterable[str]] = None,
    ep_sizes: Optional[Iterable[int]] = None,
    token_counts: Optional[Sequence[int]] = None,
    max_tokens: Optional[int] = None,
) -> list[MoECase]:
    """Expand the table into cases: rows (in file order) x token counts (ascending).

    ``models``/``ep_sizes`` keep only those rows (an unknown model name raises
    ``ValueError``).  ``token_counts`` replaces each row's own ``token_counts``;
    ``max_tokens`` then drops counts above it.
    """
    df = load_shape_table(path)
    if models is not None:
        wanted = [models] if isinstance(models, str) else list(models)
        unknown = sorted(set(wanted) - set(df["model"]))
        if unknown:
            raise ValueError(f"models: unknown {unknown}; the table has {sorted(set(df['model']))}")
        df = df[df["model"].isin(wanted)]
    if ep_sizes is not None:
        df = df[df["ep_size"].isin([int(e) for e in ep_sizes])]
    cases: list[MoECase] = []
    for row in df.to_dict(orient="records"):
        counts = list(token_counts) if token_counts is not None else parse_token_counts(row["token_counts"])
        for t in sorted(set(int(c) for c in counts)):
            if max_tokens is None or t <= max_tokens:
                cases.append(_row_case(row, t))
    return cases


def default_case(model: str = "gpt-oss-20b", ep_size: int = 2, num_tokens: int = 16) -> MoECase:
    """One case from the table (default: the seed's gpt-oss-20b EP2 configuration at 16 tokens)."""
    cases = load_vllm_cases(models=[model], ep_sizes=[ep_size], token_counts=[num_tokens])
    if not cases:
        raise ValueError(f"no shape-table row for model={model!r} ep_size={ep_size}")
    return cases[0]
