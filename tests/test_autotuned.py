"""cutlass_autotune: FlashInfer's own AutoTuner pick as a row (issue #22).  On CPU over the CUTLASS stub:
the pick under ``autotune(False, cache=FILE)`` is what the tuner-config file says for each bucket, and is
what the stub kernel then runs; settings are checked before anything runs."""

import pandas as pd
import pytest

pytest.importorskip("flashinfer")

from fp4moe_diag import MoECase  # noqa: E402
from fp4moe_diag.backends import get_backend  # noqa: E402
from fp4moe_diag.backends.flashinfer.api import get_api  # noqa: E402
from fp4moe_diag.backends.flashinfer.autotuned import CutlassAutotuneBackend, parse_settings  # noqa: E402
from fp4moe_diag.backends.flashinfer.stubs import stub_cutlass_module  # noqa: E402
from fp4moe_diag.problem.inputs import build_inputs  # noqa: E402

API = get_api()
BASE = MoECase(num_tokens=4, hidden_size=256, intermediate_size=256, num_experts=8, top_k=2,
               local_num_experts=8, model="small")


def test_settings_are_checked():
    assert parse_settings("max=8192, max=1") == ("max=8192", "max=1")
    for bad in ("max=0", "max=x", "min=3", "cache=", ""):
        with pytest.raises(ValueError, match="FP4MOE_TUNE_SETTINGS"):
            parse_settings(bad)
    with pytest.raises(ValueError, match="does not exist"):
        parse_settings("cache=/no/such/file.json")
    assert get_backend("cutlass_autotune").settings == ("max=8192", "max=1")  # vLLM's default, the seed's


def test_env_settings_reach_the_backend(monkeypatch):
    monkeypatch.setenv("FP4MOE_TUNE_SETTINGS", "max=64")
    assert CutlassAutotuneBackend().settings == ("max=64",)
    monkeypatch.setenv("FP4MOE_TUNE_SETTINGS", "max=-1")
    with pytest.raises(ValueError, match="max=-1"):
        CutlassAutotuneBackend()


@pytest.mark.skipif(API.name == "v05", reason="tuner-config files are FlashInfer 0.7.x")
def test_pick_from_an_exported_config_is_the_files_tactic_and_runs(tmp_path):
    from flashinfer.autotuner import AutoTuner

    from fp4moe_diag.backends.flashinfer.tuner_config import export_tuner_config

    rows = []
    for t, best in ((4, (3, 8)), (64, (5, 11))):
        rows.append({**BASE.with_tokens(t).to_record(), "backend": "cutlass", "tactic": str(best),
                     "tactic_label": f"g1:{best[0]}+g2:{best[1]}", "is_best": True, "status": "ok",
                     "flashinfer_version": API.version, "gpu_name": "cpu"})
    path = tmp_path / "tuner.json"
    AutoTuner.get().clear_cache()
    try:
        with stub_cutlass_module() as stub:
            export_tuner_config(pd.DataFrame(rows), path, call_kwargs={"enable_pdl": False})
            b = CutlassAutotuneBackend(scale_layout="raw", settings=(f"cache={path}",))
            picked = {}
            for t in (4, 64):
                case = BASE.with_tokens(t)
                p = b.prepare(build_inputs(case))
                p.kwargs["enable_pdl"] = False
                (tac,) = b.tactics(case, prepared=p)
                picked[t] = tac.id
                assert tac.label == "fi-autotune[cache]" and tac.params["setting"] == f"cache={path}"
                b.run(p, tac)  # forced exactly like a cutlass row
            assert picked == {4: (3, 8), 64: (5, 11)}
            assert stub.tactics_run[-1] == (5, 11)
            # the tuner's in-memory state is left empty for the rows that follow
            assert not AutoTuner.get().profiling_cache
    finally:
        AutoTuner.get().clear_cache()


def test_tactics_need_the_prepared_inputs():
    with pytest.raises(ValueError, match="prepared"):
        CutlassAutotuneBackend().tactics(BASE)
