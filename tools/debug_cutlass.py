"""Diagnose the CUTLASS backend on a GPU: correctness per variant and a kernel-time breakdown.

    FP4MOE_CUTLASS_MODULE=.carry/fused_moe_90_slim.so.xz python tools/debug_cutlass.py
"""

from __future__ import annotations

import sys

import torch

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import get_backend
from fp4moe_diag.measure.correctness import error_metrics
from fp4moe_diag.inputs import fresh_activations
from fp4moe_diag.reference import reference_moe


def check(label: str, case: MoECase, layout: str = "auto") -> None:
    b = get_backend("cutlass", scale_layout=layout)
    inp = fresh_activations(build_inputs(case, "cuda"), 11)
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    tac = b.tactics(case, prepared=prep)
    out = torch.full((case.num_tokens, case.hidden_size), float("nan"), dtype=torch.bfloat16, device="cuda")
    y = b.run(prep, tac[0], out)
    torch.cuda.synchronize()
    m = error_metrics(y, ref)
    print(f"{label:40s} rel_l2={m['rel_l2']:.4f} cos={m['cosine']:.4f} max_abs={m['max_abs_err']:.3f} "
          f"ref_mean={m['ref_abs_mean']:.3f} out_mean={float(y.float().abs().mean()):.3f} tactics={len(tac)}")


def check_swapped(label: str, case: MoECase) -> None:
    """Same, with the two halves of w13 (data, scales, bias) swapped before the kernel."""
    b = get_backend("cutlass")
    inp = fresh_activations(build_inputs(case, "cuda"), 11)
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    kw = dict(prep.kwargs)
    kw["quant_scales"] = [inp.w13.scale.contiguous().view(torch.int32), inp.w2.scale.contiguous().view(torch.int32)]
    i = case.intermediate_size
    sw = lambda t: torch.cat([t[:, i:], t[:, :i]], dim=1).contiguous()  # noqa: E731
    kw["fc1_expert_weights"] = sw(kw["fc1_expert_weights"])
    from fp4moe_diag.backends.flashinfer.cutlass import interleave_mxfp4_scales_sm90 as il

    kw["quant_scales"] = [il(sw(inp.w13.scale)).view(torch.int32), il(inp.w2.scale).view(torch.int32)]
    if kw.get("fc1_expert_biases") is not None:
        kw["fc1_expert_biases"] = sw(kw["fc1_expert_biases"])
    from flashinfer.fused_moe import cutlass_fused_moe

    out = torch.full((case.num_tokens, case.hidden_size), float("nan"), dtype=torch.bfloat16, device="cuda")
    y = cutlass_fused_moe(output=out, **kw)
    y = y[0] if isinstance(y, (list, tuple)) else y
    torch.cuda.synchronize()
    m = error_metrics(y, ref)
    print(f"{label:40s} rel_l2={m['rel_l2']:.4f} cos={m['cosine']:.4f} (plain cutlass_fused_moe, halves swapped)")


def profile(case: MoECase) -> None:
    b = get_backend("cutlass")
    inp = build_inputs(case, "cuda")
    prep = b.prepare(inp)
    tac = b.tactics(case, prepared=prep)[0]
    for _ in range(3):
        b.run(prep, tac)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            b.run(prep, tac)
        torch.cuda.synchronize()
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=15, max_name_column_width=90))


if __name__ == "__main__":
    base = MoECase(num_tokens=16, hidden_size=3072, intermediate_size=3072, num_experts=32, top_k=4,
                   local_num_experts=16, model="gpt-oss-20b")
    check("gpt-oss-20b ep2 T16 raw scales", base, "raw")
    check("gpt-oss-20b ep2 T16 (swiglu_oai, bias)", base)
    check("plain swiglu, no bias", base.replace(has_bias=False, activation="swiglu"))
    small = MoECase(num_tokens=8, hidden_size=256, intermediate_size=256, num_experts=4, top_k=2,
                    activation="swiglu", has_bias=False)
    check("small H=I=256 E=4 plain", small)
    check_swapped("oai+bias, swapped", base)
    profile(base)
    sys.stdout.flush()
