"""Host-side grouping of (token, k) pairs by local expert for the Triton MoE kernels.

This is vLLM's ``moe_align_block_size`` in plain torch (CPU or GPU): the flat pair index
``p = token * top_k + j`` of every routed pair whose expert lives on this rank is sorted by
local expert (stably, so pairs keep token order inside an expert), each expert's group is
padded to a multiple of ``block_m`` with the sentinel ``num_pairs = T * top_k``, and every
``block_m``-row block gets the local expert id it belongs to.  Pairs routed to experts on
other expert-parallel ranks (local id ``-1``) are dropped; experts with no pairs get no block.

The sizes are exact (they cost a host sync), which is fine because the grouping is made in the
backend's untimed ``prepare`` step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


@dataclass(frozen=True)
class ExpertGrouping:
    """Pairs grouped by local expert, padded per expert to a multiple of ``block_m``.

    ``sorted_pair_ids`` int32 ``[num_padded_pairs]``: flat pair index ``token * top_k + j``,
    or ``num_pairs`` for a padding row.  ``block_expert_ids`` int32 ``[num_blocks]``: the local
    expert of each ``block_m``-row block.  ``expert_counts`` int32 ``[num_local_experts]``:
    routed pairs per local expert (before padding).
    """

    sorted_pair_ids: torch.Tensor
    block_expert_ids: torch.Tensor
    expert_counts: torch.Tensor
    block_m: int
    top_k: int
    num_pairs: int
    num_valid_pairs: int

    @property
    def num_blocks(self) -> int:
        return int(self.block_expert_ids.numel())

    @property
    def num_padded_pairs(self) -> int:
        return int(self.sorted_pair_ids.numel())

    @property
    def padding_pairs(self) -> int:
        return self.num_padded_pairs - self.num_valid_pairs


def _validate(
    local_topk_ids: torch.Tensor,
    num_local_experts: int,
    block_m: int,
    topk_weights: Optional[torch.Tensor],
) -> None:
    if not isinstance(local_topk_ids, torch.Tensor):
        raise ValueError(f"local_topk_ids: expected a torch.Tensor, got {type(local_topk_ids).__name__}")
    if local_topk_ids.dtype not in _INT_DTYPES:
        raise ValueError(f"local_topk_ids: expected an integer tensor, got dtype {local_topk_ids.dtype}")
    if local_topk_ids.dim() != 2:
        raise ValueError(f"local_topk_ids: expected shape [num_tokens, top_k], got {tuple(local_topk_ids.shape)}")
    if local_topk_ids.shape[1] < 1:
        raise ValueError(f"local_topk_ids: expected top_k >= 1, got shape {tuple(local_topk_ids.shape)}")
    if local_topk_ids.device.type not in ("cpu", "cuda"):
        raise ValueError(f"local_topk_ids: expected a cpu or cuda tensor, got device {local_topk_ids.device}")
    for name, v, lo in (("num_local_experts", num_local_experts, 1), ("block_m", block_m, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name}: expected an int >= {lo}, got {v!r}")
    if local_topk_ids.numel():
        lo, hi = int(local_topk_ids.min()), int(local_topk_ids.max())
        if lo < -1 or hi >= num_local_experts:
            raise ValueError(
                f"local_topk_ids: expected local expert ids in [-1, {num_local_experts - 1}] "
                f"(-1 = expert on another rank), got range [{lo}, {hi}]"
            )
    if topk_weights is not None:
        if not isinstance(topk_weights, torch.Tensor):
            raise ValueError(f"topk_weights: expected a torch.Tensor, got {type(topk_weights).__name__}")
        if topk_weights.dtype != torch.float32:
            raise ValueError(f"topk_weights: expected dtype torch.float32, got {topk_weights.dtype}")
        if topk_weights.shape != local_topk_ids.shape:
            raise ValueError(
                f"topk_weights: expected the shape of local_topk_ids {tuple(local_topk_ids.shape)}, "
                f"got {tuple(topk_weights.shape)}"
            )
        if topk_weights.device != local_topk_ids.device:
            raise ValueError(
                f"topk_weights: expected device {local_topk_ids.device} (that of local_topk_ids), "
                f"got {topk_weights.device}"
            )


def _sorted_by_expert(local_topk_ids: torch.Tensor,
                      num_local_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The routed pairs (``-1``: another rank's, dropped) sorted by local expert, stably (token order inside an
    expert): ``(flat pair index, expert, pairs per expert [num_local_experts], rank of the pair inside its expert)``,
    int64 on the ids' device."""
    flat = local_topk_ids.reshape(-1).long()
    pair_idx = torch.nonzero(flat >= 0).flatten()
    experts = flat[pair_idx]
    order = torch.argsort(experts, stable=True)
    pair_sorted, expert_sorted = pair_idx[order], experts[order]
    counts = torch.bincount(experts, minlength=num_local_experts)
    rank = torch.arange(pair_sorted.numel(), device=flat.device) - (torch.cumsum(counts, 0) - counts)[expert_sorted]
    return pair_sorted, expert_sorted, counts, rank


def group_pairs_by_expert(
    local_topk_ids: torch.Tensor,
    num_local_experts: int,
    block_m: int,
    topk_weights: Optional[torch.Tensor] = None,
) -> ExpertGrouping:
    """Group the routed pairs of ``local_topk_ids [T, k]`` (``-1`` = not on this rank) by expert.

    ``topk_weights`` is only validated (dtype fp32, same shape and device) when given; the
    kernels read it by flat pair index.  Output tensors are int32 on the ids' device.
    """
    _validate(local_topk_ids, num_local_experts, block_m, topk_weights)
    dev = local_topk_ids.device
    num_tokens, top_k = local_topk_ids.shape
    num_pairs = num_tokens * top_k
    pair_sorted, expert_sorted, counts, rank_in_expert = _sorted_by_expert(local_topk_ids, num_local_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    padded_start = torch.cumsum(padded, 0) - padded
    pos = padded_start[expert_sorted] + rank_in_expert

    total = int(padded.sum())
    sorted_ids = torch.full((total,), num_pairs, dtype=torch.int32, device=dev)
    sorted_ids[pos] = pair_sorted.to(torch.int32)
    block_experts = torch.repeat_interleave(
        torch.arange(num_local_experts, device=dev, dtype=torch.int32), padded // block_m
    )
    return ExpertGrouping(
        sorted_pair_ids=sorted_ids,
        block_expert_ids=block_experts,
        expert_counts=counts.to(torch.int32),
        block_m=block_m,
        top_k=int(top_k),
        num_pairs=int(num_pairs),
        num_valid_pairs=int(pair_sorted.numel()),
    )


def split_tail_pairs(local_topk_ids: torch.Tensor, num_local_experts: int, block_m: int,
                     tail_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``local_topk_ids [T, k]`` as two copies for the tail-block tactics (``-tN``): per expert, with ``n`` pairs and
    ``r = n mod block_m``, the first copy keeps the pairs that go in blocks of ``block_m`` (all ``n`` when ``r`` is 0
    or over ``tail_m``), the second the expert's last ``r`` pairs when ``0 < r <= tail_m`` (one block of ``tail_m``
    instead of a mostly padded one of ``block_m``).  A pair a copy drops reads ``-1`` there (as another rank's, for
    :func:`group_pairs_by_expert`); pairs keep token order inside an expert, so the two copies split each expert's
    pairs at one rank."""
    _validate(local_topk_ids, num_local_experts, block_m, None)
    if isinstance(tail_m, bool) or not isinstance(tail_m, int) or not 1 <= tail_m < block_m:
        raise ValueError(f"tail_m: expected an int in 1..{block_m - 1} (below block_m), got {tail_m!r}")
    pair_sorted, expert_sorted, counts, rank = _sorted_by_expert(local_topk_ids, num_local_experts)
    rem = counts % block_m
    tail = torch.where((rem > 0) & (rem <= tail_m), rem, torch.zeros_like(rem))
    in_tail = pair_sorted[rank >= (counts - tail)[expert_sorted]]
    flat = local_topk_ids.reshape(-1).long()
    big = flat.clone()
    big[in_tail] = -1
    small = torch.full_like(flat, -1)
    small[in_tail] = flat[in_tail]
    shape, dtype = local_topk_ids.shape, local_topk_ids.dtype
    return big.view(shape).to(dtype), small.view(shape).to(dtype)


def tail_groupings(local_topk_ids: torch.Tensor, num_local_experts: int, block_m: int, tail_m: int,
                   topk_weights: Optional[torch.Tensor] = None) -> tuple[ExpertGrouping, ExpertGrouping]:
    """The two groupings of a ``-tN`` tactic: :func:`split_tail_pairs`'s copies grouped in blocks of ``block_m`` and
    of ``tail_m`` (:func:`group_pairs_by_expert`, ``topk_weights`` validated against both)."""
    big, small = split_tail_pairs(local_topk_ids, num_local_experts, block_m, tail_m)
    return (group_pairs_by_expert(big, num_local_experts, block_m, topk_weights),
            group_pairs_by_expert(small, num_local_experts, tail_m, topk_weights))


def overflow_groupings(local_topk_ids: torch.Tensor, num_local_experts: int, block_m: int, over_m: int,
                       topk_weights: Optional[torch.Tensor] = None) -> tuple[ExpertGrouping, ExpertGrouping]:
    """The two parts of :func:`fused_tail_grouping` (``-tNf``, :mod:`._kernels_over`): per expert with ``n >
    block_m`` pairs and ``0 < r = n mod block_m <= over_m``, its last ``block_m + r`` pairs form one block of the
    second part (``block_m + over_m`` entries: ``block_m`` pairs, then the ``r``, then padding); every other pair is
    in the first, in blocks of ``block_m`` (:func:`group_pairs_by_expert`).  The second part's ``block_m`` is
    ``block_m + over_m``, its entries' stride."""
    _validate(local_topk_ids, num_local_experts, block_m, topk_weights)
    if isinstance(over_m, bool) or not isinstance(over_m, int) or not 1 <= over_m < block_m:
        raise ValueError(f"over_m: expected an int in 1..{block_m - 1} (below block_m), got {over_m!r}")
    pair_sorted, expert_sorted, counts, rank = _sorted_by_expert(local_topk_ids, num_local_experts)
    rem = counts % block_m
    fused = (rem > 0) & (rem <= over_m) & (counts > block_m)
    start = counts - block_m - rem  # the rank of an overflow block's first pair
    in_over = fused[expert_sorted] & (rank >= start[expert_sorted])
    flat = local_topk_ids.reshape(-1).long()
    kept = flat.clone()
    kept[pair_sorted[in_over]] = -1
    main = group_pairs_by_expert(kept.view(local_topk_ids.shape).to(local_topk_ids.dtype), num_local_experts, block_m,
                                 topk_weights)
    rows = block_m + over_m
    block_of = torch.cumsum(fused.long(), 0) - 1  # an overflow expert's block, in expert order
    pos = block_of[expert_sorted[in_over]] * rows + (rank - start[expert_sorted])[in_over]
    num_pairs = local_topk_ids.numel()
    experts = torch.nonzero(fused).flatten()
    sorted_ids = torch.full((experts.numel() * rows,), num_pairs, dtype=torch.int32, device=flat.device)
    sorted_ids[pos] = pair_sorted[in_over].to(torch.int32)
    over = ExpertGrouping(sorted_pair_ids=sorted_ids, block_expert_ids=experts.to(torch.int32),
                          expert_counts=torch.bincount(expert_sorted[in_over], minlength=num_local_experts).to(
                              torch.int32),
                          block_m=rows, top_k=int(local_topk_ids.shape[1]), num_pairs=int(num_pairs),
                          num_valid_pairs=int(in_over.sum()))
    return main, over


def fused_tail_grouping(local_topk_ids: torch.Tensor, num_local_experts: int, block_m: int, over_m: int,
                        topk_weights: Optional[torch.Tensor] = None) -> tuple[ExpertGrouping, int]:
    """One grouping for one launch of :mod:`._kernels_over` (``-tNf``): the blocks of :func:`overflow_groupings`' second
    grouping first (``block_m + over_m`` entries each), then its first grouping's (``block_m`` each), and how many
    blocks come first.  ``block_m`` is the grouping's; its entries' positions are the intermediate rows."""
    main, over = overflow_groupings(local_topk_ids, num_local_experts, block_m, over_m, topk_weights)
    return ExpertGrouping(sorted_pair_ids=torch.cat([over.sorted_pair_ids, main.sorted_pair_ids]),
                          block_expert_ids=torch.cat([over.block_expert_ids, main.block_expert_ids]),
                          expert_counts=main.expert_counts + over.expert_counts, block_m=block_m, top_k=main.top_k,
                          num_pairs=main.num_pairs, num_valid_pairs=main.num_valid_pairs + over.num_valid_pairs,
                          ), over.num_blocks
