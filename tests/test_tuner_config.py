"""Tuner-config export: a sweep's best tactics as FlashInfer 0.7's own save_configs JSON, loaded back
through FlashInfer's API (0.5.x has no such format: the export refuses, which is checked too)."""

import json

import pandas as pd
import pytest

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.backends.flashinfer.api import get_api  # noqa: E402
from fp4moe_diag.backends.flashinfer.cutlass import _cutlass_fn  # noqa: E402
from fp4moe_diag.backends.flashinfer.stubs import stub_cutlass_module  # noqa: E402
from fp4moe_diag.backends.flashinfer.tuner_config import export_tuner_config  # noqa: E402
from fp4moe_diag.backends.flashinfer.cutlass import CutlassBackend  # noqa: E402
from fp4moe_diag.problem.inputs import build_inputs  # noqa: E402

API = get_api()
BASE = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2,
               local_num_experts=8, model="small")


def sweep_rows(version):
    rows = []
    for t, best, other in ((4, (3, 8), (1, 7)), (64, (5, 11), (0, 6))):
        rec = BASE.with_tokens(t).to_record()
        for tac, is_best in ((best, True), (other, False)):
            rows.append({**rec, "backend": "cutlass", "tactic": str(tac), "tactic_label": f"g1:{tac[0]}+g2:{tac[1]}",
                         "is_best": is_best, "status": "ok", "flashinfer_version": version, "gpu_name": "cpu"})
    rows.append({**BASE.to_record(), "backend": "triton", "tactic": "m16", "is_best": True, "status": "ok",
                 "flashinfer_version": version})  # not a FlashInfer backend: not exported
    return pd.DataFrame(rows)


def test_export_writes_flashinfers_format_and_load_configs_returns_the_tactics(tmp_path):
    path = tmp_path / "tuner.json"
    if API.name == "v05":
        with pytest.raises(ValueError, match="no AutoTuner.save_configs format"):
            export_tuner_config(sweep_rows(API.version), path)
        return
    from flashinfer import autotune
    from flashinfer.autotuner import AutoTuner

    AutoTuner.get().clear_cache()
    try:
        with stub_cutlass_module() as stub:
            cfg = export_tuner_config(sweep_rows(API.version), path, call_kwargs={"enable_pdl": False})
            data = json.loads(path.read_text())
            assert data["_metadata"]["flashinfer_version"] == API.version and "_generation" in data
            entries = {k: v for k, v in data.items() if not k.startswith("_")}
            assert len(entries) == 4  # gemm1 + gemm2 x two shape buckets
            assert sorted(v[1] for v in entries.values()) == [3, 5, 8, 11]
            assert all(v[0] == "MoERunner" for v in entries.values()) and cfg["_metadata"] == data["_metadata"]
            # a serving process: FlashInfer's own loader, then plain untuned calls
            assert AutoTuner.get().load_configs(str(path)) is True
            b = CutlassBackend(scale_layout="raw")
            for t in (4, 64):
                p = b.prepare(build_inputs(BASE.with_tokens(t)))
                p.kwargs["enable_pdl"] = False
                with autotune(False):
                    _cutlass_fn()(**p.kwargs)
            assert stub.tactics_run == [(3, 8), (5, 11)]
            AutoTuner.get().clear_cache()
            with autotune(False, cache=str(path)):  # the other public entry
                _cutlass_fn()(**p.kwargs)
            assert stub.tactics_run[-1] == (5, 11)
    finally:
        AutoTuner.get().clear_cache()


def test_export_refuses_rows_of_another_flashinfer(tmp_path):
    other, why = ("0.7.4", "no AutoTuner.save_configs format") if API.name == "v05" else \
        ("0.5.2", "rows measured with flashinfer \\['0.5.2'\\]")
    with pytest.raises(ValueError, match=why):
        export_tuner_config(sweep_rows(other), tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
