"""The one sweep pipeline (fp4moe_diag.runs): specs, scaling, the CLI and the notebooks agreeing."""

from __future__ import annotations

import pytest

from fp4moe_diag.cli import main
from fp4moe_diag.run_folder import load_runs
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


def test_huge_tokens_are_refused_naming_tokens_and_leave_nothing_at_out(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["sweep", "--models", "gpt-oss-20b", "--ep", "2", "--tokens", "1000000000", "--device", "cpu",
            "--out", str(out), "--no-progress"]
    for _ in range(2):  # the same command again: the same refusal, not one about --out
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            "fp4moe-diag sweep: error: argument --tokens: 1000000000 tokens of gpt-oss-20b"), err
        assert "GiB" in err[-1] and not any("Traceback" in ln for ln in err)
        assert not out.exists()
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1, 1_000_000_000), device="cpu")
    with pytest.raises(ValueError, match=r"^tokens: 1000000000 tokens of gpt-oss-20b/ep2r0/T1000000000"):
        run_sweep(spec, out, progress_bar=False, log=lambda _m: None)
    assert not out.exists()


def test_a_sweep_that_fails_before_its_first_part_removes_the_folder_it_made(tmp_path, monkeypatch):
    import fp4moe_diag.tune as T

    def refuse(case, device):
        raise ValueError("hidden_states: refused for the test")

    monkeypatch.setattr(T, "build_inputs", refuse)
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1,), hidden_scale=24, device="cpu",
                     options=MeasureOptions(warmup=0, repeats=1))
    with pytest.raises(ValueError, match="refused for the test"):
        run_sweep(spec, tmp_path / "new", progress_bar=False, log=lambda _m: None)
    assert not (tmp_path / "new").exists()
    (tmp_path / "mine").mkdir()  # a folder the sweep did not make stays (empty run files aside)
    with pytest.raises(ValueError, match="refused for the test"):
        run_sweep(spec, tmp_path / "mine", progress_bar=False, log=lambda _m: None)
    assert (tmp_path / "mine").is_dir()


def test_a_backend_without_tactics_is_one_row_saying_so(tmp_path, monkeypatch):
    from fp4moe_diag import backends

    monkeypatch.setitem(backends.REGISTRY, "no-tactics", f"{__name__}:NoTactics")
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1, 4), hidden_scale=24, device="cpu",
                     backends=("no-tactics", "reference"), options=MeasureOptions(warmup=0, repeats=1))
    df, _ = run_sweep(spec, tmp_path / "run", progress_bar=False, log=lambda _m: None)
    rows = df[df["backend"] == "no-tactics"]
    assert sorted(rows["num_tokens"]) == [1, 4]  # one row per case, none vanished
    assert set(rows["status"]) == {"unsupported"} and set(rows["stage"]) == {"tactics"}
    assert rows["error_message"].str.contains("no-tactics has no tactic for this case").all()
    assert (df[df["backend"] == "reference"]["status"] == "ok").sum() == 2


from fp4moe_diag.backends.base import Backend  # noqa: E402


class NoTactics(Backend):
    name = "no-tactics"
    device_types = ("cpu",)

    def tactics(self, case, prepared=None):
        return []

    def run(self, prepared, tactic, output=None):  # pragma: no cover - never reached
        raise AssertionError("no tactic, no run")
