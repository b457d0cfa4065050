"""FlashInfer's CUTLASS fused MoE: MXFP4 weights x BF16 activations (SM90 ``use_w4_group_scaling``).

On SM90 this is the Hopper mixed-input TMA warp-specialized grouped GEMM that vLLM uses for
gpt-oss with FlashInfer.  Weight layout: flashinfer 0.5.2 takes the raw packed uint8 weights and
the ue8m0 scale bytes interleaved as vLLM's ``FLASHINFER_CUTLASS_MXFP4_BF16`` path does
(:func:`interleave_mxfp4_scales_sm90`: ``[E, R, K/32] -> [E, K/128, R*4]``, viewed as int32);
newer releases ship ``interleave_moe_{weights,scales}_for_sm90_mixed_gemm`` (used when present).
``scale_layout="raw"`` passes the scales unchanged (what FlashInfer 0.5.2's own test does;
measured wrong on H200, see the README).

Tactics: FlashInfer tunes gemm1 and gemm2 separately (ops ``trtllm::fused_moe::gemm1``/``gemm2``).
Our tactic list is every gemm1 tactic (gemm2 at the fallback), every gemm2 tactic (gemm1 at the
fallback), plus the fallback pair ``(-1, -1)`` that FlashInfer runs without tuning: ``N1 + N2 + 1``
rows.  The ids and labels are the ones the installed FlashInfer's tuner hands the kernel
(:mod:`.api`): 0.5.x ``g1:a`` / ``g2:b`` with both in ``0 .. get_tactic_num()-1``; 0.7.x gemm2 ids are
absolute (``g1count .. g1count+g2count-1``) and both lists are filtered by the runner's
``get_valid_tactics``; ``params["gemm2_index"]`` is the position among the gemm2 configs either way.
A tactic is forced through ``profile_ids=[g1, g2]`` where the API has it (0.7), else (0.5) by committing it to
FlashInfer's own ``AutoTuner`` cache before the timed calls (:meth:`CutlassBackend.launcher`, restored after); the
op's real Python runs every time, nothing of this suite does.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch

from ...problem.case import ActivationFormat, GatedActivation, MoECase, WeightFormat
from ...problem.inputs import MoEInputs, build_inputs, default_device
from ..base import Backend, Support, Tactic
from .api import checked_kwargs, get_api
from .base import (FlashInferPrepared, capture_tuner_calls, commit_for_launches, flashinfer_support,
                   restore_after_launches)
from ... import settings

GEMM1_OP = "trtllm::fused_moe::gemm1"
GEMM2_OP = "trtllm::fused_moe::gemm2"


def interleave_mxfp4_scales_sm90(scales: torch.Tensor) -> torch.Tensor:
    """vLLM's ``_interleave_mxfp4_cutlass_sm90``: ``[E, R, K/32]`` ue8m0 bytes -> ``[E, K/128, R*4]``.

    Groups of 4 consecutive K-blocks of one row become contiguous, rows next to each other.
    """
    if scales.dim() != 3 or scales.shape[2] % 4:
        raise ValueError(f"scales: expected [E, R, K/32] with K/32 a multiple of 4, got {tuple(scales.shape)}")
    e, r, kb = scales.shape
    return scales.reshape(e, r, kb // 4, 4).permute(0, 2, 1, 3).reshape(e, kb // 4, r * 4).contiguous()


def _cutlass_fn():
    from flashinfer.fused_moe import cutlass_fused_moe

    return cutlass_fused_moe


def stage_tactics(fn, kwargs: dict) -> list[Tactic]:
    """Every gemm1 tactic (gemm2 at -1) and every gemm2 tactic (gemm1 at -1) that FlashInfer's CUTLASS op ``fn``
    offers for ``kwargs``, with the ids its tuner hands the kernel (:mod:`.api`); nothing is launched."""
    api = get_api()
    calls = capture_tuner_calls(fn, kwargs, [GEMM1_OP, GEMM2_OP])
    g2call = calls[1] if len(calls) > 1 else None
    n1, n2 = api.cutlass_tactic_ids(calls[0], g2call)
    idx = (lambda t: api.cutlass_gemm2_index(g2call, t)) if g2call is not None else (lambda t: t)  # noqa: E731
    return ([Tactic(id=(t, -1), label=f"g1:{t}", params={"gemm1": t, "gemm2": -1, "gemm2_index": -1}) for t in n1]
            + [Tactic(id=(-1, t), label=f"g2:{t}", params={"gemm1": -1, "gemm2": t, "gemm2_index": idx(t)})
               for t in n2])


def combine_stage_winners(timings: list[tuple[Tactic, float]], default_id: Any) -> Optional[Tactic]:
    """``(fastest gemm1, fastest gemm2)`` of the single-stage tactics in ``timings`` ((tactic, median us), ids
    ``(g1, -1)`` / ``(-1, g2)``): the pair FlashInfer's AutoTuner would pick, as it profiles the two GEMMs apart.
    None unless both stage winners beat the tactic ``default_id``."""
    dflt = [us for t, us in timings if t.id == default_id]

    def fastest(pos: int) -> Optional[int]:
        cands = [(us, t.id[pos]) for t, us in timings
                 if isinstance(t.id, tuple) and t.id[pos] != -1 and t.id[1 - pos] == -1]
        best = min(cands, key=lambda c: c[0], default=None)
        return best[1] if best is not None and (not dflt or best[0] < dflt[0]) else None

    g1, g2 = fastest(0), fastest(1)
    if g1 is None or g2 is None:
        return None
    return Tactic(id=(g1, g2), label=f"g1:{g1}+g2:{g2}", params={"gemm1": g1, "gemm2": g2})


def load_slim_module_if_configured() -> Optional[str]:
    """If ``FP4MOE_CUTLASS_MODULE`` names a prebuilt slim SM90 module, make FlashInfer use it."""
    path = settings.read(settings.CUTLASS_MODULE)
    if not path:
        return None
    from . import prebuilt  # noqa: PLC0415

    prebuilt.install("cutlass_fused_moe_sm90", path)
    return path


class CutlassBackend(Backend):
    name = "cutlass"
    capabilities = ((9, 0), (10, 0), (10, 3))

    def __init__(self, scale_layout: str = "auto"):
        if scale_layout not in ("auto", "raw", "vllm_sm90", "flashinfer"):
            raise ValueError(f"scale_layout: expected auto, raw, vllm_sm90 or flashinfer, got {scale_layout!r}")
        self.scale_layout = scale_layout

    def extra_support(self, device: torch.device) -> Support:
        return flashinfer_support()

    def check_case(self, case: MoECase) -> Support:
        if case.weight_format is not WeightFormat.MXFP4 or case.activation_format is not ActivationFormat.BF16:
            return Support(False, "fp4moe-diag wires the CUTLASS backend for MXFP4 weights x BF16 activations only")
        if (case.hidden_size // 32) % 4 or (case.intermediate_size // 32) % 4:
            return Support(False, "MXFP4 scales are passed as int32: hidden/intermediate must be multiples of 128")
        if not case.is_even_ep:
            return Support(False, "CUTLASS EP needs num_experts divisible by local experts and an aligned offset")
        return Support(True)

    def versions(self) -> dict[str, str]:
        import flashinfer

        return {"flashinfer": flashinfer.__version__}

    # -- tensors -----------------------------------------------------------------------
    def _kwargs(self, inputs: MoEInputs) -> dict:
        import flashinfer.fused_moe as fm

        c = inputs.case
        w13, w2 = inputs.w13.data, inputs.w2.data
        s13, s2 = inputs.w13.scale, inputs.w2.scale
        layout = self.scale_layout
        if layout == "auto":
            layout = get_api().cutlass_sm90_layout
        if layout == "flashinfer":
            if not hasattr(fm, "interleave_moe_weights_for_sm90_mixed_gemm"):
                raise ValueError(f"scale_layout='flashinfer': flashinfer {get_api().version} has no "
                                 "interleave_moe_{weights,scales}_for_sm90_mixed_gemm")
            w13 = fm.interleave_moe_weights_for_sm90_mixed_gemm(w13.contiguous(), "fp4")
            w2 = fm.interleave_moe_weights_for_sm90_mixed_gemm(w2.contiguous(), "fp4")
            s13 = fm.interleave_moe_scales_for_sm90_mixed_gemm(s13.contiguous())
            s2 = fm.interleave_moe_scales_for_sm90_mixed_gemm(s2.contiguous())
        elif layout == "vllm_sm90":
            s13 = interleave_mxfp4_scales_sm90(s13)
            s2 = interleave_mxfp4_scales_sm90(s2)
        kw = dict(
            input=inputs.hidden_states,
            token_selected_experts=inputs.topk_ids.to(torch.int32).contiguous(),
            token_final_scales=inputs.topk_weights.float().contiguous(),
            fc1_expert_weights=w13.contiguous(),
            fc2_expert_weights=w2.contiguous(),
            output_dtype=torch.bfloat16,
            quant_scales=[s13.contiguous().view(torch.int32), s2.contiguous().view(torch.int32)],
            fc1_expert_biases=None if inputs.w13_bias is None else inputs.w13_bias.to(torch.bfloat16).contiguous(),
            fc2_expert_biases=None if inputs.w2_bias is None else inputs.w2_bias.to(torch.bfloat16).contiguous(),
            ep_size=c.ep_size,
            ep_rank=c.ep_rank,
            use_w4_group_scaling=True,
            tune_max_num_tokens=max(c.num_tokens, 1),
        )
        if c.activation is GatedActivation.SWIGLU_OAI:
            kw.update(swiglu_alpha=inputs.swiglu_alpha, swiglu_beta=inputs.swiglu_beta,
                      swiglu_limit=inputs.swiglu_limit)
        return kw

    def prepare(self, inputs: MoEInputs) -> FlashInferPrepared:
        load_slim_module_if_configured()
        return FlashInferPrepared(inputs, self._kwargs(inputs))

    # -- tactics -----------------------------------------------------------------------
    def tactics(self, case: MoECase, prepared: Optional[FlashInferPrepared] = None) -> list[Tactic]:
        if prepared is None:
            dev = default_device()
            prepared = self.prepare(build_inputs(case.with_tokens(min(case.num_tokens, 8)), dev))
        default = Tactic(id=(-1, -1), label="default(-1,-1)",
                         params={"gemm1": -1, "gemm2": -1, "gemm2_index": -1}, is_default=True)
        return [default, *stage_tactics(_cutlass_fn(), prepared.kwargs)]

    def combined_tactic(self, timings: list[tuple[Tactic, float]]) -> Optional[Tactic]:
        """(fastest gemm1 tactic, fastest gemm2 tactic): what FlashInfer's AutoTuner would pick, as
        it profiles gemm1 and gemm2 separately (:func:`combine_stage_winners`)."""
        return combine_stage_winners(timings, default_id=(-1, -1))

    def tactic_calls(self, prepared: FlashInferPrepared, tactic: Tactic) -> list:
        """[(recorded choose_one call, tactic for it)] for gemm1 and gemm2 (what :meth:`commit_tactic` commits)."""
        calls = capture_tuner_calls(_cutlass_fn(), prepared.kwargs, [GEMM1_OP, GEMM2_OP])
        g = dict(zip((GEMM1_OP, GEMM2_OP), tactic.id))
        return [(c, g[c.custom_op]) for c in calls]

    def commit_tactic(self, prepared: FlashInferPrepared, tactic: Tactic) -> list:
        """Commit the (gemm1, gemm2) tactic to FlashInfer's AutoTuner for this shape bucket: a plain
        ``autotune(False)`` call then runs it (:meth:`.api.FlashInferApi.commit`)."""
        return get_api().commit(self.tactic_calls(prepared, tactic))

    def launcher(self, prepared: FlashInferPrepared, tactic: Tactic,
                 output: Optional[torch.Tensor] = None) -> Callable[[], Any]:
        """``cutlass_fused_moe`` with its arguments checked (:func:`.api.checked_kwargs`) and bound once.  0.7 forces
        the (gemm1, gemm2) tactic through ``profile_ids`` (the tuner is not asked); 0.5 has no such argument, so the
        tactic is committed to FlashInfer's AutoTuner cache for this shape bucket now (:meth:`commit_tactic`) and
        FlashInfer's own lookup answers with it on every call, until :meth:`end_launches` restores the cache."""
        g1, g2 = tactic.id
        api = get_api()
        fn = _cutlass_fn()
        kw = dict(prepared.kwargs) if output is None else {**prepared.kwargs, "output": output}
        forced = api.cutlass_forced_kwargs(kw, g1, g2)
        if forced is None:
            commit_for_launches(prepared, self.tactic_calls(prepared, tactic))
            forced = kw
        return functools.partial(fn, **checked_kwargs(fn, forced))

    def end_launches(self, prepared: FlashInferPrepared) -> None:
        """0.5: FlashInfer's AutoTuner cache as it was before the first :meth:`launcher` (nothing to undo on 0.7)."""
        restore_after_launches(prepared)

    def run(self, prepared: FlashInferPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.launch_once(prepared, tactic, output)
