"""FlashInfer 0.7.x (verified on 0.7.4 sources and wheel).

* Routed trtllm-gen MoE (changed in 0.6.8, flashinfer PR #2916): ``tile_tokens_dim`` and
  ``gated_act_type`` removed (the tile size is part of the tactic ``[tile_tokens_dim, config]``);
  ``activation_type``, ``per_token_scale``, ``routing_metadata``, ``workspace_buffer``,
  ``valid_hidden_size``, ... added (their defaults are what the suite wants).  The AutoTuner gets 8
  inputs (``MoeRunnerInputs``) and, for the routed path, ``routing_logits=None``: no meta placeholder.
* CUTLASS: ``get_valid_tactics`` is per stage: gemm1 ids ``0 .. g1-1``, gemm2 ids are absolute,
  ``g1 .. g1+g2-1``, both filtered by occupancy and by ``get_valid_tactics_for_shape``.  A tactic is
  forced through the public ``cutlass_fused_moe(..., profile_ids=[g1, g2])``.
* Committing: FlashInfer's public tuner-config path.  A JSON in ``AutoTuner.save_configs`` format
  (``_metadata`` from FlashInfer, entries ``str((custom_op, runner class, nearest_profile, extras))
  -> [runner class, tactic]``, extras from the runner's ``get_cache_key_extras``) is written and read
  back with ``AutoTuner.load_configs``.  An in-memory winner for the same key (an earlier
  ``autotune(True)`` in this process) would take priority over loaded configs, so it is dropped.
  :meth:`ApiV07.tuner_snapshot` copies all that commit and ``load_configs`` change (:data:`TUNER_STATE` and the active
  winner partition) and :meth:`ApiV07.tuner_restore` puts it back, for a launcher's commit (trtllm).
* SM90 BF16 x MXFP4 layout: FlashInfer's own ``interleave_moe_weights_for_sm90_mixed_gemm(w, "fp4")``
  (a CUDA kernel of the CUTLASS module: needs the GPU) and ``interleave_moe_scales_for_sm90_mixed_gemm``
  (folded ``[E, R/64, K/128, 16, 16]`` uint8, passed as int32 views like FlashInfer's own
  ``CutlassW4A16Runner``).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from typing import Any, Optional

from .api import FlashInferApi
from .hooks import winner_cache

CUTLASS_INPUTS = ["input", "fc1_expert_weights", "fc1_expert_biases", "fc2_expert_weights", "fc2_expert_biases"]
TRTLLM_INPUTS = ["output", "routing_logits", "topk_ids", "expert_weights", "hidden_states", "hidden_states_scale",
                 "gemm1_lora_delta", "per_token_scale"]

#: the AutoTuner attributes (0.7.4) that :meth:`ApiV07.commit` changes besides the active winner partition:
#: ``load_configs`` writes the loaded entries and their provenance, replaces the namespaced records, clears the
#: dirty namespaces and notes the file's cache generation; a lookup answered from a loaded entry logs it once
TUNER_STATE = ("_file_configs", "_file_config_policies", "_file_config_selections", "_namespaced_records",
               "_dirty_namespaces", "_observed_cache_generations", "_logged_file_hits")


def _put_back(live: Any, saved: Any) -> None:
    """``live`` (a dict or set of FlashInfer's AutoTuner) given ``saved``'s contents, in place."""
    live.clear()
    live.update(saved)


def _autotuner_module() -> Any:
    import importlib

    return importlib.import_module("flashinfer.autotuner.autotuner")


class ApiV07(FlashInferApi):
    name = "v07"
    versions = "0.7.x (verified: 0.7.4)"
    input_names = {
        "flashinfer::trtllm_fp4_block_scale_moe": TRTLLM_INPUTS,
        "trtllm::fused_moe::gemm1": CUTLASS_INPUTS,
        "trtllm::fused_moe::gemm2": CUTLASS_INPUTS,
    }
    routed_dropped = {"tile_tokens_dim": "removed in 0.6.8 (PR #2916): the tile size is part of the tactic"}
    cutlass_sm90_layout = "flashinfer"
    has_profile_ids = True
    has_tuner_configs = True
    cutlass_module_exports = ("init", "set_deepgemm_jit_include_dirs", "interleave_moe_weights_for_sm90_mixed_gemm")

    # -- CUTLASS tactics -----------------------------------------------------------------
    def cutlass_tactic_ids(self, gemm1_call: Any, gemm2_call: Any) -> tuple[list, list]:
        g1 = [t for t in gemm1_call.runners[0].get_valid_tactics(gemm1_call.inputs, None) if t != -1]
        g2 = [t for t in gemm2_call.runners[0].get_valid_tactics(gemm2_call.inputs, None) if t != -1]
        return g1, g2

    def cutlass_gemm2_index(self, gemm2_call: Any, tactic: int) -> int:
        if tactic == -1:
            return -1
        return tactic - int(gemm2_call.runners[0].fused_moe_runner.get_gemm1_tactic_count())

    def cutlass_forced_kwargs(self, kwargs: dict, g1: int, g2: int) -> Optional[dict]:
        return {**kwargs, "profile_ids": [int(g1), int(g2)]}

    # -- the tuner's state around a commit --------------------------------------------------
    def tuner_snapshot(self) -> dict:
        """Copies of what :meth:`commit` changes: :data:`TUNER_STATE` and the active winner partition."""
        from flashinfer.autotuner import AutoTuner

        tuner = AutoTuner.get()
        missing = [n for n in TUNER_STATE if not isinstance(getattr(tuner, n, None), (dict, set))]
        if missing:
            raise RuntimeError(f"flashinfer {self.version}: its AutoTuner lacks {missing} (verified on 0.7.4): "
                               "cannot take back a committed tactic")
        with tuner._lock:
            state = {n: copy.deepcopy(getattr(tuner, n)) for n in TUNER_STATE}
            state["winners"] = dict(winner_cache(tuner))
        return state

    def tuner_restore(self, snapshot: dict) -> None:
        from flashinfer.autotuner import AutoTuner

        tuner = AutoTuner.get()
        with tuner._lock:
            for n in TUNER_STATE:
                _put_back(getattr(tuner, n), copy.deepcopy(snapshot[n]))
            _put_back(winner_cache(tuner), snapshot["winners"])

    # -- tuner configs -------------------------------------------------------------------
    def cache_key(self, call: Any) -> Any:
        """FlashInfer's ``ProfilingCacheKey`` of a recorded ``choose_one`` call (runner 0)."""
        from flashinfer.autotuner import AutoTuner

        runner = call.runners[0]
        shapes = tuple(AutoTuner.get()._get_input_sizes(call.inputs))
        return AutoTuner._get_cache_key(call.custom_op, runner, shapes, call.tuning_config,
                                        tuple(runner.get_cache_key_extras(call.inputs)))

    def tuner_config_entry(self, call: Any, tactic: Any) -> tuple[str, list]:
        key = self.cache_key(call)
        return key.file_key, [key.runner_class_name, _autotuner_module()._tactic_to_json(tactic)]

    def tuner_config_metadata(self) -> dict:
        return dict(_autotuner_module()._collect_metadata())

    def commit(self, calls_and_tactics: list[tuple[Any, Any]]) -> list:
        from flashinfer.autotuner import AutoTuner

        tuner = AutoTuner.get()
        config: dict = {"_metadata": self.tuner_config_metadata()}
        keys = []
        for call, tactic in calls_and_tactics:
            file_key, value = self.tuner_config_entry(call, tactic)
            config[file_key] = value
            keys.append(file_key)
        winners = winner_cache(tuner)
        for k in [k for k in winners if k.file_key in keys]:
            del winners[k]
        fd, path = tempfile.mkstemp(prefix="fp4moe_commit_", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(config, f)
            if not tuner.load_configs(path):
                raise RuntimeError(f"AutoTuner.load_configs refused the committed config {path} (metadata mismatch)")
        finally:
            os.unlink(path)
        return keys
