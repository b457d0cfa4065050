import pytest

from fp4moe_diag import GatedActivation, MoECase, RoutingMethod, WeightFormat

BASE = dict(num_tokens=4, hidden_size=64, intermediate_size=64, num_experts=8, top_k=2)


def test_defaults_and_derived():
    c = MoECase(**BASE, local_num_experts=4, local_expert_offset=4, model="m")
    assert c.local_num_experts == 4 and c.ep_size == 2 and c.ep_rank == 1
    assert c.routing_method is RoutingMethod.Renormalize
    assert c.weight_format is WeightFormat.MXFP4 and c.block_size == 32
    assert c.label == "m/ep2r1/T4/H64/I64/E8/k2/mxfp4"
    assert MoECase.from_record(c.to_record()) == c


def test_parsing_of_enums():
    c = MoECase(**BASE, routing_method="deepseekv3", n_group=4, topk_group=2, weight_format="NVFP4",
                activation="swiglu")
    assert c.routing_method is RoutingMethod.DeepSeekV3 and c.routed_scaling_factor == 1.0
    assert c.weight_format is WeightFormat.NVFP4 and c.activation is GatedActivation.SWIGLU
    assert c.swiglu_alpha is None and c.swiglu_limit is None
    assert MoECase(**BASE, routing_method=4).routing_method is RoutingMethod.RenormalizeNaive


@pytest.mark.parametrize(
    "changes,field,expect",
    [
        (dict(num_tokens=0), "num_tokens", ">= 1"),
        (dict(hidden_size=-32), "hidden_size", ">= 1"),
        (dict(top_k=9), "top_k", "<= num_experts"),
        (dict(hidden_size=48), "hidden_size", "multiple of the mxfp4 block size 32"),
        (dict(intermediate_size=40, weight_format="nvfp4"), "intermediate_size", "block size 16"),
        (dict(routing_method=9), "routing_method", "unknown routing method"),
        (dict(routing_method="softmaxish"), "routing_method", "unknown routing method"),
        (dict(local_num_experts=4, local_expert_offset=6), "local_expert_offset \\+ local_num_experts", "<= num_experts"),
        (dict(routing_method="Llama4"), "top_k", "Llama4 routing expects top_k == 1"),
        (dict(routing_method="DeepSeekV3"), "n_group/topk_group", "expects both"),
        (dict(routing_method="DeepSeekV3", n_group=3, topk_group=1), "n_group", "divisor"),
        (dict(n_group=2, topk_group=1), "n_group/topk_group", "only DeepSeekV3"),
        (dict(weight_format="int4"), "weight_format", "expected one of"),
        (dict(swiglu_limit=None), "swiglu_limit", "expects a float"),
        (dict(num_tokens=2.5), "num_tokens", "expected an int"),
        (dict(num_experts=70000, top_k=2), "num_experts", "65536"),
    ],
)
def test_bad_fields_name_the_field(changes, field, expect):
    with pytest.raises(ValueError, match=f"{field}.*{expect}"):
        MoECase(**{**BASE, **changes})
