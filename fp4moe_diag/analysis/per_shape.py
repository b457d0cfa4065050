"""Per-shape views of the tidy results frame: best and default tactic per shape, one run per shape,
provenance.  Pure pandas (no drawing, no kernels)."""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

import pandas as pd

#: Decode is T <= 64 (the issue's definition; the decode-roofline goal is stated for <= 64 tokens).
DECODE_MAX_TOKENS = 64
#: Columns that identify a shape apart from the token count.
CASE_COLUMNS = ["model", "ep_size", "hidden_size", "intermediate_size", "num_experts", "local_num_experts",
                "top_k", "weight_format", "has_bias"]
#: Columns that identify one measured shape (a row group holding the tactics of one backend).
SHAPE_COLUMNS = ["run_id", "gpu_name", "backend", *CASE_COLUMNS, "num_tokens"]


# --------------------------------------------------------------------------- frame helpers
def require_frame(df: Optional[pd.DataFrame], what: str, columns: Iterable[str] = ()) -> pd.DataFrame:
    if df is None or not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: expected a results DataFrame for {what}, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"df: {what} needs column(s) {missing} (see fp4moe_diag.results.SCHEMA)")
    if df.empty:
        raise ValueError(f"df: {what} needs measured rows, got an empty DataFrame")
    return df


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    t = pd.to_numeric(df["time_median_us"], errors="coerce")
    return df[(df["status"] == "ok") & t.notna() & (t > 0)]


def str_or_empty(v: Any) -> str:
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def provenance(df: pd.DataFrame) -> str:
    """``"NVIDIA H200 · flashinfer 0.5.2"`` from the frame's own columns (several joined by ', ')."""
    def uniq(col: str) -> list[str]:
        if col not in df:
            return []
        return sorted({str_or_empty(v) for v in df[col].tolist()} - {""})

    gpus = ["CPU" if g.lower() == "cpu" else g for g in uniq("gpu_name")]
    fi = uniq("flashinfer_version")
    return f"{', '.join(gpus) or 'unknown device'} · flashinfer {', '.join(fi) or 'not installed'}"


def select_run(df: pd.DataFrame, run_id: Optional[str] = None) -> pd.DataFrame:
    """Rows of ``run_id``; by default the latest run (run ids start with the date) when there are several."""
    if "run_id" not in df or df.empty:
        return df
    ids = sorted({str_or_empty(v) for v in df["run_id"].tolist()})
    if run_id is not None:
        if run_id not in ids:
            raise ValueError(f"run_id: {run_id!r} is not in the frame; it has {ids}")
        return df[df["run_id"] == run_id]
    if len(ids) <= 1:
        return df
    return df[df["run_id"].fillna("") == ids[-1]]


def best_per_shape(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured shape (run x GPU x backend x case x T): the best and the default tactic.

    Columns: the shape columns, ``best_tactic``, ``best_us``, ``best_p10_us``, ``best_p90_us``,
    ``default_tactic``, ``default_us``, ``default_status``, ``speedup`` (default / best),
    ``frac_bw_roofline``, ``achieved_GBps``, ``achieved_TFLOPs`` and ``frac_flops_roofline`` of the best tactic,
    ``best_rel_l2``, ``best_sm_clock_mhz`` (the SM clock as its repeats finished, NaN where not read), ``n_tactics``
    and ``n_ok``.  The best is the ``is_best`` row when the tuner marked one (the fastest such row where a run
    merged several sweeps of the shape), else the fastest ``ok`` row.
    """
    require_frame(df, "best_per_shape", ["status", "time_median_us", *SHAPE_COLUMNS])
    keys = list(SHAPE_COLUMNS)
    d = df.copy()
    for c in keys:
        if pd.api.types.is_string_dtype(d[c]) or pd.api.types.is_object_dtype(d[c]):
            d[c] = d[c].astype("string").fillna("")
    t = pd.to_numeric(d["time_median_us"], errors="coerce")
    ok = (d["status"] == "ok") & t.notna() & (t > 0)
    flag = lambda col: d[col].fillna(False).astype(bool) if col in d else pd.Series(False, index=d.index)  # noqa: E731
    base = d.groupby(keys, dropna=False, sort=True).size().rename("n_tactics").to_frame()
    base["n_ok"] = ok.groupby([d[k] for k in keys], dropna=False).sum()
    # the flagged best first (the fastest of them where a run merged several sweeps of the shape, each with its own
    # best), else the fastest ok row (the first of equal times, as idxmin)
    timed = d.assign(_t=t, _f=flag("is_best"))[ok].sort_values("_t", kind="stable")  # no index lookup: may repeat
    flagged = timed[timed["_f"]].groupby(keys, dropna=False, sort=False).head(1)
    fastest = timed.groupby(keys, dropna=False, sort=False).head(1)
    best = pd.concat([flagged, fastest]).drop(columns=["_t", "_f"]).groupby(keys, dropna=False, sort=False).head(1)
    get = lambda frame, col: frame[col] if col in frame else pd.Series(math.nan, index=frame.index)  # noqa: E731
    b = pd.DataFrame({k: best[k] for k in keys})
    b["best_tactic"] = best["tactic_label"].astype("string").fillna("")
    for src, dst in (("time_median_us", "best_us"), ("time_p10_us", "best_p10_us"), ("time_p90_us", "best_p90_us"),
                     ("frac_bw_roofline", "frac_bw_roofline"), ("achieved_GBps", "achieved_GBps"),
                     ("achieved_TFLOPs", "achieved_TFLOPs"), ("frac_flops_roofline", "frac_flops_roofline"),
                     ("rel_l2", "best_rel_l2"), ("time_sm_clock_mhz", "best_sm_clock_mhz")):
        b[dst] = pd.to_numeric(get(best, src), errors="coerce").astype(float)
    dflt = d[flag("is_default_tactic")].groupby(keys, dropna=False, sort=False).head(1)
    dd = pd.DataFrame({k: dflt[k] for k in keys})
    dd["default_tactic"] = dflt["tactic_label"].astype("string").fillna("")
    dd["default_status"] = dflt["status"].astype("string").fillna("")
    dt = pd.to_numeric(dflt["time_median_us"], errors="coerce").astype(float)
    dd["default_us"] = dt.where(dd["default_status"] == "ok")
    res = base.reset_index().merge(b, on=keys, how="left").merge(dd, on=keys, how="left")
    res["best_tactic"] = res["best_tactic"].fillna("")
    res["default_tactic"] = res["default_tactic"].fillna("")
    res["default_status"] = res["default_status"].fillna("")
    res["speedup"] = (res["default_us"] / res["best_us"]).where(res["best_us"] > 0)
    if len(res):
        res["num_tokens"] = res["num_tokens"].astype("Int64")
        res["ep_size"] = res["ep_size"].astype("Int64")
    return res


def latest_per_shape(best: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`best_per_shape` with, for a shape measured in several runs (same GPU, backend,
    case, T), only one run's row: a run timed with CUDA graphs (no host launch gaps) before one timed
    eagerly, then a run that timed another kernel backend at that shape too (head to head: a run of one backend
    alone, a tactic filter or a twins sweep, never stands against a peer timed in another run, at other clocks),
    then the most recent (last row ``timestamp``, then run id).  Gives one line per backend across runs that each
    cover part of the tokens."""
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
    rid = best["run_id"].astype("string").fillna("")
    ranked = best.assign(_rank=rid.map(pos).fillna(-1), _graph=rid.map(graph).fillna(False).astype(bool))
    keys = [c for c in SHAPE_COLUMNS if c != "run_id"]
    at = [c for c in SHAPE_COLUMNS if c != "backend"]  # a run at a shape
    label = ranked["backend"].astype("string").fillna("")
    kernel = ~label.str.split("@").str[0].isin(["reference", "cutlass_autotune"])  # a label: a build, a release
    n = ranked.assign(_k=label.where(kernel)).groupby(at, dropna=False, sort=False)["_k"].transform("nunique")
    ranked = ranked.assign(_h2h=(n > 1) & kernel)
    out = ranked.sort_values(["_graph", "_h2h", "_rank"], kind="stable").groupby(keys, dropna=False,
                                                                                  sort=False).tail(1)
    return out.drop(columns=["_rank", "_h2h", "_graph"]).sort_index()


def run_recency(df: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """``{run_id: (last row timestamp, run_id)}``: sorting by it puts the most recent run last."""
    runs = df.assign(run_id=df["run_id"].astype("string").fillna(""))
    when = (runs.groupby("run_id")["timestamp"].max().astype("string").fillna("") if "timestamp" in runs
            else pd.Series("", index=sorted(runs["run_id"].unique())))
    return {str(rid): (str(when.get(rid, "")), str(rid)) for rid in runs["run_id"].unique()}


def one_run_per_line(df: pd.DataFrame, keys: list[str], runs: Any = None) -> pd.DataFrame:
    """The rows of a single run for each group of ``keys`` (a line of a figure, e.g. backend x GPU x case), so a
    line is one code version.  By default the most recent run (:func:`run_recency`) with rows in the group;
    ``runs`` chooses instead: a run id for every group, or ``{backend: run_id}`` (backends not named keep
    the default).  A run id that is not in the frame, or has no rows of its backend, is a ``ValueError``."""
    if df.empty:
        return df
    rid = df["run_id"].astype("string").fillna("")
    have = sorted(rid.unique())
    if isinstance(runs, str):
        if runs not in have:
            raise ValueError(f"runs: {runs!r} is not a run of the frame; it has {have}")
        return df[rid == runs]
    if runs is not None and not isinstance(runs, dict):
        raise ValueError(f"runs: expected a run id or a {{backend: run_id}} dict, got {type(runs).__name__}")
    chosen = dict(runs or {})
    for b, r in chosen.items():
        if not ((rid == r) & (df["backend"] == b)).any():
            with_b = sorted(rid[df["backend"] == b].unique())
            raise ValueError(f"runs: run {r!r} has no rows of backend {b!r}; runs with it: {with_b or 'none'}")
    recency = run_recency(df)
    keep = pd.Series(False, index=df.index)
    for _, g in df.assign(_rid=rid).groupby(keys, dropna=False, sort=False):
        b = g["backend"].iloc[0]
        pick = chosen[b] if b in chosen else max(g["_rid"].unique(), key=lambda r: recency[str(r)])
        keep[g.index[g["_rid"] == pick]] = True
    return df[keep]


def commit_label(rows: pd.DataFrame, width: int = 7) -> str:
    """The ``git_commit`` of a line's rows, cut to ``width`` characters (several joined by '/'; 'commit unknown'
    without one)."""
    commits = sorted({str_or_empty(v)[:width] for v in rows["git_commit"].tolist()} - {""}) if "git_commit" in rows else []
    return "/".join(commits) or "commit unknown"


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
    parts = [f"{name} (T {fmt_tokens(a)}" + (f"–{fmt_tokens(b)})" if b != a else ")") for name, a, b in runs]
    return sep.join(parts)


# --------------------------------------------------------------------------- axis helpers
def fmt_tokens(x: float, _pos: Any = None) -> str:
    if x <= 0:
        return ""
    if x >= 1024 and x % 1024 == 0:
        return f"{int(x // 1024)}k"
    return f"{x:g}"
