"""Tests of the Triton MXFP4 MoE backend.

* Host side (always run, no triton needed): case checks, input validation, ``supports`` without triton, the
  launch's refusals.  Expert grouping: ``test_triton_grouping.py``; tactic lists and labels: ``test_triton_configs.py``.
* Kernels under Triton's CPU interpreter (skipped when triton is not installed).  The interpreter
  is chosen when ``@triton.jit`` decorates the kernels, i.e. ``TRITON_INTERPRET=1`` must be set
  before :mod:`fp4moe_diag.backends.triton.launch` is first imported.  To stay independent of
  test order (and to let the GPU test below import the *compiled* kernels in this process),
  these cases run in ONE subprocess started with ``TRITON_INTERPRET=1`` in its environment; it
  prints the relative L2 errors as JSON and the tests assert on them.
* GPU (skipped without CUDA): compiled kernels vs the fp32 reference on a small gpt-oss-like shape.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import CONFIGS, DECODE_CONFIGS, PS_CONFIGS, SW_CONFIGS, X2_CONFIGS
from fp4moe_diag.backends.triton.configs_gu import PS_GU_CONFIGS, PS_GU_DECODE_CONFIGS
from fp4moe_diag.backends.triton.configs_warps import PS_DECODE8_CONFIGS
from fp4moe_diag.backends.triton.configs_peel import PS_PK_DECODE_CONFIGS
from interpreter import HAS_TRITON, SECOND_TRITON, interpreter_fixture, sub_env
from test_triton_configs import _case  # the small case both files build


ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-2  # relative L2 vs the fp32 reference; bf16 intermediate/output rounding gives ~4e-3


# ------------------------------------------------------------------ backend host side
@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_launch_refuses_mode_combinations_that_do_not_exist():
    from fp4moe_diag.backends.triton import launch

    with pytest.raises(ValueError, match=r"^swap: the swap-AB kernels \(mode sw\) use the packed bf16x2 upcast"):
        launch._swap(True, False)
    with pytest.raises(ValueError, match="^x2: the packed bf16x2 upcast replaces"):
        launch._x2(True, True)
    assert launch._swap(True, True) is True and launch._x2(True, False) is True
    # ps: no other mode switch; the grid order by BLOCK_M; the CUDA grid's axis-1 limit named with its knob
    with pytest.raises(ValueError, match="^ps: the pre-shuffled kernels have their own upcast"):
        launch._mode_args(False, True, False, True, (16, 128, 128, 4))
    assert launch._mode_args(False, False, False, True, (16, 128, 128, 4)) == {"N_FASTEST": False, "SCALE_WORDS": False}
    assert launch._mode_args(False, False, False, True, (64, 128, 64, 8)) == {"N_FASTEST": True, "SCALE_WORDS": True}
    assert launch._grid(10, 24, 2, True) == (24, 10, 2) and launch._grid(10, 24, 2, False) == (10, 24, 2)
    with pytest.raises(ValueError, match="^grid: 70000 programs on CUDA grid axis 1 .*larger block_m"):
        launch._grid(70000, 24, 1, True)
    with pytest.raises(ValueError, match="^w: expected the ps layout"):
        launch._weight_dims(torch.zeros(2, 4, 64, dtype=torch.uint8), True)
    assert launch._weight_dims(torch.zeros(2, 3, 5, 512, dtype=torch.uint8), True) == (48, 320)
    # the top-k sum's output and planes are checked before any launch
    planes = torch.zeros(2, 6, 64)
    with pytest.raises(ValueError, match="^out: expected a bf16 \\[T, 64\\]"):
        launch.launch_topk_sum(planes, torch.zeros(3, 64), 2)
    with pytest.raises(ValueError, match="^planes: expected \\[S, 2 \\* 2, 64\\]"):
        launch.launch_topk_sum(planes, torch.zeros(2, 64, dtype=torch.bfloat16), 2)
    with pytest.raises(ValueError, match="^local: expected an int32 \\[6\\] tensor"):
        launch.launch_topk_sum(planes, torch.zeros(3, 64, dtype=torch.bfloat16), 2, local=torch.zeros(6))


def test_check_case():
    b = TritonMXFP4Backend()
    assert b.check_case(_case())
    assert b.check_case(_case(activation="swiglu", has_bias=False))
    nv = b.check_case(_case(weight_format="nvfp4"))
    assert not nv and "nvfp4" in nv.reason
    mx8 = b.check_case(_case(activation_format="mxfp8"))
    assert not mx8 and "bf16" in mx8.reason


def test_supports_cpu_needs_interpreter(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    b = TritonMXFP4Backend()
    s = b.supports("cpu")
    assert not s
    assert ("TRITON_INTERPRET" in s.reason) or ("triton not importable" in s.reason)
    assert b.device_types == ("cuda",)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert "cpu" in b.device_types


def test_supports_without_triton_never_crashes():
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import fp4moe_diag\n"
        "from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend\n"
        "b = TritonMXFP4Backend()\n"
        "for d in ('cpu', 'cuda'):\n"
        "    s = b.supports(d); assert not s; print(s.reason)\n"
        "print(b.versions()['triton'])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=sub_env(TRITON_INTERPRET="1"),
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert all("triton not importable" in ln for ln in lines[:2]), lines
    assert lines[2] == "not importable"


def test_prepare_rejects_bad_case():
    b = TritonMXFP4Backend()
    inp = build_inputs(_case(weight_format="nvfp4", num_tokens=2))
    with pytest.raises(ValueError, match="^case:"):
        b.prepare(inp)


# ------------------------------------------------------------------ kernels in the interpreter
_INTERP_SCRIPT = r"""
import dataclasses, json, sys, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted
sys.path.insert(0, "tests")
from interpreter import one_per_family

b = TritonMXFP4Backend()
assert b.supports("cpu"), b.supports("cpu").reason
base = dict(num_tokens=5, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2)
cases = {
    "oai_bias": {},
    "oai_nobias": dict(has_bias=False),
    "swiglu_bias": dict(activation="swiglu"),
    "swiglu_nobias": dict(activation="swiglu", has_bias=False),
    "ep_offset": dict(num_experts=8, local_num_experts=4, local_expert_offset=4, num_tokens=6),
    "uneven_k": dict(hidden_size=96, intermediate_size=160, num_tokens=7),
    "many_tokens": dict(num_tokens=40, num_experts=2, hidden_size=32, intermediate_size=32),
    "ps_uneven": dict(hidden_size=192, intermediate_size=320, num_tokens=7),
}
out = {}
for name, kw in cases.items():
    case = MoECase(**{**base, **kw})
    inp = build_inputs(case)
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    tactics = b.tactics(case) if name in ("oai_bias", "many_tokens") else [b.default_tactic(case)]
    if SECOND_TRITON:  # CI's second Triton: one tile of each family (tests/interpreter.py)
        firsts = one_per_family([t.label for t in tactics])
        tactics = [t for t in tactics if t.label in firsts]
        out[f"{name}:families"] = len(firsts)
    if name in ("oai_bias", "uneven_k", "ep_offset"):  # split-K (bit-dequant kernels; K=96 leaves a short last split)
        tactics += [Tactic(id=(16, 32, 32, 4, 1, "bits", 2), label="m16n32k32w4s1-sk2")]
    if name == "uneven_k":  # K = 96 and 160 in three splits of 32 and 64: short last splits
        tactics += [Tactic(id=(32, 16, 32, 4, 1, "bits", 3), label="m32n16k32w4s1-sk3"),
                    Tactic(id=(32, 16, 32, 4, 1, "x2", 3), label="m32n16k32w4s1-x2-sk3")]
    if name in ("oai_bias", "ep_offset"):  # x2 and sw split-K
        tactics += [Tactic(id=(16, 32, 32, 4, 1, "x2", 2), label="m16n32k32w4s1-x2-sk2"),
                    Tactic(id=(16, 32, 32, 4, 1, "sw", 2), label="m16n32k32w4s1-sw-sk2")]
    if name == "ep_offset":  # ps on the experts of one rank
        tactics += [Tactic(id="m16n64k64w4s1-ps", label="m16n64k64w4s1-ps")]
    if name == "ps_uneven":  # ps: a half-empty last K tile (K = 192, 320 in 128s), split-K, rows past N
        tactics += [Tactic(id=lab, label=lab) for lab in ("m16n64k128w4s1-ps", "m32n128k64w4s1-ps-sk2",
                                                          "m16n16k64w4s1-ps", "m16n64k128w4s1-ps-sk2",
                                                          "m16n64k64w4s1-ps-g2sk2", "m16n64k64w4s1-ps-sk3-g2sk2",
                                                          "m16n32k32w4s1-x2-g2sk3",
                                                          # scale bytes loaded as bytes (>= 4 per thread) and as
                                                          # words (8 warps, fewer): configs.ps_scale_words
                                                          "m16n128k128w4s1-ps", "m32n64k64w8s1-ps",
                                                          "m16n64k64w4s1-ps-g2n128")]  # gemm2's own BLOCK_N
    if name == "uneven_k":  # sw with short last K steps (masked rows of the weight tile)
        tactics += [Tactic(id=(32, 16, 32, 4, 1, "sw", 3), label="m32n16k32w4s1-sw-sk3"),
                    Tactic(id=(16, 64, 64, 4, 1, "sw"), label="m16n64k64w4s1-sw")]
    for t in tactics:
        y = b.run(prep, t)
        assert y.dtype == torch.bfloat16 and y.shape == ref.shape
        out[f"{name}/{t.label}"] = float((y.float() - ref).norm() / ref.norm())
# output= argument
case = MoECase(**base); inp = build_inputs(case); prep = b.prepare(inp)
buf = torch.full((5, 64), float("nan"), dtype=torch.bfloat16)
y = b.run(prep, b.default_tactic(case), output=buf)
ref = reference_moe(inp)
out["output_arg"] = float((buf.float() - ref).norm() / ref.norm()) if y is buf else 1e9
# x2 gives bit-identical weights to bits, so the same tiles give the same output bits
ys = {m: b.run(prep, Tactic(id=(16, 64, 64, 4, 1, m), label=m)) for m in ("bits", "x2")}
out["x2_equals_bits"] = bool(torch.equal(ys["bits"], ys["x2"]))
# sw: the same weight values with the operands swapped (the interpreter's fp32 dot sums in another order)
y_sw = b.run(prep, Tactic(id=(16, 64, 64, 4, 1, "sw"), label="sw"))
out["sw_vs_x2"] = float((y_sw.float() - ys["x2"].float()).norm() / ys["x2"].float().norm())
# ps: the same weight values from the pre-shuffled layout
y_ps = b.run(prep, Tactic(id=(16, 64, 64, 4, 1, "ps"), label="ps"))
out["ps_vs_x2"] = float((y_ps.float() - ys["x2"].float()).norm() / ys["x2"].float().norm())
# scale bytes the x2 upcast cannot apply exactly: the tactic raises, naming the range
prep.w13_scale[0, 0, 0] = 200
from fp4moe_diag.backends.triton.backend import X2_OFFSET, x2_scale_refusal
import fp4moe_diag.backends.triton._kernels as K
out["x2_offset_mirrored"] = K.X2_OFFSET.value == X2_OFFSET and K.X2_UNSCALE.value == 2.0 ** X2_OFFSET
prep.x2_refusal = x2_scale_refusal(prep.w13_scale, prep.w2_scale)
try:
    b.run(prep, Tactic(id=(16, 64, 64, 4, 1, "x2"), label="x2"))
    out["x2_refused"] = ""
except ValueError as e:
    out["x2_refused"] = str(e)
# no pair routed to this rank: exact zeros
case = MoECase(**{**base, "num_experts": 8, "local_num_experts": 4, "local_expert_offset": 4})
inp = build_inputs(case)
inp = dataclasses.replace(inp, topk_ids=torch.randint(0, 4, inp.topk_ids.shape, dtype=torch.int32))
y = b.run(b.prepare(inp), b.default_tactic(case))
out["no_local_pairs_maxabs"] = float(y.float().abs().max())
# the top-k sum's local-pair mask (EP): rows of pairs on other ranks are not read -- NaN there changes nothing
import fp4moe_diag.backends.triton.launch as L
planes = torch.randn(1, 6, 64)
local = torch.tensor([0, -1, 2, -1, -1, 1], dtype=torch.int32)
want = torch.zeros(3, 64, dtype=torch.bfloat16)
L.launch_topk_sum(planes * (local >= 0).float()[None, :, None], want, 2)
planes[0, local < 0] = float("nan")
got = torch.zeros(3, 64, dtype=torch.bfloat16)
L.launch_topk_sum(planes, got, 2, local=local)
out["topk_local_equal"] = bool(torch.equal(got, want)) and not bool(torch.isnan(got).any())
# from TOPK_WIDE_TOKENS tokens the sum runs wide programs (1024 columns, 4 warps): the same sum
t_wide = L.TOPK_WIDE_TOKENS
planes = torch.randn(2, t_wide * 2, 64)
got = torch.zeros(t_wide, 64, dtype=torch.bfloat16)
L.launch_topk_sum(planes, got, 2)
want = (planes[0].view(t_wide, 2, 64)[:, 0] + planes[0].view(t_wide, 2, 64)[:, 1] + planes[1].view(t_wide, 2, 64)[:, 0]
        + planes[1].view(t_wide, 2, 64)[:, 1])
out["topk_wide_equal"] = bool(torch.equal(got, want.to(torch.bfloat16)))  # same order, fp32, one RNE
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize(
    "name", ["oai_bias", "oai_nobias", "swiglu_bias", "swiglu_nobias", "ep_offset", "uneven_k", "many_tokens", "ps_uneven"]
)
def test_interpreter_matches_reference(interp_results: dict, name: str):
    assert interp_results["interpreted"] is True
    errs = {k: v for k, v in interp_results.items() if k.startswith(name + "/")}
    assert errs, f"no results for {name}"
    bad = {k: v for k, v in errs.items() if not v < TOL}
    assert not bad, f"relative L2 error >= {TOL}: {bad}"


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_interpreter_all_tactics_and_edge_cases(interp_results: dict):
    n8 = sum(c.split_k == 1 and not c.split_k2 for c in PS_DECODE8_CONFIGS)  # the ones that fit K = 64 (configs_warps)
    n_gu = len(PS_GU_CONFIGS) + len(PS_GU_DECODE_CONFIGS)  # with the k64 -gu decode tile (K = 64 fits it)
    n_pk = sum(c.split_k == 1 and not c.split_k2 for c in PS_PK_DECODE_CONFIGS)  # the -pk twins K = 64 fits
    if SECOND_TRITON:  # one tile of each family the interpreter is offered (no -pdl), and the 3 split-K ones
        n_fam = interp_results["oai_bias:families"]
        assert n_fam >= 8 and sum(k.startswith("oai_bias/") for k in interp_results) == n_fam + 3
        assert {"oai_bias/m16n64k128w4s3", "oai_bias/m16n64k128w4s6-ps", "oai_bias/m16n128k64w4s6-ps-gu",
                "oai_bias/m16n128k128w4s3-ps-pk"} <= set(interp_results)
    else:
        assert n8 == 2 and n_pk == 2 and sum(k.startswith("oai_bias/") for k in interp_results) == (
            len(CONFIGS) + len(X2_CONFIGS) + len(SW_CONFIGS) + len(PS_CONFIGS) + n_gu + n8 + n_pk + 3)
        assert sum(k.startswith("oai_bias/") and "-ps" in k for k in interp_results) == len(PS_CONFIGS) + n_gu + n8 + n_pk
        assert sum(k.startswith("oai_bias/") and "-pk" in k for k in interp_results) == n_pk
        assert sum(k.startswith("oai_bias/") and "-ps-gu" in k for k in interp_results) == n_gu
        assert "oai_bias/m16n128k64w4s6-ps-gu" in interp_results
    assert interp_results["ps_vs_x2"] < 1e-2  # the same products, another summation order
    assert {"ps_uneven/m16n64k128w4s1-ps", "ps_uneven/m32n128k64w4s1-ps-sk2", "ps_uneven/m16n16k64w4s1-ps",
            "ps_uneven/m16n64k128w4s1-ps-sk2", "ep_offset/m16n64k64w4s1-ps",
            "ps_uneven/m16n64k64w4s1-ps-g2sk2", "ps_uneven/m16n64k64w4s1-ps-sk3-g2sk2",
            "ps_uneven/m16n32k32w4s1-x2-g2sk3", "ps_uneven/m16n128k128w4s1-ps",
            "ps_uneven/m32n64k64w8s1-ps", "ps_uneven/m16n64k64w4s1-ps-g2n128"} <= set(interp_results)
    assert not any(k.startswith(("uneven_k/", "many_tokens/")) and "-ps" in k for k in interp_results)  # no layout
    if not SECOND_TRITON:
        assert sum(k.startswith("oai_bias/") and "-x2" in k for k in interp_results) == len(X2_CONFIGS) + 1
    assert interp_results["x2_equals_bits"] is True
    assert interp_results["sw_vs_x2"] < 1e-2  # bf16 outputs of the same products summed in another order
    if not SECOND_TRITON:
        assert sum(k.startswith("oai_bias/") and "-sw" in k for k in interp_results) == len(SW_CONFIGS) + 1
    assert {"uneven_k/m32n16k32w4s1-sw-sk3", "uneven_k/m16n64k64w4s1-sw", "ep_offset/m16n32k32w4s1-sw-sk2"} <= set(interp_results)
    assert interp_results["x2_offset_mirrored"] is True  # backend.X2_OFFSET (no triton) == the kernels' constexpr
    assert interp_results["x2_refused"].startswith("tactic m16n64k64w4s1-x2: the x2 upcast is exact for ue8m0 scale bytes 34..160")
    for name in ("oai_bias", "uneven_k", "ep_offset"):  # the split-K runs are there and correct
        assert f"{name}/m16n32k32w4s1-sk2" in interp_results
    assert "uneven_k/m32n16k32w4s1-sk3" in interp_results and "uneven_k/m32n16k32w4s1-x2-sk3" in interp_results
    assert interp_results["output_arg"] < TOL
    assert interp_results["no_local_pairs_maxabs"] == 0.0
    assert interp_results["topk_local_equal"] is True
    assert interp_results["topk_wide_equal"] is True


# ------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"), reason="TRITON_INTERPRET is set")
@pytest.mark.parametrize(
    "num_tokens, ep, activation, has_bias, hidden",
    [(1, False, "swiglu_oai", True, 2880), (37, False, "swiglu_oai", True, 2880), (64, True, "swiglu_oai", True, 2880),
     (16, False, "swiglu", False, 2880),
     # gpt-oss padded to 3072 (as vLLM pads it): every split-K decode tactic is offered
     (4, False, "swiglu_oai", True, 3072), (64, True, "swiglu_oai", True, 3072)],
)
def test_gpu_gpt_oss_like(num_tokens: int, ep: bool, activation: str, has_bias: bool, hidden: int):
    b = TritonMXFP4Backend()
    s = b.supports("cuda")
    if not s:
        pytest.skip(s.reason)
    ep_kw = dict(local_num_experts=16, local_expert_offset=16) if ep else {}
    case = MoECase(num_tokens=num_tokens, hidden_size=hidden, intermediate_size=hidden, num_experts=32, top_k=4,
                   activation=activation, has_bias=has_bias, model="gpt-oss-20b-like", **ep_kw)
    from fp4moe_diag.problem.reference import reference_moe

    inp = build_inputs(case, "cuda")
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    tactics = b.tactics(case) if num_tokens in (1, 37) or hidden == 3072 else [b.default_tactic(case)]
    assert any(t.params["dot_scaled"] for t in tactics) or len(tactics) == 1
    if hidden == 3072:
        assert sum(t.params["split_k"] > 1 for t in tactics) == sum(c.split_k > 1 for c in DECODE_CONFIGS)
    errs = {}
    for t in tactics:
        y = b.run(prep, t)
        torch.cuda.synchronize()
        errs[t.label] = float((y.float() - ref).norm() / ref.norm())
    bad = {k: v for k, v in errs.items() if not v < TOL}
    assert not bad, bad
    out = torch.empty_like(inp.hidden_states)
    assert b.run(prep, tactics[0], output=out) is out
    torch.cuda.synchronize()
    assert float((out.float() - ref).norm() / ref.norm()) < TOL


