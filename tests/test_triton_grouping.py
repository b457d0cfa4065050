"""The Triton backend's expert grouping (``grouping.group_pairs_by_expert``): the sorted pair ids, padding and block
experts it hands the kernels, by hand-built cases, random invariants and its argument checks."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag.backends.triton.grouping import group_pairs_by_expert


def test_grouping_hand_built_with_ep_mask():
    ids = torch.tensor([[0, 2], [2, -1], [1, 0]], dtype=torch.int32)  # pairs 0..5, pair 3 is remote
    g = group_pairs_by_expert(ids, num_local_experts=3, block_m=4)
    s = 6  # padding sentinel = T * k
    assert g.sorted_pair_ids.tolist() == [0, 5, s, s, 4, s, s, s, 1, 2, s, s]
    assert g.block_expert_ids.tolist() == [0, 1, 2]
    assert g.expert_counts.tolist() == [2, 1, 2]
    assert (g.num_pairs, g.num_valid_pairs, g.num_blocks, g.num_padded_pairs) == (6, 5, 3, 12)
    assert g.padding_pairs == 7 and g.top_k == 2 and g.block_m == 4
    assert g.sorted_pair_ids.dtype == torch.int32 and g.block_expert_ids.dtype == torch.int32


def test_grouping_skips_unused_experts_and_spans_blocks():
    ids = torch.tensor([[3, 3], [3, 3], [3, 1]], dtype=torch.int64)
    g = group_pairs_by_expert(ids, num_local_experts=5, block_m=2)
    assert g.block_expert_ids.tolist() == [1, 3, 3, 3]
    assert g.sorted_pair_ids.tolist() == [5, 6, 0, 1, 2, 3, 4, 6]
    assert g.expert_counts.tolist() == [0, 1, 0, 5, 0]


def test_grouping_block_m_one_has_no_padding():
    ids = torch.tensor([[1, 0], [0, 1]], dtype=torch.int32)
    g = group_pairs_by_expert(ids, 2, 1)
    assert g.sorted_pair_ids.tolist() == [1, 2, 0, 3]
    assert g.block_expert_ids.tolist() == [0, 0, 1, 1]
    assert g.padding_pairs == 0


def test_grouping_all_remote_is_empty():
    g = group_pairs_by_expert(torch.full((3, 2), -1, dtype=torch.int32), 4, 16)
    assert g.num_blocks == 0 and g.num_padded_pairs == 0 and g.num_valid_pairs == 0 and g.num_pairs == 6


@pytest.mark.parametrize("block_m", [1, 16, 64])
def test_grouping_invariants_random(block_m: int):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(-1, 6, (37, 4), generator=gen, dtype=torch.int32)
    g = group_pairs_by_expert(ids, 6, block_m)
    flat = ids.reshape(-1)
    sp = g.sorted_pair_ids.long()
    real = sp[sp < g.num_pairs]
    assert sorted(real.tolist()) == torch.nonzero(flat >= 0).flatten().tolist()  # every local pair once
    assert g.num_padded_pairs % block_m == 0 and g.num_padded_pairs == g.num_blocks * block_m
    rows = sp.view(-1, block_m)
    for blk, e in enumerate(g.block_expert_ids.tolist()):
        r = rows[blk][rows[blk] < g.num_pairs]
        assert bool((flat[r] == e).all()) and r.numel() > 0
        assert r.tolist() == sorted(r.tolist())  # stable: token order inside an expert
    assert g.block_expert_ids.tolist() == sorted(g.block_expert_ids.tolist())


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(local_topk_ids=torch.zeros(3, 2)), "local_topk_ids"),  # float dtype
        (dict(local_topk_ids=torch.zeros(6, dtype=torch.int32)), "local_topk_ids"),  # 1-D
        (dict(local_topk_ids=torch.zeros(3, 0, dtype=torch.int32)), "local_topk_ids"),  # k = 0
        (dict(local_topk_ids=torch.tensor([[0, 4]], dtype=torch.int32)), "local_topk_ids"),  # id >= L
        (dict(local_topk_ids=torch.tensor([[0, -2]], dtype=torch.int32)), "local_topk_ids"),  # id < -1
        (dict(local_topk_ids=torch.zeros(2, 2, dtype=torch.int32, device="meta")), "local_topk_ids"),
        (dict(local_topk_ids=[[0, 1]]), "local_topk_ids"),
        (dict(num_local_experts=0), "num_local_experts"),
        (dict(block_m=0), "block_m"),
        (dict(block_m=16.0), "block_m"),
        (dict(topk_weights=torch.ones(2, 2, dtype=torch.float16)), "topk_weights"),
        (dict(topk_weights=torch.ones(2, 3)), "topk_weights"),
        (dict(topk_weights=torch.ones(2, 2, device="meta")), "topk_weights"),
    ],
)
def test_grouping_validation(kwargs: dict, name: str):
    args = dict(local_topk_ids=torch.zeros(2, 2, dtype=torch.int32), num_local_experts=4, block_m=16)
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{name}:"):
        group_pairs_by_expert(**args)
