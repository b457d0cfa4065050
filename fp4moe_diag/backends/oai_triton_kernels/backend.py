"""The ``triton_kernels`` backend: the MoE exactly as vLLM runs gpt-oss on Hopper with OpenAI's triton_kernels.

vLLM 0.33.0, ``triton_kernel_fused_experts`` (3.5.1 API), per call::

    matmul_ogs(x, w13, b13, routing_data, gather_indx=gather_indx,
               precision_config=PrecisionConfig(weight_scale=s13, flex_ctx=FlexCtx(rhs_data=InFlexData())),
               fused_activation=FusedActivation(FnSpecs("swiglu", swiglu_fn, ("alpha", "limit")), (alpha, limit), 2),
               y=inter)                                  # [1, T*k, I] bf16, expert-sorted rows
    matmul_ogs(inter.view(T*k, I), w2, b2, routing_data, scatter_indx=scatter_indx,
               precision_config=PrecisionConfig(weight_scale=s2, ...), gammas=routing_data.gate_scal,
               y=out.view(1, T, H))                      # scatter + routing weight + top-k sum

``prepare`` (not timed) converts our quantized weights to the Hopper layouts (:mod:`.layout`),
builds the routing data from our top-k ids and weights (:mod:`.routing`) and allocates ``inter``;
``run`` forces the tactic's opt_flags constraints around the two calls (:mod:`.tactics`).
Kernels per call: gemm1 (one ``_matmul_ogs``), gemm2 (``_matmul_ogs`` into a bf16 scratchpad,
then ``_reduce_grouped`` over top-k), plus the scratchpad allocation from torch's caching allocator.

SwiGLU: triton_kernels computes ``s = g * sigmoid(alpha * g)`` with ``g = min(gate, limit)`` and
returns ``s * (clamp(linear, -limit, limit) + 1)``: our ``swiglu_oai`` with ``beta = 1``; other
betas and the plain ``swiglu`` are ``unsupported``.  ``alpha``/``limit`` are scalars there, so the
per-expert values must all be equal (they are: build_inputs fills them from the case).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ...problem.case import ActivationFormat, GatedActivation, MoECase, WeightFormat
from ...problem.inputs import MoEInputs
from ..base import Backend, Support, Tactic, launch_sequence
from . import loader
from .layout import gemm1_rows, to_hopper
from .routing import build_routing
from .tactics import NUM_WARPS, OptFlagsConfig, parse_config, tactic_configs


@dataclass
class TKPrepared:
    """Everything ``run`` needs; built once per case."""

    inputs: MoEInputs
    tk: Any
    hidden: torch.Tensor  # bf16 [T, H] contiguous
    w13: Any  # triton_kernels Tensor [L, H, 2I] HopperMXValueLayout
    w2: Any  # [L, I, H]
    prec13: dict  # num_warps -> PrecisionConfig (HopperMXScaleLayout(num_warps))
    prec2: dict
    b13: Optional[torch.Tensor]  # fp32 [L, 2I] interleaved
    b2: Optional[torch.Tensor]  # fp32 [L, H]
    routing_data: Any
    gather_indx: Any
    scatter_indx: Any
    routing_source: str
    activation: Any  # FusedActivation
    inter: torch.Tensor  # bf16 [1, T*k, I]
    out: torch.Tensor  # bf16 [1, T, H] (when the caller gives no output)
    notes: list = field(default_factory=list)


def _scalar(name: str, v: Optional[torch.Tensor], fallback: Optional[float]) -> float:
    if v is None:
        if fallback is None:
            raise ValueError(f"{name}: the swiglu_oai activation needs it")
        return float(fallback)
    vals = torch.unique(v.float().cpu())
    if vals.numel() != 1:
        raise ValueError(f"{name}: triton_kernels' swiglu takes one value for all experts, got {vals.tolist()}")
    return float(vals[0])


class TritonKernelsBackend(Backend):
    """vLLM's Hopper gpt-oss MoE: triton_kernels ``matmul_ogs`` with Hopper MXFP4 layouts."""

    name = "triton_kernels"
    capabilities = ((9, 0),)  # HopperMXValueLayout / HopperMXScaleLayout are the SM90 path

    def supports(self, device: Any) -> Support:
        base = super().supports(device)
        if not base:
            return base
        err = loader.import_error()
        if err is not None:
            return Support(False, err)
        return Support(True)

    def check_case(self, case: MoECase) -> Support:
        if case.weight_format is not WeightFormat.MXFP4:
            return Support(False, f"triton_kernels' Hopper path takes MXFP4 weights only, not {case.weight_format.value}")
        if case.activation_format is not ActivationFormat.BF16:
            return Support(False, f"the Hopper MXFP4 layouts need bf16 activations, not {case.activation_format.value}")
        if case.activation is not GatedActivation.SWIGLU_OAI:
            return Support(False, "triton_kernels' fused swiglu computes silu_alpha(min(gate, limit)) * "
                                  "(clamp(linear, -limit, limit) + 1); plain swiglu (no +1) is not expressible")
        if float(case.swiglu_beta) != 1.0:
            return Support(False, f"triton_kernels' swiglu adds exactly 1 to the linear part (beta = 1); "
                                  f"the case has beta = {case.swiglu_beta}")
        if case.intermediate_size % 64:
            return Support(False, f"vLLM rounds the intermediate size up to a multiple of 64 for this backend; "
                                  f"got {case.intermediate_size} (pad the case as vLLM does)")
        if case.hidden_size <= 128 or 2 * case.intermediate_size <= 128:
            # compute_block_n gives N <= 128 a 128-wide tile, but the 8-warp Hopper scale layout needs 256
            return Support(False, f"the Hopper scale layout with 8 warps needs GEMM N > 128; got H = "
                                  f"{case.hidden_size}, 2I = {2 * case.intermediate_size}")
        return Support(True)

    def tactics(self, case: MoECase, prepared: Any = None) -> list[Tactic]:
        return [Tactic(id=c, label=c.label, params=c.params(), is_default=c.is_default) for c in tactic_configs(case)]

    def versions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            import triton
            out["triton"] = triton.__version__
        except Exception:  # noqa: BLE001
            out["triton"] = "not importable"
        try:
            tk = loader.load()
            out["triton_kernels"] = f"{tk.generation} API; {tk.source}"
        except ImportError as e:
            out["triton_kernels"] = f"not importable ({str(e)[:120]})"
        return out

    def prepare(self, inputs: MoEInputs) -> TKPrepared:
        c = inputs.case
        x = self.bf16_hidden(inputs)
        tk = loader.load()
        mo = tk.matmul_ogs
        alpha = _scalar("swiglu_alpha", inputs.swiglu_alpha, c.swiglu_alpha)
        limit = _scalar("swiglu_limit", inputs.swiglu_limit, c.swiglu_limit)
        d13, s13, b13 = gemm1_rows(inputs)
        w13, sc13 = to_hopper(tk, d13, s13, NUM_WARPS)
        w2, sc2 = to_hopper(tk, inputs.w2.data.contiguous(), inputs.w2.scale.view(torch.uint8), NUM_WARPS)
        flex = lambda: mo.FlexCtx(rhs_data=tk.numerics.InFlexData())  # noqa: E731
        prec13 = {w: mo.PrecisionConfig(weight_scale=s, flex_ctx=flex()) for w, s in sc13.items()}
        prec2 = {w: mo.PrecisionConfig(weight_scale=s, flex_ctx=flex()) for w, s in sc2.items()}
        rd, gi, si, src = build_routing(tk, inputs.local_topk_ids, inputs.topk_weights, c.local_num_experts, c.top_k)
        act = mo.FusedActivation(mo.FnSpecs("swiglu", tk.swiglu.swiglu_fn, ("alpha", "limit")), (alpha, limit), 2)
        t, h = x.shape
        dev = x.device
        return TKPrepared(
            inputs=inputs, tk=tk, hidden=x.contiguous(), w13=w13, w2=w2, prec13=prec13, prec2=prec2,
            b13=None if b13 is None else b13.to(dev).contiguous(),
            b2=None if inputs.w2_bias is None else inputs.w2_bias.to(dev, torch.float32).contiguous(),
            routing_data=rd, gather_indx=gi, scatter_indx=si, routing_source=src, activation=act,
            inter=torch.empty((1, t * c.top_k, c.intermediate_size), dtype=torch.bfloat16, device=dev),
            out=torch.empty((1, t, h), dtype=torch.bfloat16, device=dev),
        )

    def launcher(self, prepared: TKPrepared, tactic: Tactic,
                 output: Optional[torch.Tensor] = None) -> Callable[[], torch.Tensor]:
        """The two ``matmul_ogs`` calls with their arguments bound; the tactic's opt_flags constraints are set now
        (triton_kernels keeps them in a module global) and stay until :meth:`end_launches` or the next launcher.
        Each call returns ``output`` (or the prepared ``out`` as ``[T, H]``).  Call it with the inputs' CUDA device
        current (the tuner sets it once per case)."""
        p = prepared
        cfg = parse_config(tactic.id)
        t, h = p.hidden.shape
        if output is not None and (tuple(output.shape) != (t, h) or output.device != p.hidden.device):
            raise ValueError(f"output: expected a [{t}, {h}] tensor on {p.hidden.device}, got {tuple(output.shape)} "
                             f"on {output.device}")
        direct = output is not None and output.dtype == torch.bfloat16 and output.is_contiguous()
        out3 = output.view(1, t, h) if direct else p.out
        mo = p.tk.matmul_ogs
        calls = [
            functools.partial(mo.matmul_ogs, p.hidden, p.w13, p.b13, p.routing_data, gather_indx=p.gather_indx,
                              precision_config=p.prec13[cfg.num_warps], fused_activation=p.activation, y=p.inter),
            functools.partial(mo.matmul_ogs, p.inter.view(-1, p.inputs.case.intermediate_size), p.w2, p.b2,
                              p.routing_data, scatter_indx=p.scatter_indx, precision_config=p.prec2[cfg.num_warps],
                              gammas=p.routing_data.gate_scal, y=out3),
        ]
        if output is not None and not direct:
            calls.append(functools.partial(output.copy_, p.out.view(t, h)))
        of = p.tk.opt_flags
        of.reset_opt_flags_constraints()
        of.update_opt_flags_constraints(cfg.constraints())
        return launch_sequence(calls, output if output is not None else p.out.view(t, h))

    def end_launches(self, prepared: TKPrepared) -> None:
        prepared.tk.opt_flags.reset_opt_flags_constraints()

    def run(self, prepared: TKPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        try:
            launch = self.launcher(prepared, tactic, output)
            with torch.cuda.device(prepared.hidden.device):
                y = launch()
        finally:
            self.end_launches(prepared)
        return y.clone() if output is None else y

    def resolved_opt_flags(self, prepared: TKPrepared, tactic: Tactic) -> list[dict]:
        """Run ``tactic`` once (untimed) and return the OptFlags ``matmul_ogs`` used for gemm1 and gemm2
        (what the default tactic picks by itself), recorded by wrapping ``make_opt_flags``."""
        import dataclasses

        mo = prepared.tk.matmul_ogs
        orig = mo.make_opt_flags
        seen: list[dict] = []

        def recording(*args: Any, **kwargs: Any) -> Any:
            flags = orig(*args, **kwargs)
            seen.append({k: v for k, v in dataclasses.asdict(flags).items() if k != "target_kernel_kwargs"})
            return flags

        mo.make_opt_flags = recording
        try:
            self.run(prepared, tactic)
            torch.cuda.synchronize(prepared.hidden.device)
        finally:
            mo.make_opt_flags = orig
        return seen
