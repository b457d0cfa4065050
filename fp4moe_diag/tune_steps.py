"""The named steps of the device-safe tuner (:func:`fp4moe_diag.tune.tune_case` runs them in order) and the
state they share: :class:`TuneState` holds one case x backend being measured, each step reads it and adds rows."""

from __future__ import annotations

import datetime
import re
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import pandas as pd
import torch

from .backends.base import Backend, Tactic
from .problem.case import MoECase
from .problem.inputs import MoEInputs
from .measure.ceilings import Ceilings, roofline_fields
from .measure.correctness import error_metrics, poison_
from .measure.options import MeasureOptions
from .measure.timing import TimingStats, time_fn
from .results import to_frame


@dataclass
class TuneResult:
    case: MoECase
    backend: str
    rows: pd.DataFrame
    best: Optional[Tactic] = None
    default: Optional[Tactic] = None
    context_ok: bool = True
    notes: list = field(default_factory=list)

    @property
    def ok_rows(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]


#: the kernel-time columns of a row (results.SCHEMA)
KERNEL_TIME_COLUMNS = ("time_kernel_median_us", "time_kernel_p10_us", "time_kernel_p90_us", "time_kernel_spread",
                       "time_kernel_span_median_us", "time_kernel_count", "time_kernel_method",
                       "time_kernel_breakdown")


def cuda_context_ok(device: Any) -> tuple[bool, str]:
    dev = torch.device(device)
    if dev.type != "cuda":
        return True, ""
    try:
        torch.cuda.synchronize(dev)
        x = torch.ones(16, device=dev)
        if float((x + x).sum()) != 32.0:
            return False, "arithmetic check after the failure returned a wrong value"
        return True, ""
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _err(e: BaseException) -> tuple[str, str]:
    """(type, message): the first line, and the last one where they differ (a Triton CompilationError's
    first line is only "at L:C:", its cause is on the last line), 500 characters at most."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__, ""
    msg = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return type(e).__name__, msg[:500]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class SweepContext:
    """What every case x backend of one sweep shares: the device (resolved once), the environment columns, the
    ceilings and the run id of every row; ``clock`` (seconds) times the CPU path (tests pass a fake one)."""

    device: torch.device
    env: dict
    ceilings: Optional[Ceilings] = None
    run_id: Optional[str] = None
    clock: Optional[Callable[[], float]] = None


@dataclass
class TuneState:
    """One case x backend being measured: what the steps read and the rows they add."""

    case: MoECase
    backend: Backend
    options: MeasureOptions
    ctx: SweepContext
    base: dict
    result: TuneResult
    prepared: Any = None
    reference: Optional[torch.Tensor] = None  # what rows are checked against (rel_l2, correct)
    bf16_reference: Optional[torch.Tensor] = None  # the standard reference when the backend has its own (rel_l2_bf16_ref)
    work: Any = None
    out: Optional[torch.Tensor] = None
    recorded_output: Optional[torch.Tensor] = None  # what the user's recorded call returned (a dump replay)
    tactics: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    ok: list = field(default_factory=list)  # (tactic, row) of the correct tactics, in measuring order

    def fail(self, stage: str, e: BaseException) -> None:
        et, em = _err(e)
        self.rows.append({**self.base, "status": "failed", "stage": stage, "error_type": et, "error_message": em})

    def unsupported(self, stage: str, why: str) -> None:
        self.rows.append({**self.base, "status": "unsupported", "stage": stage, "error_message": why})

    def finish(self, df: Optional[pd.DataFrame] = None) -> TuneResult:
        self.result.rows = df if df is not None else to_frame(self.rows)
        return self.result


def base_row(case: MoECase, backend: Backend, ctx: SweepContext) -> dict:
    """The columns every row of this case x backend shares (environment, case, ceilings, run id)."""
    base = {**ctx.env, **case.to_record(), "backend": backend.name, "kernel_precision": backend.kernel_precision,
            "timestamp": _now()}
    if ctx.run_id is not None:
        base["run_id"] = ctx.run_id
    if ctx.ceilings is not None:
        base.update(ctx.ceilings.as_dict())
    return base


def support_row(st: TuneState) -> bool:
    """Whether the backend takes this device and case; if not, its one row says why (a check that raises too)."""
    try:
        sup = st.backend.supports(st.ctx.device)
        if sup.ok:
            sup = st.backend.check_case(st.case)
    except Exception as e:  # noqa: BLE001 - a backend whose support check raises is a row, not an abort
        st.fail("support", e)
        return False
    if not sup.ok:
        st.unsupported("support", sup.reason)
    return bool(sup.ok)


def prepare_step(st: TuneState, inputs: MoEInputs) -> bool:
    try:
        st.prepared = st.backend.prepare(inputs)
    except Exception as e:  # noqa: BLE001
        st.fail("prepare", e)
        st.result.notes.append(traceback.format_exc())
        return False
    return True


def reference_step(st: TuneState, inputs: MoEInputs) -> bool:
    """A backend with a reference of its own (:meth:`Backend.reference`: a W4A8 kernel's, quantizing as it does):
    rows are checked against it (``rel_l2``, ``correct``) and compared with the standard one (``rel_l2_bf16_ref``)."""
    if st.reference is None:
        return True
    try:
        own = st.backend.reference(inputs, st.prepared)
    except Exception as e:  # noqa: BLE001
        st.fail("prepare", e)
        st.result.notes.append(traceback.format_exc())
        return False
    if own is not None:
        st.bf16_reference, st.reference = st.reference, own
    return True


def tactic_step(st: TuneState) -> bool:
    """The backend's tactic list, filtered by ``options.tactic_filters``; an empty one is one ``unsupported`` row."""
    try:
        tactics = list(st.backend.tactics(st.case, prepared=st.prepared))
    except Exception as e:  # noqa: BLE001
        st.fail("tactics", e)
        st.result.notes.append(traceback.format_exc())
        return False
    if not tactics:
        st.unsupported("tactics", f"{st.backend.name} has no tactic for this case (its tactics() returned none)")
        return False
    rx = st.options.tactic_filter(st.backend.name)
    if rx is not None:
        tactics = [t for t in tactics if re.search(rx, t.label)]
        if not tactics:
            st.unsupported("tactics", f"no tactic of {st.backend.name} matches the tactic filter {rx!r}")
            return False
    st.tactics = tactics
    return True


def timed(st: TuneState, launch: Callable[[], Any], screened: bool) -> TimingStats:
    o = st.options
    clock_kw = {} if st.ctx.clock is None else {"clock": st.ctx.clock}
    return time_fn(launch, st.ctx.device, warmup=1 if screened else o.warmup, repeats=o.screen if screened else
                   o.repeats, flush_l2=o.flush_l2, cuda_graph=o.cuda_graph, max_seconds=o.max_seconds_per_tactic,
                   **clock_kw)


def add_kernel_time(st: TuneState, launch: Callable[[], Any], row: dict) -> None:
    """``time_kernel_*``: the GPU kernel time per call (torch.profiler / CUPTI), on CUDA with ``kernel_time``."""
    if not st.options.kernel_time or st.ctx.device.type != "cuda":
        return
    from .measure.kernel_time import time_kernels

    try:
        kt = time_kernels(launch, st.ctx.device, warmup=1, repeats=st.options.repeats, flush_l2=st.options.flush_l2,
                          cuda_graph=st.options.cuda_graph)
        row.update({k: v for k, v in kt.as_dict().items() if k in KERNEL_TIME_COLUMNS})
    except Exception as e:  # noqa: BLE001 - the event/graph timing of the row stands
        row["time_kernel_method"] = f"failed: {type(e).__name__}: {str(e)[:120]}"


def _check(st: TuneState, launch: Callable[[], Any]) -> dict:
    """One launch into the poisoned output, compared with the reference."""
    poison_(st.out)
    y = launch()
    if isinstance(y, (list, tuple)):
        y = y[0]
    if st.ctx.device.type == "cuda":
        torch.cuda.synchronize(st.ctx.device)
    m = error_metrics(y, st.reference, rel_l2_tol=st.backend.rel_l2_tol)
    m["rel_l2_bf16_ref"] = m["rel_l2"] if st.bf16_reference is None else error_metrics(y, st.bf16_reference)["rel_l2"]
    if st.recorded_output is not None:
        m.update(recorded_fields(y, st.recorded_output))
    return m


def recorded_fields(y: torch.Tensor, recorded: torch.Tensor) -> dict:
    """``recorded_rel_l2`` / ``matches_recorded``: this row's output against what the user's call returned."""
    m = error_metrics(y, recorded.to(y.device).float())
    return {"recorded_rel_l2": m["rel_l2"], "matches_recorded": bool(m["correct"])}


def timing_fields(st: TuneState, stats: TimingStats, screened: bool) -> dict:
    """The row's timing columns; a screen also sets ``time_screen_median_us``, which a later full timing keeps."""
    return {**stats.as_dict(), **roofline_fields(st.work, stats, st.ctx.ceilings),
            "timing_pass": "screen" if screened else "full",
            **({"time_screen_median_us": stats.median_us} if screened else {})}


def measure_tactic(st: TuneState, idx: int, screened: bool) -> bool:
    """One row for ``st.tactics[idx]``: launcher, correctness, timing; False when the CUDA context is gone."""
    t = st.tactics[idx]
    row = {**st.base, **st.backend.tactic_columns(t), "tactic": str(t.id), "tactic_label": t.label,
           "is_default_tactic": t.is_default, "timestamp": _now()}
    stage = "run"
    try:
        try:
            launch = st.backend.launcher(st.prepared, t, st.out)
            if st.options.check_correctness:
                row.update(_check(st, launch))
            stage = "timing"
            row.update(timing_fields(st, timed(st, launch, screened), screened))
            if not screened:
                add_kernel_time(st, launch, row)
        finally:
            st.backend.end_launches(st.prepared)
        row["status"] = "ok" if (not st.options.check_correctness or row.get("correct")) else "incorrect"
        row["stage"] = ""
    except Exception as e:  # noqa: BLE001 - a failing tactic is a result
        et, em = _err(e)
        row.update(status="failed", stage=stage, error_type=et, error_message=em)
        st.rows.append(row)
        return _context_survived(st, idx)
    st.rows.append(row)
    if row["status"] == "ok":
        st.ok.append((t, row))
    return True


def _context_survived(st: TuneState, idx: int) -> bool:
    """After a failed tactic: whether the CUDA context still works; if not, every later tactic is ``aborted``."""
    ok, why = cuda_context_ok(st.ctx.device)
    if ok:
        return True
    st.result.context_ok = False
    msg = f"CUDA context unusable after tactic {st.tactics[idx].label}: {why}"
    st.result.notes.append(msg)
    for rest in st.tactics[idx + 1:]:
        st.rows.append({**st.base, "tactic": str(rest.id), "tactic_label": rest.label,
                        "is_default_tactic": rest.is_default, "status": "aborted", "stage": "run",
                        "error_message": msg})
    return False


def combined_step(st: TuneState) -> bool:
    """The backend's combined tactic (per-op winners), measured in full as a row of its own."""
    try:
        combo = st.backend.combined_tactic([(t, r["time_median_us"]) for t, r in st.ok])
    except Exception as e:  # noqa: BLE001 - the single tactics' rows stand
        st.result.notes.append(f"combined_tactic failed: {_err(e)[0]}: {_err(e)[1]}")
        return True
    if combo is None or any(str(combo.id) == str(t.id) for t in st.tactics):
        return True
    st.tactics.append(combo)
    return measure_tactic(st, len(st.tactics) - 1, False)


def retime(st: TuneState, t: Tactic, row: Optional[dict] = None) -> TimingStats:
    """``t`` timed in full again; with ``row``, its timing columns (and kernel time) replaced."""
    try:
        launch = st.backend.launcher(st.prepared, t, st.out)
        stats = timed(st, launch, False)
        if row is not None:
            row.update(timing_fields(st, stats, False))
            add_kernel_time(st, launch, row)
        return stats
    finally:
        st.backend.end_launches(st.prepared)


def pick_best(st: TuneState) -> pd.DataFrame:
    """The rows, the fastest correct fully timed tactic marked ``is_best`` (and re-timed: ``noise_ratio``)."""
    df = to_frame(st.rows)
    st.result.default = next((t for t in st.tactics if t.is_default), None)
    ok = df[(df["status"] == "ok") & (df["timing_pass"].fillna("full") != "screen")]
    if not len(ok):
        return df
    best_idx = ok["time_median_us"].idxmin()
    df.loc[:, "is_best"] = False
    df.loc[best_idx, "is_best"] = True
    best_id = df.loc[best_idx, "tactic"]
    st.result.best = next(t for t in st.tactics if str(t.id) == best_id)
    if st.options.repeat_best:  # noise figure: the same tactic timed a second time, after all the others
        try:
            again = retime(st, st.result.best)
            first = float(df.loc[best_idx, "time_median_us"])
            df.loc[best_idx, "time_median_us_repeat"] = again.median_us
            df.loc[best_idx, "noise_ratio"] = max(first, again.median_us) / min(first, again.median_us)
        except Exception as e:  # noqa: BLE001
            st.result.notes.append(f"repeat timing of the best tactic failed: {e}")
    return df


def commit_step(st: TuneState) -> None:
    """With ``commit_best``: the library's own tuner (FlashInfer's AutoTuner cache) now holds our pick."""
    if not st.options.commit_best or st.result.best is None:
        return
    try:
        done = st.backend.commit_tactic(st.prepared, st.result.best)
        st.result.notes.append(f"committed to {st.backend.name}'s own tuner: {done}")
    except NotImplementedError as e:
        st.result.notes.append(f"not committed: {e}")


