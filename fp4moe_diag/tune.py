"""The device-safe tuner: every tactic of a backend, no meta tensor ever reaches a kernel.

:func:`tune` (a) checks every tensor a backend will receive before anything launches: meta
tensors, tensors on another device than the case's, wrong dtypes -> ``ValueError`` naming the
argument; (b) runs **every** tactic, each with a correctness check against the float32 reference
(poisoned output, fresh activations) and warm-up + timed repeats (the best one is re-timed at
the end: ``noise_ratio``); (c) turns a tactic that raises
into a row (exception type and message) and carries on; after a failure on a GPU it checks that
the CUDA context still works and, if not, marks the remaining tactics ``aborted`` and stops
cleanly; (d) picks the fastest correct tactic and, for FlashInfer backends, can hand it to
FlashInfer's own ``AutoTuner`` cache so a following ``autotune(False)`` call uses it.
"""

from __future__ import annotations

import datetime
import re
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import pandas as pd
import torch

from .backends.base import Backend, Tactic
from .case import MoECase
from .measure.correctness import error_metrics, poison_
from .inputs import MoEInputs, build_inputs, default_device, fresh_activations, resolve_device
from .measure.ceilings import Ceilings, moe_work, roofline_fields
from .measure.timing import TimingStats, time_fn
from .reference import reference_moe
from .environment import environment_info
from .results import to_frame
from .validate import validate_launch_inputs


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


#: the correctness check's activations come from this seed offset (tune and sweep must agree)
CHECK_SEED_OFFSET = 1_000_003


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def correctness_inputs(inputs: MoEInputs) -> MoEInputs:
    """Same weights and routing as ``inputs``, fresh random activations for the correctness check (recorded
    inputs, ``inputs.recorded``, are checked as they are)."""
    if inputs.recorded:
        return inputs
    return fresh_activations(inputs, seed=inputs.case.seed + CHECK_SEED_OFFSET)


def recorded_fields(y: torch.Tensor, recorded: torch.Tensor) -> dict:
    """``recorded_rel_l2`` / ``matches_recorded``: this row's output against what the user's call returned."""
    m = error_metrics(y, recorded.to(y.device).float())
    return {"recorded_rel_l2": m["rel_l2"], "matches_recorded": bool(m["correct"])}


def tune(
    case: MoECase,
    backend: Backend,
    device: Any = None,
    *,
    inputs: Optional[MoEInputs] = None,
    reference: Optional[torch.Tensor] = None,
    tactics: Optional[Sequence[Tactic]] = None,
    warmup: int = 5,
    repeats: int = 30,
    flush_l2: bool = True,
    cuda_graph: bool = False,
    check_correctness: bool = True,
    ceilings: Optional[Ceilings] = None,
    env: Optional[dict] = None,
    max_seconds_per_tactic: Optional[float] = 10.0,
    screen_repeats: Optional[int] = None,
    screen_top: int = 4,
    repeat_best: bool = True,
    commit_best: bool = False,
    progress: Optional[Callable[[str], None]] = None,
    clock: Optional[Callable[[], float]] = None,
    kernel_time: bool = False,
    tactic_filter: Optional[str] = None,
) -> TuneResult:
    """Run every tactic of ``backend`` on ``case``; one DataFrame row per tactic.

    ``tactic_filter`` (a regular expression) keeps only the tactics whose label it matches (``re.search``);
    when none matches, the result is one ``unsupported`` row that says so.

    Every tactic is checked against the reference and timed.  With ``screen_repeats`` the timing is
    two-pass: every tactic gets ``screen_repeats`` timed runs (its correctness run is the warm-up),
    then the ``screen_top`` fastest correct ones, the default tactic and the backend's combined
    tactic (if any) are timed in full (``warmup``/``repeats``); ``timing_pass`` says which.  The best
    tactic is chosen among the fully timed rows."""
    if not isinstance(backend, Backend):
        raise ValueError(f"backend: expected a Backend instance, got {type(backend).__name__}")
    if screen_repeats is not None and screen_repeats < 1:
        raise ValueError(f"screen_repeats: expected >= 1 or None, got {screen_repeats}")
    if device is None:
        device = inputs.device if inputs is not None else default_device()
    dev = resolve_device(device)
    env = env if env is not None else environment_info(dev)
    base = {**env, **case.to_record(), "backend": backend.name, "timestamp": _now()}
    if ceilings is not None:
        base.update(ceilings.as_dict())
    rows: list[dict] = []
    result = TuneResult(case, backend.name, to_frame([]))

    def finish() -> TuneResult:
        result.rows = to_frame(rows)
        return result

    for check in (lambda: backend.supports(dev), lambda: backend.check_case(case)):
        try:
            sup = check()
        except Exception as e:  # noqa: BLE001 - a backend whose support check raises is a row, not an abort
            et, em = _err(e)
            rows.append({**base, "status": "failed", "stage": "support", "error_type": et, "error_message": em})
            return finish()
        if not sup.ok:
            rows.append({**base, "status": "unsupported", "stage": "support", "error_message": sup.reason})
            return finish()

    if inputs is None:
        inputs = build_inputs(case, dev)
    elif inputs.case != case:
        raise ValueError("inputs: built for a different case than the one given")
    validate_launch_inputs(inputs, dev)  # ValueError before any kernel, for every tensor the kernels receive

    if check_correctness:
        # one prepared set serves the check and the timing: fresh activations, the case's weights
        inputs = correctness_inputs(inputs)
        validate_launch_inputs(inputs, dev)
        if reference is None:
            reference = reference_moe(inputs, torch.float32)
    try:
        prepared = backend.prepare(inputs)
    except Exception as e:  # noqa: BLE001
        et, em = _err(e)
        rows.append({**base, "status": "failed", "stage": "prepare", "error_type": et, "error_message": em})
        result.notes.append(traceback.format_exc())
        return finish()
    try:
        tactic_list = list(tactics) if tactics is not None else list(backend.tactics(case, prepared=prepared))
    except Exception as e:  # noqa: BLE001
        et, em = _err(e)
        rows.append({**base, "status": "failed", "stage": "tactics", "error_type": et, "error_message": em})
        result.notes.append(traceback.format_exc())
        return finish()

    if tactic_filter is not None:
        tactic_list = [t for t in tactic_list if re.search(tactic_filter, t.label)]
        if not tactic_list:
            rows.append({**base, "status": "unsupported", "stage": "tactics",
                         "error_message": f"no tactic of {backend.name} matches the tactic filter {tactic_filter!r}"})
            return finish()

    work = moe_work(case, inputs.local_topk_ids)
    out = torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=dev)

    clock_kw = {} if clock is None else {"clock": clock}

    def kernel_timed(t: Tactic, row: dict) -> None:
        """``time_kernel_*``: the GPU kernel time per call (torch.profiler / CUPTI), on CUDA with ``kernel_time``."""
        if not kernel_time or dev.type != "cuda":
            return
        from .measure.kernel_time import time_kernels

        try:
            kt = time_kernels(lambda: backend.run(prepared, t, out), dev, warmup=1, repeats=repeats,
                              flush_l2=flush_l2, cuda_graph=cuda_graph)
            row.update({k: v for k, v in kt.as_dict().items() if k in KERNEL_TIME_COLUMNS})
        except Exception as e:  # noqa: BLE001 - the event/graph timing of the row stands
            row["time_kernel_method"] = f"failed: {type(e).__name__}: {str(e)[:120]}"

    def timed(tactic: Tactic, screen: bool = False) -> TimingStats:
        return time_fn(lambda: backend.run(prepared, tactic, out), dev, warmup=1 if screen else warmup,
                       repeats=screen_repeats if screen else repeats, flush_l2=flush_l2, cuda_graph=cuda_graph,
                       max_seconds=max_seconds_per_tactic, **clock_kw)

    screen = screen_repeats is not None
    ok_rows: list[tuple[Tactic, dict]] = []

    def measure(t: Tactic, idx: int, screened: bool) -> bool:
        """One row for tactic ``t``: correctness, timing; False when the CUDA context is gone."""
        row = {**base, "tactic": str(t.id), "tactic_label": t.label, "is_default_tactic": t.is_default,
               "timestamp": _now()}
        if progress:
            progress(f"{backend.name} {t.label}")
        stage = "run"
        try:
            if check_correctness:
                poison_(out)
                y = backend.run(prepared, t, out)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                row.update(error_metrics(y, reference))
                if inputs.recorded_output is not None:
                    row.update(recorded_fields(y, inputs.recorded_output))
            stage = "timing"
            stats = timed(t, screened)
            row.update(stats.as_dict())
            row.update(roofline_fields(work, stats, ceilings))
            row["timing_pass"] = "screen" if screened else "full"
            if not screened:
                kernel_timed(t, row)
            row["status"] = "ok" if (not check_correctness or row.get("correct")) else "incorrect"
            row["stage"] = ""
        except Exception as e:  # noqa: BLE001 - a failing tactic is a result
            et, em = _err(e)
            row.update(status="failed", stage=stage, error_type=et, error_message=em)
            rows.append(row)
            ok, why = cuda_context_ok(dev)
            if not ok:
                result.context_ok = False
                msg = f"CUDA context unusable after tactic {t.label}: {why}"
                result.notes.append(msg)
                for rest in tactic_list[idx + 1 :]:
                    rows.append({**base, "tactic": str(rest.id), "tactic_label": rest.label,
                                 "is_default_tactic": rest.is_default, "status": "aborted", "stage": "run",
                                 "error_message": msg})
                return False
            return True
        rows.append(row)
        if row["status"] == "ok":
            ok_rows.append((t, row))
        return True

    alive = True
    for idx, t in enumerate(tactic_list):
        if not measure(t, idx, screen):
            alive = False
            break
    if alive:
        try:
            combo = backend.combined_tactic([(t, r["time_median_us"]) for t, r in ok_rows])
        except Exception as e:  # noqa: BLE001 - the single tactics' rows stand
            combo = None
            result.notes.append(f"combined_tactic failed: {_err(e)[0]}: {_err(e)[1]}")
        if combo is not None and all(str(combo.id) != str(t.id) for t in tactic_list):
            tactic_list.append(combo)
            alive = measure(combo, len(tactic_list) - 1, False)
    if screen and alive:  # second pass: the fastest screened tactics and the default, in full
        screened = sorted((r["time_median_us"], i) for i, (t, r) in enumerate(ok_rows) if r["timing_pass"] == "screen")
        pick = {i for _, i in screened[: max(screen_top, 0)]}
        pick |= {i for i, (t, r) in enumerate(ok_rows) if t.is_default and r["timing_pass"] == "screen"}
        for i in sorted(pick):
            t, row = ok_rows[i]
            try:
                stats = timed(t)
            except Exception as e:  # noqa: BLE001
                result.notes.append(f"full timing of {t.label} failed after its screen: {e}")
                continue
            row.update(stats.as_dict())
            row.update(roofline_fields(work, stats, ceilings))
            row["timing_pass"] = "full"
            kernel_timed(t, row)

    df = to_frame(rows)
    ok = df[(df["status"] == "ok") & (df["timing_pass"].fillna("full") != "screen")]
    if len(ok):
        best_idx = ok["time_median_us"].idxmin()
        df.loc[:, "is_best"] = False
        df.loc[best_idx, "is_best"] = True
        best_id = df.loc[best_idx, "tactic"]
        result.best = next(t for t in tactic_list if str(t.id) == best_id)
        if repeat_best:  # noise figure: the same tactic timed a second time, after all the others
            try:
                again = timed(result.best)
                first = float(df.loc[best_idx, "time_median_us"])
                df.loc[best_idx, "time_median_us_repeat"] = again.median_us
                df.loc[best_idx, "noise_ratio"] = max(first, again.median_us) / min(first, again.median_us)
            except Exception as e:  # noqa: BLE001
                result.notes.append(f"repeat timing of the best tactic failed: {e}")
    result.default = next((t for t in tactic_list if t.is_default), None)
    if commit_best and result.best is not None:
        # FlashInfer's own AutoTuner cache now holds our pick for this op and shape bucket
        try:
            result.notes.append(f"committed to {backend.name}'s own tuner: {backend.commit_tactic(prepared, result.best)}")
        except NotImplementedError as e:
            result.notes.append(f"not committed: {e}")
    result.rows = df
    return result


def _usable(backend: Backend, dev: torch.device, case: MoECase) -> bool:
    """Whether ``backend`` takes ``case`` here; a check that raises says no (``tune`` then records why)."""
    try:
        return bool(backend.supports(dev).ok and backend.check_case(case).ok)
    except Exception:  # noqa: BLE001
        return False


def sweep(
    cases: Sequence[MoECase],
    backends: Sequence[Backend],
    device: Any = None,
    *,
    progress_bar: bool = True,
    on_result: Optional[Callable[[TuneResult], None]] = None,
    tactic_filters: Optional[dict[str, str]] = None,
    make_inputs: Optional[Callable[[MoECase, Any], MoEInputs]] = None,
    **tune_kwargs: Any,
) -> pd.DataFrame:
    """:func:`tune` over cases x backends; inputs and the reference are built once per case.  ``tactic_filters``
    maps a backend name to its ``tactic_filter`` (backends not named run every tactic); ``make_inputs(case,
    device)`` builds a case's inputs instead of :func:`build_inputs` (a dump replay's recorded tensors)."""
    from tqdm.auto import tqdm

    dev = resolve_device(device or default_device())
    env = tune_kwargs.pop("env", None) or environment_info(dev)
    frames = []
    bar = tqdm(total=len(cases) * len(backends), disable=not progress_bar, desc="sweep")
    for case in cases:
        inputs = None
        reference = None
        for b in backends:
            bar.set_postfix_str(f"{case.label} {b.name}")
            if inputs is None and _usable(b, dev, case):
                inputs = make_inputs(case, dev) if make_inputs is not None else build_inputs(case, dev)
                reference = reference_moe(correctness_inputs(inputs), torch.float32)
            res = tune(case, b, dev, inputs=inputs, reference=reference, env=env,
                       tactic_filter=(tactic_filters or {}).get(b.name), **tune_kwargs)
            frames.append(res.rows)
            if on_result:
                on_result(res)
            bar.update(1)
        del inputs, reference
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    bar.close()
    return to_frame(pd.concat(frames, ignore_index=True).to_dict("records")) if frames else to_frame([])
