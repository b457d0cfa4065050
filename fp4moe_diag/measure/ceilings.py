"""What one MoE call must move and compute, the device's measured ceilings, and the roofline fractions."""

from __future__ import annotations

import math
from dataclasses import dataclass
import time
from typing import Any, Callable, Optional

import torch

from ..problem.case import MoECase
from . import SUSTAIN_S
from .timing import TimingStats, time_fn


@dataclass(frozen=True)
class MoEWork:
    """Bytes and FLOPs one MoE call must move/do, counting only experts that received tokens."""

    active_experts: int
    routed_pairs: int  # (token, k) pairs on this rank
    weight_bytes: int  # FP4 data + scales (+ biases) of active experts
    activation_bytes: int  # hidden in + out (bf16)
    flops: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes


def moe_work(case: MoECase, local_topk_ids: torch.Tensor) -> MoEWork:
    ids = local_topk_ids.reshape(-1)
    ids = ids[ids >= 0]
    active = int(torch.unique(ids).numel()) if ids.numel() else 0
    pairs = int(ids.numel())
    h, i, b = case.hidden_size, case.intermediate_size, case.block_size
    per_expert = (2 * i * h) // 2 + (h * i) // 2  # packed fp4 bytes
    per_expert += (2 * i * h) // b + (h * i) // b  # one scale byte per block
    if case.has_bias:
        per_expert += 4 * (2 * i + h)
    act = case.num_tokens * h * 2 * 2
    flops = 2 * pairs * (h * 2 * i + i * h)
    return MoEWork(active, pairs, active * per_expert, act, flops)


@dataclass(frozen=True)
class Ceilings:
    """Measured device ceilings (the roofline), taken in the same run as the measurements.

    ``read_bytes_per_s`` (a read-only reduction over a buffer many times the L2) is the ceiling for
    weight streaming: an MoE call only reads its weights.  The copy figure (bytes read + written)
    is kept beside it, and the datasheet figure when the device is known.

    The bf16 GEMM is timed twice, each time with the SM clock it ran at: first from a cold start (a few ms of
    GEMMs: the boost clock), then after ``sustain_s`` seconds (:func:`measure_ceilings`) of back-to-back GEMMs
    (the clock that the GPU's power limit holds under a long tensor-core load, what a long prefill call runs at).
    On the H200 the prefill rows at T = 16384 ran at 1815-1845 MHz while the ceiling's GEMMs took a few ms: a
    fraction of the first figure then mixes two clocks; the second is the like-for-like ceiling of a long call."""

    copy_bytes_per_s: float  # device-to-device copy, bytes read + written per second
    bf16_flops_per_s: float  # dense bf16 GEMM
    method: str
    read_bytes_per_s: float = float("nan")  # read-only streaming (sum over a large buffer)
    datasheet_bytes_per_s: float = float("nan")
    bf16_sm_clock_mhz: float = float("nan")  # the SM clock of the first bf16 figure (NVML; NaN without)
    bf16_sustained_flops_per_s: float = float("nan")  # the bf16 GEMM after sustain_s seconds of them
    bf16_sustained_sm_clock_mhz: float = float("nan")

    def as_dict(self) -> dict[str, float]:
        return {"ceiling_copy_GBps": self.copy_bytes_per_s / 1e9, "ceiling_bf16_TFLOPs": self.bf16_flops_per_s / 1e12,
                "ceiling_read_GBps": self.read_bytes_per_s / 1e9,
                "ceiling_datasheet_GBps": self.datasheet_bytes_per_s / 1e9,
                "ceiling_bf16_sm_clock_mhz": self.bf16_sm_clock_mhz,
                "ceiling_bf16_sustained_TFLOPs": self.bf16_sustained_flops_per_s / 1e12,
                "ceiling_bf16_sustained_sm_clock_mhz": self.bf16_sustained_sm_clock_mhz}

    @property
    def stream_bytes_per_s(self) -> float:
        """The weight-streaming ceiling: the read ceiling where measured, else the copy ceiling."""
        return self.read_bytes_per_s if math.isfinite(self.read_bytes_per_s) else self.copy_bytes_per_s


#: HBM bandwidth from the vendor's datasheet, by ``torch.cuda.get_device_name`` substring (bytes/s); the first key
#: found wins.  The SXM H100 names itself "NVIDIA H100 80GB HBM3" (the lent one of session 17), the PCIe one
#: "NVIDIA H100 PCIe"
DATASHEET_BYTES_PER_S: dict[str, float] = {"H200": 4.8e12, "H100 SXM": 3.35e12, "H100 80GB HBM3": 3.35e12,
                                           "H100 PCIe": 2.0e12, "H100 NVL": 3.9e12, "GB200": 8.0e12, "B200": 8.0e12}


def datasheet_bandwidth(device_name: str) -> float:
    for key, v in DATASHEET_BYTES_PER_S.items():
        if key in device_name:
            return v
    return float("nan")


def plausible_read(copy_bytes_per_s: float, read_bytes_per_s: float, floor: float = 0.8) -> float:
    """The measured read-only ceiling, or NaN when it is below ``floor`` x the copy ceiling: streaming reads
    move at least as many bytes per second as a copy (which also writes), so a lower figure measured the
    reduction kernel, not the memory, and must not become the roofline (the copy ceiling stands in)."""
    return read_bytes_per_s if read_bytes_per_s >= floor * copy_bytes_per_s else float("nan")


def sustained(fn: Callable[[], Any], seconds: float, sync: Callable[[], None], timed: Callable[[], TimingStats],
              clock: Callable[[], float] = time.monotonic, batch: int = 20) -> TimingStats:
    """``fn`` back to back in batches of ``batch`` (each batch waited for) until ``seconds`` have passed on
    ``clock``, then ``timed()``: the timing of a load that has run long enough for the power limit to set the clock.
    A ValueError for a negative ``seconds`` or a ``batch`` below 1, before anything runs."""
    if not seconds >= 0:
        raise ValueError(f"seconds: expected >= 0, got {seconds!r}")
    if batch < 1:
        raise ValueError(f"batch: expected >= 1, got {batch!r}")
    end = clock() + seconds
    while clock() < end:
        for _ in range(batch):
            fn()
        sync()
    return timed()


def measure_ceilings(device: Any, copy_bytes: int = 2 * 2**30, gemm_n: int = 8192, repeats: int = 10,
                     sustain_s: float = SUSTAIN_S) -> Ceilings:
    """The ceilings of :class:`Ceilings` on ``device``; ``sustain_s``: the seconds of bf16 GEMMs before the
    sustained figure (0: right after the first)."""
    if not sustain_s >= 0:
        raise ValueError(f"sustain_s: expected >= 0 seconds, got {sustain_s!r}")
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: ceilings are measured on a CUDA device, got {dev}")
    src = torch.empty(copy_bytes // 2, dtype=torch.uint8, device=dev).random_(0, 255)
    dst = torch.empty_like(src)
    tc = time_fn(lambda: dst.copy_(src), dev, warmup=3, repeats=repeats, flush_l2=False)
    # read-only: a float32 sum over copy_bytes (far larger than the L2); the result is 4 bytes.  (An int32 sum with
    # an int64 accumulator is not bandwidth-bound: it read 769 GB/s on the H200 where copy ran at 4233.)
    words = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).uniform_()
    tr = time_fn(lambda: words.sum(), dev, warmup=3, repeats=repeats, flush_l2=False)
    a = torch.randn(gemm_n, gemm_n, device=dev, dtype=torch.bfloat16)
    bm = torch.randn(gemm_n, gemm_n, device=dev, dtype=torch.bfloat16)
    tg = time_fn(lambda: a @ bm, dev, warmup=3, repeats=repeats, flush_l2=False)
    ts = sustained(lambda: a @ bm, sustain_s, lambda: torch.cuda.synchronize(dev),
                   lambda: time_fn(lambda: a @ bm, dev, warmup=0, repeats=repeats, flush_l2=False))
    copy_bytes_per_s = 2 * (copy_bytes // 2) / (tc.median_us * 1e-6)
    flops = 2 * gemm_n**3
    return Ceilings(
        copy_bytes_per_s=copy_bytes_per_s,
        bf16_flops_per_s=flops / (tg.median_us * 1e-6),
        method=(f"torch copy_, float32 sum (read-only), bf16 matmul (then again after {sustain_s:g} s of them); "
                f"CUDA events, median of {repeats}"),
        read_bytes_per_s=plausible_read(copy_bytes_per_s, (copy_bytes // 4) * 4 / (tr.median_us * 1e-6)),
        datasheet_bytes_per_s=datasheet_bandwidth(torch.cuda.get_device_name(dev)),
        bf16_sm_clock_mhz=tg.sm_clock_mhz,
        bf16_sustained_flops_per_s=flops / (ts.median_us * 1e-6),
        bf16_sustained_sm_clock_mhz=ts.sm_clock_mhz,
    )


def roofline_fields(work: MoEWork, stats: TimingStats, ceilings: Optional[Ceilings]) -> dict[str, float]:
    t = stats.median_us * 1e-6
    out = {
        "weight_bytes": work.weight_bytes,
        "active_experts": work.active_experts,
        "routed_pairs": work.routed_pairs,
        "flops": work.flops,
        "achieved_GBps": work.total_bytes / t / 1e9 if t > 0 else float("nan"),
        "achieved_TFLOPs": work.flops / t / 1e12 if t > 0 else float("nan"),
        "frac_bw_roofline": float("nan"),
        "frac_flops_roofline": float("nan"),
    }
    if ceilings is not None and t > 0:
        # bytes moved once (read) against the read-only streaming ceiling (the copy one where not measured)
        out["frac_bw_roofline"] = (work.total_bytes / t) / ceilings.stream_bytes_per_s
        out["frac_flops_roofline"] = (work.flops / t) / ceilings.bf16_flops_per_s
    return out
