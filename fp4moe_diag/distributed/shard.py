"""Sweeps sharded over the ranks of ``torchrun``: ``torchrun --nproc-per-node N -m fp4moe_diag sweep ...``.

Rank ``r`` runs every ``N``-th case x backend (from the ``r``-th on) into its own run folder
``<out>/ranks/rank<r>/`` (part files, a kill cannot tear them) and writes ``DONE`` there when it finished.  Rank 0
then waits for every rank's ``DONE`` (polling, bounded by ``timeout``) and merges the ranks into ``<out>``: the
same schema, with ``rank`` / ``world_size`` filled in.  A rank that died leaves the others' rows intact; the merge
still writes what exists and an ``INCOMPLETE`` file naming the missing ranks
(``python -m fp4moe_diag.distributed.shard --merge OUT`` merges again after the fact).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd

DONE = "DONE"
INCOMPLETE = "INCOMPLETE"


def rank_dir(out: Path, rank: int) -> Path:
    return Path(out) / "ranks" / f"rank{rank}"


def merge_ranks(out: Any, world: Optional[int] = None) -> tuple[pd.DataFrame, list[int]]:
    """Merge ``<out>/ranks/rank*/`` into ``<out>``; returns ``(rows, missing ranks)`` and writes ``INCOMPLETE``
    (with the missing ranks) when a rank has no ``DONE``."""
    from ..run_folder import load_run, save_run
    from ..results import to_frame

    out = Path(out)
    found = sorted(int(p.name[4:]) for p in (out / "ranks").glob("rank*") if p.name[4:].isdigit())
    if not found:
        raise ValueError(f"out: {out} holds no ranks/rank<N>/ folders of a sharded sweep")
    world = world or max(found) + 1
    frames, missing = [], []
    for r in range(world):
        d = rank_dir(out, r)
        if not (d / DONE).is_file():
            missing.append(r)
        try:
            rows = load_run(d)
        except ValueError:
            continue  # a rank that died before its first case
        frames.append(rows.assign(rank=r, world_size=world))
    df = to_frame(pd.concat(frames, ignore_index=True).to_dict("records")) if frames else to_frame([])
    save_run(df, out)  # every rank's rows already carry the run id of <out> (run_sweep's run_id)
    marker = out / INCOMPLETE
    if missing:
        marker.write_text(json.dumps({"missing_ranks": missing, "world_size": world, "rows": len(df)}) + "\n")
    elif marker.exists():
        marker.unlink()
    return df, missing


def run_sharded_sweep(spec: Any, out: Any, rank: int, world: int, *, timeout: float = 24 * 3600.0,
                      poll: float = 1.0, log: Callable[[str], None] = print, **run_kwargs: Any) -> Optional[pd.DataFrame]:
    """This rank's share of ``spec`` into ``<out>/ranks/rank<rank>/``; rank 0 returns the merged rows."""
    from ..runs import run_sweep

    out = Path(out)
    mine = rank_dir(out, rank)
    run_sweep(spec, mine, shard=(rank, world), run_id=out.name, log=lambda m: log(f"[rank {rank}] {m}"), **run_kwargs)
    (mine / DONE).write_text(f"{time.time()}\n")
    if rank != 0:
        return None
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all((rank_dir(out, r) / DONE).is_file() for r in range(world)):
            break
        time.sleep(poll)
    df, missing = merge_ranks(out, world)
    log(f"merged {len(df)} rows of {world} ranks -> {out}" + (f"; INCOMPLETE, missing ranks {missing}" if missing else ""))
    return df


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.distributed.shard",
                                 description="merge the rank folders of a sharded sweep")
    ap.add_argument("--merge", required=True, metavar="OUT", help="the sharded sweep's --out folder")
    ap.add_argument("--world-size", type=int, default=None)
    a = ap.parse_args(argv)
    try:
        df, missing = merge_ranks(a.merge, a.world_size)
    except ValueError as e:
        ap.error(str(e))
    print(f"{len(df)} rows -> {a.merge}" + (f"; INCOMPLETE: ranks {missing} did not finish" if missing else ""))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
