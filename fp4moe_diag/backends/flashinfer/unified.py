"""FlashInfer's unified MoE runners (``flashinfer.fused_moe`` ``MoEConfig`` / ``MoEWeightPack`` / runner classes,
0.7.x) that take MXFP4 weights on SM90, each as a backend of its own.

Which runners exist is FlashInfer's answer, not ours: :func:`sm90_mxfp4_runners` reads FlashInfer's own
backend registry (``flashinfer.fused_moe.layer._BACKEND_RUNNERS``: config class -> runner class) and keeps every
runner whose config ``supported(90)`` and whose ``supported_quant_variants`` has MXFP4 weights.  On FlashInfer
0.7.4 that is four; :data:`RUNNERS` wires each (a test fails when FlashInfer offers one we do not wire):

=====================  ==========================  ==================  ===========================================
backend                FlashInfer runner           activations         tactics
=====================  ==========================  ==================  ===========================================
``cutlass_w4a16``      ``CutlassW4A16Runner``      BF16                the flat CUTLASS op's gemm1 / gemm2 lists
``cutlass_humming``    ``CutlassHummingRunner``    FP8 per tensor      the same, for the Humming kernels
``cutile_mxfp4``       ``CuTileMxfp4Bf16Runner``   BF16                the runner's own stage configs
``frost_low_latency``  ``FrostLowLatencyRunner``   BF16                the runner's fallback (FMA)
=====================  ==========================  ==================  ===========================================

Inputs are made by FlashInfer's own preparation for that runner: ``<Config>.prepare_weights`` from the canonical
BF16 weights (the case's MXFP4 weights dequantized: FlashInfer re-quantizes them with its own quantizer; the
correctness check against the float32 reference of *our* quantized weights shows any difference), or from the
packed E2M1 bytes and UE8M0 scales where the runner takes those (cuTile).  A tactic is forced through the
runner's own ``forward(inputs, tactic=...)``; the output buffer is the tuner's poisoned one.

What the runners do not take is a row that says so, before anything is built: expert biases (the unified
CUTLASS runners call ``cutlass_fused_moe`` without ``fc1/fc2_expert_biases``; gpt-oss has them, so its shapes run
as ``data/shapes/gpt-oss-nobias.csv``), expert parallelism (``supports_expert_parallelism = False``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from ...problem.case import ActivationFormat, GatedActivation, MoECase, WeightFormat
from ...problem.inputs import MoEInputs
from ...problem.quant import dequantize_mxfp4
from ..base import Backend, Support, Tactic
from .base import flashinfer_support
from .cutlass import _cutlass_fn, combine_stage_winners, load_slim_module_if_configured, stage_tactics


@dataclass(frozen=True)
class RunnerSpec:
    backend: str
    runner: str  # class name in flashinfer.fused_moe.runners, or "module:Class"
    config: str  # class name in flashinfer.fused_moe.api
    activation: str  # QuantFormat member name of the activation axis
    archs: tuple[tuple[int, int], ...]
    weights_from: str  # "bf16": Config.prepare_weights(w1_bf16, w2_bf16, geometry); "mx": (w1_fp4, w1_scale, w2_fp4,
    #                    w2_scale, geometry); "mx_plain": the same four, activation only
    tactics: str  # "cutlass" (flat op gemm1/gemm2 lists), "cutile" (stage configs), "fallback" (-1 only)


RUNNERS: dict[str, RunnerSpec] = {s.backend: s for s in (
    RunnerSpec("cutlass_w4a16", "CutlassW4A16Runner", "CutlassW4A16Config", "BF16", ((9, 0),), "bf16", "cutlass"),
    RunnerSpec("cutlass_humming", "CutlassHummingRunner", "CutlassHummingConfig", "FP8PerTensor", ((9, 0),),
               "bf16", "cutlass"),
    RunnerSpec("cutile_mxfp4", "CuTileMxfp4Bf16Runner", "CuTileMxfp4Bf16Config", "BF16",
               ((8, 9), (9, 0), (12, 0), (12, 1)), "mx", "cutile"),
    RunnerSpec("frost_low_latency", "flashinfer.fused_moe.backends.frost_low_latency.runner:FrostLowLatencyRunner",
               "FrostLowLatencyConfig", "BF16", ((8, 0), (9, 0), (10, 0), (10, 3), (10, 7), (12, 0)), "mx_plain",
               "fallback"),
)}


def runner_class(spec: RunnerSpec) -> Any:
    """The FlashInfer runner class of ``spec`` (an AttributeError/ImportError when this FlashInfer lacks it)."""
    import importlib

    module, _, cls = spec.runner.rpartition(":")
    return getattr(importlib.import_module(module or "flashinfer.fused_moe.runners"), cls)


def sm90_mxfp4_runners() -> list[str]:
    """FlashInfer's own list: runner class names whose config supports SM90 and that take MXFP4 weights."""
    from flashinfer.fused_moe import layer
    from flashinfer.fused_moe.api import QuantFormat

    out = []
    for cfg, run in layer._BACKEND_RUNNERS.items():
        variants = getattr(run, "supported_quant_variants", ())
        if cfg.supported(90) and any(w is QuantFormat.MXFP4 for w, _ in variants):
            out.append(run.__name__)
    return sorted(out)


@dataclass
class UnifiedPrepared:
    inputs: MoEInputs
    runner: Any
    packed: list
    launch_kwargs: dict


class UnifiedRunnerBackend(Backend):
    """One FlashInfer unified MoE runner (:data:`RUNNERS`), every tactic forced through ``runner.forward``."""

    spec: RunnerSpec

    def extra_support(self, device: torch.device) -> Support:
        sup = flashinfer_support()
        if not sup:
            return sup
        try:
            runner_class(self.spec)
        except (ImportError, AttributeError) as e:
            return Support(False, f"flashinfer {self._fi_version()} has no {self.spec.runner}: {type(e).__name__}: {e}")
        return Support(True)

    def check_case(self, case: MoECase) -> Support:
        r = self.spec.runner.rpartition(":")[2]
        if case.weight_format is not WeightFormat.MXFP4 or case.activation_format is not ActivationFormat.BF16:
            return Support(False, f"{r}: fp4moe-diag wires MXFP4 weights with BF16 input activations only")
        if case.has_bias:
            return Support(False, f"{r} takes no expert biases (FlashInfer {self._fi_version()} calls the kernel "
                                  "without fc1/fc2_expert_biases); the gpt-oss shapes without biases are "
                                  "data/shapes/gpt-oss-nobias.csv")
        if case.ep_size != 1:
            return Support(False, f"{r} does not support expert parallelism (supports_expert_parallelism = False)")
        if case.activation is not GatedActivation.SWIGLU_OAI:
            return Support(False, f"{r}: fp4moe-diag maps only the gpt-oss SwiGLU (alpha, beta, limit) to FlashInfer's")
        return Support(True)

    @staticmethod
    def _fi_version() -> str:
        import flashinfer  # noqa: PLC0415

        return flashinfer.__version__

    def versions(self) -> dict[str, str]:
        return {"flashinfer": self._fi_version()}

    # -- preparation (FlashInfer's own) ---------------------------------------------------
    def _config(self, case: MoECase) -> Any:
        import flashinfer.fused_moe.api as api  # noqa: PLC0415

        act = api.SwiGLU(alpha=float(case.swiglu_alpha), beta=float(case.swiglu_beta), limit=float(case.swiglu_limit))
        return api.MoEConfig(
            routing=api.RoutingConfig(num_experts=case.num_experts, top_k=case.top_k),
            quant=api.QuantConfig(weight=api.QuantFormat.MXFP4,
                                  activation=getattr(api.QuantFormat, self.spec.activation)),
            experts=api.ExpertConfig(intermediate_size=case.intermediate_size),
            activation=act,
            backend=api.BackendOptions(candidates=(getattr(api, self.spec.config)(),)),
            execution=api.ExecutionConfig(tune_max_num_tokens=max(case.num_tokens, 1)),
        ), act

    def _view(self, cfg_cls: Any, inputs: MoEInputs, act: Any) -> dict:
        c = inputs.case
        geo = dict(num_local_experts=c.local_num_experts, hidden_size=c.hidden_size,
                   intermediate_size=c.intermediate_size, activation=act, device=inputs.device)
        if self.spec.weights_from in ("mx", "mx_plain"):
            e8 = torch.float8_e8m0fnu
            mx = (inputs.w13.data, inputs.w13.scale.view(e8), inputs.w2.data, inputs.w2.scale.view(e8))
            return cfg_cls.prepare_weights(*mx, **geo) if self.spec.weights_from == "mx" else \
                cfg_cls.prepare_weights(*mx, activation=act)
        w1 = dequantize_mxfp4(inputs.w13.data, inputs.w13.scale, torch.float32).to(torch.bfloat16)
        w2 = dequantize_mxfp4(inputs.w2.data, inputs.w2.scale, torch.float32).to(torch.bfloat16)
        return cfg_cls.prepare_weights(w1, w2, **geo)

    def prepare(self, inputs: MoEInputs) -> UnifiedPrepared:
        import flashinfer.fused_moe.api as api  # noqa: PLC0415

        why = self.check_case(inputs.case)
        if not why:
            raise ValueError(f"case: {why.reason}")
        load_slim_module_if_configured()
        cfg, act = self._config(inputs.case)
        runner = runner_class(self.spec)(cfg, device=inputs.device)
        runner.check_support()
        runner.build()
        weights = api.MoEWeightPack()
        weights.prepare_for(runner.backend_key, self._view(getattr(api, self.spec.config), inputs, act))
        pack = api.MoEActivationPack(inputs.hidden_states, None, inputs.topk_ids.to(torch.int32).contiguous(),
                                     inputs.topk_weights.float().contiguous())
        packed = runner.pack_inputs(pack, weights)
        return UnifiedPrepared(inputs, runner, packed, dict(runner.launch_kwargs_for(packed)))

    # -- tactics -----------------------------------------------------------------------
    def tactics(self, case: MoECase, prepared: Optional[UnifiedPrepared] = None) -> list[Tactic]:
        if prepared is None:
            raise ValueError(f"prepared: {self.name} lists tactics from FlashInfer's prepared runner; call prepare()")
        out = [Tactic(id=-1, label="default(-1)", is_default=True)]
        if self.spec.tactics == "cutlass":
            out += _cutlass_stage_tactics(prepared)
        elif self.spec.tactics == "cutile":
            out += _cutile_stage_tactics(prepared)
        return out

    def combined_tactic(self, timings: list[tuple[Tactic, float]]) -> Optional[Tactic]:
        """The CUTLASS runners: the flat path's pair of stage winners (:func:`.cutlass.combine_stage_winners`), as
        one tactic of the runner; none for the others."""
        return combine_stage_winners(timings, default_id=-1) if self.spec.tactics == "cutlass" else None

    def launcher(self, prepared: UnifiedPrepared, tactic: Tactic,
                 output: Optional[torch.Tensor] = None) -> Callable[[], Any]:
        """FlashInfer's own ``runner.forward`` with the packed inputs and the tactic bound (the runner writes, and
        returns, its first input: the tuner's poisoned ``output`` when given)."""
        packed = prepared.packed if output is None else [output, *prepared.packed[1:]]
        return functools.partial(prepared.runner.forward, packed, tactic=tactic.id, **prepared.launch_kwargs)

    def run(self, prepared: UnifiedPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.launch_once(prepared, tactic, output)


def _cutlass_stage_tactics(prepared: UnifiedPrepared) -> list[Tactic]:
    """The stage tactics of the flat CUTLASS op this runner calls, for the arguments it passes it."""
    r, p = prepared.runner, prepared.packed
    kw = dict(input=p[1], token_selected_experts=p[2], token_final_scales=p[3], fc1_expert_weights=p[4],
              fc2_expert_weights=p[5], output_dtype=torch.bfloat16, quant_scales=r._quant_scales(p),
              use_w4_group_scaling=r._use_w4_group_scaling, use_wfp4afp8_humming=r._use_wfp4afp8_humming,
              tune_max_num_tokens=r.config.execution.tune_max_num_tokens, **prepared.launch_kwargs)
    return stage_tactics(_cutlass_fn(), kw)


def _cutile_stage_tactics(prepared: UnifiedPrepared) -> list[Tactic]:
    """cuTile compound tactics (block, gemm1 config, gemm2 config): each stage's configs with the other stage at
    the runner's fallback, for the fallback block size."""
    r, p = prepared.runner, prepared.packed
    fb = tuple(r._fallback_tactic(p))
    block = fb[0]
    out = []
    for stage, sl in ((1, r._stage_tactic_slice(1)), (2, r._stage_tactic_slice(2))):
        for cfg in r._stage_tactics(p, stage=stage, block_size=block):
            t = list(fb)
            t[sl] = list(cfg)
            if tuple(t) != fb:
                out.append(Tactic(id=tuple(t), label=f"b{block}-g{stage}:{'x'.join(map(str, cfg))}",
                                  params={"stage": stage}))
    return out


#: tolerance of the FP8-activation runners (Humming) against the bf16 float32 reference: no reference of their exact
#: quantization (per-tensor e4m3 activations with FlashInfer's scale recipe) is built here, so they are checked against
#: the bf16 one with room for what FP8 activations cost -- our own W4A8 kernels measure 0.041-0.046 against that same
#: reference on the H200 (s9e, s10 runs), Humming 0.042 (s10); a wrong kernel is far above it
W4A8_VS_BF16_REL_L2_TOL = 5e-2


def _make(spec: RunnerSpec) -> type[UnifiedRunnerBackend]:
    bf16 = spec.activation == "BF16"
    return type(f"Unified_{spec.backend}", (UnifiedRunnerBackend,),
                {"name": spec.backend, "spec": spec, "capabilities": spec.archs, "__module__": __name__,
                  "kernel_precision": "w4a16" if bf16 else "w4a8", "rel_l2_tol": None if bf16 else W4A8_VS_BF16_REL_L2_TOL})


CutlassW4A16Backend = _make(RUNNERS["cutlass_w4a16"])
CutlassHummingBackend = _make(RUNNERS["cutlass_humming"])
CuTileMxfp4Backend = _make(RUNNERS["cutile_mxfp4"])
FrostLowLatencyBackend = _make(RUNNERS["frost_low_latency"])
