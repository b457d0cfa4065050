"""Ablation timings (``python -m fp4moe_diag.profiling.ablate``: a tactic of our Triton kernels beside ``~nodeq``,
``~load`` and ``~seq``, backends/triton/_kernels_ablate.py) as a table of shares, and as the measured reason beside
issue #25's goals (``goals`` reads the ``ablate*.csv`` of the folders it is given)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from .headline import gpu_label, several_gpus

#: the rows :func:`..profiling.ablate.ablate_case` writes, one per case x tactic x variant (:data:`VARIANTS`)
COLUMNS = ("model", "ep_size", "num_tokens", "tactic", "variant", "label", "time_median_us", "time_p10_us",
           "time_p90_us", "time_spread", "time_method", "time_kernel_median_us", "time_kernel_breakdown",
           "weight_bytes", "weight_TBps", "frac_read_ceiling", "ceiling_read_GBps", "gpu_name", "triton_version",
           "git_commit")
KEYS = ["gpu_name", "model", "ep_size", "num_tokens", "tactic"]
VARIANTS = ("tactic", "nodeq", "load", "seq")  #: the ``variant`` column's values
#: a case whose four timings spread more than this (p90 - p10 over the median, the largest of the four) is flagged:
#: its shares may be noise (120b EP4 T=64 on the H100 spread 11 % over 30 replays, 1 % over 100)
NOISY_SPREAD = 0.05


def ablation_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per case and tactic of rows of :data:`COLUMNS`: the four times, the shares of the tactic's time, and
    the weight stream of each over the read ceiling, and the largest spread of the four (``max_spread``).  Rows of
    several files (``source``, :func:`read_ablations`) stay apart.  A ValueError where a variant is missing."""
    missing = set(VARIANTS) - set(df["variant"])
    if missing:
        raise ValueError(f"rows: every case needs the variants {', '.join(VARIANTS)}; missing {sorted(missing)}")
    df = df.assign(gpu_name=df["gpu_name"].fillna("") if "gpu_name" in df else "",
                   time_spread=df["time_spread"] if "time_spread" in df else float("nan"))
    keys = KEYS + (["source"] if "source" in df else [])
    t = df.pivot_table(index=keys, columns="variant", values="time_median_us", aggfunc="last")
    f = df.pivot_table(index=keys, columns="variant", values="frac_read_ceiling", aggfunc="last")
    spread = df.groupby(keys)["time_spread"].max()
    if t[list(VARIANTS)].isna().any().any():
        raise ValueError(f"rows: a case lacks one of the variants {', '.join(VARIANTS)}")
    out = pd.DataFrame({
        "tactic_us": t["tactic"], "nodeq_us": t["nodeq"], "load_us": t["load"],
        "dequant_share": (t["tactic"] - t["nodeq"]) / t["tactic"],
        "loop_rest_share": (t["nodeq"] - t["load"]) / t["tactic"],
        "load_share": t["load"] / t["tactic"], "seq_us": t["seq"], "seq_over_load": t["seq"] / t["load"],
        "tactic_read_frac": f["tactic"], "load_read_frac": f["load"], "seq_read_frac": f["seq"],
        "max_spread": spread.reindex(t.index),
    })
    return out.reset_index()


def markdown(table: pd.DataFrame) -> str:
    """:func:`ablation_table` as Markdown: times with their read-ceiling fractions, then the shares; a GPU column first
    where the rows come from several GPUs, the run folder last where the table has one (:func:`committed_ablations`)."""
    gpu, run = several_gpus(table), "run" in table
    head = ["model", "EP", "T", "tactic", "tactic us (read)", "~nodeq us", "~load us (read)", "~seq us (read)",
            "dequant", "rest of the loop", "weight stream", "~seq / ~load"]
    cols = (["GPU"] if gpu else []) + head + (["run"] if run else [])
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for r in table.itertuples():
        noisy = f" (noisy: spread {r.max_spread:.0%})" if r.max_spread > NOISY_SPREAD else ""
        lines.append(("| " + gpu_label(r.gpu_name) + " " if gpu else "")
                     + f"| {r.model} | {r.ep_size} | {r.num_tokens} | `{r.tactic}` | {r.tactic_us:.1f} "
                     f"({r.tactic_read_frac:.0%}) | {r.nodeq_us:.1f} | {r.load_us:.1f} ({r.load_read_frac:.0%}) "
                     f"| {r.seq_us:.1f} ({r.seq_read_frac:.0%}) | {r.dequant_share:.0%} | {r.loop_rest_share:.0%} "
                     f"| {r.load_share:.0%} | {r.seq_over_load:.2f}{noisy} |" + (f" {r.run} |" if run else ""))
    return "\n".join(lines)


def read_ablations(folders: Iterable[Path]) -> pd.DataFrame:
    """Every ``ablate*.csv`` of ``folders`` as one frame of :data:`COLUMNS` and ``source`` (folder/file; empty when
    there is none)."""
    frames = [pd.read_csv(f).assign(source=f"{Path(d).name}/{f.name}") for d in folders
              for f in sorted(Path(d).glob("ablate*.csv"))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))


def committed_ablations(root: Path | None = None) -> pd.DataFrame:
    """:func:`ablation_table` of every ``ablate*.csv`` under ``data/runs/*/`` (``root``: another runs folder), with
    each case's run folder in ``run``; empty when none is committed."""
    from ..paths import run_folders

    return ablations_per_run(run_folders(root))


def ablations_per_run(folders: Iterable[Path]) -> pd.DataFrame:
    """:func:`ablation_table` of each folder's ``ablate*.csv`` on its own, with the folder's name in ``run`` (a folder
    without any adds nothing; none at all: an empty frame)."""
    tables = []
    for d in folders:
        rows = read_ablations([d])
        if not rows.empty:
            tables.append(ablation_table(rows).assign(run=Path(d).name))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def ablation_note(table: pd.DataFrame, model: str, ep_size: int, num_tokens: int, tactic: str,
                  gpu_name: str = "") -> str:
    """The shares of :func:`ablation_table` for this shape and tactic as a phrase ('' when it was not ablated).  A
    ``-tm`` tactic (its loop reads a tile-major copy; its ``~load`` / ``~seq`` are refused) takes its ps twin's, named;
    of several ablations the least noisy; ``gpu_name`` (when given) must match the rows' where they record one."""
    if table.empty:
        return ""
    twin = tactic.replace("-tm", "")
    m = table[(table["model"] == model) & (table["ep_size"] == ep_size) & (table["num_tokens"] == num_tokens)
              & table["tactic"].isin([tactic, twin])]
    if gpu_name:
        m = m[m["gpu_name"].isin(["", gpu_name])]
    if m.empty:
        return ""
    m = m.assign(_twin=m["tactic"] != tactic, _spread=m["max_spread"].fillna(0.0))
    r = m.sort_values(["_twin", "_spread"]).iloc[0]
    of = f" [of the ps twin {r.tactic}]" if r.tactic != tactic else ""
    noisy = f" (spread up to {r.max_spread:.0%}: noisy)" if r.max_spread > NOISY_SPREAD else ""
    return (f"ablation{of}: dequant {r.dequant_share:.0%}, rest of the loop {r.loop_rest_share:.0%}, weight stream "
            f"{r.load_share:.0%} of {r.tactic_us:.1f} us (~load at {r.load_read_frac:.0%} of the read ceiling, ~seq "
            f"at {r.seq_read_frac:.0%}){noisy}")
