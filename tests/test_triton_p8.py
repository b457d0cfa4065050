"""Mode ``p8`` of backend ``triton_w4a8``: the W4A8 GEMMs of mode ``f8`` on the pre-shuffled layout of
:mod:`fp4moe_diag.backends.triton.p8_layout` (codes + per-block e4m3 tables, a byte-permute decode).

* Host side (no kernels): labels and checks; the layout's positions against constants worked out by hand from the
  p8_layout docstring; shuffle -> the kernel's integer decode == ``fold_mxfp4_e4m3`` bit for bit (random codes with
  negative zeros, blocks far below their row's largest scale, below e4m3's range and at the clamp); refusals; the
  tactic list.
* Interpreter (TRITON_INTERPRET=1, one subprocess, tiny shapes): the kernels' decode bit for bit; the whole backend
  with -p8 tactics against the W4A8 reference (:data:`TOL_W4A8`) and the bf16 one (:data:`TOL_BF16`), with K a
  multiple of 64 but not of BLOCK_K, EP offsets, a token routed to other ranks only, prefill tiles; -p8 against
  -f8 of the same tile; the launchers' argument checks.
* sm_90a build on this CPU host (Triton's bundled ptxas / nvdisasm): both loops are QGMMA, spill nothing, have no
  shared-memory store, and issue well under half of f8's instructions per weight.
"""

from __future__ import annotations

import pytest
import torch

from interpreter import HAS_TRITON, interpreter_fixture, needs_sass_tools

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import get_backend
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton import p8_layout as P
from fp4moe_diag.backends.triton.backend_w4a8 import p8_refusal
from fp4moe_diag.backends.triton.configs import KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_f8 import F8_CONFIGS
from fp4moe_diag.backends.triton.configs_p8 import P8_CONFIGS
from fp4moe_diag.problem.quant import pack_e2m1
from fp4moe_diag.problem.reference_w4a8 import fold_mxfp4_e4m3

from test_triton_w4a8 import TOL_BF16, TOL_W4A8


def _bits(w8: torch.Tensor) -> torch.Tensor:
    """float32 e4m3 values (or float8_e4m3fn) -> their uint8 bit patterns (keeps -0)."""
    return (w8 if w8.dtype == torch.float8_e4m3fn else w8.to(torch.float8_e4m3fn)).view(torch.uint8)


# ------------------------------------------------------------------ host side
def test_p8_labels_and_checks():
    kc = parse_config("m128n64k128w4s3-p8")
    assert (kc.mode, kc.p8, kc.w4a8, kc.f8, kc.label) == ("p8", True, True, False, "m128n64k128w4s3-p8")
    assert kc.params()["p8"] is True and "p8" not in parse_config("m128n64k128w4s3-f8").params()
    assert all(parse_config(c.label) == c for c in P8_CONFIGS) and all(c.block_m >= 64 for c in P8_CONFIGS)
    for bad in (dict(split_k=2), dict(block_k=96), dict(block_n=72)):
        with pytest.raises(ValueError, match="mode p8 has no split-K"):
            KernelConfig(**{**dict(block_m=64, block_n=64, block_k=128, num_warps=4, num_stages=3, mode="p8"), **bad})
    with pytest.raises(ValueError, match="pdl .* is a mode ps option"):
        parse_config("m64n64k128w4s3-p8-pdl")


def _random_case(nl: int, n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random packed codes (every code, negative zeros included) and scale bytes: one block per row at 200, the
    others 200 - 0..60, and a few at 0 (d = -200: clamped to -126, value 0) and 200 - 9..12 (e4m3 subnormals)."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (nl, n, k), dtype=torch.uint8, generator=g)
    codes[..., 0::7] = 8  # negative zeros
    scale = (200 - torch.randint(0, 61, (nl, n, k // 32), generator=g)).to(torch.uint8)
    scale[..., 0] = 200
    scale[:, ::3, -1] = 0
    scale[:, 1::3, -1] = (200 - 9 - torch.arange(n)[1::3] % 4).to(torch.uint8)
    return pack_e2m1(codes), scale


@pytest.mark.parametrize("shape", [(2, 32, 128), (1, 48, 192), (3, 16, 64)])
def test_shuffle_then_decode_is_the_reference_fold_bit_for_bit(shape):
    nl, n, k = shape
    data, scale = _random_case(nl, n, k, n + k)
    codes, tables = P.shuffle(data, scale)
    assert tuple(codes.shape) == (nl, n // 16, k // 64, 512) and tuple(tables.shape) == (nl, n // 16, k // 32, 128)
    dec = P.decode(codes, tables, k)
    assert dec.dtype == torch.float8_e4m3fn and tuple(dec.shape) == (nl, n, k)
    for e in range(nl):
        w8, _ = fold_mxfp4_e4m3(data[e], scale[e])
        assert torch.equal(_bits(dec[e]), _bits(w8))
    assert (_bits(dec) == 0x80).any() and (_bits(dec) == 0).any()  # -0 kept; underflow to 0
    assert ((_bits(dec) & 0x78) == 0).logical_and((_bits(dec) & 7) != 0).any()  # e4m3 subnormals


@pytest.mark.parametrize("row, kpos, code", [(0, 0, 0xF), (9, 5, 0x9), (23, 63, 0xE), (17, 100, 0x3), (31, 84, 0xC)])
def test_one_code_lands_where_the_docstring_says(row, kpos, code):
    n, k = 32, 128
    codes = torch.zeros((1, n, k), dtype=torch.uint8)
    codes[0, row, kpos] = code
    out = P.shuffle_codes(pack_e2m1(codes))
    r, rh, g = row // 16, (row % 16) // 8, row % 8
    c, s, kh, t, j = kpos // 64, (kpos % 64) // 32, (kpos % 32) // 16, (kpos % 16) // 4, kpos % 4
    word_at = (((r * (k // 64) + c) * 8 + g) * 4 + t) * 4 + 2 * s + rh  # [r, c, g, t, (s, rh)]
    words = out.contiguous().view(torch.int32).reshape(-1).to(torch.int64) & 0xFFFFFFFF
    want = ((code & 7) << (4 * j + 16 * kh)) | ((code >> 3) << (8 * j + (7 if kh == 0 else 3)))
    assert words[word_at].item() == want and int((words != 0).sum()) == (1 if want else 0)


def test_table_bytes_and_positions():
    n, k = 16, 64
    scale = torch.full((1, n, k // 32), 120, dtype=torch.uint8)
    scale[0, 11, 1] = 118  # row 11 (rh 1, g 3), block 1: d = -2
    t = P.shuffle_tables(scale)
    mags = torch.tensor(P.MAGNITUDES)
    assert torch.equal(_bits(t[0, 0, 0, 0:8].view(torch.float8_e4m3fn).float()), _bits(mags))  # row 0: d = 0
    at = (3 * 2 + 1) * 8  # [g 3, rh 1] of slab 0, block 1
    assert t[0, 0, 1, at:at + 8].view(torch.float8_e4m3fn).float().tolist() == (mags / 4).tolist()
    assert (t & 0x80).sum() == 0  # every table byte positive: the sign is or-ed in


def test_shuffle_in_steps_of_experts_is_the_same(monkeypatch):
    data, _ = _random_case(3, 32, 128, 5)
    whole = P.shuffle_codes(data)
    monkeypatch.setattr(P, "_TEMP_BYTES", 1)  # one expert per step
    assert torch.equal(P.shuffle_codes(data), whole)


def test_refusals():
    ok = torch.zeros((1, 32, 64), dtype=torch.uint8)
    with pytest.raises(ValueError, match="^data: the p8 layout needs rows divisible by 16"):
        P.shuffle_codes(torch.zeros((1, 24, 64), dtype=torch.uint8))
    with pytest.raises(ValueError, match="^data: .*K divisible by 64; got rows=32, K=96"):
        P.shuffle_codes(torch.zeros((1, 32, 48), dtype=torch.uint8))
    with pytest.raises(ValueError, match="^scale: .*got rows=32, K=32"):
        P.shuffle_tables(torch.zeros((1, 32, 1), dtype=torch.uint8))
    with pytest.raises(ValueError, match="^data: expected uint8"):
        P.shuffle_codes(ok.float())
    with pytest.raises(ValueError, match="^scale: expected \\[1, 32, 4\\]"):
        P.shuffle(ok, torch.zeros((1, 32, 2), dtype=torch.uint8))
    codes, tables = P.shuffle(ok, torch.zeros((1, 32, 4), dtype=torch.uint8))
    with pytest.raises(ValueError, match="^k:"):
        P.decode(codes, tables, 64)
    assert P.refusal(32, 128) is None and "rows=8" in P.refusal(8, 64)


def test_tactics_offer_p8_where_the_layout_exists():
    b = get_backend("triton_w4a8")
    case = MoECase(num_tokens=4096, hidden_size=2880, intermediate_size=2880, num_experts=32, top_k=4)
    ts = b.tactics(case)
    assert [t.label for t in ts] == [c.label for c in F8_CONFIGS + P8_CONFIGS]
    assert next(t for t in ts if t.is_default).label == "m128n64k128w4s3-p8"  # the prefill default where p8 exists
    small = MoECase(num_tokens=4, hidden_size=96, intermediate_size=64, num_experts=2, top_k=1)
    assert "K divisible by 64" in p8_refusal(small)
    no_p8 = get_backend("triton_w4a8").tactics(small.with_tokens(512))  # no p8 layout: the f8 prefill default
    assert [t.label for t in no_p8] == [c.label for c in F8_CONFIGS]
    assert next(t for t in no_p8 if t.is_default).label == "m64n64k128w4s4-f8"
    assert [t.label for t in b.tactics(small)] == [c.label for c in F8_CONFIGS]
    assert "rows=64, K=96" in p8_refusal(MoECase(num_tokens=4, hidden_size=64, intermediate_size=96, num_experts=2,
                                                  top_k=1))


def test_backends_refuse_p8_where_it_does_not_belong_or_exist():
    inp = build_inputs(MoECase(num_tokens=2, hidden_size=96, intermediate_size=64, num_experts=2, top_k=1))
    b16 = get_backend("triton")
    with pytest.raises(ValueError, match="belong to backend triton_w4a8"):
        b16.launcher(b16.prepare(inp), Tactic(id="m64n64k64w4s1-p8", label="x"))
    b8 = get_backend("triton_w4a8")
    prep = b8.prepare(inp)
    assert prep.p8 is None
    with pytest.raises(ValueError, match="K divisible by 64"):
        b8.launcher(prep, Tactic(id="m64n64k64w4s1-p8", label="x"))


# ------------------------------------------------------------------ interpreter
_INTERP_SCRIPT = r"""
import dataclasses, json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import get_backend
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import kernels_interpreted
from fp4moe_diag.backends.triton import launch_p8, p8_layout
from fp4moe_diag.problem.quant import pack_e2m1
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.problem.reference_w4a8 import fold_mxfp4_e4m3, reference_w4a8_moe

out = {}
g = torch.Generator().manual_seed(2)
# the kernels' decode: 48 rows (3 slabs: a masked 4th) x 192 K (3 chunks: a masked 4th), d from 0 to -40
codes = torch.randint(0, 16, (1, 48, 192), dtype=torch.uint8, generator=g); codes[..., ::5] = 8
scale = (150 - torch.randint(0, 41, (1, 48, 6), generator=g)).to(torch.uint8); scale[..., 2] = 150
c, t = p8_layout.shuffle(pack_e2m1(codes), scale)
w8 = launch_p8.decode_p8(c[0], t[0])
ref, _ = fold_mxfp4_e4m3(pack_e2m1(codes[0]), scale[0])
out["decode_equal"] = bool(torch.equal(w8.view(torch.uint8), ref.to(torch.float8_e4m3fn).view(torch.uint8)))
out["decode_nonzero"] = int((ref != 0).sum())
# the launchers' checks
errs = []
for bad in (lambda: launch_p8.gemm2_calls(*([None] * 2), c[0], t, torch.zeros(1, 48, dtype=torch.uint8), *([None] * 11)),
            lambda: launch_p8.gemm2_calls(None, None, c, t[:, :, :2], torch.zeros(1, 48, dtype=torch.uint8), *([None] * 11)),
            lambda: launch_p8.gemm2_calls(None, None, c, t, torch.zeros(1, 40, dtype=torch.uint8), *([None] * 11))):
    try:
        bad()
    except ValueError as e:
        errs.append(str(e).split(":")[0])
out["launch_errors"] = errs

b = get_backend("triton_w4a8")
base = dict(num_tokens=6, hidden_size=192, intermediate_size=192, top_k=2)  # K = 192: uneven for BLOCK_K 128
cases = {
    "uneven": dict(num_experts=4),
    "ep_offset": dict(num_experts=8, local_num_experts=4, local_expert_offset=4, activation="swiglu", has_bias=False),
    "prefill": dict(num_tokens=40, num_experts=2, hidden_size=128, intermediate_size=64),
}
labels = {"uneven": ("m64n64k128w4s4-p8", "m128n128k64w8s3-p8"),
          "ep_offset": ("m128n64k128w4s3-p8",),
          "prefill": ("m64n128k128w8s3-p8", "m128n64k128w4s3-p8")}
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
        f8 = lab.replace("-p8", "-f8")
        y8 = b.run(prep, Tactic(id=f8, label=f8)).float()
        out[f"vs_f8/{name}/{lab}"] = float((y - y8).norm() / y8.norm())
        if name == "ep_offset":
            out[f"remote_row/{lab}"] = float(y[0].abs().max())
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_interpreter_decode_is_bit_exact_and_launchers_check(interp_results: dict):
    assert interp_results["interpreted"] is True
    assert interp_results["decode_equal"] is True and interp_results["decode_nonzero"] > 2000
    assert interp_results["launch_errors"] == ["w", "w_tables", "w_emax"]


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_interpreter_backend_matches_both_references_and_f8(interp_results: dict):
    pick = lambda p: {k: v for k, v in interp_results.items() if k.startswith(p)}  # noqa: E731
    w4a8, bf16, vs_f8 = pick("w4a8/"), pick("bf16/"), pick("vs_f8/")
    assert len(w4a8) == len(bf16) == len(vs_f8) == 5
    assert not {k: v for k, v in w4a8.items() if not v < TOL_W4A8}, w4a8
    assert not {k: v for k, v in bf16.items() if not v < TOL_BF16}, bf16
    # the quantization shows against bf16 only (5x: the bf16 per-pair plane, truncated by the interpreter's store,
    # adds ~2e-3 to both)
    assert all(v > 5 * w4a8["w4a8/" + k[5:]] for k, v in bf16.items())
    assert not {k: v for k, v in vs_f8.items() if not v < 4e-3}, vs_f8  # the same numbers up to the bf16 rounding
    assert [v for k, v in interp_results.items() if k.startswith("remote_row/")] == [0.0]


# ------------------------------------------------------------------ sm_90a build (CPU host, Triton's bundled tools)
@needs_sass_tools()
@pytest.mark.parametrize("label", ["m128n64k128w4s3-p8", "m64n128k128w8s3-p8"])
def test_sm90_p8_loops_take_qgmma_without_shuffles_or_spills(label: str):
    from fp4moe_diag.profiling.sass import count, stack_bytes

    for gemm in ("gemm1", "gemm2"):
        r = count(label, gemm, k=3072)
        f8 = count(label.replace("-p8", "-f8"), gemm, k=3072)
        assert r.mma == "QGMMA" and r.opcodes.get("STS", 0) == 0, r  # FP8 wgmma; no shared-memory shuffle
        assert "HMUL2" not in r.opcodes and "F2FP" not in r.opcodes, r  # no arithmetic fold: a table lookup
        assert r.opcodes["PRMT"] == r.weights_per_thread // 4, r  # one byte permute per 4 weights, nothing else
        assert r.instructions_per_weight < 0.6 * f8.instructions_per_weight, (r, f8)
        assert stack_bytes(label, gemm, 3072) == 0  # no register spills


# ------------------------------------------------------------------ GPU (compiled kernels; not run on a CPU host)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("num_tokens, ep", [(64, True), (1024, False)])
def test_gpu_every_p8_tactic_against_both_references_and_f8(num_tokens: int, ep: bool):
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("TRITON_INTERPRET is set")
    b = get_backend("triton_w4a8")
    s = b.supports("cuda")
    if not s:
        pytest.skip(s.reason)
    from fp4moe_diag.backends.triton import launch_p8
    from fp4moe_diag.problem.reference import reference_moe
    from fp4moe_diag.problem.reference_w4a8 import reference_w4a8_moe

    data, scale = _random_case(1, 48, 192, 7)  # the compiled prmt decode (register grouping), bit for bit
    codes, tables = P.shuffle(data, scale)
    w8 = launch_p8.decode_p8(codes[0].cuda(), tables[0].cuda()).cpu()
    assert torch.equal(_bits(w8), _bits(fold_mxfp4_e4m3(data[0], scale[0])[0]))
    ep_kw = dict(local_num_experts=16, local_expert_offset=16) if ep else {}
    case = MoECase(num_tokens=num_tokens, hidden_size=2880, intermediate_size=2880, num_experts=32, top_k=4, **ep_kw)
    inp = build_inputs(case, "cuda")
    ref, r8 = reference_moe(inp), reference_w4a8_moe(inp)
    prep = b.prepare(inp)
    errs = {}
    for kc in P8_CONFIGS:
        y = b.run(prep, Tactic(id=kc, label=kc.label)).float()
        f8 = parse_config(kc.label.replace("-p8", "-f8"))
        y8 = b.run(prep, Tactic(id=f8, label=f8.label)).float()
        torch.cuda.synchronize()
        errs[kc.label] = tuple(float((y - r).norm() / r.norm()) for r in (r8, ref, y8))
    assert not {k: v for k, v in errs.items() if not (v[0] < b.rel_l2_tol and v[1] < TOL_BF16 and v[2] < 1e-2)}, errs
