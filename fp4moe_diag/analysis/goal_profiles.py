"""Nsight Compute profiles behind the goal table (:mod:`.goals`): the ``ncu_<n>-<backend>-<model>-ep<E>-t<T>.csv``
files of run folders (one row per kernel launch, as ``python -m fp4moe_diag profile`` writes them, see
:mod:`fp4moe_diag.profiling.ncu`), matched to a timed best tactic, and the measured reason read off them.

* :func:`read_profiles` -- every profile file of some folders, one row per kernel launch, with ``source`` (the
  folder's name), ``file``, ``backend``, ``model``, ``ep_size``, ``num_tokens`` (from the file name),
  ``tactic_label`` and ``top_stall`` (the largest ``stall_*_pct`` but ``selected``, which is issuing, not waiting).
* :func:`match_profile` -- the profile of one backend x shape that best fits a timed tactic: the same tactic
  (``exact``), else one label the other plus ``-suffixes`` (``variant``: ``-ps`` against ``-ps-pdl``), else any
  tactic of the shape (``other tactic``); among equals the folder the timing came from, then the latest folder (by name).
* :func:`reason_text` -- one line: the kernel role that costs the most (against the peer: the largest excess), its
  time, and what bounds it (DRAM, SM or latency) with the SM / DRAM / issue / occupancy / registers / top stall.
Pure pandas.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd

from .builds import TRITON_BACKENDS

#: a profile file's name: ncu_<n>-<backend>-<model>-ep<E>-t<T>.csv
PROFILE_NAME = re.compile(r"^ncu_(\d+)-([A-Za-z0-9_]+)-(.+)-ep(\d+)-t(\d+)\.csv$")
#: a kernel whose DRAM throughput is at least this share of peak (%) is DRAM-bound
DRAM_BOUND_PCT = 60.0
#: else one whose SM throughput is at least this (%) is SM-bound; below both it is latency-bound
SM_BOUND_PCT = 70.0
#: the per-kernel columns the goal report shows (``top_stall``: "name pct %")
KERNEL_COLUMNS = ["kernel", "duration_us", "dram_read_GBps", "dram_throughput_pct", "sm_throughput_pct",
                  "issue_slots_busy_pct", "achieved_occupancy_pct", "registers_per_thread", "top_stall"]
MATCH_KINDS = ("exact", "variant", "other tactic")


@dataclass(frozen=True)
class ProfileMatch:
    """The profile of one backend x shape picked for a timed tactic: its kernels (one row per launch, in order),
    ``match`` (one of :data:`MATCH_KINDS`), ``source`` (the run folder's name), ``file`` and the profiled tactic."""
    kernels: pd.DataFrame
    match: str
    source: str
    file: str
    tactic: str
    note: str = ""  #: e.g. the Triton release the profile does not record

    def label(self) -> str:
        """``"<folder>"``, with ``" (variant: <profiled tactic>)"`` when not the timed tactic itself, and the note."""
        return (self.source + ("" if self.match == "exact" else f" ({self.match}: {self.tactic})")
                + (f" ({self.note})" if self.note else ""))


def top_stall(d: pd.DataFrame) -> pd.Series:
    """Per row: ``"wait 24.9 %"``, the largest ``stall_<name>_pct`` but ``stall_selected_pct``; NA without any."""
    cols = [c for c in d.columns if c.startswith("stall_") and c.endswith("_pct") and c != "stall_selected_pct"]
    if not cols:
        return pd.Series(pd.NA, index=d.index, dtype="object")
    vals = d[cols].apply(pd.to_numeric, errors="coerce")
    name = vals.idxmax(axis=1, skipna=True) if len(vals) else pd.Series(dtype="object")
    out = [pd.NA if pd.isna(v) else f"{n[6:-4]} {v:.1f} %" for n, v in zip(name, vals.max(axis=1))]
    return pd.Series(out, index=d.index, dtype="object")


def read_profile_file(path: Path) -> Optional[pd.DataFrame]:
    """One profile file -> its launches with the file name's keys; None for a name or table not of this kind."""
    m = PROFILE_NAME.match(path.name)
    if not m:
        return None
    d = pd.read_csv(path)
    if not {"kernel", "duration_us"} <= set(d.columns):
        return None
    if "tactic_label" not in d:
        ann = d["annotation"] if "annotation" in d else pd.Series("", index=d.index)
        d["tactic_label"] = ann.astype(str).str.split(":", n=1).str[-1].str.strip()
    d["top_stall"] = top_stall(d)
    return d.assign(source=path.parent.name, file=path.name, backend=m[2], model=m[3], ep_size=int(m[4]),
                    num_tokens=int(m[5]), tactic_label=d["tactic_label"].astype(str))


def read_profiles(folders: Iterable[Path]) -> pd.DataFrame:
    """Every ``ncu_*.csv`` of these folders (not of their sub-folders), one row per kernel launch; an empty frame
    when there are none."""
    frames = [d for f in folders for p in sorted(Path(f).glob("ncu_*.csv"))
              if (d := read_profile_file(p)) is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["source", "file", "backend", "model", "ep_size", "num_tokens", "tactic_label", *KERNEL_COLUMNS])


def with_folder_releases(profiles: pd.DataFrame, releases: dict[str, set[str]]) -> pd.DataFrame:
    """``profiles`` with ``triton_version`` filled where a file records none and its folder's timings ran under one
    Triton release (``releases``: folder name -> the releases of its rows); a folder of several keeps it unknown."""
    return _from_folder(profiles, "triton_version", releases)


def with_folder_gpus(profiles: pd.DataFrame, gpus: dict[str, set[str]]) -> pd.DataFrame:
    """``profiles`` with ``gpu_name``: the GPU of its folder's timings where they ran on one (``gpus``: folder name ->
    the GPUs of its rows), else unknown (a folder of profiles only)."""
    return _from_folder(profiles, "gpu_name", gpus)


def _from_folder(profiles: pd.DataFrame, column: str, values: dict[str, set[str]]) -> pd.DataFrame:
    p = profiles.copy()
    rec = p[column].astype("string") if column in p else pd.Series(pd.NA, index=p.index, dtype="string")
    one = {k: next(iter(v)) for k, v in values.items() if len(v) == 1}
    p[column] = rec.fillna(p["source"].map(one).astype("string"))
    return p


def tactic_match(profiled: str, timed: str) -> str:
    """``exact``, ``variant`` (one label is the other plus ``-<more>``: ``m16n128k128w4s3-ps`` and
    ``m16n128k128w4s3-ps-pdl``) or ``other tactic``."""
    if profiled == timed:
        return "exact"
    longer, shorter = (timed, profiled) if len(timed) > len(profiled) else (profiled, timed)
    return "variant" if shorter and longer.startswith(shorter + "-") else "other tactic"


def match_profile(profiles: pd.DataFrame, backend: str, model: str, ep_size: int, num_tokens: int, tactic: str,
                  timed_in: str = "", gpu_name: str = "") -> Optional[ProfileMatch]:
    """The profile of ``backend`` (a FlashInfer label ``cutlass@0.7.4`` matches files of ``cutlass``) at this shape
    that best fits ``tactic``; ``timed_in`` (the timing's run folder) wins ties.  None when the shape has none.  A
    Triton-built backend under one release (``triton@3.7.1``) takes only profiles of that release (``triton_version``
    of the file) or of none recorded (older files: the match's note says so).  ``gpu_name``: only profiles of that GPU
    (:func:`with_folder_gpus`) or of an unknown one: never an H200's kernels as the reason on an H100."""
    if profiles is None or profiles.empty:
        return None
    base, _, release = str(backend).partition("@")
    c = profiles[(profiles["backend"] == base) & (profiles["model"] == model) & (profiles["ep_size"] == int(ep_size))
                 & (profiles["num_tokens"] == int(num_tokens))]
    if gpu_name and "gpu_name" in c:
        gpu = c["gpu_name"].astype("string")
        c = c[gpu.isna() | (gpu == gpu_name)]
    tagged = bool(release) and base in TRITON_BACKENDS  # triton@3.7.1: only profiles of kernels that release built
    if tagged and "triton_version" in c:
        rec = c["triton_version"].astype("string")
        c = c[rec.isna() | (rec == release)]
    if c.empty:
        return None
    cands = []
    for (source, file, lab), g in c.groupby(["source", "file", "tactic_label"], sort=False):
        kind = tactic_match(str(lab), str(tactic))
        cands.append(((MATCH_KINDS.index(kind), source != timed_in, _desc(source)), kind, source, file, lab, g))
    _, kind, source, file, lab, g = min(cands, key=lambda t: t[0])
    unrecorded = tagged and ("triton_version" not in g or g["triton_version"].isna().all())
    note = "its Triton release not recorded" if unrecorded else ""  # a profile from before the release was recorded
    sort = ["launch"] if "launch" in g else []
    return ProfileMatch(g.sort_values(sort).reset_index(drop=True) if sort else g.reset_index(drop=True),
                        kind, str(source), str(file), str(lab), note)


def _desc(name: str) -> tuple:
    """Sort key that puts a later folder name first."""
    return tuple(-ord(ch) for ch in name)


def kernel_role(name: str) -> str:
    """``gemm1`` | ``gemm2`` | ``topk_sum`` | ``quant`` | ``splitk`` | ``other``, from a kernel's name (ours and
    triton_kernels' ``_matmul_ogs_..._swiglu`` / ``_reduce_grouped``)."""
    n = str(name).lower()
    for role, keys in (("quant", ("quant",)), ("splitk", ("finalize",)), ("topk_sum", ("topk_sum", "reduce")),
                       ("gemm1", ("gemm1", "swiglu")), ("gemm2", ("gemm2", "matmul"))):
        if any(k in n for k in keys):
            return role
    return "other"


def bound_of(k: pd.Series) -> str:
    """``DRAM-bound`` / ``SM-bound`` / ``latency-bound`` by :data:`DRAM_BOUND_PCT` and :data:`SM_BOUND_PCT`."""
    if as_float(k.get("dram_throughput_pct")) >= DRAM_BOUND_PCT:
        return "DRAM-bound"
    return "SM-bound" if as_float(k.get("sm_throughput_pct")) >= SM_BOUND_PCT else "latency-bound"


def as_float(v: object) -> float:
    """``float(v)``; NaN for a missing or non-numeric value (``pd.NA`` included)."""
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def describe_kernel(k: pd.Series) -> str:
    """``"latency-bound: SM 56 %, DRAM 0.33 TB/s (8 % of peak), issue 34 %, occupancy 12 %, 255 regs, stall wait
    24.9 %"``."""
    dram = as_float(k.get("dram_read_GBps")) / 1e3
    parts = [f"SM {as_float(k.get('sm_throughput_pct')):.0f} %",
             f"DRAM {dram:.2f} TB/s ({as_float(k.get('dram_throughput_pct')):.0f} % of peak)",
             f"issue {as_float(k.get('issue_slots_busy_pct')):.0f} %",
             f"occupancy {as_float(k.get('achieved_occupancy_pct')):.0f} %",
             f"{as_float(k.get('registers_per_thread')):.0f} regs"]
    stall = k.get("top_stall")
    if isinstance(stall, str) and stall:
        parts.append(f"stall {stall}")
    return f"{bound_of(k)}: " + ", ".join(parts)


def cupti_text(breakdown: object, kernel_sum_us: object = None, span_us: object = None) -> Optional[str]:
    """A run row's CUPTI kernel times (``time_kernel_breakdown``: JSON of kernel name -> us per call) as one phrase,
    summed per kernel role (:func:`kernel_role`), longest first: ``gemm1 118.2, gemm2 105.0, topk_sum 17.2 us (sum
    240.4, span 176.2)`` (the span: first kernel start to last kernel end; below the sum where kernels overlap).
    None where the row has no breakdown (a screened-only row, or a run without ``--kernel-time``)."""
    if not isinstance(breakdown, str) or not breakdown.strip():
        return None
    try:
        per_kernel = json.loads(breakdown)
    except ValueError:
        return None
    if not isinstance(per_kernel, dict) or not per_kernel:
        return None
    roles: dict[str, float] = {}
    for name, us in per_kernel.items():
        role = kernel_role(name)
        roles[role] = roles.get(role, 0.0) + float(us)
    text = ", ".join(f"{r} {us:.1f}" for r, us in sorted(roles.items(), key=lambda kv: -kv[1])) + " us"
    extra = [f"{w} {v:.1f}" for w, v in (("sum", as_float(kernel_sum_us)), ("span", as_float(span_us)))
             if not math.isnan(v)]
    return text + (f" ({', '.join(extra)})" if extra else "")


def reason_text(ours: Optional[ProfileMatch], peer: Optional[ProfileMatch] = None) -> str:
    """The measured reason in one line.  Without ``peer``: the slowest kernel of ours.  With it: per kernel role
    (:func:`kernel_role`, times summed), the role where ours spends the most over the peer (where ours is ahead in
    every role: where it gains most); both sides' largest kernel of that role described (:func:`describe_kernel`)."""
    if ours is None:
        return "no profile"
    k = ours.kernels.assign(role=ours.kernels["kernel"].map(kernel_role))
    total = k["duration_us"].sum()
    theirs = None
    if peer is not None:
        pk = peer.kernels.assign(role=peer.kernels["kernel"].map(kernel_role))
        diff = k.groupby("role")["duration_us"].sum().sub(pk.groupby("role")["duration_us"].sum(), fill_value=0)
        role = str(diff.idxmax() if diff.max() > 0 else diff.idxmin())
        mine, theirs = k[k["role"] == role], pk[pk["role"] == role]
        lead = "behind most in" if diff.max() > 0 else "ahead in every role, most in"
        head = (f"ours {lead} {role}: {mine['duration_us'].sum():.1f} us of {total:.1f} vs peer "
                f"{theirs['duration_us'].sum():.1f} of {pk['duration_us'].sum():.1f} us (ncu)")
    else:
        mine = k.loc[[k["duration_us"].idxmax()]]
        head = f"{mine['role'].iloc[0]} {mine['duration_us'].sum():.1f} us of {total:.1f} us in {len(k)} kernels (ncu)"
    text = head
    if not mine.empty:
        text += f"; ours {describe_kernel(mine.loc[mine['duration_us'].idxmax()])}"
    if theirs is not None and not theirs.empty:
        text += f"; peer {describe_kernel(theirs.loc[theirs['duration_us'].idxmax()])}"
    return text


#: the peers a device call profiles with what ``evidence.sh`` carries (FlashInfer's kernels need its module too)
PROFILED_PEERS = ("triton_kernels",)


def peers_to_profile(table: pd.DataFrame) -> pd.DataFrame:
    """The goal-1 rows not met whose peer (one of :data:`PROFILED_PEERS`) has no profile of its own timed tactic, with
    ``ours_tactic`` replaced by ``PEER=TACTIC`` (what ``evidence.sh``'s PROFILES takes for a backend not ours), so that
    goal 1's reason can name the kernel role ours loses in (:func:`reason_text`)."""
    t = table[(table["goal"] == 1) & (table["status"] == "not met") & table["peer_tactic"].notna()
              & table["peer_backend"].isin(PROFILED_PEERS)
              & (table["peer_profile_match"].astype("string") != "exact").fillna(True)]
    return t.assign(ours_tactic=t["peer_backend"].astype(str) + "=" + t["peer_tactic"].astype(str))


def unprofiled(table: pd.DataFrame) -> pd.DataFrame:
    """What a device call should profile: the shapes ours misses (``not met``) with no Nsight Compute profile of ours'
    timed tactic itself (none, or another tactic's or a variant's), and goal 1's peers likewise (``BACKEND=TACTIC``,
    :func:`peers_to_profile`); one row per GPU x shape x tactic (``gpu_name``, ``model``, ``ep_size``,
    ``num_tokens``, ``tactic``, ``goals``: the goals missed there)."""
    t = table[(table["status"] == "not met") & table["ours_tactic"].notna()
              & (table["ours_profile_match"].astype("string") != "exact").fillna(True)]
    t = pd.concat([t, peers_to_profile(table)], ignore_index=True)
    cols = ["gpu_name", "model", "ep_size", "num_tokens", "ours_tactic"]
    out = t.groupby(cols, sort=True)["goal"].agg(lambda g: ",".join(map(str, sorted(set(g))))).reset_index()
    return out.rename(columns={"ours_tactic": "tactic", "goal": "goals"})
