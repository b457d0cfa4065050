"""FlashInfer 0.5.x: the API of the bug report (verified on 0.5.2).

* Routed trtllm-gen MoE: takes ``tile_tokens_dim``; the AutoTuner gets 6 inputs, the routed path puts
  a ``meta`` placeholder for ``routing_logits`` among them (the bug).
* CUTLASS: gemm1 and gemm2 tactics are each ``0 .. get_tactic_num()-1`` (the same config list);
  no ``profile_ids``: a tactic is forced by answering ``AutoTuner.choose_one``.
* Committing: no public API.  ``AutoTuner.profiling_cache`` is keyed
  ``(custom_op, runner class name, hash(runner), nearest_profile)`` with value
  ``(runner_id, tactic, profile)``, which is what 0.5.2's own profiling writes.
* SM90 BF16 x MXFP4 layout: raw packed weights, ue8m0 scales interleaved as vLLM does
  (``[E, R, K/32] -> [E, K/128, R*4]``, viewed as int32; measured right on the H200).
"""

from __future__ import annotations

from typing import Any

from .api import FlashInferApi

CUTLASS_INPUTS = ["input", "fc1_expert_weights", "fc1_expert_biases", "fc2_expert_weights", "fc2_expert_biases"]


class ApiV05(FlashInferApi):
    name = "v05"
    versions = "0.5.x (verified: 0.5.2)"
    input_names = {
        "flashinfer::trtllm_fp4_block_scale_moe": [
            "output", "routing_logits", "topk_ids", "expert_weights", "hidden_states", "hidden_states_scale",
        ],
        "trtllm::fused_moe::gemm1": CUTLASS_INPUTS,
        "trtllm::fused_moe::gemm2": CUTLASS_INPUTS,
    }
    cutlass_sm90_layout = "vllm_sm90"
    has_profile_ids = False
    has_tuner_configs = False
    cutlass_module_exports = ("init",)
    #: exported only by 0.7.x CUTLASS modules: a .so that has it was built from 0.7 sources
    cutlass_module_foreign = ("interleave_moe_weights_for_sm90_mixed_gemm",)

    def cutlass_tactic_ids(self, gemm1_call: Any, gemm2_call: Any) -> tuple[list, list]:
        n1 = list(gemm1_call.runners[0].get_valid_tactics(gemm1_call.inputs, None))
        n2 = list(gemm2_call.runners[0].get_valid_tactics(gemm2_call.inputs, None)) if gemm2_call else n1
        return n1, n2

    def tuner_snapshot(self) -> dict:
        """A copy of ``AutoTuner.profiling_cache`` (the only thing :meth:`commit` writes)."""
        from flashinfer.autotuner import AutoTuner

        return dict(AutoTuner.get().profiling_cache)

    def tuner_restore(self, snapshot: dict) -> None:
        from flashinfer.autotuner import AutoTuner

        cache = AutoTuner.get().profiling_cache
        cache.clear()
        cache.update(snapshot)

    def commit(self, calls_and_tactics: list[tuple[Any, Any]]) -> list:
        from flashinfer.autotuner import AutoTuner

        tuner = AutoTuner.get()
        keys = []
        for call, tactic in calls_and_tactics:
            shapes = tuple(tuner._get_input_sizes(call.inputs))
            key = AutoTuner._get_cache_key(call.custom_op, call.runners[0], shapes, call.tuning_config)
            tuner.profiling_cache[key] = (0, tactic, None)
            keys.append(key)
        return keys
