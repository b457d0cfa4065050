"""The W4A8 tactic family of our Triton kernels (backend ``triton_w4a8``, mode ``f8``; issue #25).

* Host side (no triton): labels and checks, the registry and ``kernel_precision``, the tactic list, the W4A8 float32
  reference (its fold and row quantizer against ``torch.float8_e4m3fn``), the tuner's own-reference hook.
* Interpreter (TRITON_INTERPRET=1, one subprocess, tiny shapes): the in-kernel fold and the row quantizer bit for
  bit against the reference's, and the whole backend against the W4A8 reference (tolerance :data:`TOL_W4A8`) and
  the bf16 float32 reference (:data:`TOL_BF16`), with uneven K, EP offsets, decode and prefill tiles, a zero
  activation row and tokens routed to other ranks only; and one tuner run (the hook end to end).
* sm_90a build on this CPU host (Triton's bundled ptxas): a decode and a prefill tile use FP8 wgmma (QGMMA) in
  both K loops, with the f16x2 fold, and spill no registers.
"""

from __future__ import annotations

import pytest
import torch

from interpreter import HAS_TRITON, interpreter_fixture, needs_sass_tools

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import backend_class, get_backend
from fp4moe_diag.backends.base import Backend, Tactic
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_f8 import F8_CONFIGS
from fp4moe_diag.backends.triton.configs_p8 import P8_CONFIGS
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.problem.quant import e2m1_decode, pack_e2m1
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.problem.reference_w4a8 import fold_mxfp4_e4m3, quantize_rows_e4m3, reference_w4a8_moe, row_emax
from fp4moe_diag.tune import tune

#: relative L2 against the W4A8 reference (same quantization; the bf16 output rounding is ~2e-3)
TOL_W4A8 = 5e-3
#: relative L2 against the bf16-activation float32 reference (e4m3 activations twice: ~4e-2 on these inputs)
TOL_BF16 = 8e-2


# ------------------------------------------------------------------ host side
def test_f8_labels_and_checks():
    kc = parse_config("m128n128k128w8s3-f8")
    assert (kc.mode, kc.f8, kc.block_m, kc.num_warps, kc.label) == ("f8", True, 128, 8, "m128n128k128w8s3-f8")
    assert kc.params()["f8"] is True and "f8" not in parse_config("m16n64k128w4s3-ps").params()
    assert all(parse_config(c.label) == c for c in F8_CONFIGS)
    with pytest.raises(ValueError, match="mode f8 has no split-K"):
        KernelConfig(16, 64, 128, 4, 3, "f8", 2)
    with pytest.raises(ValueError, match="mode f8 .* block_k a multiple of 32"):
        KernelConfig(16, 64, 48, 4, 3, "f8")
    with pytest.raises(ValueError, match="pdl .* is a mode ps option"):
        parse_config("m16n64k128w4s3-f8-pdl")
    with pytest.raises(ValueError, match="expected a label"):
        parse_config("m16n64k128w4s3-pdl-f8")


def test_registry_and_kernel_precision():
    b = get_backend("triton_w4a8")
    assert b.name == "triton_w4a8" and b.kernel_precision == "w4a8" and b.rel_l2_tol == 2e-2
    assert backend_class("triton").kernel_precision == "w4a16" and backend_class("triton").rel_l2_tol is None
    assert backend_class("reference").kernel_precision == "fp32"
    assert backend_class("cutlass_humming").kernel_precision == "w4a8"
    assert backend_class("cutlass_w4a16").kernel_precision == "w4a16"
    assert backend_class("cutlass").kernel_precision == "w4a16"


@pytest.mark.parametrize("tokens", [1, 64, 4096])
def test_tactics_cover_decode_and_prefill(tokens: int):
    case = MoECase(num_tokens=tokens, hidden_size=2880, intermediate_size=2880, num_experts=32, top_k=4)
    ts = get_backend("triton_w4a8").tactics(case)
    assert [t.label for t in ts] == [c.label for c in F8_CONFIGS + P8_CONFIGS]  # -p8: tests/test_triton_p8.py
    assert all(t.label.endswith(("-f8", "-p8")) for t in ts)
    assert sum(t.is_default for t in ts) == 1
    default = next(t for t in ts if t.is_default).id
    assert default.block_m == (16 if tokens * 4 <= 256 else 128) and default.mode == ("f8" if tokens * 4 <= 256 else "p8")
    kcs = [t.id for t in ts]
    assert {16, 64, 128} <= {k.block_m for k in kcs} and {4, 8} == {k.num_warps for k in kcs}
    assert all(k.block_n >= 64 and k.split_k == 1 for k in kcs)  # a wgmma M of weight rows; no split-K


def test_backends_refuse_each_others_tactics():
    case = MoECase(num_tokens=2, hidden_size=64, intermediate_size=64, num_experts=2, top_k=1)
    inp = build_inputs(case)
    b16 = get_backend("triton")
    with pytest.raises(ValueError, match="belong to backend triton_w4a8"):
        b16.launcher(b16.prepare(inp), Tactic(id="m16n64k64w4s1-f8", label="x"))
    b8 = get_backend("triton_w4a8")
    with pytest.raises(ValueError, match="runs the W4A8 tactics"):
        b8.launcher(b8.prepare(inp), Tactic(id="m16n64k64w4s1-sw", label="x"))


def test_fold_reference_against_float8_e4m3fn():
    """Every code at every d = s - E from 0 to -20 (underflow into and below e4m3's subnormals)."""
    g = torch.Generator().manual_seed(0)
    codes = torch.arange(16, dtype=torch.uint8).repeat(21, 2)  # [21 rows, 32] = one block per row
    scale = torch.full((21, 2), 140, dtype=torch.uint8)
    scale[:, 0] = 140 - torch.arange(21, dtype=torch.uint8)  # block 0 of row r: d = -r
    codes = torch.cat([codes, torch.randint(0, 16, (21, 32), dtype=torch.uint8, generator=g)], 1)
    w8, emax = fold_mxfp4_e4m3(pack_e2m1(codes), scale)
    assert emax.tolist() == [140] * 21
    d = (scale.to(torch.int32) - 140).repeat_interleave(32, 1).to(torch.float32)
    want = (e2m1_decode(codes) * torch.pow(2.0, d)).to(torch.float8_e4m3fn).float()
    assert torch.equal(w8, want)
    assert w8[8:, :16].abs().max() > 0 and w8[13:, :16].abs().max() == 0  # 6 * 2**-12 rounds up; 6 * 2**-13 to 0
    sub = 2.0 ** -9  # e4m3's smallest subnormal
    assert [w8[r, 7].item() / sub for r in (10, 11, 12, 13)] == [3, 2, 1, 0]  # 6 * 2**-r: 3, 1.5 (tie: even), .75, .375
    assert [w8[r, 1].item() / sub for r in (8, 9)] == [1, 0]  # 0.5 * 2**-9 = half the smallest subnormal: tie to 0
    assert w8[10, 3].item() == sub and w8[10, 11].item() == -sub  # 1.5 * 2**-10 = 0.75 * sub, and its negative


def test_row_quantizer_and_emax():
    x = torch.randn(4, 96)
    x[2] = 0
    q, s = quantize_rows_e4m3(x)
    assert s[2].item() == 1.0 and q[2].abs().max() == 0
    assert torch.allclose(s[[0, 1, 3]], x[[0, 1, 3]].abs().amax(1) / 448)
    assert (q.abs().amax(1)[[0, 1, 3]] == 448).all()  # the row's amax lands on e4m3's largest value
    assert torch.equal(q, (x / s[:, None]).to(torch.float8_e4m3fn).float())
    assert row_emax(torch.tensor([[[3, 9, 4]]], dtype=torch.uint8)).tolist() == [[9]]
    with pytest.raises(ValueError, match="^x:"):
        quantize_rows_e4m3(torch.zeros(3))


def test_w4a8_reference_is_close_to_the_bf16_one():
    inp = build_inputs(MoECase(num_tokens=9, hidden_size=128, intermediate_size=96, num_experts=4, top_k=2))
    ref, r8 = reference_moe(inp), reference_w4a8_moe(inp)
    err = float((r8 - ref).norm() / ref.norm())
    assert 1e-3 < err < TOL_BF16  # e4m3 activations are visible, and bounded


class _OwnReferenceBackend(Backend):
    """A CPU backend whose output is its own reference exactly and which is 10 % off the standard one."""
    name = "own_ref"
    kernel_precision = "w4a8"
    rel_l2_tol = 1e-2
    device_types = ("cpu",)

    def tactics(self, case, prepared=None):
        return [Tactic(id=0, label="t0", is_default=True)]

    def reference(self, inputs, prepared):
        return reference_moe(inputs) * 1.1

    def run(self, prepared, tactic, output=None):
        y = (reference_moe(prepared) * 1.1).to(torch.bfloat16)
        return y if output is None else output.copy_(y)


def test_tuner_checks_against_the_backends_own_reference():
    case = MoECase(num_tokens=3, hidden_size=64, intermediate_size=64, num_experts=2, top_k=1)
    row = tune(case, _OwnReferenceBackend(), "cpu", options=MeasureOptions(warmup=0, repeats=1)).rows.iloc[0]
    assert row["status"] == "ok" and row["kernel_precision"] == "w4a8"
    assert row["rel_l2"] < 1e-2 and abs(row["rel_l2_bf16_ref"] - 0.1) < 1e-2
    strict = type("Strict", (_OwnReferenceBackend,), {"rel_l2_tol": 1e-6})()  # its own tolerance decides
    row = tune(case, strict, "cpu", options=MeasureOptions(warmup=0, repeats=1)).rows.iloc[0]
    assert row["status"] == "incorrect" and 0 < row["rel_l2"] < 1e-2
    row = tune(case, get_backend("reference"), "cpu", options=MeasureOptions(warmup=0, repeats=1)).rows.iloc[0]
    assert row["kernel_precision"] == "fp32" and row["rel_l2_bf16_ref"] == row["rel_l2"]


# ------------------------------------------------------------------ interpreter
_INTERP_SCRIPT = r"""
import dataclasses, json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import get_backend
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import kernels_interpreted
from fp4moe_diag.backends.triton import launch_f8
from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.problem.quant import pack_e2m1
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.problem.reference_w4a8 import fold_mxfp4_e4m3, quantize_rows_e4m3, reference_w4a8_moe
from fp4moe_diag.tune import tune

out = {}
g = torch.Generator().manual_seed(1)
# the fold: 32 rows x 64 K, d = s - E from 0 down to -31 (every row has one block at E = 140)
codes = torch.randint(0, 16, (32, 64), dtype=torch.uint8, generator=g)
scale = torch.stack([torch.full((32,), 140), 140 - torch.arange(32)], 1).to(torch.uint8)
w8_ref, emax = fold_mxfp4_e4m3(pack_e2m1(codes), scale)
w8 = launch_f8.fold_e4m3(pack_e2m1(codes), scale, emax)
out["fold_equal"] = bool(torch.equal(w8.float(), w8_ref))
out["fold_nonzero"] = int((w8_ref != 0).sum())
# the row quantizer, bf16 rows with a zero row
x = (torch.randn(5, 80, generator=g) * 3).to(torch.bfloat16)
x[3] = 0
q = torch.empty((6, 80), dtype=torch.float8_e4m3fn); s = torch.empty(6)
for call in launch_f8.quant_rows_calls(x, q, s):
    call()
q_ref, s_ref = quantize_rows_e4m3(x)
out["quant_equal"] = bool(torch.equal(q[:5].float(), q_ref)) and bool(torch.equal(s[:5], s_ref))
out["quant_zero_row_scale"] = float(s[3])

b = get_backend("triton_w4a8")
base = dict(num_tokens=6, hidden_size=96, intermediate_size=160, top_k=2)  # K = 96 / 160: uneven for BLOCK_K 64, 128
cases = {
    "uneven": dict(num_experts=4),
    "ep_offset": dict(num_experts=8, local_num_experts=4, local_expert_offset=4, activation="swiglu", has_bias=False),
    "prefill": dict(num_tokens=40, num_experts=2, hidden_size=64, intermediate_size=64),
}
labels = {"uneven": ("m16n64k64w4s1-f8", "m16n64k128w4s3-f8", "m64n128k128w8s3-f8"),
          "ep_offset": ("m16n64k32w4s1-f8", "m64n64k128w4s4-f8"),
          "prefill": ("m128n64k128w4s3-f8", "m128n128k64w8s3-f8", "m16n128k64w4s3-f8")}
for name, kw in cases.items():
    inp = build_inputs(MoECase(**{**base, **kw}))
    x = inp.hidden_states.clone(); x[1] = 0  # a zero activation row
    inp = dataclasses.replace(inp, hidden_states=x)
    if name == "ep_offset":  # token 0 routed to other ranks only: its output row must be exact zeros
        ids = inp.topk_ids.clone(); ids[0] = torch.tensor([0, 1]); inp = dataclasses.replace(inp, topk_ids=ids)
    ref, r8 = reference_moe(inp), reference_w4a8_moe(inp)
    prep = b.prepare(inp)
    for lab in labels[name]:
        y = b.run(prep, Tactic(id=lab, label=lab)).float()
        out[f"w4a8/{name}/{lab}"] = float((y - r8).norm() / r8.norm())
        out[f"bf16/{name}/{lab}"] = float((y - ref).norm() / ref.norm())
        if name == "ep_offset":
            out[f"remote_row/{lab}"] = float(y[0].abs().max())
# the tuner: rows checked against the W4A8 reference, rel_l2_bf16_ref against the bf16 one
case = MoECase(**{**base, "num_experts": 4})
df = tune(case, b, "cpu", options=MeasureOptions(warmup=0, repeats=1, tactic_filters=("triton_w4a8=^m16n64k128w4s3",),
                                                  repeat_best=False)).rows
r = df.iloc[0]
out["tune"] = dict(n=len(df), status=str(r["status"]), correct=bool(r["correct"]), rel_l2=float(r["rel_l2"]),
                   bf16=float(r["rel_l2_bf16_ref"]), precision=str(r["kernel_precision"]), label=str(r["tactic_label"]))
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_interpreter_fold_and_quantizer_are_bit_exact(interp_results: dict):
    assert interp_results["interpreted"] is True
    assert interp_results["fold_equal"] is True and interp_results["fold_nonzero"] > 1000
    assert interp_results["quant_equal"] is True and interp_results["quant_zero_row_scale"] == 1.0


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_interpreter_backend_matches_both_references(interp_results: dict):
    w4a8 = {k: v for k, v in interp_results.items() if k.startswith("w4a8/")}
    bf16 = {k: v for k, v in interp_results.items() if k.startswith("bf16/")}
    assert len(w4a8) == len(bf16) == 8
    assert not {k: v for k, v in w4a8.items() if not v < TOL_W4A8}, w4a8
    assert not {k: v for k, v in bf16.items() if not v < TOL_BF16}, bf16
    assert all(v > 10 * w4a8["w4a8/" + k[5:]] for k, v in bf16.items())  # the quantization shows against bf16 only
    assert [v for k, v in interp_results.items() if k.startswith("remote_row/")] == [0.0, 0.0]


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_interpreter_tuner_rows(interp_results: dict):
    t = interp_results["tune"]
    assert (t["n"], t["status"], t["correct"], t["precision"], t["label"]) == (1, "ok", True, "w4a8",
                                                                                "m16n64k128w4s3-f8")
    assert t["rel_l2"] < TOL_W4A8 and 10 * t["rel_l2"] < t["bf16"] < TOL_BF16


# ------------------------------------------------------------------ sm_90a build (CPU host, Triton's bundled tools)
@needs_sass_tools()
@pytest.mark.parametrize("label", ["m16n64k128w4s3-f8", "m128n128k64w8s3-f8"])
def test_sm90_build_uses_fp8_wgmma_without_spills(label: str):
    from fp4moe_diag.profiling.sass import count, stack_bytes

    for gemm in ("gemm1", "gemm2"):
        r = count(label, gemm, k=2880)
        assert r.mma == "QGMMA" and r.instructions_per_weight < 9, r  # FP8 wgmma in the K loop, the f16x2 fold
        assert r.opcodes.get("HMUL2", 0) > 0 and r.opcodes.get("F2FP", 0) > 0  # mul.f16x2, cvt ... e4m3x2.f16x2
        assert stack_bytes(label, gemm, 2880) == 0  # no register spills


# ------------------------------------------------------------------ GPU (compiled kernels; not run on a CPU host)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("num_tokens, ep", [(4, False), (64, True), (1024, False)])
def test_gpu_every_tactic_against_both_references(num_tokens: int, ep: bool):
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("TRITON_INTERPRET is set")
    b = get_backend("triton_w4a8")
    s = b.supports("cuda")
    if not s:
        pytest.skip(s.reason)
    from fp4moe_diag.backends.triton import launch_f8

    g = torch.Generator().manual_seed(3)  # the compiled (f16x2) fold, bit for bit against the reference's
    codes = torch.randint(0, 16, (64, 128), dtype=torch.uint8, generator=g)
    scale = (140 - torch.randint(0, 40, (64, 4), generator=g)).to(torch.uint8)
    w8_ref, emax = fold_mxfp4_e4m3(pack_e2m1(codes), scale)
    w8 = launch_f8.fold_e4m3(pack_e2m1(codes).cuda(), scale.cuda(), emax.cuda())
    assert torch.equal(w8.float().cpu(), w8_ref)
    ep_kw = dict(local_num_experts=16, local_expert_offset=16) if ep else {}
    case = MoECase(num_tokens=num_tokens, hidden_size=2880, intermediate_size=2880, num_experts=32, top_k=4, **ep_kw)
    inp = build_inputs(case, "cuda")
    ref, r8 = reference_moe(inp), reference_w4a8_moe(inp)
    prep = b.prepare(inp)
    errs = {}
    for t in b.tactics(case):
        y = b.run(prep, t).float()
        torch.cuda.synchronize()
        errs[t.label] = (float((y - r8).norm() / r8.norm()), float((y - ref).norm() / ref.norm()))
    assert not {k: v for k, v in errs.items() if not (v[0] < b.rel_l2_tol and v[1] < TOL_BF16)}, errs
