"""Two tactics, of one backend or two, timed in alternation on the same case: is one faster, call for call?

``python -m fp4moe_diag.profiling.duel --model gpt-oss-20b --ep 1 --tokens 16384
--a triton=m128n128k64w16s3-ps-gu-tm-g2n256 --b triton_kernels=tk-mautokautow8 --out data/runs/RUN/duel.csv``

Per case (the shape table's model and EP at each token count, inputs built as the sweep builds them) both calls are
prepared and captured in CUDA graphs, then timed by :func:`..measure.paired.time_paired`: ``--warmup`` untimed
replays each, then ``--rounds`` rounds of one replay each in alternating order, the L2 flushed before every replay.
One row per case: each call's median / p10 / p90, the per-round ratio a / b (median, p10, p90), the share of rounds a
was faster, the verdict (``ahead``: a faster in at least 9 rounds of 10, ``behind``, ``level``) and whether the L2
was flushed (``l2_flushed``; ``--no-l2-flush``: a diagnosis, whether a gap lies in how the calls meet a cold L2: such a
duel never decides a goal, :func:`..analysis.duels.duel_verdict`).  ``--kernel-time``: the same replays traced by
CUPTI too (:mod:`..measure.traced_rounds`): each side's kernel span and sum, what each replay took beyond its kernels,
each kernel's median (``a_kernels``, ``b_kernels``: JSON) and the per-round ratio of the spans; ``--sync-after-flush``:
the host waits for each flush before it queues the call, so the GPU idles before every call, as in a sweep's CUPTI
pass (the two passes put ours and triton_kernels in opposite order at 20b EP2 T=4096, ``docs/conditions-s26.md``).
Both are diagnoses (``kernel_time``, ``sync_after_flush`` in the row) and never decide a goal.  This settles
what a sweep's two medians, taken minutes apart, cannot at the sizes where the GPU's clocks drift over a timing
(20b EP1 T=16384 on the H100, ``docs/goals-h100-s17.md``).  Timing only: the tactics' outputs are checked by the
sweeps that chose them, not here."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional, Sequence

#: the columns of a duel CSV, in order (then the environment's: gpu_name, triton_version, flashinfer_version, git_commit)
COLUMNS = ("model", "ep_size", "num_tokens", "a_backend", "a_tactic", "b_backend", "b_tactic", "a_median_us",
           "a_p10_us", "a_p90_us", "b_median_us", "b_p10_us", "b_p90_us", "rounds", "ratio_median", "ratio_p10",
           "ratio_p90", "a_faster_share", "verdict", "l2_flushed", "sync_after_flush", "kernel_time")
#: the columns ``--kernel-time`` fills (:func:`..measure.traced_rounds.pair_columns`), after :data:`COLUMNS`' own
KERNEL_COLUMNS = ("a_span_median_us", "b_span_median_us", "span_ratio_median", "a_sum_median_us", "b_sum_median_us",
                  "a_event_minus_span_us", "b_event_minus_span_us", "a_kernels", "b_kernels")


def duel_case(case: Any, a: tuple[str, str], b: tuple[str, str], device: Any, rounds: int, warmup: int,
              flush_l2: bool = True, sync_after_flush: bool = False, kernel_time: bool = False) -> dict:
    """One row of :data:`COLUMNS` and :data:`KERNEL_COLUMNS` (but the environment's): ``a`` against ``b`` on
    ``case``; the kernel columns filled only with ``kernel_time`` (else NaN / empty)."""
    from ..measure import paired
    from ..measure.traced_rounds import pair_columns, traced_rounds
    from .call_setup import prepare_pair

    prepared, launches = prepare_pair(case, a, b, device)  # prepared: kept while the rounds replay their graphs
    extra: dict[str, Any] = {c: "" if c.endswith("_kernels") else float("nan") for c in KERNEL_COLUMNS}
    if kernel_time:
        traced = traced_rounds(paired.graph_replays(launches, device), device, rounds, warmup, flush_l2,
                               sync_after_flush)
        times = {k: [r.event_us for r in v] for k, v in traced.items()}
        extra |= pair_columns(traced["a"], traced["b"])
    else:
        times = paired.time_paired(launches, device, rounds=rounds, warmup=warmup, flush_l2=flush_l2,
                                   sync_after_flush=sync_after_flush)
    s = paired.paired_summary(times["a"], times["b"])
    return dict(model=case.model, ep_size=case.ep_size, num_tokens=case.num_tokens, a_backend=a[0], a_tactic=a[1],
                b_backend=b[0], b_tactic=b[1], **s.as_dict(), l2_flushed=bool(flush_l2),
                sync_after_flush=bool(sync_after_flush), kernel_time=bool(kernel_time), **extra)


def _parser() -> argparse.ArgumentParser:
    from .. import cli_args as A
    from .gpu_args import add_device_out_args, add_pair_args

    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.duel", description=__doc__.split("\n\n")[0])
    add_pair_args(ap)
    ap.add_argument("--rounds", type=A.positive_int, default=30, help="timed rounds (default 30)")
    ap.add_argument("--warmup", type=A.non_negative_int, default=30, help="untimed replays of each call (default 30)")
    ap.add_argument("--no-l2-flush", action="store_true", help="replay without the L2 flush before each call (a "
                    "diagnosis: such a duel never decides a goal)")
    ap.add_argument("--sync-after-flush", action="store_true", help="wait for each flush before queueing the call "
                    "(the GPU idles before every call, as in a sweep's CUPTI pass; a diagnosis)")
    ap.add_argument("--kernel-time", action="store_true", help="trace the same replays with CUPTI too: each side's "
                    "kernel span, sum and per-kernel medians (a diagnosis)")
    add_device_out_args(ap)
    return ap


def _lines(r: dict) -> str:
    """What the tool prints of a row: the paired verdict, and with ``--kernel-time`` the kernels."""
    text = (f"{r['model']} EP{r['ep_size']} T={r['num_tokens']}: a {r['a_median_us']:.1f} us, b "
            f"{r['b_median_us']:.1f} us; a / b per round {r['ratio_median']:.3f} (p10 {r['ratio_p10']:.3f}, p90 "
            f"{r['ratio_p90']:.3f}), a faster in {r['a_faster_share']:.0%} of {r['rounds']} rounds: {r['verdict']}"
            + ("" if r["l2_flushed"] else " (L2 not flushed)") + (" (idle before each call)"
                                                                   if r["sync_after_flush"] else ""))
    if r["kernel_time"]:
        text += (f"\n  kernel spans a {r['a_span_median_us']:.1f} us, b {r['b_span_median_us']:.1f} us (a / b per "
                 f"round {r['span_ratio_median']:.3f}); replay beyond its kernels a {r['a_event_minus_span_us']:.1f}"
                 f" us, b {r['b_event_minus_span_us']:.1f} us\n  a {r['a_kernels']}\n  b {r['b_kernels']}")
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .gpu_args import pair_main

    return pair_main(_parser(), argv, "a duel is timed on a CUDA GPU (graph replays)",
                     lambda case, args: duel_case(case, args.a, args.b, args.device, args.rounds, args.warmup,
                                                  not args.no_l2_flush, args.sync_after_flush, args.kernel_time),
                     COLUMNS + KERNEL_COLUMNS, _lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
