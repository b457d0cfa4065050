"""Where each goal of issue #25 stands, per shape, with the measured reason (``python -m fp4moe_diag goals RUN ...``).

The goals, for our Triton backend (``triton``, bf16 activations), at the goal shapes (:data:`GOAL_CASES`: gpt-oss-20b
EP1 and EP2 at T = 1 .. 16384, gpt-oss-120b EP4 at T = 1 .. 4096; the token counts are those measured; goal 5 alone
also at :data:`W4A8_ONLY_CASES`):

1. never slower than any bf16-activation peer: each peer backend's best tactic (:func:`.tables.x_of_best`, like for
   like: ``kernel_precision`` w4a16; FlashInfer told apart by version, ``cutlass@0.7.4``);
2. decode: weight bytes / time >= :func:`decode_goal_gbps` at :data:`DECODE_GOAL_TOKENS` (20b EP1 T = 16..64,
   120b EP4 T = 64): the issue's 3.4 TB/s on the H200, on another GPU :data:`DECODE_GOAL_FRAC` of the read ceiling
   measured in the run (the fraction the issue took of the H200's);
3. T <= :data:`SMALL_T_MAX`: time <= :data:`SMALL_T_FACTOR` x (weight bytes / measured read ceiling + one launch,
   ``launch_us``, by default :data:`LAUNCH_US`);
4. prefill, T >= :data:`PREFILL_MIN_TOKENS`: achieved TFLOP/s >= :data:`PREFILL_GOAL_FRAC` of the measured bf16
   ceiling (``frac_flops_roofline``);
5. W4A8 (``triton_w4a8``), T >= :data:`PREFILL_MIN_TOKENS`: at least as fast as FlashInfer's MXFP4 x FP8 path
   (:data:`W4A8_PEER`, ``cutlass_humming``), its accuracy (``rel_l2_bf16_ref``) next to the bf16 path's; without an
   ok row of the peer the goal is ``not compared``, with the peer's error or ``not run``.

:func:`goal_table` gives one row per goal x shape (:data:`GOAL_COLUMNS`); ``x_goal`` is the one "how far" of every
goal: the speed-up ours needs to meet it (ours' time over the time the goal allows: goal 1 ours / peer, goal 2
target / achieved, goal 3 time / allowed, goal 4 0.70 / achieved share, goal 5 w4a8 / cutlass_humming); met when
<= 1.  The reasons come from Nsight Compute profiles (:mod:`.goal_profiles`); :mod:`.goals_markdown` renders both.
Pure pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import pandas as pd

from .ablations import ablation_note, ablation_table
from .read_floors import floor_note, floor_table, floor_us
from .duels import apply_duels
from .goal_notes import clocks_apart_note, prefill_note
from .energy import energy_note
from .traced_duels import traced_note
from .builds import TRITON_BACKENDS, backend_label
from .goal_profiles import KERNEL_COLUMNS, ProfileMatch, as_float, cupti_text, match_profile, reason_text
from .tables import BF16_CLOCK_COLUMNS, with_run_ceilings, x_of_best

#: one kernel launch (us): the fixed cost in goal 3's bound, weight bytes / read ceiling + LAUNCH_US.  3 us is an
#: H200 launch of a CUDA-graph node with its ramp-up and tail (ours at 120b EP4 T=1, no weights to read: ~4 us)
LAUNCH_US = 3.0
DECODE_GOAL_GBPS = 3400.0  #: goal 2 on the H200 (the issue's number)
DECODE_GOAL_FRAC = 0.80  #: goal 2 elsewhere: this share of the read ceiling measured in the run
SMALL_T_MAX = 4
SMALL_T_FACTOR = 1.3
PREFILL_MIN_TOKENS = 4096
PREFILL_GOAL_FRAC = 0.70
W4A8_PEER = "cutlass_humming"
#: (model, ep_size) -> the largest T of the goals
GOAL_CASES = {("gpt-oss-20b", 1): 16384, ("gpt-oss-20b", 2): 16384, ("gpt-oss-120b", 4): 4096}
#: (model, ep_size) -> the largest T where goal 5 alone applies: FlashInfer's Humming runner takes neither expert biases
#: nor EP, so gpt-oss-120b's only shape it runs is EP1 without biases (``data/shapes/gpt-oss-nobias.csv``), outside the
#: bf16 goals' shapes
W4A8_ONLY_CASES = {("gpt-oss-120b", 1): 16384}
#: (model, ep_size) -> the T range (inclusive) of goal 2
DECODE_GOAL_TOKENS = {("gpt-oss-20b", 1): (16, 64), ("gpt-oss-120b", 4): (64, 64)}
GOAL_NAMES = {1: "never slower than any bf16-activation peer",
              2: f"decode >= {DECODE_GOAL_GBPS / 1e3:.1f} TB/s on the H200, elsewhere "
                 f"{100 * DECODE_GOAL_FRAC:.0f} % of the read ceiling (weight bytes / time)",
              3: f"T <= {SMALL_T_MAX} within {SMALL_T_FACTOR}x of weight bytes / read ceiling + one launch",
              4: f"prefill (T >= {PREFILL_MIN_TOKENS}) >= {100 * PREFILL_GOAL_FRAC:.0f} % of the bf16 ceiling",
              5: f"W4A8 (T >= {PREFILL_MIN_TOKENS}) at least as fast as {W4A8_PEER}"}
SHAPE = ["gpu_name", "model", "ep_size", "has_bias", "num_tokens"]


def decode_goal_gbps(gpu_name: str, read_ceiling_gbps: float) -> float:
    """Goal 2's target (GB/s): :data:`DECODE_GOAL_GBPS` on an H200, else :data:`DECODE_GOAL_FRAC` x the read ceiling
    measured in the run (NaN where it was not: then the goal is not compared)."""
    return DECODE_GOAL_GBPS if "H200" in gpu_name else DECODE_GOAL_FRAC * read_ceiling_gbps


#: the columns of :func:`goal_table`
GOAL_COLUMNS = {
    "goal": "1..5 (:data:`GOAL_NAMES`)", **{c: "the shape" for c in SHAPE},
    "measured": "ours' value in ``unit``", "target": "what the goal asks, in ``unit``", "unit": "us, TB/s or %",
    "status": "met | level (goal 1: a level duel) | not met | not compared",
    "x_goal": "speed-up ours needs (<= 1: met; NaN: not compared)",
    "ours_backend": "ours (triton; goal 5: triton_w4a8)", "ours_tactic": "its best tactic", "ours_us": "its time",
    "ours_run": "the run folder of the timing", "peer_backend": "the fastest bf16 peer (goal 5: cutlass_humming)",
    "peer_tactic": "its best tactic", "peer_us": "its time", "peer_run": "its run folder",
    "weight_bytes": "the weight bytes of ours' call (goals 2-3 look their read floor up by it)",
    "floor_us": "goals 2-3: the fastest one-kernel read of those bytes on that GPU (``profiling.read_floor``), or NaN",
    "chain_us": "goals 2-3: the fastest read of those bytes by two dependent kernels (gemm1's 2/3, then 1/3), or NaN",
    "ours_rel_l2_bf16_ref": "ours' accuracy (rel_l2 vs the fp32 reference of the bf16 activations)",
    "bf16_rel_l2_bf16_ref": "goal 5: the bf16 path's (triton) accuracy, for comparison",
    "note": "how the value was made, or why not compared", "reason": "the measured reason (Nsight Compute)",
    "ours_profile": "the folder of ours' profile (and the profiled tactic where not the timed one)",
    "peer_profile": "the peer's",
    "ours_profile_match": "how ours' profile matches its timed tactic: exact, variant, other tactic (NA: none)",
    "peer_profile_match": "the peer's",
    "ours_cupti": "ours' kernels in the timing's own run (CUPTI, per kernel role, us a call; sum and span)",
    "peer_cupti": "the peer's",
    "ours_clock_mhz": "the SM clock ours' best row read as its repeats finished (NVML; NaN where not read)",
    "peer_clock_mhz": "the peer's",
}
#: the run columns :func:`.goal_profiles.cupti_text` reads, in its argument order
CUPTI_COLUMNS = ("time_kernel_breakdown", "time_kernel_median_us", "time_kernel_span_median_us")


@dataclass(frozen=True)
class GoalReport:
    """:func:`goal_report`'s result: ``table`` (:data:`GOAL_COLUMNS`) and ``kernels`` (per shape x side, the
    profiled kernels: ``side`` ours | peer, ``backend``, ``tactic``, ``match``, ``source``, :data:`KERNEL_COLUMNS`)."""
    table: pd.DataFrame
    kernels: pd.DataFrame


def in_goals(model: str, ep: int, t: int) -> bool:
    """Whether some goal applies at ``model`` EP ``ep`` T ``t``."""
    key = (str(model), int(ep))
    if key in W4A8_ONLY_CASES:
        return PREFILL_MIN_TOKENS <= int(t) <= W4A8_ONLY_CASES[key]
    top = GOAL_CASES.get(key)
    return top is not None and 1 <= int(t) <= top


def _facts(df: pd.DataFrame) -> pd.DataFrame:
    """Per run x backend label x shape x tactic (ok rows): weight bytes, the run's ceilings, the accuracy."""
    ok = df[df["status"] == "ok"].assign(backend=backend_label(df[df["status"] == "ok"]))
    acc = ok["rel_l2_bf16_ref"].where(ok["rel_l2_bf16_ref"].notna(),
                                      ok["rel_l2"].where(ok["kernel_precision"].fillna("w4a16") == "w4a16"))
    ok = ok.assign(rel_l2_bf16_ref=acc, run_id=ok["run_id"].astype("string"))
    keys = ["run_id", "backend", *SHAPE, "tactic_label"]
    cols = ["weight_bytes", "ceiling_read_GBps", "ceiling_bf16_TFLOPs", "rel_l2_bf16_ref"]
    cols += [c for c in (*CUPTI_COLUMNS, *BF16_CLOCK_COLUMNS) if c in ok]
    return ok[keys + cols].groupby(keys, dropna=False, sort=False).first().reset_index().rename(
        columns={"tactic_label": "best_tactic"})


def _at(d: pd.DataFrame, key: tuple) -> pd.DataFrame:
    """The rows of ``d`` at the shape ``key`` (:data:`SHAPE` values; a missing value matches nothing)."""
    for c, v in zip(SHAPE, key):
        d = d[d[c].eq(v).fillna(False).astype(bool)]
    return d


def _why_missing(df: pd.DataFrame, backend: str, key: tuple) -> str:
    """``"<backend> not run"``, or its rows' statuses and first error at the shape."""
    d = _at(df[(backend_label(df).str.split("@").str[0] == backend.split("@")[0])], key)
    if d.empty:
        return f"{backend} not run"
    err = d[d["error_message"].notna() & (d["error_message"] != "")]
    first = f": {err['error_type'].iloc[0]}: {err['error_message'].iloc[0]}" if len(err) else ""
    counts = ", ".join(f"{n} {s}" for s, n in d["status"].value_counts().items())
    return f"{backend} has no ok row ({counts}){first}"


def _row(goal: int, key: tuple, measured: float, target: float, unit: str, x: float, ours: Optional[pd.Series],
         peer: Optional[pd.Series], note: str = "") -> dict:
    r = dict(zip(SHAPE, key), goal=goal, measured=measured, target=target, unit=unit, x_goal=x, note=note,
             status="not compared" if pd.isna(x) else ("met" if x <= 1 else "not met"))
    for side, s in (("ours", ours), ("peer", peer)):
        r.update({f"{side}_backend": None if s is None else s["backend"],
                  f"{side}_tactic": None if s is None else s["best_tactic"],
                  f"{side}_us": math.nan if s is None else s["best_us"],
                  f"{side}_run": None if s is None else s["run_id"]})
    r["ours_rel_l2_bf16_ref"] = math.nan if ours is None else as_float(ours.get("rel_l2_bf16_ref"))
    r["weight_bytes"] = math.nan if ours is None else as_float(ours.get("weight_bytes"))
    for side, s in (("ours", ours), ("peer", peer)):
        r[f"{side}_cupti"] = None if s is None else cupti_text(*(s.get(c) for c in CUPTI_COLUMNS))
        r[f"{side}_clock_mhz"] = math.nan if s is None else as_float(s.get("best_sm_clock_mhz"))
    return r


def _fastest_peer(g: pd.DataFrame, ours: str, w4a8: str) -> Optional[pd.Series]:
    """The fastest bf16-activation backend but ours (never a W4A8 one, whatever its rows' ``kernel_precision``).
    Where the rows hold several Triton releases (``ours`` = ``triton@3.7.1``, :func:`.builds.backend_label`), our
    build under another release is not a peer, and the Triton-built peers are those of the same release."""
    base = g["backend"].str.split("@").str[0]
    ours_base, _, release = ours.partition("@")
    same_release = ~base.isin(TRITON_BACKENDS) | (release == "") | g["backend"].str.endswith(f"@{release}")
    p = g[(g["kernel_precision"] == "w4a16") & (base != ours_base) & ~base.isin([w4a8, W4A8_PEER]) & same_release]
    return None if p.empty else p.loc[p["best_us"].idxmin()]


def _bf16_goals(key: tuple, o: pd.Series, p: Optional[pd.Series], launch_us: float) -> list[dict]:
    """Goals 1-4 at one shape where ours has a time."""
    goals = applicable(key[1], key[2], int(key[4]))
    out = [_row(1, key, o["best_us"], math.nan if p is None else p["best_us"], "us",
                math.nan if p is None else o["best_us"] / p["best_us"], o, p,
                "no bf16 peer measured" if p is None else clocks_apart_note(o, p))]
    wb, ceil = as_float(o.get("weight_bytes")), as_float(o.get("ceiling_read_GBps"))
    gbps = wb / (o["best_us"] * 1e3)
    missing = "" if gbps == gbps and ceil == ceil else "not compared: the row lacks weight_bytes or ceiling_read_GBps"
    if 2 in goals:
        target = decode_goal_gbps(str(key[0]), ceil)
        out.append(_row(2, key, gbps / 1e3, target / 1e3, "TB/s", target / gbps, o, p, missing or
                        f"{wb / 1e6:.1f} MB in {o['best_us']:.1f} us; {100 * gbps / ceil:.0f} % of the read "
                        f"ceiling {ceil / 1e3:.2f} TB/s"))
    if 3 in goals:
        bound = wb / (ceil * 1e3) + launch_us
        allowed = SMALL_T_FACTOR * bound
        out.append(_row(3, key, o["best_us"], allowed, "us", o["best_us"] / allowed, o, p, missing or
                        f"bound {bound:.1f} us = {wb / 1e6:.1f} MB / {ceil / 1e3:.2f} TB/s + {launch_us:g} us launch; "
                        f"{o['best_us'] / bound:.2f}x of it"))
    if 4 in goals:
        frac = as_float(o["frac_flops_roofline"])
        out.append(_row(4, key, 100 * frac, 100 * PREFILL_GOAL_FRAC, "%", PREFILL_GOAL_FRAC / frac, o, p,
                        prefill_note(o) if frac == frac else "not compared: the row lacks frac_flops_roofline"))
    return out


def applicable(model: str, ep: int, t: int) -> list[int]:
    """The goals (1..5) that apply at a goal shape."""
    if (str(model), int(ep)) in W4A8_ONLY_CASES:
        return [5] * (t >= PREFILL_MIN_TOKENS)
    lo, hi = DECODE_GOAL_TOKENS.get((str(model), int(ep)), (0, -1))
    return [1] + [2] * (lo <= t <= hi) + [3] * (t <= SMALL_T_MAX) + [4, 5] * (t >= PREFILL_MIN_TOKENS)


def _missing_ours(df: pd.DataFrame, key: tuple, ours: str) -> list[dict]:
    why = _why_missing(df, ours, key)
    return [_row(g, key, math.nan, math.nan, "", math.nan, None, None, why)
            for g in applicable(key[1], key[2], int(key[4])) if g != 5]


def _peer_cannot(key: tuple) -> str:
    """Why :data:`W4A8_PEER` has no row at a shape whatever a run asks (``""`` where it could run): the unified
    CUTLASS runners take no expert biases and no EP (``backends.flashinfer.unified``)."""
    bias, ep = key[SHAPE.index("has_bias")], int(key[SHAPE.index("ep_size")])
    has_bias = bool(pd.notna(bias) and bias)  # unknown (NA): not claimed
    why = [w for w, c in (("expert biases", has_bias), (f"EP (EP{ep} here)", ep != 1)) if c]
    if not why:
        return ""
    return (f" (it takes no {' and no '.join(why)}: goal 5 is compared at the bias-free EP1 shapes, "
            "data/shapes/gpt-oss-nobias.csv)")


def _w4a8_goal(df: pd.DataFrame, key: tuple, g: pd.DataFrame, w4a8: str, bf16: Optional[pd.Series]) -> dict:
    """Goal 5 at one shape: ours = ``w4a8``, peer = cutlass_humming (any FlashInfer version: the fastest)."""
    w = g[g["backend"] == w4a8]
    h = g[g["backend"].str.split("@").str[0] == W4A8_PEER]
    o = None if w.empty else w.iloc[0]
    p = None if h.empty else h.loc[h["best_us"].idxmin()]
    notes = [_why_missing(df, w4a8, key)] if o is None else []
    notes += [_why_missing(df, W4A8_PEER, key) + _peer_cannot(key)] if p is None else []
    x = math.nan if o is None or p is None else o["best_us"] / p["best_us"]
    r = _row(5, key, math.nan if o is None else o["best_us"], math.nan if p is None else p["best_us"], "us", x, o, p,
             "; ".join(notes))
    r["bf16_rel_l2_bf16_ref"] = math.nan if bf16 is None else as_float(bf16.get("rel_l2_bf16_ref"))
    return r


def goal_shapes(df: pd.DataFrame) -> list[tuple]:
    """The measured goal shapes (:data:`SHAPE` tuples) of ``df``'s kernel rows, sorted."""
    d = df[df["backend"] != "reference"][SHAPE].drop_duplicates()
    keys = [tuple(r) for r in d.itertuples(index=False) if in_goals(r.model, r.ep_size, r.num_tokens)]
    return sorted(keys, key=lambda k: (str(k[0]), str(k[1]), int(k[2]), not bool(k[3]), int(k[4])))


def _w4a8_label(x: pd.DataFrame, w4a8: str, ours: str) -> str:
    """``w4a8`` as :func:`x_of_best` labels it: where the rows hold several Triton releases, a W4A8 backend measured
    under one of them is ``triton_w4a8@3.6.0``; that of ours' release, else the only one (several: a ``ValueError``)."""
    have = set(x["backend"].astype(str))
    tagged = sorted(b for b in have if b.startswith(f"{w4a8}@"))
    if w4a8 in have or not tagged:
        return w4a8
    mine = f"{w4a8}@{ours.partition('@')[2]}"
    if mine in tagged:
        return mine
    if len(tagged) == 1:
        return tagged[0]
    raise ValueError(f"w4a8: these rows hold {w4a8} under several Triton releases ({', '.join(tagged)}); "
                     f"pass one of them")


def goal_rows(df: pd.DataFrame, ours: str = "triton", w4a8: str = "triton_w4a8",
              launch_us: float = LAUNCH_US) -> pd.DataFrame:
    """The goal table without the reasons: one row per goal x goal shape of ``df`` (:data:`GOAL_COLUMNS` but
    ``reason`` and the profile columns); ceilings per run folder (:func:`with_run_ceilings`); per shape and backend
    one run (:func:`.per_shape.latest_per_shape`: one that timed a peer there too before one that did not)."""
    df = with_run_ceilings(df)
    x = x_of_best(df)
    tagged = sorted({b for b in x["backend"].astype(str) if b.startswith(f"{ours}@")})
    if tagged and ours not in set(x["backend"]):
        raise ValueError(f"ours: these rows hold {ours} under several Triton releases ({', '.join(tagged)}); "
                         f"pass one of them")
    w4a8 = _w4a8_label(x, w4a8, ours)
    x = x.merge(_facts(df), on=["run_id", "backend", *SHAPE, "best_tactic"], how="left")
    rows: list[dict] = []
    for key in goal_shapes(df):
        g = _at(x, key)
        mine = g[g["backend"] == ours]
        o = None if mine.empty else mine.iloc[0]
        if applicable(key[1], key[2], int(key[4])) == [5]:  # a W4A8-only shape: goal 5 alone
            rows.append(_w4a8_goal(df, key, g, w4a8, o))
            continue
        if o is None:
            rows += _missing_ours(df, key, ours)
        else:
            rows += _bf16_goals(key, o, _fastest_peer(g, ours, w4a8), launch_us)
        if int(key[4]) >= PREFILL_MIN_TOKENS:
            rows.append(_w4a8_goal(df, key, g, w4a8, o))
    out = pd.DataFrame(rows)
    for c in GOAL_COLUMNS:
        if c not in out:
            out[c] = pd.NA
    return out.sort_values(["goal", *SHAPE[1:]], kind="stable").reset_index(drop=True)[list(GOAL_COLUMNS)]


def _profile(profiles: pd.DataFrame, r: pd.Series, side: str, cache: dict) -> Optional[ProfileMatch]:
    backend, tactic = r[f"{side}_backend"], r[f"{side}_tactic"]
    if not isinstance(backend, str):
        return None
    k = (backend, r["model"], int(r["ep_size"]), int(r["num_tokens"]), str(tactic), str(r[f"{side}_run"]),
         str(r["gpu_name"]))
    if k not in cache:
        cache[k] = match_profile(profiles, *k[:5], timed_in=k[5], gpu_name=k[6])
    return cache[k]


#: the columns of :attr:`GoalReport.kernels` before the profile's own (:data:`.goal_profiles.KERNEL_COLUMNS`)
KERNEL_KEYS = ["gpu_name", "model", "ep_size", "num_tokens", "side", "backend", "tactic", "match", "source"]


def _kernels_of(r: pd.Series, side: str, m: ProfileMatch) -> pd.DataFrame:
    k = m.kernels[[c for c in KERNEL_COLUMNS if c in m.kernels]].copy()
    keys = {**{c: r[c] for c in KERNEL_KEYS[:4]}, "side": side, "backend": r[f"{side}_backend"], "tactic": m.tactic,
            "match": m.match, "source": m.source}
    for i, (c, v) in enumerate(keys.items()):
        k.insert(i, c, v)
    return k


def goal_report(df: pd.DataFrame, profiles: Optional[pd.DataFrame] = None, ours: str = "triton",
                w4a8: str = "triton_w4a8", launch_us: float = LAUNCH_US,
                ablations: Optional[pd.DataFrame] = None, duels: Optional[pd.DataFrame] = None,
                energy: Optional[pd.DataFrame] = None, floors: Optional[pd.DataFrame] = None) -> GoalReport:
    """:func:`goal_rows` with the measured reason of each row from ``profiles`` (:func:`.goal_profiles.read_profiles`)
    and the profiled kernels of ours and the peer per shape.  Goal 1 and 5 name the kernel role where ours loses
    most time to the peer (when both are profiled); goals 2-4 ours' slowest kernel.  ``ablations``
    (:func:`.ablations.read_ablations`): where ours' tactic was ablated at the shape, its shares follow the reason.
    ``duels`` (:func:`.duels.read_duels`): goal 1's verdict at a shape where ours and the peer were duelled
    (:func:`.duels.apply_duels`).  ``energy`` (:func:`.energy.read_energy`): goal 1's reason also gives ours against
    the peer under a sustained load where that was read (:func:`.energy.energy_note`; never the verdict), and the
    kernels of a duel traced on the same replays, role by role (:func:`.traced_duels.traced_note`; never the
    verdict either).  ``floors`` (:func:`.read_floors.read_floors`): goals 2 and 3 also give the fastest one-kernel
    read of ours' weight bytes on that GPU (:func:`.read_floors.floor_note`)."""
    t = goal_rows(df, ours, w4a8, launch_us)
    floor = floor_table(pd.DataFrame() if floors is None else floors)
    if duels is not None and not duels.empty:
        t = apply_duels(t, duels)
    profiles = pd.DataFrame() if profiles is None else profiles
    shares = ablation_table(ablations) if ablations is not None and not ablations.empty else pd.DataFrame()
    cache: dict = {}
    for col, of in (("floor_us", "time_median_us"), ("chain_us", "chain_us")):
        t[col] = [floor_us(floor, r.gpu_name, r.weight_bytes, of) if r.goal in (2, 3) else math.nan
                  for r in t.itertuples()]
    reasons, ours_p, peer_p, matches, peer_m, kernels, seen = [], [], [], [], [], [], set()
    for _, r in t.iterrows():
        mo, mp = _profile(profiles, r, "ours", cache), _profile(profiles, r, "peer", cache)
        why = reason_text(mo, mp if r["goal"] in (1, 5) else None) if mo is not None else _cupti_reason(r)
        note = ablation_note(shares, r["model"], int(r["ep_size"]), int(r["num_tokens"]), str(r["ours_tactic"]),
                             str(r["gpu_name"]))
        if r["goal"] == 1 and isinstance(r["peer_backend"], str):
            at = (r["gpu_name"], r["model"], int(r["ep_size"]), int(r["num_tokens"]), str(r["ours_backend"]),
                  r["peer_backend"])
            note = "; ".join(s for s in (note, energy_note(energy, *at), traced_note(duels, *at)) if s)
        if r["goal"] in (2, 3):
            bound = r["target"] / SMALL_T_FACTOR if r["goal"] == 3 else math.nan
            note = "; ".join(s for s in (note, floor_note(floor, r["gpu_name"], r["weight_bytes"], r["ours_us"],
                                                          bound)) if s)
        reasons.append(f"{why}; {note}" if note else why)
        ours_p.append(None if mo is None else mo.label())
        matches.append(None if mo is None else mo.match)
        peer_p.append(None if mp is None else mp.label())
        peer_m.append(None if mp is None else mp.match)
        for side, m in (("ours", mo), ("peer", mp)):
            if m is not None and (m.source, m.file, m.tactic, side) not in seen:
                seen.add((m.source, m.file, m.tactic, side))
                kernels.append(_kernels_of(r, side, m))
    t = t.assign(reason=reasons, ours_profile=ours_p, peer_profile=peer_p, ours_profile_match=matches,
                 peer_profile_match=peer_m)
    k = pd.concat(kernels, ignore_index=True) if kernels else pd.DataFrame(columns=[*KERNEL_KEYS, *KERNEL_COLUMNS])
    k = k.sort_values(KERNEL_KEYS[:4], kind="stable").reset_index(drop=True)
    return GoalReport(t, k)


def _cupti_reason(r: pd.Series) -> str:
    """Without a Nsight Compute profile: the kernel times CUPTI measured in the timing's own run (ours', and the
    peer's for goals 1 and 5), or ``no profile`` where the run has none."""
    sides = ("ours", "peer") if r["goal"] in (1, 5) else ("ours",)
    parts = [f"{s} {r[f'{s}_cupti']}" for s in sides if isinstance(r.get(f"{s}_cupti"), str)]
    return "no profile" + (f"; CUPTI in the run: {'; '.join(parts)}" if parts else "")
