"""torch.distributed on CPU (gloo) under torchrun: sharded sweeps (merge, a killed rank) and the EP layer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fp4moe_diag.distributed.ep_layer import token_slice
from fp4moe_diag.distributed.shard import INCOMPLETE, merge_ranks, rank_dir
from fp4moe_diag.run_folder import load_runs, part_files

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ["-m", "fp4moe_diag", "sweep", "--models", "gpt-oss-20b", "--ep", "2", "--hidden-scale", "24",
         "--repeats", "1", "--warmup", "0", "--no-progress"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(n: int, args: list[str], **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), *args]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def test_token_slices_cover_every_token_once():
    for t in (1, 7, 64):
        for w in (1, 2, 3):
            got = [i for r in range(w) for i in range(*token_slice(t, r, w).indices(t))]
            assert got == list(range(t))


def test_sharded_sweep_merges_into_the_single_process_rows(tmp_path):
    one = tmp_path / "one"
    cp = subprocess.run([sys.executable, *SWEEP, "--tokens", "1,4,16", "--out", str(one)], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    p = torchrun(2, [*SWEEP, "--tokens", "1,4,16", "--out", str(tmp_path / "sharded")])
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out[-3000:]
    single = load_runs(tmp_path, pattern="one/results.parquet")
    merged = load_runs(tmp_path, pattern="sharded/results.parquet")
    assert len(merged) == len(single) == 3 and not (tmp_path / "sharded" / INCOMPLETE).exists()
    assert sorted(merged["num_tokens"]) == [1, 4, 16] and set(merged["world_size"]) == {2}
    assert sorted(merged["rank"].tolist()) == [0, 0, 1]  # round-robin: items 0 and 2 on rank 0, item 1 on rank 1
    a = single.sort_values("num_tokens")["rel_l2"].to_numpy()
    b = merged.sort_values("num_tokens")["rel_l2"].to_numpy()
    assert (a == b).all()  # the same reference rows, whoever computed them


def test_a_killed_rank_leaves_the_others_rows_and_the_run_marked_incomplete(tmp_path):
    out = tmp_path / "sharded"
    tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # rank 1 gets five cases: the kill lands long before its last
    p = torchrun(2, [*SWEEP, "--tokens", ",".join(map(str, tokens)), "--out", str(out)], start_new_session=True)
    lock = rank_dir(out, 1) / ".lock"
    deadline = time.monotonic() + 240
    # a finished part, never the ``.tmp-*`` file of one being written (killing then would leave none)
    while time.monotonic() < deadline and not part_files(rank_dir(out, 1)):
        time.sleep(0.02)
    assert lock.exists(), "rank 1 never started"
    pid = json.loads(lock.read_text())["pid"]
    os.kill(pid, signal.SIGSTOP)  # frozen at once, so what it finished is what is on disk now
    finished = len(part_files(rank_dir(out, 1)))
    os.kill(pid, signal.SIGKILL)
    p.communicate(timeout=300)
    assert p.returncode != 0  # torchrun reports the failed rank
    assert 1 <= finished < 5
    df, missing = merge_ranks(out, 2)
    assert 1 in missing and json.loads((out / INCOMPLETE).read_text())["missing_ranks"] == missing
    assert (df["rank"] == 1).sum() == finished  # the killed rank's finished cases survive (one row each)
    # torchrun's agent stops rank 0 too once rank 1 died: its finished cases are kept, one row each
    assert (df["rank"] == 0).sum() == len(part_files(rank_dir(out, 0))) and len(df) < len(tokens)


@pytest.mark.parametrize("tokens", [8, 3])
def test_ep_layer_matches_the_single_process_reference(tmp_path, tokens):
    res = tmp_path / "ep.json"
    p = torchrun(2, ["-m", "fp4moe_diag.distributed.ep_layer", "--tokens", str(tokens), "--hidden-scale", "12",
                     "--json", str(res)])
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out[-3000:]
    r = json.loads(res.read_text())
    ranks = r["ranks"]
    assert [x["rank"] for x in ranks] == [0, 1] and all(x["status"] == "ok" and x["correct"] for x in ranks)
    assert sum(x["pairs_received"] for x in ranks) == tokens * 4  # every (token, k) pair reached its expert's rank
    assert sum(x["tokens_owned"] for x in ranks) == tokens
    assert all(x["rel_l2"] < 0.01 for x in ranks)
    assert r["layer_us_slowest_rank"] == max(x["layer_us"] for x in ranks)
