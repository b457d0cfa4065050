"""profiling.energy: energy per call of two tactics in alternating blocks (NVML's counter); its pure parts and its
refusals on a CPU, with fake counters and clocks (no GPU, no NVML)."""

from __future__ import annotations

import pytest

from fp4moe_diag.profiling import energy


def test_blocks_alternate_and_each_reading_is_the_counters_around_its_block():
    state = {"mj": 0.0, "s": 0.0, "mhz": 1980.0}
    ran = []
    cost = {"a": (300.0, 0.10), "b": (280.0, 0.098)}  # mJ and seconds a block

    def block(name):
        def run():
            ran.append(name)
            state["mj"] += cost[name][0]
            state["s"] += cost[name][1]
            state["mhz"] -= 15.0  # the clock falls as the load goes on
        return run

    out = energy.block_rounds({"a": block("a"), "b": block("b")}, 3, lambda: state["mj"], lambda: state["s"],
                              lambda: state["mhz"])
    assert ran == ["a", "b", "b", "a", "a", "b"]  # the order rotated each round
    assert [r[0] for r in out["a"]] == [300.0] * 3 and [round(r[1], 6) for r in out["b"]] == [0.098] * 3
    assert [r[2] for r in out["a"]] == [1965.0, 1920.0, 1905.0]
    s = energy.side_stats(out["a"], calls=200)
    assert s == pytest.approx({"mj_per_call": 1.5, "watts": 3.0, "us_per_call": 500.0, "sm_clock_mhz": 1920.0})
    with pytest.raises(ValueError, match="rounds"):
        energy.block_rounds({"a": block("a")}, 0, lambda: 0.0, lambda: 0.0, lambda: 0.0)
    with pytest.raises(ValueError, match="calls"):
        energy.side_stats(out["a"], calls=0)


def test_energy_refuses_bad_input_before_any_gpu_work(tmp_path, capsys):
    out = tmp_path / "energy.csv"

    def refused(*argv: str) -> str:
        with pytest.raises(SystemExit) as e:
            energy.main(["--tokens", "64", "--out", str(out), *argv])
        assert e.value.code == 2
        return capsys.readouterr().err

    a = ("--a", "triton=m16n128k128w4s3-ps")
    assert "argument --b: the same call as --a" in refused(*a, "--b", "triton=m16n128k128w4s3-ps", "--device", "cpu")
    assert "argument --calls" in refused(*a, "--b", "triton_kernels=tk-m16k128w4", "--calls", "0")
    assert "energy is read on a CUDA GPU" in refused(*a, "--b", "triton_kernels=tk-m16k128w4", "--device", "cpu")
    assert not out.exists()


def test_a_device_without_nvmls_energy_counter_is_refused_before_anything_is_prepared(monkeypatch):
    from fp4moe_diag import MoECase
    from fp4moe_diag.profiling import call_setup

    prepared = []
    monkeypatch.setattr(call_setup, "prepare_call", lambda *a, **k: prepared.append(a))
    case = MoECase(num_tokens=2, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2, model="tiny")
    with pytest.raises(ValueError, match="^device: NVML's energy counter is not readable here"):
        energy.energy_case(case, ("reference", "torch fp32"), ("reference", "torch fp32"), "cpu", 10, 2)
    assert prepared == []
