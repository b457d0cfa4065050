"""Energy per call of two tactics, of one backend or two, under a sustained load: does one draw more power?

``python -m fp4moe_diag.profiling.energy --model gpt-oss-20b --ep 2 --tokens 4096
--a triton=m128n128k64w16s3-ps-gu-tm-g2n256 --b triton_kernels=tk-m128kautow8s3 --out data/runs/RUN/energy.csv``

Under the GPU's power limit a kernel that draws more power per call is slowed by the clock it brings on: two calls
whose CUPTI kernel times say one thing can replay the other way round (session 25, H100, 20b EP2 T=4096: ours'
kernels 0.6 % ahead in the profiler's rounds, its replays 0.5 % behind in every duel, with the L2 flushed or not).
Per case both calls are prepared and captured in CUDA graphs (as :mod:`.duel`), then run in ``--rounds`` rounds of
alternating blocks: a block replays one call ``--calls`` times back to back (no L2 flush, no host wait inside), and
NVML's energy counter (mJ), the wall clock and, at its end, the SM clock are read around it.  One row per case:
each side's energy per call (mJ), mean power (W), time per call (us: the block's wall time over its calls) and SM
clock (MHz), medians over the rounds, and the ratios a / b.  Power and clock, not a timing method: the goals read
duels (:mod:`.duel`)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable, Optional, Sequence

#: the columns of an energy CSV, in order (then the environment's, :data:`.gpu_args.ENV`)
COLUMNS = ("model", "ep_size", "num_tokens", "a_backend", "a_tactic", "b_backend", "b_tactic", "calls", "rounds",
           "a_mj_per_call", "b_mj_per_call", "a_watts", "b_watts", "a_us_per_call", "b_us_per_call",
           "a_sm_clock_mhz", "b_sm_clock_mhz", "energy_ratio", "time_ratio")


def block_rounds(blocks: dict[str, Callable[[], None]], rounds: int, energy_mj: Callable[[], float],
                 clock: Callable[[], float], sm_clock: Callable[[], float]) -> dict[str, list[tuple]]:
    """Per side, ``rounds`` readings ``(mJ, seconds, MHz)`` of its block (``blocks[side]()`` runs it and waits for
    it), the sides alternating and their order rotated each round (a then b, then b then a)."""
    from ..measure.paired import round_orders

    if rounds < 1:
        raise ValueError(f"rounds: expected >= 1, got {rounds!r}")
    out: dict[str, list[tuple]] = {n: [] for n in blocks}
    for order in round_orders(list(blocks), rounds):  # as a duel's rounds
        for name in order:
            e0, t0 = energy_mj(), clock()
            blocks[name]()
            e1, t1 = energy_mj(), clock()
            out[name].append((e1 - e0, t1 - t0, sm_clock()))
    return out


def side_stats(readings: list[tuple], calls: int) -> dict[str, float]:
    """One side's medians over its blocks: mJ and us per call, mean watts, SM clock."""
    if calls < 1 or not readings:
        raise ValueError(f"calls / readings: expected >= 1 call and a reading, got {calls!r} and {len(readings)}")
    mj = statistics.median(e / calls for e, _, _ in readings)
    us = statistics.median(1e6 * s / calls for _, s, _ in readings)
    timed = [e / 1e3 / s for e, s, _ in readings if s > 0]  # a block the clock did not see end: no power from it
    watts = statistics.median(timed) if timed else float("nan")
    return {"mj_per_call": mj, "watts": watts, "us_per_call": us,
            "sm_clock_mhz": statistics.median(c for _, _, c in readings)}


def _nvml_energy(device: Any) -> Callable[[], float]:
    """A reader of NVML's total energy counter (mJ) of ``device``; a ValueError where NVML cannot give it."""
    import torch

    try:
        import pynvml

        pynvml.nvmlInit()
        index = torch.cuda._get_nvml_device_index(torch.device(device))  # CUDA_VISIBLE_DEVICES as torch reads it
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as e:  # noqa: BLE001 -- no pynvml, no NVML, a GPU without the counter
        raise ValueError(f"device: NVML's energy counter is not readable here ({type(e).__name__}: {e})") from None
    return lambda: float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


def energy_case(case: Any, a: tuple[str, str], b: tuple[str, str], device: Any, calls: int, rounds: int) -> dict:
    """One row of :data:`COLUMNS` (but the environment's): ``a`` against ``b`` on ``case``."""
    import torch

    from ..measure.paired import capture_graph
    from ..measure.timing import sm_clock_mhz
    from .call_setup import prepare_pair

    energy = _nvml_energy(device)  # before any preparation: a GPU without the counter is refused first
    dev = torch.device(device)
    prepared, launches = prepare_pair(case, a, b, device)  # prepared: kept while the graphs replay
    replays = {side: capture_graph(launch, device) for side, launch in launches.items()}

    def block(replay: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                replay()
            if dev.type == "cuda":  # (on a CPU, where the tests run it with a fake counter, the calls are done)
                torch.cuda.synchronize(dev)
        return run

    for replay in replays.values():  # warm: a block each, untimed
        block(replay)()
    readings = block_rounds({s: block(r) for s, r in replays.items()}, rounds, energy, time.perf_counter,
                            lambda: sm_clock_mhz(dev))
    sa, sb = side_stats(readings["a"], calls), side_stats(readings["b"], calls)
    return dict(model=case.model, ep_size=case.ep_size, num_tokens=case.num_tokens, a_backend=a[0], a_tactic=a[1],
                b_backend=b[0], b_tactic=b[1], calls=calls, rounds=rounds,
                **{f"a_{k}": v for k, v in sa.items()}, **{f"b_{k}": v for k, v in sb.items()},
                energy_ratio=sa["mj_per_call"] / sb["mj_per_call"], time_ratio=sa["us_per_call"] / sb["us_per_call"])


def _parser() -> argparse.ArgumentParser:
    from .. import cli_args as A
    from .gpu_args import add_device_out_args, add_pair_args

    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.energy", description=__doc__.split("\n\n")[0])
    add_pair_args(ap)
    ap.add_argument("--calls", type=A.positive_int, default=200, help="replays per block (default 200)")
    ap.add_argument("--rounds", type=A.positive_int, default=10, help="blocks of each call (default 10)")
    add_device_out_args(ap)
    return ap


def _line(r: dict) -> str:
    """What the tool prints of a row: each side's energy, power, time and clock, and the ratios."""
    return (f"{r['model']} EP{r['ep_size']} T={r['num_tokens']}: a {r['a_mj_per_call']:.2f} mJ, {r['a_watts']:.0f} W, "
            f"{r['a_us_per_call']:.1f} us, {r['a_sm_clock_mhz']:.0f} MHz; b {r['b_mj_per_call']:.2f} mJ, "
            f"{r['b_watts']:.0f} W, {r['b_us_per_call']:.1f} us, {r['b_sm_clock_mhz']:.0f} MHz; a / b energy "
            f"{r['energy_ratio']:.3f}, time {r['time_ratio']:.3f}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .gpu_args import pair_main

    return pair_main(_parser(), argv, "energy is read on a CUDA GPU (NVML)",
                     lambda case, args: energy_case(case, args.a, args.b, args.device, args.calls, args.rounds),
                     COLUMNS, _line)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
