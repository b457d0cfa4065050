"""FlashInfer's trtllm-gen FP4 MoE, the routed entry point of the upstream bug.

``flashinfer.trtllm_fp4_block_scale_routed_moe`` takes vLLM's packed ``topk_ids``
(``(expert_id << 16) | bf16(weight)``), MXFP4/NVFP4 weights shuffled for trtllm-gen's kernels,
and runs on SM100/SM103 (B200, GB200, B300) only.  Elsewhere this backend reports
``unsupported`` with that reason.  On SM100 it is device-safe by construction: tactics come
from the runner's ``get_valid_tactics`` on the recorded (shape-only) inputs, and the stock
profiling path that would hand the kernel the ``meta`` routing-logits placeholder never runs.

The entry point takes no tactic argument, so :meth:`TrtllmGenBackend.launcher` commits the tactic to FlashInfer's
own AutoTuner cache once, before the timed calls (:meth:`.api.FlashInferApi.commit`: 0.5 its ``profiling_cache``,
0.7 a tuner config through ``load_configs``), and returns the plain entry point with its arguments bound: each
timed call is FlashInfer's op, whose own cache lookup answers with the tactic.  :meth:`~TrtllmGenBackend.end_launches`
gives the tuner back the cache it had before.

Weight preparation follows FlashInfer's tests for trtllm-gen FP4 MoE (gated-activation row
reorder, then ``shuffle_matrix_a`` / ``shuffle_matrix_sf_a`` with ``epilogue_tile_m = 128``).
Not yet run on a B200 by this project: treat its numbers as unverified until a B200 run lands.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch

from ...problem.case import ActivationFormat, MoECase
from .hooks import TRTLLM_FP4_OP, routed_moe_function
from ...problem.inputs import MoEInputs, build_inputs
from ..base import Backend, Support, Tactic
from .base import (
    FlashInferPrepared,
    capture_tuner_calls,
    commit_for_launches,
    flashinfer_support,
    restore_after_launches,
    valid_tactics,
)

EPILOGUE_TILE_M = 128


def prepare_trtllm_weights(kwargs: dict, case: MoECase) -> dict:
    """Reorder + shuffle gemm1/gemm2 weights and scales into trtllm-gen's layout (SM100)."""
    from flashinfer import reorder_rows_for_gated_act_gemm, shuffle_matrix_a, shuffle_matrix_sf_a

    kw = dict(kwargs)
    l, i, h = case.local_num_experts, case.intermediate_size, case.hidden_size
    b = case.block_size
    w13, s13 = kw["gemm1_weights"], kw["gemm1_weights_scale"]
    w2, s2 = kw["gemm2_weights"], kw["gemm2_weights_scale"]
    g1w, g1s, g2w, g2s = [], [], [], []
    for e in range(l):
        w = reorder_rows_for_gated_act_gemm(w13[e].view(torch.uint8).clone())
        s = reorder_rows_for_gated_act_gemm(s13[e].view(torch.uint8).clone())
        g1w.append(shuffle_matrix_a(w, EPILOGUE_TILE_M))
        g1s.append(shuffle_matrix_sf_a(s.reshape(2 * i, h // b), EPILOGUE_TILE_M, b))
        g2w.append(shuffle_matrix_a(w2[e].view(torch.uint8), EPILOGUE_TILE_M))
        g2s.append(shuffle_matrix_sf_a(s2[e].view(torch.uint8).reshape(h, i // b), EPILOGUE_TILE_M, b))
    sdt = s13.dtype
    kw["gemm1_weights"] = torch.stack(g1w)
    kw["gemm1_weights_scale"] = torch.stack(g1s).view(sdt).reshape(l, 2 * i, h // b)
    kw["gemm2_weights"] = torch.stack(g2w)
    kw["gemm2_weights_scale"] = torch.stack(g2s).view(sdt).reshape(l, h, i // b)
    b13 = kw.get("gemm1_bias")
    if b13 is not None:  # the bias rows follow the weight rows (reorder works on dim 0, per expert)
        kw["gemm1_bias"] = torch.stack(
            [reorder_rows_for_gated_act_gemm(b13[e].reshape(2 * i, 1)).reshape(2 * i) for e in range(l)]
        )
    return kw


def routed_kwargs(inputs: MoEInputs, **kwargs: Any) -> dict:
    """``inputs.trtllm_kwargs(**kwargs)`` as the installed flashinfer's routed entry point names them
    (:meth:`.api.FlashInferApi.routed_kwargs`: 0.7 drops ``tile_tokens_dim`` on purpose)."""
    from .api import get_api  # noqa: PLC0415

    return get_api().routed_kwargs(inputs.trtllm_kwargs(**kwargs))


def _kernel_tactic(tactic: Tactic) -> Any:
    """The kernel takes a [tile_tokens_dim, config] list; our Tactic ids are hashable tuples."""
    return list(tactic.id) if isinstance(tactic.id, tuple) else tactic.id


class TrtllmGenBackend(Backend):
    name = "trtllm"
    capabilities = ((10, 0), (10, 3))

    def supports(self, device: Any) -> Support:
        sup = super().supports(device)
        if not sup.ok and "SM10" in sup.reason:
            return Support(False, sup.reason + "; its tactic list needs one too (trtllm_get_valid_moe_configs "
                                               "queries the live GPU)")
        return sup

    def extra_support(self, device: torch.device) -> Support:
        return flashinfer_support()

    def check_case(self, case: MoECase) -> Support:
        if case.activation_format is not ActivationFormat.BF16:
            return Support(False, "fp4moe-diag builds bf16 hidden states; mxfp8 activations are not wired yet")
        return Support(True)

    def prepare(self, inputs: MoEInputs) -> FlashInferPrepared:
        kw = routed_kwargs(inputs, tune_max_num_tokens=max(1, inputs.case.num_tokens))
        return FlashInferPrepared(inputs, prepare_trtllm_weights(kw, inputs.case))

    def tactics(self, case: MoECase, prepared: Optional[FlashInferPrepared] = None) -> list[Tactic]:
        if prepared is None:
            prepared = self.prepare(build_inputs(case, "cuda"))
        call = capture_tuner_calls(routed_moe_function(), prepared.kwargs, [TRTLLM_FP4_OP])[0]
        # get_valid_tactics only reads shapes (routing_logits.shape[0]); the meta placeholder is
        # never handed to a kernel here.
        tacts = valid_tactics(call)
        out = [Tactic(id=-1, label="default(-1)", is_default=True)]
        out += [Tactic(id=tuple(t) if isinstance(t, (list, tuple)) else t,
                       label=f"tile{t[0]}/cfg{t[1]}" if isinstance(t, (list, tuple)) else str(t)) for t in tacts]
        return out

    def tactic_calls(self, prepared: FlashInferPrepared, tactic: Tactic,
                     output: Optional[torch.Tensor] = None) -> list:
        """[(recorded choose_one call, kernel tactic)]: what :meth:`commit_tactic` and :meth:`launcher` commit
        (the call recorded with ``output`` bound when given, as the launcher calls the op)."""
        kw = prepared.kwargs if output is None else {**prepared.kwargs, "output": output}
        call = capture_tuner_calls(routed_moe_function(), kw, [TRTLLM_FP4_OP])[0]
        return [(call, _kernel_tactic(tactic))]

    def commit_tactic(self, prepared: FlashInferPrepared, tactic: Tactic) -> list:
        """Hand ``tactic`` to FlashInfer's AutoTuner cache: a later ``autotune(False)`` call uses it."""
        from .api import get_api

        return get_api().commit(self.tactic_calls(prepared, tactic))

    def launcher(self, prepared: FlashInferPrepared, tactic: Tactic,
                 output: Optional[torch.Tensor] = None) -> Callable[[], Any]:
        """``trtllm_fp4_block_scale_routed_moe`` with its arguments checked (:func:`.api.checked_kwargs`) and bound
        once.  It takes no tactic: ``tactic`` is committed to FlashInfer's AutoTuner cache for this op and shape
        bucket now (:func:`.base.commit_for_launches`), and FlashInfer's own lookup answers with it on every call,
        until :meth:`end_launches` gives the tuner back its cache."""
        from .api import checked_kwargs

        fn = routed_moe_function()
        kw = dict(prepared.kwargs) if output is None else {**prepared.kwargs, "output": output}
        bound = checked_kwargs(fn, kw)
        commit_for_launches(prepared, self.tactic_calls(prepared, tactic, output))
        return functools.partial(fn, **bound)

    def end_launches(self, prepared: FlashInferPrepared) -> None:
        """FlashInfer's AutoTuner cache as it was before the first :meth:`launcher`."""
        restore_after_launches(prepared)

    def run(self, prepared: FlashInferPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.launch_once(prepared, tactic, output)
