"""The CSVs the GPU-only tools of :mod:`..profiling` leave in a run folder (``duel-*.csv``, ``energy-*.csv``): read
as one frame with each row's ``source``, each file checked for the columns its reader needs."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd


def read_tool_csvs(folders: Iterable[Path], pattern: str, columns: Sequence[str], what: str,
                   tool: str) -> list[pd.DataFrame]:
    """The files ``pattern`` of each folder (sorted), each with ``source`` (folder/file); a file lacking one of
    ``columns`` -> ValueError naming it, the ``what`` column(s) it lacks and the ``tool`` that writes them."""
    frames = []
    for d in folders:
        for f in sorted(Path(d).glob(pattern)):
            x = pd.read_csv(f)
            missing = [c for c in columns if c not in x.columns]
            if missing:
                raise ValueError(f"runs: {f} lacks the {what} column(s) {missing} (python -m {tool})")
            frames.append(x.assign(source=f"{Path(d).name}/{f.name}"))
    return frames


def pair_rows(d: pd.DataFrame, gpu_name: str, model: str, ep: int, t: int, ours: str, peer: str) -> pd.DataFrame:
    """The rows of a tool's frame (:func:`read_tool_csvs`) at this GPU and shape with ours as ``a_backend`` and the
    peer as ``b_backend`` (``ours`` / ``peer`` may carry an ``@release``: compared without it)."""
    return d[(d["gpu_name"].astype(str) == str(gpu_name)) & (d["model"].astype(str) == str(model))
             & (d["ep_size"].astype(int) == int(ep)) & (d["num_tokens"].astype(int) == int(t))
             & (d["a_backend"].astype(str) == ours.partition("@")[0])
             & (d["b_backend"].astype(str) == peer.partition("@")[0])]
