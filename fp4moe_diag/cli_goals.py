"""``python -m fp4moe_diag goals RUN_DIR [RUN_DIR ...]``: where each goal of issue #25 stands, per shape, with the
measured reason (:mod:`fp4moe_diag.analysis.goals`).  Folders with results give the timings; every folder's
``ncu_*.csv`` profiles and ``ablate*.csv`` ablations (``profiling.ablate``) give the reasons, ``duel-*.csv`` duels
(``profiling.duel``) goal 1's finer verdict, ``read-floor*.csv`` (``profiling.read_floor``) goals 2-3 the fastest
one-kernel read of the call's weight bytes (a folder may hold only those)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from . import cli_args as A


def _has_profiles(d: Path) -> bool:
    return any(any(d.glob(g)) for g in ("ncu_*.csv", "ablate*.csv", "duel-*.csv", "energy-*.csv", "read-floor*.csv"))


def check_goal_args(args: argparse.Namespace) -> list[Path]:
    """The folders that hold results; a ValueError (one line, exit 2) for a missing folder, one with neither
    results nor profiles, no results at all, or a backend name this suite does not know."""
    from .backends import available_backends
    from .run_folder import is_run_folder

    names = available_backends()
    base, at, release = args.ours.partition("@")  # triton@3.7.1: our build under one Triton release of several
    if base not in names or (at and not re.fullmatch(r"\d+\.\d+\.\d+\S*", release)):
        raise ValueError(f"argument --ours: unknown backend {args.ours!r}; expected one of {', '.join(names)} "
                         f"(optionally @<triton release>, e.g. triton@3.7.1)")
    if args.w4a8 not in names:
        raise ValueError(f"argument --w4a8: unknown backend {args.w4a8!r}; expected one of {', '.join(names)}")
    for d in args.runs:
        if not d.is_dir():
            raise ValueError(f"argument runs: {d} does not exist or is not a directory")
        if not is_run_folder(d) and not _has_profiles(d):
            raise ValueError(f"argument runs: {d} has no results (results.parquet / results.csv / parts/), no "
                             "ncu_*.csv profiles, no ablate*.csv ablations, no duel-*.csv duels, no energy-*.csv and "
                             "no read-floor*.csv")
    timed = [d for d in args.runs if is_run_folder(d)]
    if not timed:
        raise ValueError("argument runs: none of the folders has results (only profiles); pass a run folder too")
    return timed


def evidence_command(duels: list[str], profiles: list[str], gpu_names: pd.Series,
                     conditions: Sequence[str] = (), floor_bytes: Sequence[int] = ()) -> str:
    """The one device call that measures what the goals still lack: ``tools/device/plans/evidence.sh`` with the read
    floors of ``floor_bytes`` (goals 2-3 not met without one), the duels, the profiles and the traced duels
    (``conditions``: goal-1 shapes not met whose pair no duel traced),
    ``ONLY_ON`` the runs' GPU (its model, e.g. H200), or a comment where nothing is left.  A ValueError where ours'
    rows come from several GPUs (each GPU's lists are its own)."""
    gpus = sorted(set(gpu_names.dropna().astype(str)) - {"", "cpu"})
    if len(gpus) != 1:
        raise ValueError(f"argument --plan: expected the runs of one GPU, got ours' rows from {gpus or 'none'}; pass "
                         "the run folders of one GPU")
    if not duels and not profiles and not conditions and not floor_bytes:
        return (f"# {gpus[0]}: nothing left to measure: every missed shape has a profile of ours' tactic, every "
                "undecided goal-1 shape a duel, every goal-1 shape not met a traced duel and every goal 2-3 shape "
                "not met a read floor")
    lists = (("floor", "FLOOR_BYTES", [",".join(str(b) for b in floor_bytes)] if floor_bytes else []),
             ("duel", "DUELS", duels), ("conditions", "CONDITIONS", conditions), ("profile", "PROFILES", profiles))
    parts = " ".join(p for p, _, items in lists if items)
    only_on = gpus[0].removeprefix("NVIDIA ").split()[0]
    return (f'ONLY_ON={only_on} PARTS="{parts}"' + "".join(f' {var}="{" ".join(items)}"' for _, var, items in lists
                                                          if items) + " bash tools/device/plans/evidence.sh")


def cmd_goals(args: argparse.Namespace) -> int:
    from .analysis.ablations import read_ablations
    from .analysis.duels import read_duels, undecided
    from .analysis.energy import read_energy
    from .analysis.goal_profiles import read_profiles, unprofiled, with_folder_gpus, with_folder_releases
    from .analysis.goals import goal_report
    from .analysis.traced_duels import untraced
    from .analysis.goals_markdown import goals_markdown
    from .analysis.read_floors import read_floors, unfloored
    from .run_folder import load_run

    timed = check_goal_args(args)
    frames = [load_run(d) for d in timed]
    df = pd.concat(frames, ignore_index=True)
    base, _, release = args.ours.partition("@")
    mine = (df["backend"] == base) & ((df["triton_version"] == release) if release else True)
    if not mine.any():
        have = sorted(set(df["backend"].dropna().astype(str)))
        raise ValueError(f"argument --ours: no rows of backend {args.ours!r} in these runs; they have {have}")
    def per_folder(column: str) -> dict[str, set[str]]:  # folder name -> the values of its rows
        return {d.name: set(f[column].dropna().astype(str)) - {""} for d, f in zip(timed, frames) if column in f}

    profiles = with_folder_gpus(with_folder_releases(read_profiles(args.runs), per_folder("triton_version")),
                                per_folder("gpu_name"))
    duel_rows = read_duels(args.runs)
    report = goal_report(df, profiles, ours=args.ours, w4a8=args.w4a8, launch_us=args.launch_us,
                         ablations=read_ablations(args.runs), duels=duel_rows,
                         energy=read_energy(args.runs), floors=read_floors(args.runs))
    if args.csv:
        report.table.to_csv(args.csv, index=False)
    if not (args.duels or args.unprofiled or args.plan):
        print(goals_markdown(report, launch_us=args.launch_us), end="")
        return 0
    duels = undecided(report.table)  # the lines evidence.sh takes in DUELS
    profiles = list(dict.fromkeys(f"{r.model}|{r.ep_size}|{r.num_tokens}|{r.tactic}"  # in PROFILES; one per shape and
                                  for r in unprofiled(report.table).itertuples()))  # tactic, whatever GPU missed it
    if args.plan:
        # goal-1 shapes not met whose pair no duel traced: CONDITIONS (its first way is the plain duel, so such a shape
        # leaves DUELS)
        traced = untraced(report.table, duel_rows)
        print(evidence_command([d for d in duels if d not in traced], profiles, df.loc[mine, "gpu_name"], traced,
                               unfloored(report.table)))
    else:
        print("\n".join(duels if args.duels else profiles))
    return 0


def add_parser(sub: Any) -> None:
    from .analysis.goals import LAUNCH_US

    g = sub.add_parser("goals", help="issue #25's goals per shape: measured, goal, met or how far, the reason",
                       description="Read run folders and print, per goal of issue #25 and goal shape, our best "
                       "time or rate, the goal, met / level / not met / not compared, the speed-up still needed, "
                       "ours' and the peer's best tactics, and the measured reason from the folders' Nsight Compute "
                       "profiles (ncu_*.csv) and ablations (ablate*.csv), goal 1 from duels (duel-*.csv) where ours "
                       "and the peer were duelled, then the profiled kernels per shape (Markdown).")
    g.add_argument("runs", nargs="+", type=Path,
                   help="run folders (timings), and folders of ncu_*.csv profiles, ablate*.csv or duel-*.csv")
    g.add_argument("--ours", default="triton", help="our bf16-activation backend (default triton; triton@3.7.1: its "
                   "build under that Triton release, where the runs hold several)")
    g.add_argument("--w4a8", default="triton_w4a8", help="our W4A8 backend for goal 5 (default triton_w4a8)")
    g.add_argument("--launch-us", type=A.positive_float, default=LAUNCH_US,
                   help=f"one launch in goal 3's bound, us (default {LAUNCH_US:g})")
    g.add_argument("--csv", type=Path, default=None, help="also write the goal table here")
    what = g.add_mutually_exclusive_group()
    what.add_argument("--unprofiled", action="store_true", help="print instead, one per line as MODEL|EP|T|TACTIC, "
                   "ours' best tactic at each missed shape that no Nsight Compute profile of that tactic explains, "
                   "and at goal 1's shapes not met triton_kernels' as MODEL|EP|T|triton_kernels=TACTIC (what "
                   "tools/device/plans/evidence.sh takes in PROFILES)")
    what.add_argument("--duels", action="store_true", help="print instead, one per line as MODEL|EP|T|OURS=TACTIC|"
                   "PEER=TACTIC, goal 1's shapes missed or met by less than 2 %% with no duel yet (what "
                   "tools/device/plans/evidence.sh takes in DUELS)")
    what.add_argument("--plan", action="store_true", help="print instead the one device call that measures both "
                      "lists and traces a duel where goal 1 is not met and no duel of ours' best was traced: "
                      "ONLY_ON=<the runs' GPU> PARTS=... DUELS=... CONDITIONS=... PROFILES=... bash "
                      "tools/device/plans/evidence.sh (the runs of one GPU)")
    g.set_defaults(func=cmd_goals)
