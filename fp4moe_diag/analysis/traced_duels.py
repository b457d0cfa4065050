"""Duels traced by CUPTI on the same replays (``profiling.duel --kernel-time``, :mod:`..measure.traced_rounds`) read
beside goal 1: which kernel of ours loses (or wins) the time against the peer's kernel of the same role, measured in
the replays the events timed.  A diagnosis: goal 1's verdict stays the plain duel's (:func:`.duels.deciding`)."""

from __future__ import annotations

import json

import pandas as pd

from .duels import duel_line, read_duels
from .goal_profiles import kernel_role
from .tool_csvs import pair_rows

#: the order the roles are named in
ROLES = ("gemm1", "gemm2", "topk_sum", "splitk", "quant", "other")


def by_role(kernels_json: str) -> dict[str, float]:
    """A duel row's ``a_kernels`` / ``b_kernels`` (JSON: kernel name -> median us a call) summed per kernel role
    (:func:`.goal_profiles.kernel_role`), in :data:`ROLES` order; ``{}`` for an empty cell."""
    if not isinstance(kernels_json, str) or not kernels_json.strip():
        return {}
    acc: dict[str, float] = {}
    for name, us in json.loads(kernels_json).items():
        role = kernel_role(name)
        acc[role] = acc.get(role, 0.0) + float(us)
    return {r: acc[r] for r in ROLES if r in acc}


def traced_note(duels: pd.DataFrame, gpu_name: str, model: str, ep: int, t: int, ours: str, peer: str) -> str:
    """One clause per traced duel of ours (``a``) against the peer (``b``) at this GPU and shape, or ``""``: the
    per-round ratio of the events and of the kernel spans, and each role's kernel time, ours / peer (under ``-pdl``
    a kernel's time includes its wait for the one before: the span does not)."""
    if duels is None or duels.empty or "kernel_time" not in duels.columns or "a_kernels" not in duels.columns:
        return ""
    d = pair_rows(duels[duels["kernel_time"].astype(bool)], gpu_name, model, ep, t, ours, peer)
    out = []
    for r in d.itertuples():
        a, b = by_role(r.a_kernels), by_role(r.b_kernels)
        roles = ", ".join(f"{k} {a[k]:.1f} / {b[k]:.1f}" for k in ROLES if k in a and k in b)
        idle = "the GPU idle before each call" if bool(r.sync_after_flush) else "the calls back to back"
        out.append(f"traced ({r.source}, {idle}): ours `{r.a_tactic}` / peer `{r.b_tactic}` events "
                   f"{float(r.ratio_median):.3f}, kernel spans {float(r.span_ratio_median):.3f}; us a call: {roles}")
    return "; ".join(out)


def traced_table(duels: pd.DataFrame) -> pd.DataFrame:
    """The traced duels of a duel frame (:func:`.duels.read_duels`, or :func:`.duels.committed_duels`' sources read
    again), one row each: GPU, shape, both tactics, whether the GPU idled before each call, the per-round ratios of the
    events and of the kernel spans, and per kernel role ours' and the peer's median us a call (``gemm1 ours``,
    ``gemm1 peer``, ...); empty when none."""
    keys = ["gpu_name", "model", "ep_size", "num_tokens", "a_tactic", "b_tactic"]
    if duels is None or duels.empty or "kernel_time" not in duels.columns or "a_kernels" not in duels.columns:
        return pd.DataFrame(columns=keys + ["idle_before", "ratio_median", "span_ratio_median", "source"])
    rows = []
    for _, r in duels[duels["kernel_time"].astype(bool)].iterrows():
        a, b = by_role(r["a_kernels"]), by_role(r["b_kernels"])
        row = {k: r[k] for k in keys} | {"idle_before": bool(r["sync_after_flush"]),
                                          "ratio_median": float(r["ratio_median"]),
                                          "span_ratio_median": float(r["span_ratio_median"])}
        for role in ROLES:
            if role in a or role in b:
                row |= {f"{role} ours": a.get(role, float("nan")), f"{role} peer": b.get(role, float("nan"))}
        rows.append(row | {"source": r["source"]})
    return pd.DataFrame(rows)


def committed_traced(root=None) -> pd.DataFrame:  # noqa: ANN001 -- a Path or None, as committed_duels
    """:func:`traced_table` of every ``duel-*.csv`` under ``data/runs/*/`` (``root``: another runs folder)."""
    from ..paths import run_folders

    return traced_table(read_duels(run_folders(root)))


def untraced(table: pd.DataFrame, duels: pd.DataFrame) -> list[str]:
    """Goal 1's shapes not met (:func:`.goals.goal_rows` after :func:`.duels.apply_duels`) where no duel of ours'
    best tactic there was traced (``profiling.duel --kernel-time``) at that GPU: one line each,
    ``MODEL|EP|T|OURS=TACTIC|PEER=TACTIC`` (backends without their ``@release``), what
    ``tools/device/plans/evidence.sh`` takes in ``CONDITIONS`` (``PARTS=conditions``: which kernel loses the time)."""
    t = table[(table["goal"] == 1) & (table["status"] == "not met") & table["peer_tactic"].notna()
              & table["ours_tactic"].notna()]
    traced = duels[duels["kernel_time"].astype(bool)] if duels is not None and "kernel_time" in duels.columns else None
    lines = []
    for r in t.itertuples():
        done = traced is not None and not traced.empty and (
            pair_rows(traced, r.gpu_name, r.model, int(r.ep_size), int(r.num_tokens), str(r.ours_backend),
                      str(r.peer_backend))["a_tactic"].astype(str) == str(r.ours_tactic)).any()
        if not done:
            lines.append(duel_line(r))
    return list(dict.fromkeys(lines))
