"""torchrun's environment and the process group.  Without torchrun: world 1, no process group, nothing changes."""

from __future__ import annotations

import os
from dataclasses import dataclass

#: NVLink multicast stays off (a program that uses it can take a shared host's GPUs out of service)
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def from_env() -> Dist:
    """RANK / WORLD_SIZE / LOCAL_RANK as torchrun sets them (a ValueError naming a bad one)."""
    vals = {}
    for name, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        v = os.environ.get(name, default)
        if not v.isdigit():
            raise ValueError(f"{name}: expected a non-negative integer (set by torchrun), got {v!r}")
        vals[name] = int(v)
    if vals["WORLD_SIZE"] < 1 or vals["RANK"] >= vals["WORLD_SIZE"]:
        raise ValueError(f"RANK/WORLD_SIZE: expected 0 <= RANK < WORLD_SIZE, got {vals['RANK']}/{vals['WORLD_SIZE']}")
    return Dist(vals["RANK"], vals["WORLD_SIZE"], vals["LOCAL_RANK"])


def init(device_type: str) -> Dist:
    """Set the multicast switches off and, under torchrun, join the process group (nccl on CUDA with one GPU per
    LOCAL_RANK, gloo on CPU).  Returns the rank's :class:`Dist`."""
    for k, v in SAFE_ENV.items():
        os.environ[k] = v  # never enabled, whatever the caller's environment says
    d = from_env()
    if d.distributed:
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            if device_type == "cuda":
                torch.cuda.set_device(d.local_rank)
            dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return d


def finish() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
