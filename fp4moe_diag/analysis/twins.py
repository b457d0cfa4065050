"""A tactic family against its twins: each measured tactic whose label holds ``variant`` (``-pdlw``) beside the tactic
of the same run, shape and backend whose label has ``base`` there instead (``-pdl``; ``""``: the suffix taken out),
timed by the same sweep under the same library releases (a run imported from two sweeps, one per Triton release,
pairs each row with its twin of its own release).  The ratio is the variant's median over its twin's (below 1: the variant is faster), by
the replay median and, where both rows have it, by the CUPTI kernel span; each row keeps both spreads, so that a
difference smaller than them reads as level.  A pair timed in different passes of a screened sweep (``timing_pass``:
one row only screened, 2 repeats, the other re-timed with the finalists, often minutes and clocks apart) is not like
for like: its verdict is ``unlike`` and the count says so."""

from __future__ import annotations

import re

import pandas as pd

from .per_shape import ok_rows, require_frame

#: one twin pair per run x shape x backend x library release
KEYS = ["run_id", "gpu_name", "model", "ep_size", "num_tokens", "backend"]
#: the releases a twin must share (where the rows have them; '' for rows without)
RELEASES = ["triton_version", "flashinfer_version", "torch_version"]
COLUMNS = KEYS + RELEASES + ["tactic", "twin", "us", "twin_us", "ratio", "kernel_ratio", "spread", "twin_spread",
                             "passes", "verdict"]


def _part(variant: str) -> "re.Pattern[str]":
    """``variant`` as a whole label part: followed by the label's end or its next part (``-`` / ``~``), so that
    ``-pdlt`` is not read inside ``-pdltt`` nor ``-pdl`` inside ``-pdlw``."""
    return re.compile(re.escape(variant) + r"(?=$|[-~])")


def twin_label(label: str, variant: str, base: str) -> str:
    """``label`` with its (last) ``variant`` part replaced by ``base``."""
    found = list(_part(variant).finditer(label))
    if not found:
        raise ValueError(f"label {label!r} holds no {variant!r}")
    m = found[-1]
    return label[: m.start()] + base + label[m.end():]


def _verdict(ratio: float, spread: float) -> str:
    return "level" if abs(ratio - 1.0) <= spread else "faster" if ratio < 1.0 else "slower"


def _pair(r: pd.Series, t: pd.Series) -> dict:
    """A pair's times, ratio and verdict: by their medians when both were timed in the same pass; else, when both
    kept the screen that picked the finalists (``time_screen_median_us``, from session 24), by those screens, taken
    in one pass (``passes``: ``screens (...)``; the verdict against the larger of the rows' spreads); else
    ``unlike``."""
    same = r["_pass"] == t["_pass"]
    us, twin_us, passes = r["time_median_us"], t["time_median_us"], r["_pass"]
    if not same:
        passes = f"{r['_pass']} / {t['_pass']}"
        if pd.notna(r["_screen"]) and pd.notna(t["_screen"]):
            us, twin_us, same, passes = r["_screen"], t["_screen"], True, f"screens ({passes})"
    ratio = us / twin_us
    return {"us": us, "twin_us": twin_us, "ratio": ratio, "passes": passes,
            "verdict": _verdict(ratio, max(r["_spread"], t["_spread"])) if same else "unlike"}


def twin_table(df: pd.DataFrame, variant: str, base: str) -> pd.DataFrame:
    """One row per measured ``variant`` tactic with a measured twin (see the module note); ``verdict`` says
    ``faster`` / ``slower`` when the ratio is off 1 by more than the larger of the two time spreads, else
    ``level``; ``unlike`` when the two were timed in different passes and did not both keep their screens
    (``passes`` names both; :func:`_pair`).  A ValueError when ``variant`` is empty, equals ``base`` or names no measured tactic."""
    if not isinstance(variant, str) or not variant or variant == base:
        raise ValueError(f"variant: expected a label part other than base ({base!r}), got {variant!r}")
    df = ok_rows(require_frame(df, "results", KEYS + ["tactic_label", "time_median_us", "status"]))
    var = df[df["tactic_label"].str.contains(_part(variant), regex=True)]
    if var.empty:
        raise ValueError(f"variant: no measured tactic label holds {variant!r}")
    df = df.assign(**{c: df[c].fillna("").astype(str) if c in df else "" for c in RELEASES})
    spread = (df["time_spread"] if "time_spread" in df else pd.Series(0.0, index=df.index)).fillna(0.0)
    span = df["time_kernel_span_median_us"] if "time_kernel_span_median_us" in df else pd.Series(float("nan"),
                                                                                                 index=df.index)
    passes = df["timing_pass"].fillna("").astype(str) if "timing_pass" in df else pd.Series("", index=df.index)
    screen = df["time_screen_median_us"] if "time_screen_median_us" in df else pd.Series(float("nan"), index=df.index)
    both = df.assign(_spread=spread, _span=span, _pass=passes, _screen=screen)
    keys = KEYS + RELEASES
    idx = both.set_index(keys + ["tactic_label"])
    rows = []
    for _, r in both.loc[var.index].iterrows():
        twin = twin_label(r["tactic_label"], variant, base)
        key = tuple(r[k] for k in keys) + (twin,)
        if key not in idx.index:
            continue
        t = idx.loc[key]
        t = t.iloc[0] if isinstance(t, pd.DataFrame) else t
        rows.append({**{k: r[k] for k in keys}, "tactic": r["tactic_label"], "twin": twin,
                     "kernel_ratio": r["_span"] / t["_span"], "spread": r["_spread"], "twin_spread": t["_spread"],
                     **_pair(r, t)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(keys + ["tactic"], kind="stable").reset_index(drop=True)


def twins_markdown(table: pd.DataFrame, variant: str, base: str) -> str:
    """The table as Markdown, then one line: how many pairs are faster, level, slower and unlike, and the median
    ratio of the like ones."""
    head = ("| GPU | Triton | model | EP | T | tactic | twin | us | twin us | ratio | kernel-span ratio | spreads | "
            "timed in | verdict |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    lines = [head]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.gpu_name} | {r.triton_version or '-'} | {r.model} | {r.ep_size} | {r.num_tokens} | "
                     f"`{r.tactic}` | `{r.twin}` | "
                     f"{r.us:.1f} | {r.twin_us:.1f} | {r.ratio:.3f} | "
                     f"{'-' if pd.isna(r.kernel_ratio) else f'{r.kernel_ratio:.3f}'} | "
                     f"{r.spread:.1%} / {r.twin_spread:.1%} | {r.passes or '-'} | {r.verdict} |")
    n = table["verdict"].value_counts()
    like = table[table["verdict"] != "unlike"]
    lines.append(f"\n{variant} against {base or 'no suffix'}: {len(table)} pairs, {n.get('faster', 0)} faster, "
                 f"{n.get('level', 0)} level, {n.get('slower', 0)} slower"
                 + (f", {n['unlike']} unlike (timed in different passes)" if n.get("unlike", 0) else "")
                 + (f"; median ratio {like['ratio'].median():.3f}" if len(like) else ""))
    return "\n".join(lines)
