"""Read floors (``profiling.read_floor``'s ``read-floor*.csv``): the fastest one-kernel read of a call's weight bytes on
a GPU, and the phrase goals 2 and 3 give it (how much of a shape's distance to its bound no single kernel reading
those bytes could close, and how much is ours).  ``read_floor --chain``'s rows (:data:`CHAIN_PREFIX`) are the same
bytes read by two dependent kernels, gemm1's share then gemm2's: each floor row carries the fastest of them as
``chain_us``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd

#: the columns :func:`floor_table` keeps, per GPU and size
FLOOR_COLUMNS = ("gpu_name", "nbytes", "kernel", "read_bytes", "time_median_us", "time_spread", "GBps", "source",
                 "chain_us", "chain_kernel")
#: the kernel label prefix of ``read_floor --chain``'s rows: two dependent reads (gemm1's 2/3 of the bytes, then 1/3)
CHAIN_PREFIX = "chain-"


def read_floors(folders: Iterable[Path]) -> pd.DataFrame:
    """Every ``read-floor*.csv`` of ``folders`` as one frame, with ``source`` (folder/file); empty when there is none."""
    frames = [pd.read_csv(f).assign(source=f"{Path(d).name}/{f.name}") for d in folders
              for f in sorted(Path(d).glob("read-floor*.csv"))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(FLOOR_COLUMNS))


def _fastest(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.loc[rows.groupby(["gpu_name", "nbytes"])["time_median_us"].idxmin()]


def floor_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The floor per (GPU, size): the one-kernel row with the shortest median of every kernel and file that read it,
    and as ``chain_us`` / ``chain_kernel`` the shortest two-read chain (NaN / None where none was timed)."""
    if rows.empty:
        return pd.DataFrame(columns=list(FLOOR_COLUMNS))
    rows = rows.assign(gpu_name=rows["gpu_name"].fillna("").astype(str), nbytes=rows["nbytes"].astype("int64"))
    chained = rows["kernel"].astype(str).str.startswith(CHAIN_PREFIX)
    best = _fastest(rows[~chained])
    chain = _fastest(rows[chained]) if chained.any() else rows.iloc[:0]
    chain = chain[["gpu_name", "nbytes", "time_median_us", "kernel"]].rename(
        columns={"time_median_us": "chain_us", "kernel": "chain_kernel"})
    best = best.merge(chain, on=["gpu_name", "nbytes"], how="left")
    return best[[c for c in FLOOR_COLUMNS if c in best]].reset_index(drop=True)


def _floor_row(table: pd.DataFrame, gpu_name: str, weight_bytes: float) -> Optional[pd.Series]:
    """The row of ``table`` (:func:`floor_table`) for exactly ``weight_bytes`` on ``gpu_name``, or None."""
    if table.empty or not weight_bytes == weight_bytes or weight_bytes <= 0:
        return None
    hit = table[(table["gpu_name"] == str(gpu_name)) & (table["nbytes"] == int(weight_bytes))]
    return None if hit.empty else hit.iloc[0]


def floor_us(table: pd.DataFrame, gpu_name: str, weight_bytes: float, column: str = "time_median_us") -> float:
    """The floor (us) of exactly ``weight_bytes`` on ``gpu_name`` (``column="chain_us"``: its two-read chain's); NaN
    where ``table`` has none."""
    f = _floor_row(table, gpu_name, weight_bytes)
    return math.nan if f is None or column not in f else float(f[column])


def _against(floor: float, ours_us: float, bound_us: float) -> str:
    """Ours against a floor of ``floor`` us and, where ``bound_us`` is finite (goal 3), the bound against it."""
    return f"ours {ours_us / floor:.2f}x of that" + (f", the bound {bound_us / floor:.2f}x" if math.isfinite(bound_us)
                                                      else "")


def floor_note(table: pd.DataFrame, gpu_name: str, weight_bytes: float, ours_us: float, bound_us: float) -> str:
    """Where ``table`` (:func:`floor_table`) holds a floor for exactly ``weight_bytes`` on ``gpu_name``: that floor,
    ours against it and, where ``bound_us`` is finite (goal 3), the bound against it, then the same for its two-read
    chain where one was timed; else ''."""
    f = _floor_row(table, gpu_name, weight_bytes)
    if f is None:
        return ""
    one = f["time_median_us"]
    text = (f"one kernel reads these {weight_bytes / 1e6:.1f} MB in {one:.1f} us at best ({f['GBps'] / 1e3:.2f} TB/s, "
            f"{f['kernel']}; {f['source']}): {_against(one, ours_us, bound_us)}")
    chain = f.get("chain_us", math.nan)
    if isinstance(chain, float) and math.isfinite(chain):
        text += (f"; two dependent kernels (gemm1's 2/3, then gemm2's 1/3) read them in {chain:.1f} us at best: "
                 f"{_against(chain, ours_us, bound_us)}")
    return text


def unfloored(goals: pd.DataFrame) -> list[int]:
    """The weight bytes of goal 2 and 3 rows not met in :func:`.goals.goal_report`'s table that have no ``floor_us``
    (no floor of exactly those bytes on their GPU), in order: what ``evidence.sh PARTS=floor`` should read."""
    rows = goals[goals["goal"].isin([2, 3]) & (goals["status"] == "not met") & goals["floor_us"].isna()
                 & (goals["weight_bytes"] > 0)]
    return sorted({int(b) for b in rows["weight_bytes"]})
