"""The read floor: the shortest time one kernel takes to read N contiguous bytes from DRAM, timed as the sweep times a
call (a CUDA-graph replay between events, the L2 flushed before each, warm-up, median of ``--repeats``).

``python -m fp4moe_diag.profiling.read_floor --bytes 15.1MB,60.3MB --out read-floor.csv``

Issue #25's goal 3 bounds a T <= 4 call by its weight bytes over the read ceiling plus one launch (3 us); the read
ceiling is a reduction over 2 GiB (:func:`..measure.ceilings.measure_ceilings`).  A decode call reads 15-480 MB, where
one kernel's ramp (the first loads wait out the DRAM latency, the last wave drains) is not amortised.  The floor at the
call's size says what the memory gives one kernel there: a shape's distance to its bound then splits into what no
single kernel reading those bytes gets (floor over bound) and what is ours (ours over floor).

At each size every :data:`CONFIGS` of a streaming-read kernel (:mod:`._stream_read`: programs of ``chunk`` contiguous
bytes, ``block`` bytes a step, all of a step's loads in flight) and torch's float32 ``sum`` (the ceiling's own method)
are timed; a config reads its size rounded up to whole chunks (``read_bytes``), so the fastest row is a floor for
reading at least N bytes.  Before its timing each Triton config's sums are checked against torch's (every word read
once).  ``--ceiling-bytes`` (default 2 GiB) adds one large size: the same kernels there should reach the read
ceiling, which says that the small sizes' floors are the memory's ramp, not the kernel.

A MoE call is two dependent GEMMs: gemm2 reads gemm1's whole output row of an expert, so its weights cannot all be in
flight before gemm1's last ones.  ``--chain`` (what ``evidence.sh PARTS=floor`` passes) also times each config as two
launches back to back (``chain-<config>``), the first reading :data:`CHAIN_SPLIT`'s share of the bytes (gemm1's
``[2I, H]`` against gemm2's ``[H, I]``: 2 to 1 where I = H, as in gpt-oss), the second the rest: the floor of a call
that reads its weights in two dependent kernels, ramp and drain twice."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from ..analysis.read_floors import CHAIN_PREFIX

KB = 1024


@dataclass(frozen=True)
class ReadConfig:
    """One streaming-read kernel: ``chunk_bytes`` a program, ``block_bytes`` a loop step, its warps and stages."""

    chunk_bytes: int
    block_bytes: int
    num_warps: int
    num_stages: int

    def __post_init__(self) -> None:
        for name in ("chunk_bytes", "block_bytes"):
            v = getattr(self, name)
            if v < 4 * 32 or v & (v - 1):
                raise ValueError(f"{name}: expected a power of two >= 128, got {v!r}")
        if self.chunk_bytes % self.block_bytes:
            raise ValueError(f"block_bytes: expected a divisor of chunk_bytes={self.chunk_bytes}, got {self.block_bytes}")

    @property
    def label(self) -> str:
        return f"c{_size(self.chunk_bytes)}-b{_size(self.block_bytes)}-w{self.num_warps}s{self.num_stages}"


def _size(v: int) -> str:
    return f"{v // KB}k" if v % KB == 0 else str(v)


#: the configs timed at each size: 8-512 KB a program, 8-32 KB a step (64-128 bytes a thread), with and without
#: Triton's software pipelining.  On the H100 (``-s39a``, 32-512 KB) 32 KB programs were fastest at every size, 128 KB
#: ones within 1-2 % from 45 MB on, 512 KB ones up to 5.6x slower at 15 MB: hence the 8 and 16 KB ones
CONFIGS = tuple(ReadConfig(c * KB, b * KB, w, s) for c in (8, 16, 32, 128, 512)
                for b, w in ((8, 4), (16, 8), (32, 8)) if b <= c for s in (1, 3))
TORCH_LABEL = "torch-sum"
#: ``--chain``: the first of the two dependent reads' share of the bytes (gemm1's 2 of 3); their label prefix is
#: :data:`..analysis.read_floors.CHAIN_PREFIX`
CHAIN_SPLIT = (2, 3)
COLUMNS = ("gpu_name", "nbytes", "kernel", "read_bytes", "time_median_us", "time_p10_us", "time_p90_us",
           "time_spread", "GBps", "time_method", "sm_clock_mhz", "triton_version", "git_commit")
_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_bytes(text: str, name: str = "--bytes") -> list[int]:
    """``15.1MB,60300000,2GiB`` -> byte counts (decimal MB / GB, binary MiB / GiB); a ValueError naming ``name``."""
    out = []
    for item in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", item)
        unit = m.group(2).upper() if m else None
        if not m or unit not in _UNITS or float(m.group(1)) * _UNITS[unit] < 1:
            raise ValueError(f"{name}: expected sizes like 15.1MB, 60300000 or 2GiB, separated by commas, got {item!r}")
        out.append(int(round(float(m.group(1)) * _UNITS[unit])))
    return out


def _device(device: Any) -> torch.device:
    from ..backends.triton.loading import interpret_enabled

    dev = torch.device(device)
    if dev.type != "cuda" and not (dev.type == "cpu" and interpret_enabled()):
        raise ValueError(f"device: read floors are timed on a CUDA device (cpu only under TRITON_INTERPRET=1), got {dev}")
    return dev


def checked_launch(words: torch.Tensor, cfg: ReadConfig) -> Callable[[], None]:
    """The bare launch of ``cfg`` over all of ``words`` (int32, whole chunks), after one checked run: a RuntimeError
    when its sums differ from torch's (a word not read, or read twice)."""
    from ._stream_read import stream_read_launch

    chunk = cfg.chunk_bytes // 4
    if words.numel() % chunk:
        raise ValueError(f"words: expected whole chunks of {chunk} words, got {words.numel()}")
    sums = torch.empty(words.numel() // chunk, dtype=torch.int32, device=words.device)
    launch = stream_read_launch(words, sums, chunk, cfg.block_bytes // 4, cfg.num_warps, cfg.num_stages)
    launch()
    got, want = int(sums.sum(dtype=torch.int64)) % 2**32, int(words.sum(dtype=torch.int64)) % 2**32
    if got != want:
        raise RuntimeError(f"{cfg.label}: the kernel's sums ({got}) are not the buffer's ({want})")
    return launch


def _chunks(nbytes: int, chunk_bytes: int) -> int:
    """``nbytes`` rounded up to whole chunks."""
    return -(-nbytes // chunk_bytes) * chunk_bytes


def chain_bytes(nbytes: int, chunk_bytes: int) -> tuple[int, int]:
    """The bytes of ``--chain``'s two reads of ``nbytes``: :data:`CHAIN_SPLIT`'s share of it, then the rest, each
    rounded up to whole chunks."""
    first = _chunks(nbytes * CHAIN_SPLIT[0] // CHAIN_SPLIT[1], chunk_bytes)
    return first, _chunks(max(nbytes - first, 1), chunk_bytes)


def _timed(nbytes: int, words: torch.Tensor, configs: Sequence[ReadConfig], chain: bool) -> list[tuple]:
    """(label, bytes read, the bare callable) of each read of ``nbytes`` from ``words``: every config, its two-read
    chain where ``chain``, then torch's sum."""
    out = []
    for c in configs:
        n = _chunks(nbytes, c.chunk_bytes)
        out.append((c.label, n, checked_launch(words[: n // 4], c)))
        if chain:
            a, b = chain_bytes(nbytes, c.chunk_bytes)
            first, second = checked_launch(words[: a // 4], c), checked_launch(words[a // 4: (a + b) // 4], c)
            out.append((CHAIN_PREFIX + c.label, a + b, lambda f=first, s=second: (f(), s())))
    n = _chunks(nbytes, 4)
    out.append((TORCH_LABEL, n, words[: n // 4].view(torch.float32).sum))
    return out


def floor_rows(nbytes: int, device: Any, configs: Sequence[ReadConfig] = CONFIGS, repeats: int = 30,
               warmup: int = 5, chain: bool = False) -> list[dict]:
    """One row per config (with ``chain`` also its two dependent reads, :data:`CHAIN_PREFIX`) and torch's sum,
    reading at least ``nbytes`` on ``device``."""
    from ..measure.timing import time_fn

    dev = _device(device)
    if nbytes < 1:
        raise ValueError(f"nbytes: expected >= 1, got {nbytes!r}")
    biggest = max(c.chunk_bytes for c in configs)
    words = torch.empty(_chunks(nbytes, biggest) // 4 + 2 * biggest // 4, dtype=torch.float32, device=dev)
    words = words.uniform_().view(torch.int32)
    rows = []
    for label, read_bytes, fn in _timed(nbytes, words, configs, chain):
        st = time_fn(fn, dev, warmup=warmup, repeats=repeats, flush_l2=dev.type == "cuda",
                     cuda_graph=dev.type == "cuda")
        rows.append(dict(nbytes=nbytes, kernel=label, read_bytes=read_bytes, time_median_us=st.median_us,
                         time_p10_us=st.p10_us, time_p90_us=st.p90_us, time_spread=st.spread,
                         GBps=read_bytes / st.median_us / 1e3, time_method=st.method, sm_clock_mhz=st.sm_clock_mhz))
    return rows


def floors(rows: Any) -> Any:
    """The floor per size: the fastest row of each ``nbytes`` (rows of :data:`COLUMNS`), with its kernel
    (:func:`..analysis.read_floors.floor_table`, what ``goals`` reads)."""
    import pandas as pd

    from ..analysis.read_floors import floor_table

    return floor_table(pd.DataFrame(rows))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.read_floor", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", required=True, help="sizes to read, comma-separated (15.1MB, 60300000, 2GiB)")
    ap.add_argument("--ceiling-bytes", default="2GiB", help="one large size beside them, to show the kernels reach "
                    "the read ceiling there (0: none)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--chain", action="store_true", help="also time each config as two dependent reads (2/3, then "
                    "1/3 of the bytes: gemm1's and gemm2's weights)")
    ap.add_argument("--out", type=Path, required=True, help="the CSV of every row (written after each size)")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ..environment import environment_info
    from .gpu_args import write_rows

    ap = _parser()
    args = ap.parse_args(argv)
    try:
        sizes = parse_bytes(args.bytes)
        if args.ceiling_bytes.strip() not in ("0", ""):
            sizes += parse_bytes(args.ceiling_bytes, "--ceiling-bytes")
        if args.repeats < 1 or args.warmup < 0:
            raise ValueError(f"--repeats / --warmup: expected >= 1 / >= 0, got {args.repeats} / {args.warmup}")
        _device(args.device)
    except ValueError as e:
        ap.error(str(e))
    env = environment_info(args.device)
    tags = {k: env.get(k, "") for k in ("gpu_name", "triton_version", "git_commit")}
    rows: list[dict] = []
    for n in sizes:
        rows += [tags | r for r in floor_rows(n, args.device, repeats=args.repeats, warmup=args.warmup,
                                                     chain=args.chain)]
        write_rows(rows, COLUMNS, args.out)  # after every size: a cut-off run keeps what it finished
    print(floors(rows).to_string(index=False))
    print(json.dumps({"out": str(args.out), "rows": len(rows)}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
