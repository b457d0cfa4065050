"""profiling.waves: the programs of each gemm launch of a tactic on a case (its own routing), the programs an SM holds
(the sm_90a build) and the waves on a GPU of N SMs; and problem.inputs.case_routing, which it draws the routing with."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.inputs import case_routing, local_expert_ids
from fp4moe_diag.problem.shapes import default_case
from fp4moe_diag.profiling.waves import LaunchWaves, launch_waves, main
from interpreter import bundled_tools

TOOLS = pytest.mark.skipif(not bundled_tools("ptxas", "cuobjdump"),
                           reason="triton with its bundled CUDA tools is not installed")


def test_case_routing_is_build_inputs_routing():
    case = MoECase(num_tokens=40, hidden_size=128, intermediate_size=64, num_experts=8, top_k=2,
                   local_num_experts=4, local_expert_offset=4)
    inp = build_inputs(case)
    ids, weights = case_routing(case)
    assert torch.equal(ids, inp.topk_ids) and torch.equal(weights, inp.topk_weights)
    assert torch.equal(local_expert_ids(ids, case), inp.local_topk_ids)
    assert int((inp.local_topk_ids >= 0).sum()) < 80  # some pairs on the other rank
    with pytest.raises(ValueError, match="^case:"):
        case_routing("gpt-oss-20b")
    if not torch.cuda.is_available():  # the device is checked before any draw
        with pytest.raises(ValueError, match="^device"):
            case_routing(case, "cuda")


def test_waves_and_floors_arithmetic():
    w = LaunchWaves("gemm1", 16, programs=384, per_sm=3, sms=132)
    assert w.waves == pytest.approx(384 / 396)
    assert LaunchWaves("gemm2 tail", 128, programs=0, per_sm=2, sms=132).waves == 0.0
    # 384 programs x 6 K steps x 800 loop instructions x 4 warps = 7,372,800 warp instructions; 132 SMs x 4 issue
    # slots x 1980 cycles per us = 1,045,440 per us: 7.05 us.  40,108,032 bytes at 4380 GB/s: 9.16 us.  Products:
    # 384 x 6 x (2 x 16 x 128 x 256 = 1,048,576) = 2.416e9 flop at 790 TFLOP/s: 3.06 us
    w = LaunchWaves("gemm1", 16, 384, 3, 132, k_steps=6, loop_instructions=800, num_warps=4, weight_bytes=40_108_032,
                    step_flops=2 * 16 * 128 * 256)
    assert w.issue_floor_us() == pytest.approx(7_372_800 / 1_045_440)
    assert w.dram_floor_us() == pytest.approx(40_108_032 / 4_380_000)
    assert w.mma_floor_us() == pytest.approx(384 * 6 * 1_048_576 / 790e6)
    assert w.issue_floor_us(clock_ghz=0.99) == pytest.approx(2 * w.issue_floor_us())


@TOOLS
def test_launch_waves_at_t1_and_with_tails():
    # gpt-oss-20b EP1 T=1: top-4 of one token is 4 experts, one M block each; gemm1 over I = 3072 in 64-column tiles,
    # split 2: 4 x 48 x 2 programs; gemm2 over H = 3072 in 64-row tiles, split 2
    case = default_case("gpt-oss-20b", 1, 1)
    g1, g2 = launch_waves(case, "m16n64k256w4s3-ps-sk2")
    assert (g1.kernel, g1.programs, g2.kernel, g2.programs) == ("gemm1", 384, "gemm2", 384)
    assert g1.per_sm >= 1 and g1.waves == pytest.approx(384 / (g1.per_sm * 132))
    # the floors' inputs: K 3072 split in 2 = 6 steps of 256; 4 experts' [6144, 3072] gemm1 bytes (1536 of codes and 96
    # of scales a row) and [3072, 3072] gemm2 bytes; a gemm1 step is 16 x 128 rows (lin + gate) x 256 products
    assert (g1.k_steps, g2.k_steps, g1.num_warps) == (6, 6, 4)
    assert (g1.weight_bytes, g2.weight_bytes) == (4 * 6144 * 1632, 4 * 3072 * 1632)
    assert (g1.step_flops, g2.step_flops) == (2 * 16 * 128 * 256, 2 * 16 * 64 * 256)
    assert g1.loop_instructions > 500  # the sm_90a build's K loop (every Triton release: 750-900 instructions)
    # a -tN tactic: every expert's pairs in the main launch's blocks of 128 or the tail's of 64, none lost
    case = MoECase(num_tokens=300, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2)
    plan = launch_waves(case, "m128n128k64w8s3-ps-g2n256-t64", sms=10)
    assert [w.kernel for w in plan] == ["gemm1", "gemm1 tail", "gemm2", "gemm2 tail"]
    assert [w.block_m for w in plan] == [128, 64, 128, 64] and all(w.sms == 10 for w in plan)
    ids = local_expert_ids(case_routing(case)[0], case)
    counts = torch.bincount(ids[ids >= 0].flatten(), minlength=4).tolist()
    main_blocks = sum(n // 128 + (n % 128 > 64) for n in counts)  # a remainder of 1..64 goes to the tail
    tail_blocks = sum(0 < n % 128 <= 64 for n in counts)
    assert plan[0].programs == main_blocks * 2 and plan[1].programs == tail_blocks * 2  # 256 / 128 column tiles
    assert plan[2].programs == main_blocks * 1 and plan[3].programs == tail_blocks * 1  # gemm2: 256 rows a program


def test_launch_waves_refuses_before_any_build(capsys):
    case = default_case("gpt-oss-20b", 1, 1)
    with pytest.raises(ValueError, match="^tactic: the bf16"):
        launch_waves(case, "m64n64k64w4s3-f8")
    with pytest.raises(ValueError, match="^sms:"):
        launch_waves(case, "m16n64k256w4s3-ps-sk2", sms=0)
    with pytest.raises(ValueError, match="^tactic: .* leaves a split"):
        launch_waves(MoECase(num_tokens=1, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2),
                     "m16n64k256w4s3-ps-sk2")
    assert main(["--tokens", "1", "--tactic", "m16n64"]) == 2
    assert capsys.readouterr().err.startswith("waves: error: tactic:")
