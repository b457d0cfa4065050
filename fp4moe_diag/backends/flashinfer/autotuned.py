"""FlashInfer's own autotuner as a measured backend: what ``autotune(True)`` picks, timed like every tactic.

Backend ``cutlass_autotune``: the same entry point, inputs and module as ``cutlass``
(:class:`~.cutlass.CutlassBackend`), but its tactics are not enumerated by us.  For each *tuning setting*
FlashInfer's ``AutoTuner`` is run the way a serving engine runs it, then a plain ``autotune(False)`` call of
this case (its own token count) asks the tuner for its pick; the row's tactic is that ``(gemm1, gemm2)`` pair,
forced and timed exactly like a ``cutlass`` row.  Tuner regret = pick time / the best ``cutlass`` tactic of
the same case in the same run (:mod:`fp4moe_diag.analysis.tuner`).

Settings (``FP4MOE_TUNE_SETTINGS``, comma-separated; default ``max=8192,max=1``):

* ``max=N``: ``with autotune(True): cutlass_fused_moe(..., tune_max_num_tokens=N)`` on this case's inputs, from
  an empty tuner cache (FlashInfer profiles every bucket up to N in that call), then the pick for this case's
  token count.  ``max=8192``: vLLM 0.33/0.34 passes no ``tune_max_num_tokens`` to the CUTLASS MoE, so
  FlashInfer's default 8192 applies (vLLM's ``fi_moe_largest_bucket`` floor for the trtllm paths is 8192 too);
  ``max=1``: the seed's call (tuned for one token, then serving any batch size).  A setting is tuned once per
  weight shape (model, EP slice, bias) and process; its tuner cache is kept and restored for each token count.
* ``cache=FILE``: ``autotune(False, cache=FILE)``: the pick from a tuner-config file, e.g. the one
  ``python -m fp4moe_diag export-tuner-config RUN --out FILE`` writes from a ``cutlass`` sweep (closing the regret).

A pick of ``(-1, -1)`` is FlashInfer's untuned fallback: the tuner had nothing for that bucket.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from ...problem.case import MoECase
from ..base import Tactic
from .base import FlashInferPrepared
from .cutlass import GEMM1_OP, GEMM2_OP, CutlassBackend, _cutlass_fn
from .hooks import call_with_supported_kwargs, intercept_choose_one, winner_cache
from ... import settings as fp4moe_settings

ENV_SETTINGS = fp4moe_settings.TUNE_SETTINGS
DEFAULT_SETTINGS = ("max=8192", "max=1")


def parse_settings(text: str) -> tuple[str, ...]:
    """``"max=8192,max=1,cache=FILE"`` -> the settings; a ValueError names a bad entry."""
    out = []
    for item in (s.strip() for s in str(text).split(",")):
        kind, sep, value = item.partition("=")
        if not sep or kind not in ("max", "cache") or not value:
            raise ValueError(f"{ENV_SETTINGS}: expected entries 'max=N' or 'cache=FILE', got {item!r}")
        if kind == "max" and (not value.isdigit() or int(value) < 1):
            raise ValueError(f"{ENV_SETTINGS}: 'max=N' needs an int N >= 1, got {item!r}")
        if kind == "cache" and not os.path.isfile(value):
            raise ValueError(f"{ENV_SETTINGS}: tuner-config file {value!r} does not exist")
        out.append(item)
    if not out:
        raise ValueError(f"{ENV_SETTINGS}: no setting given")
    return tuple(out)


def _tactic_int(v: Any) -> int:
    if isinstance(v, (list, tuple)):  # a runner may answer a one-element list
        v = v[0] if len(v) == 1 else v
    return int(v)


class CutlassAutotuneBackend(CutlassBackend):
    """``cutlass_fused_moe`` at the tactic FlashInfer's own AutoTuner picks, one row per tuning setting."""

    name = "cutlass_autotune"

    def __init__(self, scale_layout: str = "auto", settings: Optional[tuple[str, ...]] = None):
        super().__init__(scale_layout=scale_layout)
        env = fp4moe_settings.read(ENV_SETTINGS)
        self.settings = parse_settings(",".join(settings)) if settings else (
            parse_settings(env) if env else DEFAULT_SETTINGS)
        self._tuned: dict = {}  # (weight-shape key, setting) -> (winner-cache snapshot, tuning seconds)

    def _run_op(self, prepared: FlashInferPrepared, **extra: Any) -> None:
        call_with_supported_kwargs(_cutlass_fn(), {**prepared.kwargs, **extra})

    def _snapshot(self, case: MoECase, setting: str, prepared: FlashInferPrepared) -> tuple[dict, float]:
        """The tuner's winners after tuning ``setting`` for this weight shape (tuned once per process)."""
        from flashinfer.autotuner import AutoTuner, autotune

        key = (case.with_tokens(1), setting)
        if key not in self._tuned:
            tuner = AutoTuner.get()
            tuner.clear_cache()
            m = int(setting.partition("=")[2])
            t0 = time.perf_counter()
            with autotune(True):
                self._run_op(prepared, tune_max_num_tokens=m)
            self._tuned[key] = (dict(winner_cache(tuner)), time.perf_counter() - t0)
        return self._tuned[key]

    def pick(self, case: MoECase, prepared: FlashInferPrepared, setting: str) -> tuple[tuple[int, int], dict]:
        """``((gemm1, gemm2), info)``: FlashInfer's pick for this case under ``setting``."""
        from flashinfer.autotuner import AutoTuner, autotune

        tuner = AutoTuner.get()
        kind, _, value = setting.partition("=")
        info: dict = {"setting": setting}
        if kind == "max":
            snap, secs = self._snapshot(case, setting, prepared)
            tuner.clear_cache()
            winner_cache(tuner).update(snap)
            info["tuning_s"] = round(secs, 2)
            ctx = autotune(False)
            extra = {"tune_max_num_tokens": int(value)}
        else:
            tuner.clear_cache()
            ctx = autotune(False, cache=value)
            extra = {}
        with ctx, intercept_choose_one("record", ops=[GEMM1_OP, GEMM2_OP]) as rec:
            self._run_op(prepared, **extra)
        tuner.clear_cache()
        picks = {c.custom_op: c.answer[1] for c in rec.calls}  # the last answer per op
        missing = [op for op in (GEMM1_OP, GEMM2_OP) if op not in picks]
        if missing:
            raise RuntimeError(f"FlashInfer's AutoTuner was not asked for {missing} in a plain call")
        return (_tactic_int(picks[GEMM1_OP]), _tactic_int(picks[GEMM2_OP])), info

    def tactics(self, case: MoECase, prepared: Optional[FlashInferPrepared] = None) -> list[Tactic]:
        if prepared is None:
            raise ValueError("prepared: cutlass_autotune asks FlashInfer's tuner on the case's own inputs; "
                             "call prepare() first")
        out = []
        for setting in self.settings:
            (g1, g2), info = self.pick(case, prepared, setting)
            label = f"fi-autotune[{setting if setting.startswith('max') else 'cache'}]"
            out.append(Tactic(id=(g1, g2), label=label, params={**info, "gemm1": g1, "gemm2": g2}))
        return out

    def combined_tactic(self, timings: list) -> Optional[Tactic]:
        return None  # the picks are FlashInfer's, not ours to combine

    def default_tactic(self, case: MoECase) -> Optional[Tactic]:
        return None
