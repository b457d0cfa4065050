import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fp4moe_diag import MoECase, RoutingMethod
from fp4moe_diag.problem.routing import naive_pack_topk, pack_topk, route, unpack_topk


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 65535), st.integers(0, 0xFFFF))
def test_pack_unpack_round_trip_every_id_and_bf16(eid, bits):
    w = torch.tensor([bits if bits < 0x8000 else bits - 0x10000], dtype=torch.int16).view(torch.bfloat16)
    if not torch.isfinite(w).all():
        return
    packed = pack_topk(torch.tensor([eid]), w)
    ids, ws = unpack_topk(packed)
    assert int(ids[0]) == eid
    assert ws.view(torch.int16).tolist() == w.view(torch.int16).tolist()


def test_all_expert_ids_round_trip_with_negative_weight():
    ids = torch.arange(65536, dtype=torch.int32)
    w = torch.full((65536,), -0.375)
    got_ids, got_w = unpack_topk(pack_topk(ids, w))
    assert torch.equal(got_ids, ids)
    assert bool((got_w.float() == -0.375).all())


def test_layout_matches_flashinfer_packed_score_idx():
    # PackedScoreIdx {bf16 score; int16 idx}: idx in the high half, score bits in the low half
    p = pack_topk(torch.tensor([5]), torch.tensor([1.0]))
    assert int(p[0]) == (5 << 16) | 0x3F80


def test_naive_packing_sign_extends_negative_weights():
    ids = torch.tensor([3])
    bad = naive_pack_topk(ids, torch.tensor([-1.0]))
    assert int(unpack_topk(bad)[0][0]) == 0xFFFF  # id destroyed
    good = pack_topk(ids, torch.tensor([-1.0]))
    assert int(unpack_topk(good)[0][0]) == 3


def test_pack_rejects_bad_input():
    with pytest.raises(ValueError, match="expert_ids: expert ids must be in \\[0, 7\\]"):
        pack_topk(torch.tensor([8]), torch.tensor([0.5]), num_experts=8)
    with pytest.raises(ValueError, match="weights: expected the shape"):
        pack_topk(torch.tensor([1, 2]), torch.tensor([0.5]))
    with pytest.raises(ValueError, match="weights: expected finite"):
        pack_topk(torch.tensor([1]), torch.tensor([float("nan")]))
    with pytest.raises(ValueError, match="packed: expected dtype torch.int32"):
        unpack_topk(torch.tensor([1], dtype=torch.int64))


LOGITS = torch.tensor([[0.1, 2.0, -1.0, 0.5, 1.5, 0.0, -0.5, 3.0]])


def _case(method, k, **kw):
    return MoECase(num_tokens=1, hidden_size=32, intermediate_size=32, num_experts=8, top_k=k,
                   routing_method=method, **kw)


def test_default_softmax_then_topk():
    ids, w = route(LOGITS, _case(RoutingMethod.Default, 2))
    p = torch.softmax(LOGITS, -1)[0]
    assert ids.tolist() == [[7, 1]]
    assert torch.allclose(w[0], p[[7, 1]])


def test_renormalize_topk_then_softmax():
    ids, w = route(LOGITS, _case(RoutingMethod.Renormalize, 3))
    assert ids.tolist() == [[7, 1, 4]]
    e = torch.exp(torch.tensor([3.0, 2.0, 1.5]))
    assert torch.allclose(w[0], e / e.sum())
    assert float(w.sum()) == pytest.approx(1.0)


def test_renormalize_naive_equals_renormalize():
    a = route(LOGITS, _case(RoutingMethod.RenormalizeNaive, 3))
    b = route(LOGITS, _case(RoutingMethod.Renormalize, 3))
    assert torch.equal(a[0], b[0]) and torch.allclose(a[1], b[1])


def test_topk_raw_values():
    ids, w = route(LOGITS, _case(RoutingMethod.TopK, 2))
    assert ids.tolist() == [[7, 1]] and w.tolist() == [[3.0, 2.0]]


def test_llama4_top1_sigmoid():
    ids, w = route(LOGITS, _case(RoutingMethod.Llama4, 1))
    assert ids.tolist() == [[7]]
    assert float(w[0, 0]) == pytest.approx(float(torch.sigmoid(torch.tensor(3.0))))


def test_deepseek_v3_groups():
    # 8 experts in 4 groups of 2; pick 2 groups by the sum of their top-2 biased sigmoid scores
    case = _case(RoutingMethod.DeepSeekV3, 2, n_group=4, topk_group=2, routed_scaling_factor=2.5)
    bias = torch.zeros(8)
    ids, w = route(LOGITS, case, bias)
    s = torch.sigmoid(LOGITS[0])
    group = s.view(4, 2).sum(-1)  # groups: (0,1) (2,3) (4,5) (6,7)
    best_groups = set(torch.topk(group, 2).indices.tolist())
    assert {int(i) // 2 for i in ids[0]} <= best_groups
    expected = sorted(range(8), key=lambda e: -float(s[e]) if e // 2 in best_groups else 1e9)[:2]
    assert ids[0].tolist() == expected
    assert float(w.sum()) == pytest.approx(2.5, rel=1e-5)
    # a large bias on expert 2 moves its group in, but weights stay unbiased sigmoid scores
    bias[2] = 10.0
    ids2, w2 = route(LOGITS, case, bias)
    assert 2 in ids2[0].tolist()
    assert float(w2.sum()) == pytest.approx(2.5, rel=1e-5)


def test_route_rejects_wrong_shape():
    with pytest.raises(ValueError, match="logits: expected shape"):
        route(torch.zeros(1, 7), _case(RoutingMethod.Default, 2))
