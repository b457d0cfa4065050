"""Energy per call under a sustained load (``energy-*.csv`` of :mod:`..profiling.energy`) read beside the goals: a
diagnosis of goal 1 (which power regime the duel's verdict holds in), never its verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from .tool_csvs import pair_rows, read_tool_csvs

#: the columns :func:`energy_note` reads (profiling.energy writes these and more)
COLUMNS = ["model", "ep_size", "num_tokens", "a_backend", "a_tactic", "b_backend", "b_tactic", "a_mj_per_call",
           "b_mj_per_call", "a_watts", "b_watts", "a_us_per_call", "b_us_per_call", "energy_ratio", "time_ratio",
           "gpu_name"]


def read_energy(folders: Iterable[Path]) -> pd.DataFrame:
    """Every ``energy-*.csv`` of ``folders`` as one frame, with ``source`` (folder/file); empty (with
    :data:`COLUMNS`) when there is none.  A file lacking a column of :data:`COLUMNS` -> ValueError naming it."""
    frames = read_tool_csvs(folders, "energy-*.csv", COLUMNS, "energy", "fp4moe_diag.profiling.energy")
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS + ["source"])


def energy_note(energy: pd.DataFrame, gpu_name: str, model: str, ep: int, t: int, ours: str, peer: str) -> str:
    """One clause per energy reading of ours (``a``) against the peer (``b``, backends without their ``@release``)
    at this GPU and shape, or ``""``: the time and energy ratios a / b under a sustained load and each side's us,
    W, mJ a call."""
    if energy is None or energy.empty:
        return ""
    e = pair_rows(energy, gpu_name, model, ep, t, ours, peer)
    return "; ".join(
        f"sustained load ({r.source}): ours `{r.a_tactic}` / peer `{r.b_tactic}` time {float(r.time_ratio):.3f}, "
        f"energy {float(r.energy_ratio):.3f} a call ({float(r.a_us_per_call):.1f} / {float(r.b_us_per_call):.1f} us, "
        f"{float(r.a_watts):.0f} / {float(r.b_watts):.0f} W)" for r in e.itertuples())
