"""Our own Triton routed MXFP4 MoE as a backend (any GPU Triton supports, e.g. H200/SM90).

BF16 activations, MXFP4 weights (ue8m0 block-32 scales) dequantized inside the kernels, fp32
accumulation, bf16 intermediate.  ``prepare`` groups the routed pairs by local expert for every
``BLOCK_M`` of the tactic list (:mod:`.grouping`) and allocates the workspaces; ``run``
launches gemm1 (gate/up + activation) and gemm2 (down, times routing weight) of
:mod:`.launch`, then one kernel sums gemm2's split planes and the ``top_k`` slots into the bf16 output (``-fs``
tactics: gemm2 itself, and a split gemm1 its own finalize: two kernels; arrival counters made at bind time).

Triton is imported lazily: importing this module never needs it.  On CPU the backend runs only
under Triton's interpreter, i.e. when ``TRITON_INTERPRET=1`` was set before the kernels module
was first imported.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Optional

import torch

from ...problem.case import ActivationFormat, GatedActivation, MoECase, WeightFormat
from ...problem.inputs import MoEInputs
from ..base import Backend, Support, Tactic, device_capability, launch_sequence
from . import ps_layout
from .configs import (CONFIGS, DECODE_CONFIGS, DECODE_MAX_PAIRS, DOT_SCALED_CONFIGS, PS_CONFIGS, PS_DECODE_CONFIGS,
                      PS_PDL_CONFIGS,
                      SW_CONFIGS, SW_DECODE_CONFIGS, X2_CONFIGS, X2_DECODE_CONFIGS, KernelConfig, default_config,
                      parse_config, split_k_fits)
from .configs_gu import PS_GU_CONFIGS, PS_GU_PDL_CONFIGS, PS_GU_WIDE_CONFIGS
from .grouping import ExpertGrouping, group_pairs_by_expert

_LAUNCH = "fp4moe_diag.backends.triton.launch"
_KERNELS = "fp4moe_diag.backends.triton._kernels"

def _split_fits(case: MoECase, kc: KernelConfig) -> bool:
    """gemm1 reduces over H in ``split_k`` splits, gemm2 over I in ``gemm2_split``."""
    return (split_k_fits(case.hidden_size, kc.block_k, kc.split_k)
            and split_k_fits(case.intermediate_size, kc.block_k, kc.gemm2_split))


def ps_refusal(case: MoECase, layout: str = "pre-shuffled") -> Optional[str]:
    """Why this case's weights (w13 ``[2I, H]``, w2 ``[H, I]``) have no pre-shuffled layout (mode ps; the p8 layout of
    ``triton_w4a8`` has the same slabs and chunks and asks this too, naming itself ``layout``); None when they have
    one."""
    h, i = case.hidden_size, case.intermediate_size
    return ps_layout.refusal(2 * i, h, layout) or ps_layout.refusal(h, i, layout)


#: ``_kernels.X2_OFFSET`` (that module needs triton) and the ue8m0 scale bytes the x2 upcast applies exactly
X2_OFFSET = 32
X2_SCALE_BYTES = (X2_OFFSET + 2, X2_OFFSET + 128)


def x2_scale_refusal(*scales: torch.Tensor) -> Optional[str]:
    """Why the x2 tactics cannot run weights with these ue8m0 scale bytes exactly; None when they can.

    x2 folds 2**126 and an offset of 2**-32 into one bf16 factor 2**(s - 33) per block: exact for
    s in 34..160 (scales 2**-93 .. 2**33); outside, the factor or the products leave bf16's normal range."""
    lo, hi = X2_SCALE_BYTES
    for s in scales:
        if s.numel() == 0:
            continue
        smin, smax = int(s.min()), int(s.max())
        if smin < lo or smax > hi:
            return (f"the x2 upcast is exact for ue8m0 scale bytes {lo}..{hi} (2**{lo - 127}..2**{hi - 127}); "
                    f"these weights have {smin}..{smax}")
    return None


def interpret_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` asks for Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def triton_import_error() -> Optional[str]:
    """``None`` when triton imports, else the reason."""
    try:
        import triton  # noqa: F401
    except Exception as e:  # noqa: BLE001 -- a broken install must not crash supports()
        return f"{type(e).__name__}: {e}"
    return None


def load_kernels() -> ModuleType:
    """Import the launchers (and with them the kernels and triton) on first use."""
    return importlib.import_module(_LAUNCH)


def kernels_interpreted() -> Optional[bool]:
    """Whether the already-imported kernels run in the interpreter; ``None`` if not imported yet."""
    mod = sys.modules.get(_KERNELS)
    if mod is None:
        return None
    return bool(mod.INTERPRETED)


@dataclass
class TritonPrepared:
    """Everything ``run`` needs: contiguous weights, groupings per BLOCK_M, workspaces."""

    inputs: MoEInputs
    hidden: torch.Tensor  # bf16 [T, H], contiguous
    w13: torch.Tensor
    w13_scale: torch.Tensor
    w2: torch.Tensor
    w2_scale: torch.Tensor
    w13_bias: Optional[torch.Tensor]
    w2_bias: Optional[torch.Tensor]
    alpha: Optional[torch.Tensor]
    beta: Optional[torch.Tensor]
    limit: Optional[torch.Tensor]
    topk_weights: torch.Tensor  # fp32 [T * k]
    activation: int
    pair_out: torch.Tensor  # bf16 [T * k, H]: gemm2's one plane (split 1); rows of non-local pairs stay zero
    out_bf16: torch.Tensor  # bf16 [T, H]: the top-k sum when the caller passes no output
    groupings: dict[int, ExpertGrouping] = field(default_factory=dict)
    inter_buf: Optional[torch.Tensor] = None  # bf16 [max padded pairs, I]
    part_bufs: dict[int, torch.Tensor] = field(default_factory=dict)  # split_k -> fp32 [S, rows, 2I]
    pair_planes: dict[int, torch.Tensor] = field(default_factory=dict)  # split_k > 1 -> fp32 [S, T*k, H]
    x2_refusal: Optional[str] = None  # why the x2 tactics cannot run these weights exactly (None: they can)
    ps: Optional[tuple[torch.Tensor, ...]] = None  # (w13, w13_scale, w2, w2_scale) in the ps layout, made in prepare
    ps_gu: Optional[tuple[torch.Tensor, torch.Tensor]] = None  # (w13, w13_scale) gate/up-interleaved: gate_up_weights
    counter_bufs: dict[str, torch.Tensor] = field(default_factory=dict)  # -fs: "gemm1" / "gemm2" -> int32 zeros
    local_buf: Optional[torch.Tensor] = None  # int32 [T * k]: local expert id per pair, -1 on another rank

    def local_pairs(self) -> Optional[torch.Tensor]:
        """The top-k sum's local-pair mask (int32 ``[T * k]``, < 0: the pair's expert is on another rank), made on
        first use; None when every expert is local (EP1: the sum reads every row, no mask to load)."""
        c = self.inputs.case
        if c.local_num_experts == c.num_experts:
            return None
        if self.local_buf is None:
            self.local_buf = self.inputs.local_topk_ids.to(device=self.pair_out.device, dtype=torch.int32).flatten()
        return self.local_buf

    def grouping(self, block_m: int) -> ExpertGrouping:
        """The grouping for ``block_m`` (made on first use), with an intermediate buffer large enough."""
        if block_m not in self.groupings:
            c = self.inputs.case
            weights = self.topk_weights.view(self.inputs.topk_weights.shape)
            g = group_pairs_by_expert(self.inputs.local_topk_ids, c.local_num_experts, block_m, weights)
            self.groupings[block_m] = g
            rows = g.num_padded_pairs
            if self.inter_buf is None or self.inter_buf.shape[0] < rows:
                self.inter_buf = torch.empty(
                    (max(rows, 1), c.intermediate_size), dtype=torch.bfloat16, device=self.pair_out.device
                )
        return self.groupings[block_m]

    def gate_up_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """w13 and its scales in the ps layout with gate / up interleaved per slab (tactics ``-gu``,
        :func:`.ps_layout.shuffle_gate_up`): made on the first -gu launcher of this case (not timed), then kept.
        It costs the ps w13 bytes once more (gpt-oss-20b, 32 experts: 265 MB + 17 MB of scales; 120b EP1: 1.06 GB
        + 66 MB), only in runs that use -gu."""
        if self.ps_gu is None:
            self.ps_gu = ps_layout.shuffle_gate_up(self.w13, self.w13_scale)
        return self.ps_gu

    def gemm1_partials(self, split_k: int, rows: int) -> Optional[torch.Tensor]:
        """gemm1's fp32 partials ``[split_k, >= rows, 2I]`` for ``split_k`` > 1 (None for one split)."""
        if split_k == 1:
            return None
        part = self.part_bufs.get(split_k)
        if part is None or part.shape[1] < rows:
            part = torch.empty((split_k, max(rows, 1), 2 * self.inputs.case.intermediate_size), dtype=torch.float32,
                               device=self.pair_out.device)
            self.part_bufs[split_k] = part
        return part

    def gemm2_planes(self, split_k: int) -> torch.Tensor:
        """gemm2's output planes ``[split_k, T*k, H]``.  They start as zeros: rows of pairs routed to other ranks are
        never written.  One split writes its per-pair products as bf16 (as triton_kernels does before its reduction):
        half the bytes of fp32 for gemm2 to write and the top-k sum to read (at 20b EP1 T=4096, 94 of 189 MB; the
        top-k sum kernel took 53 us reading fp32, Nsight Compute s7-profile); several splits keep fp32 partial sums,
        which are not yet products."""
        if split_k == 1:
            return self.pair_out.unsqueeze(0)
        planes = self.pair_planes.get(split_k)
        if planes is None:
            planes = torch.zeros((split_k, *self.pair_out.shape), dtype=torch.float32, device=self.pair_out.device)
            self.pair_planes[split_k] = planes
        return planes


    def arrival_counters(self, gemm: str, n: int) -> torch.Tensor:
        """The int32 arrival counters (at least ``n``) of ``gemm``'s fused end (tactics ``-fs``): zeroed here, once
        (bind time, never in the timed call); each call leaves them zero (the kernels reset what they count)."""
        buf = self.counter_bufs.get(gemm)
        if buf is None or buf.numel() < n:
            buf = torch.zeros(max(n, 1), dtype=torch.int32, device=self.pair_out.device)
            self.counter_bufs[gemm] = buf
        return buf

    def fused_sum(self, out: torch.Tensor, n_tiles: int) -> Any:
        """gemm2's fused top-k sum into ``out`` (:class:`.launch.FusedSum`): counters per (token, N tile), each
        token's local pairs (pairs on other ranks never arrive), and the tokens with none (their rows get zeros)."""
        t, k = self.inputs.local_topk_ids.shape
        per_token = (self.inputs.local_topk_ids >= 0).sum(dim=1).to(device=self.pair_out.device, dtype=torch.int32)
        none = torch.nonzero(per_token == 0).flatten().to(torch.int32)
        orphans = torch.full((-(-none.numel() // 16) * 16,), -1, dtype=torch.int32, device=self.pair_out.device)
        orphans[:none.numel()] = none
        return load_kernels().FusedSum(out=out, counters=self.arrival_counters("gemm2", t * n_tiles),
                                       token_pairs=per_token.contiguous(), orphans=orphans, top_k=k)


class TritonMXFP4Backend(Backend):
    """Routed MXFP4 MoE in Triton: gemm1 + activation, gemm2 + routing weight, the top-k sum kernel."""

    name = "triton"
    capabilities = None

    @property
    def device_types(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("cuda", "cpu") if interpret_enabled() else ("cuda",)

    def supports(self, device: Any) -> Support:
        err = triton_import_error()
        if err is not None:
            return Support(False, f"triton not importable ({err})")
        dev = torch.device(device)
        if dev.type == "cpu" and not interpret_enabled():
            return Support(False, "triton runs on CPU only in its interpreter (set TRITON_INTERPRET=1 before import)")
        return super().supports(dev)

    def extra_support(self, device: torch.device) -> Support:
        want_interp = device.type == "cpu"
        have = kernels_interpreted()
        if have is not None and have != want_interp:
            mode = "interpreted" if have else "compiled"
            return Support(False, f"triton kernels were already imported {mode}; TRITON_INTERPRET changed afterwards")
        if device.type == "cuda":
            cc = device_capability(device)
            if cc is not None and cc < (8, 0):
                return Support(False, f"bf16 tl.dot needs SM80 or newer; device is SM{cc[0]}{cc[1]}")
        return Support(True)

    def check_case(self, case: MoECase) -> Support:
        if case.weight_format is not WeightFormat.MXFP4:
            return Support(False, f"triton kernels take MXFP4 weights only, not {case.weight_format.value}")
        if case.activation_format is not ActivationFormat.BF16:
            return Support(False, f"triton kernels take bf16 activations only, not {case.activation_format.value}")
        return Support(True)

    def tactics(self, case: MoECase, prepared: Any = None) -> list[Tactic]:
        """The bit-arithmetic, x2 and sw configs everywhere, ps where the weights have that layout (H and I
        multiples of 64; with the ``-gu`` gemm1 variants of PS_GU_CONFIGS, above the decode sizes also
        PS_GU_WIDE_CONFIGS); the ``tl.dot_scaled`` ones only when compiled (GPU); for ``T * top_k <= DECODE_MAX_PAIRS``
        the split-K decode configs (x2 / sw / ps ones everywhere, ds ones on GPU); at decode on GPU the ps
        tactics with programmatic dependent launch (``-pdl``, and PS_GU_PDL_CONFIGS), with and without the fused ends
        (``-fs``)."""
        default = default_config(case)
        decode = case.num_tokens * case.top_k <= DECODE_MAX_PAIRS
        configs: tuple[KernelConfig, ...] = CONFIGS + X2_CONFIGS + SW_CONFIGS
        if decode:
            configs += tuple(c for c in X2_DECODE_CONFIGS + SW_DECODE_CONFIGS if _split_fits(case, c))
        if ps_refusal(case) is None:
            configs += PS_CONFIGS + (tuple(c for c in PS_DECODE_CONFIGS if _split_fits(case, c)) if decode else ())
            configs += PS_GU_CONFIGS + (() if decode else PS_GU_WIDE_CONFIGS)
        if not (interpret_enabled() or kernels_interpreted()):
            if decode and ps_refusal(case) is None:  # programmatic dependent launch: compiled kernels only
                configs += tuple(c for c in PS_PDL_CONFIGS + PS_GU_PDL_CONFIGS if _split_fits(case, c))
            configs += DOT_SCALED_CONFIGS
            if decode:
                configs += tuple(c for c in DECODE_CONFIGS if _split_fits(case, c))
        return [Tactic(id=kc, label=kc.label, is_default=kc == default, params=kc.params()) for kc in configs]

    def versions(self) -> dict[str, str]:
        try:
            import triton
        except Exception:  # noqa: BLE001
            return {"triton": "not importable"}
        return {"triton": triton.__version__, "triton_interpret": str(int(interpret_enabled()))}

    def prepare(self, inputs: MoEInputs) -> TritonPrepared:
        prep = self.prepare_common(inputs, sorted({kc.block_m for kc in CONFIGS + DOT_SCALED_CONFIGS}))
        prep.x2_refusal = x2_scale_refusal(prep.w13_scale, prep.w2_scale)
        if ps_refusal(inputs.case) is None:  # the offline re-layout of mode ps: once here, never timed
            prep.ps = (ps_layout.shuffle_weights(prep.w13), ps_layout.shuffle_scales(prep.w13_scale),
                       ps_layout.shuffle_weights(prep.w2), ps_layout.shuffle_scales(prep.w2_scale))
        return prep

    def prepare_common(self, inputs: MoEInputs, block_ms: list[int]) -> TritonPrepared:
        """What every tactic family needs: the checked inputs, contiguous weights, the output buffers and the
        groupings of ``block_ms`` (made now, untimed)."""
        c = inputs.case
        x = self.bf16_hidden(inputs)
        dev = x.device
        t, h = x.shape
        k = c.top_k
        opt = lambda v: None if v is None else v.to(dev, torch.float32).contiguous()  # noqa: E731
        prep = TritonPrepared(
            inputs=inputs,
            hidden=x.contiguous(),
            w13=inputs.w13.data.contiguous(),
            w13_scale=inputs.w13.scale.view(torch.uint8).contiguous(),
            w2=inputs.w2.data.contiguous(),
            w2_scale=inputs.w2.scale.view(torch.uint8).contiguous(),
            w13_bias=opt(inputs.w13_bias),
            w2_bias=opt(inputs.w2_bias),
            alpha=opt(inputs.swiglu_alpha),
            beta=opt(inputs.swiglu_beta),
            limit=opt(inputs.swiglu_limit),
            topk_weights=inputs.topk_weights.to(torch.float32).reshape(-1).contiguous(),
            activation=1 if c.activation is GatedActivation.SWIGLU_OAI else 0,
            pair_out=torch.zeros((t * k, h), dtype=torch.bfloat16, device=dev),
            out_bf16=torch.empty((t, h), dtype=torch.bfloat16, device=dev),
        )
        for bm in block_ms:
            prep.grouping(bm)
        return prep

    def launcher(self, prepared: TritonPrepared, tactic: Tactic,
                 output: Optional[torch.Tensor] = None) -> Callable[[], torch.Tensor]:
        """The tactic's kernel launches (:meth:`calls`), checked and bound once: each call runs them into ``output``
        (or the prepared ``out_bf16``) and returns it.  Call it with the inputs' CUDA device current (the tuner sets
        it once per case)."""
        return launch_sequence(self.calls(prepared, tactic, output), output if output is not None else prepared.out_bf16)

    def calls(self, prepared: TritonPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> list[Callable]:
        """The launches of one call, in order: gemm1 [+ finalize], gemm2, the top-k sum [+ a copy into ``output``].
        ``-fs`` tactics: gemm1 finalizes its splits and gemm2 sums the top-k rows (no finalize, no top-k sum)."""
        kern = load_kernels()
        kc = parse_config(tactic.id)
        if kc.w4a8:
            raise ValueError(f"tactic {kc.label}: the W4A8 tactics (-f8, -p8) belong to backend triton_w4a8")
        if kc.x2_scales and prepared.x2_refusal:
            raise ValueError(f"tactic {kc.label}: {prepared.x2_refusal}")
        if kc.ps and prepared.ps is None:
            raise ValueError(f"tactic {kc.label}: {ps_refusal(prepared.inputs.case)}")
        bm, bn, bk, nw, ns = kc.block_m, kc.block_n, kc.block_k, kc.num_warps, kc.num_stages
        p = prepared
        x = p.hidden
        t, h = x.shape
        if output is not None and (tuple(output.shape) != (t, h) or output.device != x.device):
            raise ValueError(f"output: expected a [{t}, {h}] tensor on {x.device}, got {tuple(output.shape)} on "
                             f"{output.device}")
        g = p.grouping(bm)
        inter = p.inter_buf[: max(g.num_padded_pairs, 1)]
        pair_out = p.gemm2_planes(kc.gemm2_split)
        # one fixed-order reduction over (split planes, top_k), stored bf16: deterministic (the top-k sum kernel, or
        # with -fs gemm2's last arrival per token: atomics count arrivals only, the sum has the same order and bits)
        direct = output is not None and output.dtype == torch.bfloat16 and output.stride(1) == 1
        y = output if direct else p.out_bf16
        w13, w13_scale, w2, w2_scale = p.ps if kc.ps else (p.w13, p.w13_scale, p.w2, p.w2_scale)
        modes = dict(dot_scaled=kc.dot_scaled, x2=kc.x2, swap=kc.swap, ps=kc.ps, pdl=kc.pdl)
        if kc.gate_up:  # gemm1 reads the gate/up-interleaved copy of w13 (made now on first use); gemm2 as ps
            w13, w13_scale = p.gate_up_weights()
        n1 = g.num_blocks * -(-p.inputs.case.intermediate_size // bn)
        calls = kern.gemm1_calls(
            x, w13, w13_scale, p.w13_bias, p.alpha, p.beta, p.limit, inter,
            g.sorted_pair_ids, g.block_expert_ids, g.num_pairs, g.top_k, p.activation,
            bm, bn, bk, nw, ns, split_k=kc.split_k, part=p.gemm1_partials(kc.split_k, g.num_padded_pairs), **modes,
            gate_up=kc.gate_up,
            counters=p.arrival_counters("gemm1", n1) if kc.fused and kc.split_k > 1 else None,
        )
        calls += kern.gemm2_calls(
            inter, w2, w2_scale, p.w2_bias, p.topk_weights, pair_out,
            g.sorted_pair_ids, g.block_expert_ids, g.num_pairs,
            bm, kc.gemm2_block_n, bk, nw, ns, split_k=kc.gemm2_split, **modes,
            fused=p.fused_sum(y, -(-h // kc.gemm2_block_n)) if kc.fused else None,
        )
        if not kc.fused:
            calls += kern.topk_sum_calls(pair_out, y, p.inputs.case.top_k, pdl=kc.pdl > 0, local=p.local_pairs())
        if output is not None and not direct:
            calls.append(functools.partial(output.copy_, y))
        return calls

    def run(self, prepared: TritonPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        launch = self.launcher(prepared, tactic, output)
        dev = self.device_of(prepared)
        with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
            y = launch()
        return y.clone() if output is None else y

    def device_of(self, prepared: TritonPrepared) -> torch.device:
        """The device the kernels of ``prepared`` run on (that of the hidden states)."""
        return prepared.hidden.device
