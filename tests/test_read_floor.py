"""The read floor (``profiling.read_floor``: the streaming-read kernel under the interpreter, its checks, the CLI's
refusals) and what ``goals`` makes of it (``analysis.read_floors``: the floor per size, goals 2-3's note, the plan's
sizes)."""

from __future__ import annotations

import pandas as pd
import pytest

from fp4moe_diag.analysis.goals import goal_report
from fp4moe_diag.analysis.goals_markdown import goals_markdown
from fp4moe_diag.analysis.read_floors import floor_note, floor_table, read_floors, unfloored
from fp4moe_diag.profiling.read_floor import CONFIGS, ReadConfig, chain_bytes, floors, main, parse_bytes
from frames import GPU
from interpreter import interpreted_results
from test_goals import frame, goal


def test_sizes_parse_in_decimal_and_binary_units_and_bad_ones_name_the_argument():
    assert parse_bytes("15077376,15.1MB, 2GiB,4KiB,1GB") == [15077376, 15_100_000, 2**31, 4096, 10**9]
    for bad in ("", "15 TB", "-3", "MB", "0", "1.5.2"):
        with pytest.raises(ValueError, match=r"^--bytes: expected sizes like 15.1MB"):
            parse_bytes(bad)
    with pytest.raises(ValueError, match=r"^--ceiling-bytes: "):
        parse_bytes("x", "--ceiling-bytes")


def test_configs_are_whole_steps_of_whole_chunks():
    assert len(CONFIGS) == 24 and len({c.label for c in CONFIGS}) == 24
    assert min(c.chunk_bytes for c in CONFIGS) == 8 * 1024 and all(c.chunk_bytes % c.block_bytes == 0 for c in CONFIGS)
    assert ReadConfig(128 * 1024, 16 * 1024, 8, 3).label == "c128k-b16k-w8s3"
    assert ReadConfig(512, 128, 1, 1).label == "c512-b128-w1s1"
    with pytest.raises(ValueError, match=r"^block_bytes: expected a divisor of chunk_bytes=512"):
        ReadConfig(512, 1024, 1, 1)
    with pytest.raises(ValueError, match=r"^chunk_bytes: expected a power of two >= 128"):
        ReadConfig(3000, 128, 1, 1)


def test_the_cli_refuses_bad_input_in_one_line_before_any_read(tmp_path, capsys):
    out = tmp_path / "f.csv"
    for argv, msg in ((["--bytes", "15 TB"], "--bytes: expected sizes"),
                      (["--bytes", "1MB", "--repeats", "0"], "--repeats / --warmup"),
                      (["--bytes", "1MB", "--device", "cpu"], "device: read floors are timed on a CUDA device")):
        with pytest.raises(SystemExit) as e:
            main([*argv, "--out", str(out)])
        assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not out.exists()


SCRIPT = r"""
import json, torch
from fp4moe_diag.profiling.read_floor import ReadConfig, checked_launch, floor_rows
from fp4moe_diag.backends.triton.loading import kernels_interpreted
cfgs = (ReadConfig(512, 128, 1, 1), ReadConfig(1024, 256, 2, 3))
rows = floor_rows(5000, "cpu", configs=cfgs, repeats=2, warmup=0)
out = {"rows": [{k: r[k] for k in ("nbytes", "kernel", "read_bytes", "time_method")} for r in rows]}
chained = floor_rows(3000, "cpu", configs=cfgs[:1], repeats=2, warmup=0, chain=True)
out["chained"] = [[r["kernel"], r["read_bytes"]] for r in chained]
words = torch.arange(1024, dtype=torch.int32)
try:
    checked_launch(words[:1000], cfgs[0])
except ValueError as e:
    out["partial"] = str(e)
import fp4moe_diag.profiling._stream_read as S
sums = torch.zeros(2, dtype=torch.int32)
S.stream_read_launch(words, sums, 512, 128, 1, 1)()
out["sums"] = sums.tolist()
"""


@pytest.fixture(scope="module")
def interp() -> dict:
    return interpreted_results(SCRIPT + 'print("RESULT " + json.dumps(out))\n')


def test_the_kernel_reads_every_word_once_and_each_config_reads_whole_chunks(interp):
    assert interp["sums"] == [sum(range(512)), sum(range(512, 1024))]  # one int32 sum per 512-word chunk
    assert interp["rows"] == [  # 5000 bytes: 10 chunks of 512 bytes, 5 of 1024; torch's sum reads the 5000
        {"nbytes": 5000, "kernel": "c512-b128-w1s1", "read_bytes": 5120, "time_method": "wall-clock"},
        {"nbytes": 5000, "kernel": "c1k-b256-w2s3", "read_bytes": 5120, "time_method": "wall-clock"},
        {"nbytes": 5000, "kernel": "torch-sum", "read_bytes": 5000, "time_method": "wall-clock"}]
    assert interp["partial"] == "words: expected whole chunks of 128 words, got 1000"


def test_chain_reads_split_the_bytes_two_to_one_in_whole_chunks(interp):
    # 3000 bytes: gemm1's 2/3 (2000) -> 4 chunks of 512, the rest (952) -> 2; each read checked against torch's sum
    assert interp["chained"] == [["c512-b128-w1s1", 3072], ["chain-c512-b128-w1s1", 3072], ["torch-sum", 3000]]
    assert chain_bytes(60_309_504, 32 * 1024) == (40_206_336, 20_119_552)  # 20b EP1 T=1, 32 KB programs
    assert chain_bytes(3 * 2**20, 2**20) == (2 * 2**20, 2**20)  # exact thirds: nothing added


def _floor_rows(gpu: str = GPU) -> pd.DataFrame:
    return pd.DataFrame([dict(gpu_name=gpu, nbytes=40_000_000, kernel=k, read_bytes=40_000_000 + pad,
                              time_median_us=us, time_spread=0.01, GBps=(40_000_000 + pad) / us / 1e3)
                         for k, pad, us in (("c32k-b8k-w4s1", 4096, 14.0), ("c128k-b16k-w8s1", 0, 12.5),
                                            ("torch-sum", 0, 16.0))])


def test_the_floor_of_a_size_is_its_fastest_read_and_goals_2_3_say_it(tmp_path):
    rows = _floor_rows()
    assert floors(rows)[["nbytes", "kernel", "time_median_us"]].values.tolist() == [[40_000_000, "c128k-b16k-w8s1",
                                                                                      12.5]]
    (tmp_path / "f").mkdir()
    rows.to_csv(tmp_path / "f" / "read-floor-goals.csv", index=False)
    read = read_floors([tmp_path / "f", tmp_path])
    assert len(read) == 3 and set(read["source"]) == {"f/read-floor-goals.csv"}
    table = floor_table(read)
    # ours 15 us for 40 MB; the bound 40 MB / 4 TB/s + 3 us = 13 us (test_goals' frame)
    assert floor_note(table, GPU, 40_000_000, 15.0, 13.0) == (
        "one kernel reads these 40.0 MB in 12.5 us at best (3.20 TB/s, c128k-b16k-w8s1; f/read-floor-goals.csv): "
        "ours 1.20x of that, the bound 1.04x")
    assert floor_note(table, "NVIDIA H100 80GB HBM3", 40_000_000, 15.0, 13.0) == ""  # another GPU's floor: none
    assert floor_note(table, GPU, 40_000_001, 15.0, 13.0) == ""  # exactly the call's bytes, nothing near
    rep = goal_report(frame(), None, floors=read)
    assert "one kernel reads these 40.0 MB in 12.5 us" in goal(rep.table, 3, 1)["reason"]
    assert "one kernel reads" not in goal(rep.table, 2, 64)["reason"]  # 300 MB: no floor read
    assert goal(rep.table, 3, 1)["weight_bytes"] == 40_000_000
    assert goal(rep.table, 3, 1)["floor_us"] == 12.5 and pd.isna(goal(rep.table, 2, 64)["floor_us"])
    head = [ln for ln in goals_markdown(rep).splitlines() if ln.startswith("### Goal 3")]
    assert head == ["### Goal 3: T <= 4 within 1.3x of weight bytes / read ceiling + one launch -- met at 1 of 1 shapes"]
    # a floor above what the goal allows (1.3 x 13 us = 16.9 us): the header says no single-kernel read meets it
    slow = goal_report(frame(), None, floors=read.assign(time_median_us=read["time_median_us"] + 7.5))
    assert goal(slow.table, 3, 1)["floor_us"] == 20.0
    assert [ln for ln in goals_markdown(slow).splitlines() if ln.startswith("### Goal 3")][0].endswith(
        "met at 1 of 1 shapes; at 1 one kernel that only reads the weights takes longer than the goal allows (read floor)")



def test_the_chain_floor_is_kept_apart_from_the_one_kernel_floor_and_goals_2_3_say_both():
    rows = pd.concat([_floor_rows(), pd.DataFrame([dict(gpu_name=GPU, nbytes=40_000_000, kernel=k, read_bytes=40_000_000,
                                                        time_median_us=us, time_spread=0.01, GBps=40_000_000 / us / 1e3)
                                                   for k, us in (("chain-c32k-b8k-w4s1", 17.5),
                                                                 ("chain-c128k-b16k-w8s1", 19.0))])])
    table = floor_table(rows.assign(source="f/read-floor-goals.csv"))
    assert table[["kernel", "time_median_us", "chain_us", "chain_kernel"]].values.tolist() == [
        ["c128k-b16k-w8s1", 12.5, 17.5, "chain-c32k-b8k-w4s1"]]  # a chain is never the one-kernel floor
    assert floor_note(table, GPU, 40_000_000, 21.0, 13.0).endswith(
        "ours 1.68x of that, the bound 1.04x; two dependent kernels (gemm1's 2/3, then gemm2's 1/3) read them in "
        "17.5 us at best: ours 1.20x of that, the bound 0.74x")
    assert pd.isna(floor_table(_floor_rows())["chain_us"].iloc[0])  # no --chain rows: no chain floor
    rep = goal_report(frame(), None, floors=rows.assign(source="f"))
    assert goal(rep.table, 3, 1)["chain_us"] == 17.5 and goal(rep.table, 3, 1)["floor_us"] == 12.5
    # 1.3 x 13 us = 16.9 us allowed: the one-kernel floor fits under it, the two-kernel one does not
    assert [ln for ln in goals_markdown(rep).splitlines() if ln.startswith("### Goal 3")][0].endswith(
        "met at 1 of 1 shapes; at 1 two dependent kernels that only read them (gemm1's share, then gemm2's) take "
        "longer than the goal allows")


def test_the_plan_asks_for_the_floors_of_goal_2_3_shapes_not_met_that_have_none():
    def plan(floors):  # goal 2 at T=64 (300 MB) not met, goal 3 at T=1 (40 MB) met
        return unfloored(goal_report(frame(), None, floors=floors).table)

    assert plan(None) == [300_000_000]
    assert plan(_floor_rows().assign(nbytes=300_000_000, source="f")) == []
    assert plan(_floor_rows("NVIDIA H100 80GB HBM3").assign(nbytes=300_000_000, source="f")) == [300_000_000]
