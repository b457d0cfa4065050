"""The duels of run folders (``duel-*.csv``, :mod:`fp4moe_diag.profiling.duel`: two tactics timed in alternating
rounds, the ratio a / b per round) and what they say about goal 1 of issue #25 (never slower than a bf16 peer) at a
shape: where two medians taken one after the other cannot tell ours from the peer, the per-round ratio can."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import pandas as pd

from .tool_csvs import pair_rows, read_tool_csvs

#: the columns :func:`duel_verdict` reads (profiling.duel writes these and the tactics' medians)
COLUMNS = ["model", "ep_size", "num_tokens", "a_backend", "a_tactic", "b_backend", "b_tactic", "ratio_median",
           "ratio_p10", "ratio_p90", "a_faster_share", "rounds", "verdict", "gpu_name"]


def read_duels(folders: Iterable[Path]) -> pd.DataFrame:
    """Every ``duel-*.csv`` of ``folders`` as one frame, with ``source`` (folder/file); empty (with :data:`COLUMNS`)
    when there is none.  A file lacking a column of :data:`COLUMNS` -> ValueError naming it."""
    # a file from before session 25 has no l2_flushed column (every duel then flushed the L2), from before session 26
    # no sync_after_flush or kernel_time (no duel then idled before its calls or ran under the profiler)
    frames = [x.assign(**{c: x[c] if c in x else plain for c, (plain, _) in _CONDITIONS.items()})
              for x in read_tool_csvs(folders, "duel-*.csv", COLUMNS, "duel", "fp4moe_diag.profiling.duel")]
    if not frames:
        return pd.DataFrame(columns=COLUMNS + [*_CONDITIONS, "source"])
    out = pd.concat(frames, ignore_index=True)
    return out.assign(**{c: out[c].map(lambda v: str(v).strip().lower() in ("true", "1")) for c in _CONDITIONS})


#: a duel's conditions: the goals' value (also that of a file that lacks the column: only a duel at it decides a goal)
#: and what a duel away from it is called (:func:`condition`)
_CONDITIONS = {"l2_flushed": (True, "L2 not flushed"), "sync_after_flush": (False, "idle before each call"),
               "kernel_time": (False, "traced")}


def deciding(d: pd.DataFrame) -> pd.DataFrame:
    """The duels timed by the goals' method: the L2 flushed before each call, the calls queued back to back, no
    profiler (``profiling.duel --no-l2-flush``, ``--sync-after-flush`` and ``--kernel-time`` diagnose)."""
    keep = pd.Series(True, index=d.index)
    for c, (plain, _) in _CONDITIONS.items():
        if c in d.columns:
            keep &= d[c].astype(bool) == plain
    return d[keep]


def committed_duels(root: Optional[Path] = None) -> pd.DataFrame:
    """Every ``duel-*.csv`` under ``data/runs/*/`` (``root``: another runs folder) as one table, a row per duel:
    GPU, shape, both tactics, the per-round ratio and verdict, how it was timed (:func:`condition`) and its run folder
    (``source``); empty when none."""
    from ..paths import run_folders

    d = read_duels(run_folders(root))
    d = d.assign(condition=[condition(r) for _, r in d.iterrows()])
    keep = ["gpu_name", "model", "ep_size", "num_tokens", "a_backend", "a_tactic", "b_backend", "b_tactic",
            "ratio_median", "ratio_p10", "ratio_p90", "a_faster_share", "verdict", "condition", "source"]
    return d[keep].sort_values(keep[:4], kind="stable").reset_index(drop=True)


def condition(r: pd.Series) -> str:
    """How a duel row (:func:`read_duels`) was timed: ``plain`` (the goals' method, :func:`deciding`), else its
    diagnoses joined: ``L2 not flushed``, ``idle before each call``, ``traced``."""
    parts = [text for col, (plain, text) in _CONDITIONS.items() if bool(r.get(col, plain)) != plain]
    return ", ".join(parts) or "plain"


def deciding_at(duels: pd.DataFrame, gpu_name: str, model: str, ep: int, t: int, ours: str, peer: str) -> pd.DataFrame:
    """The duels that may decide goal 1 for ours (``a``) against the peer (``b``) at this GPU and shape: timed by
    the goals' method (:func:`deciding`) and, where ours names its Triton release (``triton@3.6.0``), under it."""
    if duels is None or duels.empty:
        return pd.DataFrame(columns=COLUMNS)
    backend, _, release = ours.partition("@")
    d = pair_rows(duels, gpu_name, model, ep, t, backend, peer)
    if release and backend.startswith("triton") and "triton_version" in d.columns:
        d = d[d["triton_version"].astype(str) == release]
    return deciding(d)  # a duel without the flush, with an idle gap or under the profiler diagnoses


def duel_verdict(duels: pd.DataFrame, gpu_name: str, model: str, ep: int, t: int, ours: str,
                 peer: str, best: Optional[str] = None) -> Optional[pd.Series]:
    """The duel of ours (``a``, backend ``ours`` without its ``@release``) against the peer (``b``) at this GPU and
    shape; None when there is none.  Of several (other tactics of ours, other sessions): the one where ours did
    best (the lowest median ratio) of those ours won; else, with ``best`` (the run's best tactic of ours), the
    lowest of that tactic's duels; else the lowest of all.  So a duel of the run's best that ours lost is not hidden
    behind a level duel of an older tactic.  Duels against several tactics of the peer: that choice is made per peer
    tactic, and the peer's strongest one answers (the highest of those ratios): goal 1 asks ours to beat the peer's
    best, and a win against one of its tactics does not hide a loss against another (session 25, H100, 20b EP2
    T=4096: 0.996 against ``tk-m128k128w8``, 1.004 against ``tk-m128kautow8s3``); a peer tactic duelled only by
    another tactic of ours than ``best`` that did not win says nothing of ours' best and answers only when no other
    does.  The note names both tactics.  Repeated duels of one pair are pooled first (:func:`pooled`): picking
    the lowest of them would pick the luckiest sample.  When
    ours is a Triton backend with its release (``triton@3.6.0``), only the duels timed under that Triton release
    count (a duel under another release answers another question: ``evidence.sh`` with ``KIT``), and only those
    timed by the goals' method (:func:`deciding`: ``--no-l2-flush``, ``--sync-after-flush`` and ``--kernel-time``
    diagnose, never decide)."""
    d = pooled(deciding_at(duels, gpu_name, model, ep, t, ours, peer))
    if d.empty:
        return None
    per_peer = [_ours_best(g, best) for _, g in d.groupby(d["b_tactic"].astype(str), sort=True)]
    decisive = [r for r in per_peer if best is None or str(r["a_tactic"]) == str(best) or r["verdict"] == "ahead"]
    return max(decisive or per_peer, key=lambda r: float(r["ratio_median"]))


#: a pooled duel's verdict from the share of its rounds ours was faster (as a single duel's p90 < 1 / p10 > 1)
AHEAD_SHARE, BEHIND_SHARE = 0.9, 0.1


def pooled(d: pd.DataFrame) -> pd.DataFrame:
    """Duels (:func:`deciding_at`) with the repeats of one pair (the same tactic of ours and of the peer, under the
    same Triton release) pooled into one row: ``rounds`` summed, the ratios and the share of rounds ours was faster
    the rounds-weighted means, the verdict from that share (``ahead`` at :data:`AHEAD_SHARE` or more, ``behind`` at
    :data:`BEHIND_SHARE` or less, else ``level``), ``duels`` their count and ``source`` their files.  (Session 26,
    H200, 20b EP1 T=16384: 1.003 level in 20 % of rounds and 1.003 behind in 7 %: pooled 1.003 in 13 %, level.)"""
    rows = []
    keys = [d[c].astype(str) for c in ("a_tactic", "b_tactic", "triton_version") if c in d.columns]
    for _, g in (d.groupby(keys, sort=True) if len(d) else ()):
        r = g.iloc[0].copy()
        r["duels"] = len(g)
        if len(g) > 1:
            w = g["rounds"].astype(float)
            for c in ("ratio_median", "ratio_p10", "ratio_p90", "a_faster_share"):
                r[c] = float((g[c].astype(float) * w).sum() / w.sum())
            share = r["a_faster_share"]
            r["rounds"] = int(w.sum())
            r["verdict"] = "ahead" if share >= AHEAD_SHARE else "behind" if share <= BEHIND_SHARE else "level"
            r["source"] = "; ".join(g["source"].astype(str))
        rows.append(r)
    return pd.DataFrame(rows, columns=[*d.columns, "duels"])


def _ours_best(d: pd.DataFrame, best: Optional[str]) -> pd.Series:
    """Of the duels against one tactic of the peer: the one ours won by most, else the run's best tactic's lowest,
    else the lowest."""
    for pick in (d[d["verdict"].astype(str) == "ahead"], d[d["a_tactic"].astype(str) == str(best)], d):
        if not pick.empty:
            return pick.loc[pick["ratio_median"].astype(float).idxmin()]
    raise AssertionError("unreachable: d is not empty")


def duel_text(r: pd.Series) -> str:
    """One line: the ratio, its p10-p90, the share of rounds ours was faster, the verdict and where it is from (of
    a pooled row, :func:`pooled`: how many duels, and the rounds-weighted means)."""
    n = int(r.get("duels", 1) or 1)  # "duel (" opens both forms: undecided() reads it as "duelled"
    what = (f"duel ({int(r['rounds'])} alternating rounds" if n == 1 else
            f"duel ({n} of this pair pooled: {int(r['rounds'])} alternating rounds, ratios their rounds-weighted means")
    return (f"{what}, {r['source']}): ours `{r['a_tactic']}` / peer "
            f"`{r['b_tactic']}` {float(r['ratio_median']):.3f} (p10 {float(r['ratio_p10']):.3f}, p90 "
            f"{float(r['ratio_p90']):.3f}), ours faster in {100 * float(r['a_faster_share']):.0f} % of rounds: "
            f"{r['verdict']}")


#: what a goal row's note says of a duel that cannot decide it (``behind`` or ``level`` with another tactic of ours than
#: the run's best); :func:`undecided` lists such shapes again
NOT_DECIDING = "not deciding"


#: goal 1's status from a duel of the run's best tactic
VERDICT_STATUS = {"ahead": "met", "behind": "not met", "level": "level"}


def apply_duels(table: pd.DataFrame, duels: pd.DataFrame) -> pd.DataFrame:
    """Goal 1's rows of a goal table (:func:`.goals.goal_rows`) with a duel at their shape: ``status`` from the duel
    (``ahead``: met, ``behind``: not met, ``level``: level, neither shown faster at the same clocks), ``x_goal`` its
    median ratio, and the duel's line in ``note``.  (Until session 25 a level duel kept the medians' status: on the
    H100 at 20b EP1 T=16384 that was "not met, 1.03x" from medians the headline itself called not like for like in
    clocks (ours' finalists read 1620 MHz, theirs 1695), beside a level duel, 1.002.)  A duel of another tactic of
    ours than the row's (``ours_tactic``, the run's best) decides only when ours is ahead in it (some tactic of ours
    beats the peer); behind or level, it says nothing of the best one: the note says :data:`NOT_DECIDING` and the
    medians' status stays.  Other rows unchanged."""
    t = table.copy()
    for i, r in t[t["goal"] == 1].iterrows():
        if not isinstance(r.get("peer_backend"), str) or not isinstance(r.get("ours_backend"), str):
            continue
        best = r.get("ours_tactic")
        d = duel_verdict(duels, r["gpu_name"], r["model"], int(r["ep_size"]), int(r["num_tokens"]),
                         r["ours_backend"], r["peer_backend"], best if isinstance(best, str) else None)
        if d is None:
            continue
        other = isinstance(best, str) and best != str(d["a_tactic"]) and d["verdict"] != "ahead"
        if d["verdict"] in VERDICT_STATUS and not other:
            t.at[i, "status"] = VERDICT_STATUS[d["verdict"]]
            t.at[i, "x_goal"] = float(d["ratio_median"])
        text = duel_text(d) + (f" ({NOT_DECIDING}: not this run's best `{best}`)" if other else "")
        t.at[i, "note"] = "; ".join(s for s in (str(r["note"] or ""), text) if s)
    return t


#: best rows timed at SM clocks further apart than this are not like for like (:func:`clocks_apart`; the headline's
#: note, :func:`.headline.clock_note`, takes the same)
CLOCK_GAP = 1.05


def clocks_apart(mine, theirs):  # noqa: ANN001, ANN201 -- floats or Series alike
    """Whether two SM clocks (MHz; floats, or Series elementwise) lie more than :data:`CLOCK_GAP` apart; a clock
    missing (NaN) or not positive: False."""
    hi, lo = np.maximum(mine, theirs), np.minimum(mine, theirs)
    with np.errstate(divide="ignore", invalid="ignore"):  # lo 0 or NaN: False by (lo > 0) alone
        return (lo > 0) & (hi / lo > CLOCK_GAP)


def undecided(table: pd.DataFrame, margin: float = 0.02) -> list[str]:
    """Goal 1's shapes that a duel should decide: not met, or met by less than ``margin`` (medians taken one after
    the other, within the run-to-run spread), or whose two best rows read SM clocks more than :data:`CLOCK_GAP` apart
    (``ours_clock_mhz``, ``peer_clock_mhz``: on the H100, s25a, such medians put ours 3 % behind where a duel found
    them level), and not duelled yet (or only with another tactic of ours than the run's best, behind or level): one
    line each, ``MODEL|EP|T|OURS=TACTIC|PEER=TACTIC`` (backends without their ``@release``), what
    ``tools/device/plans/evidence.sh`` takes in ``DUELS``."""
    if not 0 <= margin < 1:
        raise ValueError(f"margin: expected a fraction in [0, 1), got {margin!r}")
    t = table[(table["goal"] == 1) & table["peer_tactic"].notna() & table["ours_tactic"].notna()]
    note = t["note"].astype(str)
    duelled = note.str.contains("duel (", regex=False) & ~note.str.contains(NOT_DECIDING, regex=False)
    clocks = t.reindex(columns=["ours_clock_mhz", "peer_clock_mhz"]).apply(pd.to_numeric, errors="coerce")
    apart = clocks_apart(clocks["ours_clock_mhz"], clocks["peer_clock_mhz"])
    t = t[((t["status"] == "not met") | (t["x_goal"] > 1 - margin) | apart) & ~duelled]
    return list(dict.fromkeys(duel_line(r) for r in t.itertuples()))


def duel_line(r) -> str:  # noqa: ANN001 -- a goal-table row (itertuples)
    """A goal-1 row's pair as ``tools/device/plans/evidence.sh`` takes it in ``DUELS`` / ``CONDITIONS``:
    ``MODEL|EP|T|OURS=TACTIC|PEER=TACTIC``, the backends without their ``@release``."""
    return (f"{r.model}|{int(r.ep_size)}|{int(r.num_tokens)}|{str(r.ours_backend).partition('@')[0]}={r.ours_tactic}|"
            f"{str(r.peer_backend).partition('@')[0]}={r.peer_tactic}")
