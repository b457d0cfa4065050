"""The one sweep pipeline (fp4moe_diag.runs): specs, scaling, the CLI and the notebooks agreeing."""

from __future__ import annotations

import pytest

from fp4moe_diag.cli import main
from fp4moe_diag.results import load_runs
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.runs import SweepSpec, run_sweep, scaled_case


def test_scaled_case_rounds_to_a_multiple_of_128():
    (c,) = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(4,)).cases()
    s = scaled_case(c, 5)  # 2880 // 5 = 576 -> 512; the block size and the CUTLASS alignment both divide it
    assert (s.hidden_size, s.intermediate_size) == (512, 512) and s.num_tokens == 4
    assert scaled_case(c, 1) is c and scaled_case(c, 1000).hidden_size == 128
    with pytest.raises(ValueError, match="hidden_scale"):
        scaled_case(c, 0)


@pytest.mark.parametrize("bad, match", [
    (dict(models=()), "models"), (dict(models="gpt-oss-20b"), "models"), (dict(tokens=(0,)), "tokens"),
    (dict(hidden_scale=0), "hidden_scale"), (dict(ep_sizes=(True,)), "ep_sizes"), (dict(options={}), "options"),
])
def test_bad_specs_name_the_field(bad, match):
    kw = dict(models=("gpt-oss-20b",))
    kw.update(bad)
    with pytest.raises(ValueError, match=f"^{match}:"):
        SweepSpec(**kw)


@pytest.mark.parametrize("bad, match", [
    (dict(repeats=0), "repeats"), (dict(warmup=-1), "warmup"), (dict(screen=0), "screen"),
    (dict(screen_top=0), "screen_top"), (dict(max_seconds_per_tactic=-1.0), "max_seconds_per_tactic"),
    (dict(max_seconds_per_tactic=float("nan")), "max_seconds_per_tactic"), (dict(cuda_graph=1), "cuda_graph"),
    (dict(tactic_filters="reference=x"), "tactic_filters"),
])
def test_bad_options_name_the_field(bad, match):
    with pytest.raises(ValueError, match=f"^{match}:"):
        MeasureOptions(**bad)


def test_unknown_model_or_entry_is_refused_before_any_work():
    with pytest.raises(ValueError, match="model"):
        SweepSpec(models=("no-such-model",)).cases()
    with pytest.raises(ValueError, match="models"):
        SweepSpec(models=("gpt-oss-20b:x",)).cases()


def test_hidden_scale_5_runs_the_same_cases_in_the_cli_and_the_notebooks(tmp_path, capsys):
    """``sweep --hidden-scale 5`` once raised 'expected a multiple of ... 32, got 614' while the report rounded."""
    out = tmp_path / "cli"
    assert main(["sweep", "--models", "gpt-oss-20b", "--ep", "2", "--tokens", "1,4", "--hidden-scale", "5",
                 "--repeats", "1", "--warmup", "0", "--out", str(out), "--no-progress"]) == 0
    cli = load_runs(tmp_path, pattern="cli/results.parquet")
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1, 4), hidden_scale=5,
                     options=MeasureOptions(repeats=1, warmup=0))
    nb, where = run_sweep(spec, tmp_path / "nb", progress_bar=False, log=lambda _m: None)
    assert where == tmp_path / "nb"
    cols = ["model", "num_tokens", "hidden_size", "intermediate_size", "ep_size", "local_num_experts", "backend"]
    assert cli[cols].reset_index(drop=True).equals(nb[cols].reset_index(drop=True))
    assert set(cli["hidden_size"]) == {512} and set(cli["status"]) == {"ok"}


def test_cli_bad_input_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["sweep", "--models", "no-such-model", "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fp4moe-diag sweep: error: argument --models: unknown model 'no-such-model'")
    assert not any("Traceback" in ln for ln in err)


def test_an_existing_run_is_refused_then_resumed_without_recomputing(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["sweep", "--models", "gpt-oss-20b", "--ep", "2", "--tokens", "1", "--hidden-scale", "24", "--repeats", "1",
            "--warmup", "0", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    first = load_runs(tmp_path, pattern="run/results.parquet")
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2 and "--resume" in capsys.readouterr().err
    assert main(args + ["--resume", "--tokens", "1,4"]) == 0  # T=1 is kept, T=4 is added
    again = load_runs(tmp_path, pattern="run/results.parquet")
    assert sorted(again["num_tokens"].tolist()) == [1, 4]
    t1 = again[again["num_tokens"] == 1]
    assert t1["timestamp"].tolist() == first["timestamp"].tolist()  # not recomputed
