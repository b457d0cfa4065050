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
from typing import Any, Callable, Optional

import torch

from ...problem.case import ActivationFormat, GatedActivation, MoECase, WeightFormat
from ...problem.inputs import MoEInputs
from ..base import Backend, Support, Tactic, device_capability, launch_sequence
from . import ps_layout
from .configs import (ABLATIONS, CONFIGS, DECODE_CONFIGS, DOT_SCALED_CONFIGS, PS_CONFIGS,
                      PS_DECODE_CONFIGS, PS_PDL_CONFIGS,
                      SW_CONFIGS, SW_DECODE_CONFIGS, X2_CONFIGS, X2_DECODE_CONFIGS, KernelConfig, decode_sized,
                      parse_config, split_k_fits)
from .configs_gu import (PS_GU_CONFIGS, PS_GU_DECODE_CONFIGS, PS_GU_DECODE_PDL_CONFIGS, PS_GU_PDL_CONFIGS,
                         PS_GU_WIDE_CONFIGS)
from .configs_tail import PS_TAIL_CONFIGS, PS_TAIL_PDL_CONFIGS, launch_pdl, pdlt_twins, pdltt_twins
from .configs_peel import PS_PK_DECODE_CONFIGS, PS_PK_DECODE_PDL_CONFIGS
from .configs_regcap import regcap_configs
from .configs_tm import (PS_TM_DECODE_CONFIGS, PS_TM_DECODE_PDL_CONFIGS, PS_TM_PREFILL_CONFIGS,
                         PS_TM_PREFILL_PDL_CONFIGS, tm_refusal)
from .configs_persist import PS_PT_DECODE_CONFIGS, PS_PT_DECODE_PDL_CONFIGS
from .configs_stages import PS_G2S_DECODE_PDL_CONFIGS
from .configs_unroll import PS_GU16_U2_CONFIGS, PS_GU16_U2_PDL_CONFIGS
from .configs_warps import (PS_DECODE8_CONFIGS, PS_DECODE8_PDL_CONFIGS, PS_GU16_CONFIGS, PS_GU16_K128_CONFIGS,
                            PS_GU16_K128_PDL_CONFIGS, PS_GU16_PDL_CONFIGS, PS_GU16_T32F_M64_CONFIGS)
from .assembler import launch_assembler, tail_fused_ptxas
from .defaults import measured_default
from .loading import (interpret_enabled, kernels_interpreted, load_kernels, load_over_kernels,  # noqa: F401
                      triton_import_error)
from .grouping import ExpertGrouping
from .prepared import TritonPrepared

def _split_fits(case: MoECase, kc: KernelConfig) -> bool:
    """gemm1 reduces over H in ``split_k`` splits, gemm2 over I in ``gemm2_split``."""
    return (split_k_fits(case.hidden_size, kc.block_k, kc.split_k)
            and split_k_fits(case.intermediate_size, kc.block_k, kc.gemm2_split))


def _tile_major(case: MoECase, configs: tuple[KernelConfig, ...]) -> tuple[KernelConfig, ...]:
    """The tactics of ``configs`` that fit ``case``: split-K, and for a ``-tm`` one whole tiles
    (:func:`.configs_tm.tm_refusal`)."""
    return tuple(c for c in configs if _split_fits(case, c) and (not c.tile_major or tm_refusal(case, c) is None))


def label_only_configs(case: MoECase, compiled: bool) -> tuple[KernelConfig, ...]:
    """The families measured slower and no longer offered, which still run by label (``profile``, ``duel``, notebook
    03): the persistent ``-pt`` / ``-ptf`` decode tiles, the ``-g2sN`` decode tiles (compiled only: ``-pdl``), the
    k128 16-warp ``-gu`` prefill tiles and the 64-token ``-t32f`` ones (their ``-pdl`` twins compiled only) and the
    ``-u2`` prefill twins of :mod:`.configs_unroll` (their ``-pdl`` ones compiled only), where their split and layout
    fit ``case``."""
    if ps_refusal(case) is not None:
        return ()
    if decode_sized(case):
        configs = PS_PT_DECODE_CONFIGS + ((PS_PT_DECODE_PDL_CONFIGS + PS_G2S_DECODE_PDL_CONFIGS) if compiled else ())
    else:
        configs = PS_GU16_K128_CONFIGS + (PS_GU16_K128_PDL_CONFIGS if compiled else ()) + PS_GU16_T32F_M64_CONFIGS[
            :2 if compiled else 1]
        configs += _tile_major(case, PS_GU16_U2_CONFIGS + (PS_GU16_U2_PDL_CONFIGS if compiled else ()))
    return tuple(c for c in configs if _split_fits(case, c))


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
        PS_GU_WIDE_CONFIGS, the 16-warp PS_GU16_CONFIGS and the tail-block ones of PS_TAIL_CONFIGS, compiled also
        PS_TAIL_PDL_CONFIGS, PS_GU16_PDL_CONFIGS and the -tm PS_TM_PREFILL_PDL_CONFIGS, with the ``-pdlt`` and
        ``-pdltt`` twins of those with tails (:mod:`.configs_tail`); at decode the PS_DECODE_CONFIGS, 8-warp
        PS_DECODE8_CONFIGS and k64 -gu PS_GU_DECODE_CONFIGS that fit); the ``tl.dot_scaled`` ones only when
        compiled (GPU); where :func:`.tiling.decode_sized` (a rank expects <= DECODE_MAX_PAIRS pairs) the split-K
        decode configs (x2 / sw / ps ones everywhere, ds ones on GPU); at decode on GPU the ps tactics with
        programmatic dependent launch
        (``-pdl``, PS_GU_PDL_CONFIGS, PS_DECODE8_PDL_CONFIGS and PS_GU_DECODE_PDL_CONFIGS), with and without the
        fused ends (``-fs``); the ``-tm`` twins of the winners (:mod:`.configs_tm`) where their tiles are whole (not
        the persistent ``-pt`` / ``-ptf`` ones of :mod:`.configs_persist`: measured slower, run by label only); at
        decode the ``-pk`` twins of :mod:`.configs_peel` (K steps without K masks; their ``-pdl`` ones compiled); not
        the ``-g2sN`` ones of :mod:`.configs_stages` (gemm2's deeper pipeline: measured slower, run by label) nor the
        k128 16-warp ``-gu`` ones of :mod:`.configs_warps` (measured slower, run by label);
        compiled, from Triton 3.7 on, the ``-rN`` register-capped twins of :mod:`.configs_regcap`; not the ``-u2``
        prefill ones of :mod:`.configs_unroll` (K loops unrolled: measured slower, run by label).
        The default: :mod:`.defaults`."""
        decode = decode_sized(case)
        configs: tuple[KernelConfig, ...] = CONFIGS + X2_CONFIGS + SW_CONFIGS
        if decode:
            configs += tuple(c for c in X2_DECODE_CONFIGS + SW_DECODE_CONFIGS if _split_fits(case, c))
        if ps_refusal(case) is None:
            configs += PS_CONFIGS + (tuple(c for c in PS_DECODE_CONFIGS + PS_DECODE8_CONFIGS + PS_GU_DECODE_CONFIGS
                                           if _split_fits(case, c)) if decode else ())
            configs += PS_GU_CONFIGS + (() if decode else PS_GU_WIDE_CONFIGS + PS_GU16_CONFIGS + PS_TAIL_CONFIGS)
            configs += _tile_major(case, PS_TM_DECODE_CONFIGS if decode else PS_TM_PREFILL_CONFIGS)
            configs += tuple(c for c in PS_PK_DECODE_CONFIGS if _split_fits(case, c)) if decode else ()
        compiled = not (interpret_enabled() or kernels_interpreted())
        release = self.versions().get("triton") if compiled else None  # the -rN twins and the defaults depend on it
        if compiled:
            if ps_refusal(case) is None:  # -rN: register caps (configs_regcap: which ones depends on the release)
                configs += tuple(c for c in regcap_configs(decode, release) if _split_fits(case, c))
            if decode and ps_refusal(case) is None:  # programmatic dependent launch: compiled kernels only
                configs += tuple(c for c in PS_PDL_CONFIGS + PS_GU_PDL_CONFIGS + PS_DECODE8_PDL_CONFIGS
                                 + PS_GU_DECODE_PDL_CONFIGS if _split_fits(case, c))
                configs += _tile_major(case, PS_TM_DECODE_PDL_CONFIGS)
                configs += tuple(c for c in PS_PK_DECODE_PDL_CONFIGS if _split_fits(case, c))
            elif ps_refusal(case) is None:  # prefill: the 8-warp tail tiles, the 16-warp -gu ones and their -tm twins
                prefill_pdl = PS_TAIL_PDL_CONFIGS + PS_GU16_PDL_CONFIGS + _tile_major(case, PS_TM_PREFILL_PDL_CONFIGS)
                configs += prefill_pdl + pdlt_twins(prefill_pdl) + pdltt_twins(prefill_pdl)  # -pdlt(t): configs_tail
            configs += DOT_SCALED_CONFIGS
            if decode:
                configs += tuple(c for c in DECODE_CONFIGS if _split_fits(case, c))
        cc = device_capability("cuda") if compiled else None
        ptxas = tail_fused_ptxas(cc[0] * 10 + cc[1]).version if cc else None  # the -tNf rules depend on it
        default = measured_default(case, configs, cc, release, ptxas)
        return [Tactic(id=kc, label=kc.label, is_default=kc == default, params=kc.params()) for kc in configs]

    def tactic_columns(self, tactic: Tactic) -> dict:
        """``triton_ptxas`` of a ``-tNf`` tactic where another ptxas than Triton's builds its kernels on this GPU
        (:func:`.assembler.tail_fused_ptxas`)."""
        kc = tactic.id
        if not (isinstance(kc, KernelConfig) and kc.tail_fused):
            return {}
        assembler = launch_assembler(device_capability("cuda"), interpret_enabled() or bool(kernels_interpreted()))
        return {"triton_ptxas": assembler.version} if assembler.path else {}

    def tactic_by_label(self, case: MoECase, label: str, prepared: Any = None) -> Tactic:
        """An offered tactic, one of :func:`label_only_configs` (measured slower, not offered), or an ablation of an
        offered one (``LABEL~nodeq`` / ``~load`` / ``~seq``: :data:`.configs.ABLATIONS`, for ``profiling.ablate`` and
        ``profile``; never offered by :meth:`tactics`)."""
        base, sep, _ = label.partition("~")
        if not sep:
            compiled = not (interpret_enabled() or kernels_interpreted())
            for kc in label_only_configs(case, compiled):
                if kc.label == label:
                    return Tactic(id=kc, label=kc.label, is_default=False, params=kc.params())
            return super().tactic_by_label(case, label, prepared)
        kc = parse_config(label)  # the ablation's name checked before the tactic list is built
        super().tactic_by_label(case, base, prepared)  # the tactic it ablates: offered for this case
        return Tactic(id=kc, label=kc.label, is_default=False, params=kc.params())

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
        bn, bk, nw, ns = kc.block_n, kc.block_k, kc.num_warps, kc.num_stages
        p = prepared
        x = p.hidden
        t, h = x.shape
        if output is not None and (tuple(output.shape) != (t, h) or output.device != x.device):
            raise ValueError(f"output: expected a [{t}, {h}] tensor on {x.device}, got {tuple(output.shape)} on "
                             f"{output.device}")
        rounds = self._rounds(p, kc)
        pair_out = p.gemm2_planes(kc.gemm2_split)
        # one fixed-order reduction over (split planes, top_k), stored bf16: deterministic (the top-k sum kernel, or
        # with -fs gemm2's last arrival per token: atomics count arrivals only, the sum has the same order and bits)
        direct = output is not None and output.dtype == torch.bfloat16 and output.stride(1) == 1
        y = output if direct else p.out_bf16
        w13, w13_scale, w2, w2_scale = p.ps if kc.ps else (p.w13, p.w13_scale, p.w2, p.w2_scale)
        modes = dict(dot_scaled=kc.dot_scaled, x2=kc.x2, swap=kc.swap, ps=kc.ps, pdl=kc.pdl,
                     ablate=ABLATIONS[kc.ablate], tile_major=kc.tile_major, persist=kc.persist, peel=kc.peel,
                     unroll=kc.unroll)
        if kc.gate_up:  # gemm1 reads the gate/up-interleaved copy of w13 (made now on first use); gemm2 as ps
            w13, w13_scale = p.gate_up_weights()
        if kc.tile_major:  # -tm: both read copies stored tile by tile (made now on first use, configs_tm)
            why = tm_refusal(p.inputs.case, kc)
            if why:
                raise ValueError(f"tactic {kc.label}: {why}")
            rows = (2 if kc.gate_up else 1) * bn  # a -gu tile: lin and gate rows
            w13, w13_scale = p.tile_major_weights("w13_gu" if kc.gate_up else "w13", rows // 16, bk // 64)
            w2, w2_scale = p.tile_major_weights("w2", kc.gemm2_block_n // 16, bk // 64)
        calls = []
        if kc.tail_fused:  # -tNf: one launch per GEMM, the blocks with a tail first (_kernels_over)
            calls += self._fused_tail_calls(p, kc, w13, w13_scale, w2, w2_scale, pair_out)  # _rounds: none
        # -pdlt / -pdltt: a tail launch works before its wait (pdl 5) only behind a main launch to end after
        after_main = bool(rounds) and rounds[0][0].num_blocks > 0
        for i, (g, bm, inter) in enumerate(rounds):
            n1 = g.num_blocks * -(-p.inputs.case.intermediate_size // bn)
            calls += kern.gemm1_calls(
                x, w13, w13_scale, p.w13_bias, p.alpha, p.beta, p.limit, inter,
                g.sorted_pair_ids, g.block_expert_ids, g.num_pairs, g.top_k, p.activation,
                bm, bn, bk, nw, ns, split_k=kc.split_k, part=p.gemm1_partials(kc.split_k, g.num_padded_pairs),
                **modes | {"pdl": launch_pdl(kc.pdl, "gemm1", i == 1, after_main)}, gate_up=kc.gate_up,
                reg_cap=kc.reg_cap,  # -rN caps gemm1 only (configs_regcap)
                counters=p.arrival_counters("gemm1", n1) if kc.fused and kc.split_k > 1 else None,
            )
        for i, (g, bm, inter) in enumerate(rounds):
            calls += kern.gemm2_calls(
                inter, w2, w2_scale, p.w2_bias, p.topk_weights, pair_out,
                g.sorted_pair_ids, g.block_expert_ids, g.num_pairs,
                bm, kc.gemm2_block_n, bk, nw, kc.gemm2_stages, split_k=kc.gemm2_split,
                **modes | {"pdl": launch_pdl(kc.pdl, "gemm2", i == 1, after_main)},
                fused=p.fused_sum(y, -(-h // kc.gemm2_block_n)) if kc.fused else None,
            )
        if not kc.fused:
            calls += kern.topk_sum_calls(pair_out, y, p.inputs.case.top_k, pdl=kc.pdl > 0, local=p.local_pairs())
        if output is not None and not direct:
            calls.append(functools.partial(output.copy_, y))
        return calls

    @staticmethod
    def _fused_tail_calls(p: TritonPrepared, kc: KernelConfig, w13: torch.Tensor, w13_scale: torch.Tensor,
                          w2: torch.Tensor, w2_scale: torch.Tensor, pair_out: torch.Tensor) -> list[Callable]:
        """gemm1 and gemm2 of a ``-tNf`` tactic: one launch each over :meth:`TritonPrepared.fused_tail_grouping`."""
        over = load_over_kernels()
        g, n_over = p.fused_tail_grouping(kc.block_m, kc.tail_m)
        inter = p.inter_buf[: max(g.num_padded_pairs, 1)]
        tile = (kc.block_m, kc.tail_m, n_over)
        pdl = min(kc.pdl, 1)  # one launch per GEMM: no tail launch to start early (-pdlt / -pdltt run as -pdl)
        return over.gemm1_over_calls(p.hidden, w13, w13_scale, p.w13_bias, p.alpha, p.beta, p.limit, inter,
                                     g.sorted_pair_ids, g.block_expert_ids, g.num_pairs, g.top_k, p.activation,
                                     *tile, kc.block_n, kc.block_k, kc.num_warps, kc.num_stages, pdl,
                                     kc.tile_major) + \
            over.gemm2_over_calls(inter, w2, w2_scale, p.w2_bias, p.topk_weights, pair_out, g.sorted_pair_ids,
                                  g.block_expert_ids, g.num_pairs, *tile, kc.gemm2_block_n, kc.block_k,
                                  kc.num_warps, kc.gemm2_stages, pdl, kc.tile_major)

    @staticmethod
    def _rounds(p: TritonPrepared, kc: KernelConfig) -> list[tuple[ExpertGrouping, int, torch.Tensor]]:
        """(grouping, BLOCK_M, intermediate rows) of each gemm1 / gemm2 launch pair: one, or with ``-tN`` the blocks
        of ``block_m`` and then each expert's tail block of ``tail_m`` (rows after the others', pairs disjoint: both
        gemm2 launches write the same plane, then one top-k sum)."""
        if kc.tail_fused:
            return []
        if not kc.tail_m:
            g = p.grouping(kc.block_m)
            return [(g, kc.block_m, p.inter_buf[: max(g.num_padded_pairs, 1)])]
        big, small = p.tail_groupings(kc.block_m, kc.tail_m)
        rb = big.num_padded_pairs
        return [(big, kc.block_m, p.inter_buf[:rb]), (small, kc.tail_m, p.inter_buf[rb: rb + small.num_padded_pairs])]

    def run(self, prepared: TritonPrepared, tactic: Tactic, output: Optional[torch.Tensor] = None) -> torch.Tensor:
        launch = self.launcher(prepared, tactic, output)
        dev = self.device_of(prepared)
        with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
            y = launch()
        return y.clone() if output is None else y

    def device_of(self, prepared: TritonPrepared) -> torch.device:
        """The device the kernels of ``prepared`` run on (that of the hidden states)."""
        return prepared.hidden.device
