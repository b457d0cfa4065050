"""The process nsight-python profiles: ``python -m fp4moe_diag.profiling.driver SPEC.json``.

nsight-python runs ncu over a script (it may re-run this module under ncu), not over a notebook kernel,
so :func:`fp4moe_diag.profiling.session.profile_kernels` writes a JSON spec and runs this module in a
subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # nsight-python re-runs this file as a script (``python .../driver.py``) under ncu
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "fp4moe_diag.profiling"  # noqa: A001 -- so that the relative imports resolve

from .ncu import kernels_from_calls, kernels_table, metric_names, ncu_csv_export, raw_from_ncu_csv


def main(spec_path: str) -> None:  # pragma: no cover - needs a GPU, ncu and nsight-python
    import nsight

    from ..problem.case import MoECase
    from .call_setup import prepare_call

    spec = json.loads(Path(spec_path).read_text())
    metrics = list(metric_names(bool(spec.get("stalls"))))
    case = MoECase.from_record(spec["case"])
    call = prepare_call(spec["backend"], case, spec["tactics"], spec["device"])

    @nsight.analyze.kernel(configs=[(case.num_tokens,)], runs=int(spec["runs"]), metrics=metrics,
                           combine_kernel_metrics=lambda a, b: a + b, output_prefix=spec["prefix"],
                           output_csv=True)
    def fused_moe(num_tokens: int) -> None:
        for role, t in call.tactics.items():
            launch = call.bind(t)  # outside the range: only the call's own kernels are profiled
            with nsight.annotate(f"{role}: {t.label}"):
                launch()
        call.synchronize()

    res = fused_moe()
    if res is None:  # nsight-python < 1.0 re-ran this script under ncu; the child stops here
        return
    calls = res.to_dataframe()
    calls.to_csv(spec["calls_csv"], index=False)
    table = kernels_from_calls(calls)
    reps = sorted(Path(spec["prefix"]).parent.glob(Path(spec["prefix"]).name + "ncu-output-*.ncu-rep"))
    if reps:
        try:
            per_kernel = kernels_table(raw_from_ncu_csv(ncu_csv_export(reps[-1], metrics), calls, metrics))
            if len(per_kernel):
                table = per_kernel
        except Exception as e:  # noqa: BLE001 -- the per-call table above still stands
            print(f"per-kernel export failed, keeping nsight-python's per-call sums: {e}", file=sys.stderr)
    table.assign(**_recorded_versions()).to_csv(spec["kernels_csv"], index=False)


def _recorded_versions() -> dict:  # pragma: no cover - runs in the profiled child
    """The Triton release that built the profiled kernels: ``goals`` matches a profile only to timings of it."""
    try:
        import triton
    except ImportError:
        return {}
    return {"triton_version": str(triton.__version__)}


if __name__ == "__main__":  # pragma: no cover - needs a GPU, ncu and nsight-python
    if len(sys.argv) != 2:
        print("usage: python -m fp4moe_diag.profiling.driver SPEC.json", file=sys.stderr)
        raise SystemExit(2)
    main(sys.argv[1])
