"""Past one GPU on torch.distributed (launched by ``torchrun``): :mod:`.env` (rank, world, process group, NVLink
multicast kept off), :mod:`.shard` (sweeps sharded over ranks, merged by rank 0), :mod:`.ep_layer` (real expert
parallelism: all-to-all dispatch, the routed MoE backend on each rank, all-to-all combine)."""
