"""The notes of the goal table's rows (:mod:`.goals`): goal 1's where two medians ran at clocks apart, goal 4's
TFLOP/s against the ceilings and their clocks."""

from __future__ import annotations

import pandas as pd

from .duels import clocks_apart
from .goal_profiles import as_float
from .tables import BF16_CLOCK_COLUMNS


def clocks_apart_note(o: pd.Series, p: pd.Series) -> str:
    """Goal 1's note where ours' and the peer's best rows read SM clocks apart (:func:`.duels.clocks_apart`):
    the medians compare clocks too (a duel decides; :func:`.duels.undecided` lists the shape), else ``""``."""
    mine, theirs = as_float(o.get("best_sm_clock_mhz")), as_float(p.get("best_sm_clock_mhz"))
    if not clocks_apart(mine, theirs):
        return ""
    return f"medians at {mine:.0f} / {theirs:.0f} MHz: not like for like in clocks"


def prefill_note(o: pd.Series) -> str:
    """Goal 4's note: ours' TFLOP/s of the ceiling's, and where the run measured them, the SM clocks of both and the
    sustained ceiling (:class:`..measure.ceilings.Ceilings`): the verdict takes the first ceiling, as the issue
    states it; the clocks say whether ours and the ceiling's GEMMs ran at the same one."""
    ach, ceil = as_float(o.get("achieved_TFLOPs")), as_float(o.get("ceiling_bf16_TFLOPs"))
    mine = as_float(o.get("best_sm_clock_mhz"))
    at, held, held_at = (as_float(o.get(c)) for c in BF16_CLOCK_COLUMNS)
    note = f"{ach:.0f} of {ceil:.0f} TFLOP/s"
    if mine == mine and at == at:
        note += f"; ours ran at {mine:.0f} MHz, the ceiling's GEMMs at {at:.0f}"
    if held == held:
        clock = f" at {held_at:.0f} MHz" if held_at == held_at else ""
        note += f"; sustained ceiling {held:.0f} TFLOP/s{clock}: ours {100 * ach / held:.1f} % of it"
    return note
