"""Tests of the ``triton_kernels`` backend (OpenAI triton_kernels as vLLM runs it on Hopper).

* Always (no triton, no triton_kernels needed): unsupported cleanly when the package is missing,
  case checks, tactic list, gate/linear interleave, scale padding, bitmatrix and routing tensors
  against plain loops, and a float64 emulation of the two ``matmul_ogs`` calls on the converted
  rows + routing tensors that must equal the reference.
* With triton_kernels importable on CPU (``.carry/triton_kernels`` or ``FP4MOE_TRITON_KERNELS_DIR``):
  its pure-torch Hopper value/scale layouts round-trip our bytes, and its torch routing metadata.
* GPU (marked ``gpu``, skipped without CUDA / SM90 / triton_kernels): every tactic against the
  float32 reference with the suite's tolerances, and the routing kernels against the torch routing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends import backend_class
from fp4moe_diag.backends.oai_triton_kernels import loader
from fp4moe_diag.backends.oai_triton_kernels.layout import (deinterleave_gate_linear, gemm1_rows,
                                                            interleave_gate_linear, pad_scale_k)
from fp4moe_diag.backends.oai_triton_kernels.routing import as_uint32, pack_bitmatrix, routing_tensors, \
    vllm_routing_inputs
from fp4moe_diag.backends.oai_triton_kernels.tactics import OptFlagsConfig, default_block_m, parse_config
from fp4moe_diag.problem.reference import gated_activation, reference_moe

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".carry" / "triton_kernels"
if not os.environ.get(loader.ENV_DIR) and (CARRY / "triton_kernels" / "__init__.py").is_file():
    os.environ[loader.ENV_DIR] = str(CARRY)


def _tk_or_none():
    try:
        return loader.load()
    except ImportError:
        return None


def small_case(**kw) -> MoECase:
    base = dict(num_tokens=7, hidden_size=128, intermediate_size=64, num_experts=8, top_k=2, model="tiny")
    base.update(kw)
    return MoECase(**base)


# ------------------------------------------------------------------ support
def test_registry_and_import_need_no_triton():
    cls = backend_class("triton_kernels")
    assert cls.name == "triton_kernels"
    code = ("import sys, fp4moe_diag.backends.oai_triton_kernels.backend as b; "
            "print(int('triton' in sys.modules), int('triton_kernels' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["0", "0"]


def test_unsupported_without_triton_kernels(tmp_path):
    """A machine where triton_kernels is nowhere: supports() says so and how to get it (SM90 faked)."""
    code = """
import json, torch
import fp4moe_diag.backends.base as base
torch.cuda.is_available = lambda: True
base.device_capability = lambda dev: (9, 0)
from fp4moe_diag.backends.oai_triton_kernels.backend import TritonKernelsBackend
s = TritonKernelsBackend().supports("cuda")
print(json.dumps({"ok": s.ok, "reason": s.reason}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env[loader.ENV_DIR] = str(tmp_path)  # an empty folder: no package there
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert not res["ok"]
    assert "triton_kernels not importable" in res["reason"] and str(tmp_path) in res["reason"]
    assert "python/triton_kernels" in res["reason"] and "vllm/third_party/triton_kernels" in res["reason"]


def test_unsupported_on_cpu_and_other_archs(monkeypatch):
    b = backend_class("triton_kernels")()
    s = b.supports("cpu")
    assert not s and "cuda" in s.reason
    import fp4moe_diag.backends.base as base
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "Fake B200")
    monkeypatch.setattr(base, "device_capability", lambda dev: (10, 0))
    s = b.supports("cuda")
    assert not s and "SM90" in s.reason


@pytest.mark.parametrize("kw, word", [
    (dict(activation="swiglu", has_bias=False), "plain swiglu"),
    (dict(swiglu_beta=0.5), "beta = 0.5"),
    (dict(weight_format="nvfp4", hidden_size=128, intermediate_size=64), "MXFP4"),
    (dict(intermediate_size=96), "multiple of 64"),
])
def test_check_case_unsupported(kw, word):
    s = backend_class("triton_kernels")().check_case(small_case(**kw))
    assert not s and word in s.reason


def test_check_case_gpt_oss_ok():
    b = backend_class("triton_kernels")()
    assert b.check_case(small_case(hidden_size=2880, intermediate_size=2880))
    assert b.check_case(small_case(hidden_size=256, intermediate_size=128))
    s = b.check_case(small_case())  # H = 128: N too small for the 8-warp scale layout
    assert not s and "N > 128" in s.reason


# ------------------------------------------------------------------ tactics
@pytest.mark.parametrize("t, e, k", [(1, 32, 4), (64, 32, 4), (4096, 32, 4), (16384, 128, 4), (3, 8, 2)])
def test_tactic_list(t, e, k):
    case = small_case(num_tokens=t, num_experts=e, top_k=k)
    tl = backend_class("triton_kernels")().tactics(case)
    assert 10 <= len(tl) <= 20
    assert [x.is_default for x in tl].count(True) == 1 and tl[0].is_default
    assert tl[0].id.constraints() == {"split_k": 1}  # vLLM's SM90 constraint, nothing else
    labels = [x.label for x in tl]
    assert len(set(labels)) == len(labels)
    for x in tl:
        assert parse_config(x.label) == x.id
        assert x.id.constraints()["split_k"] == 1 and not x.id.is_persistent
        assert x.params["block_n"] == (128 if x.id.num_warps == 4 else 256)
    assert default_block_m(case) in (16, 32, 64, 128)


def test_default_block_m_matches_heuristic():
    assert default_block_m(small_case(num_tokens=1, num_experts=32, top_k=4)) == 16
    assert default_block_m(small_case(num_tokens=1024, num_experts=32, top_k=4)) == 128
    assert default_block_m(small_case(num_tokens=256, num_experts=32, top_k=4)) == 32


@pytest.mark.parametrize("kw", [dict(num_warps=2), dict(block_m=8), dict(block_k=256), dict(split_k=2),
                                dict(is_persistent=True), dict(num_stages=0)])
def test_bad_configs_raise(kw):
    with pytest.raises(ValueError, match="tactic"):
        OptFlagsConfig(**kw)
    with pytest.raises(ValueError):
        parse_config("m16n64k128w4s3")


# ------------------------------------------------------------------ layout
def test_interleave_gate_linear_rows():
    i = 5
    t = torch.arange(2 * i * 3).reshape(1, 2 * i, 3)
    out = interleave_gate_linear(t)
    for j in range(i):
        assert torch.equal(out[0, 2 * j], t[0, i + j])  # gate j
        assert torch.equal(out[0, 2 * j + 1], t[0, j])  # linear j
    assert torch.equal(deinterleave_gate_linear(out), t)
    b = torch.randn(3, 2 * i)
    assert torch.equal(deinterleave_gate_linear(interleave_gate_linear(b, dim=1), dim=1), b)


def test_pad_scale_k():
    s = torch.randint(0, 255, (2, 8, 90), dtype=torch.uint8)  # 2880 / 32 = 90 groups -> 92
    p = pad_scale_k(s)
    assert p.shape == (2, 8, 92) and torch.equal(p[..., :90], s) and int(p[..., 90:].abs().sum()) == 0
    assert pad_scale_k(p) is p


def _swiglu_tk(h: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    """triton_kernels' swiglu_fn / compute_swiglu in torch: even columns gate ("gelu"), odd linear, +1."""
    gelu, lin = h[..., 0::2], h[..., 1::2]
    gelu = gelu.clamp(max=limit)
    lin = lin.clamp(min=-limit, max=limit)
    s = gelu / (1 + torch.exp(-alpha * gelu))
    return s * lin + s


def test_interleaved_rows_with_tk_swiglu_equal_reference_activation():
    case = small_case()
    inp = build_inputs(case)
    d13, s13, b13 = gemm1_rows(inp)
    from fp4moe_diag.problem.quant import FP4Tensor
    w_ours = inp.w13.dequantize(torch.float64)
    w_int = FP4Tensor(d13, s13, 32).dequantize(torch.float64)
    x = inp.hidden_states.double()
    for e in range(case.local_num_experts):
        ref = gated_activation(x @ w_ours[e].T + inp.w13_bias[e].double(), case.activation,
                               case.swiglu_alpha, case.swiglu_beta, case.swiglu_limit)
        got = _swiglu_tk(x @ w_int[e].T + b13[e].double(), case.swiglu_alpha, case.swiglu_limit)
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ routing
def test_pack_bitmatrix_against_loop():
    ids = torch.tensor([[0, 33], [-1, 5], [-1, -1], [31, 40]])
    words = pack_bitmatrix(ids, 41)
    assert words.shape == (4, 2)
    want = torch.zeros(4, 2, dtype=torch.int64)
    for t in range(4):
        for e in ids[t].tolist():
            if e >= 0:
                want[t, e // 32] |= 1 << (e % 32)
    assert torch.equal(words, want)
    u = as_uint32(words)
    assert u.dtype == torch.uint32 and torch.equal(u.view(torch.int32).long() & 0xFFFFFFFF, want)


def _routing_loop(ids: torch.Tensor, w: torch.Tensor, n_local: int):
    flat = ids.reshape(-1).tolist()
    pairs = sorted((e, i) for i, e in enumerate(flat) if e >= 0)  # (expert, flat index): stable
    topk = [i for _, i in pairs] + [-1] * (len(flat) - len(pairs))
    gate = [-1] * len(flat)
    for pos, (_, i) in enumerate(pairs):
        gate[i] = pos
    hist = [sum(1 for e in flat if e == x) for x in range(n_local)]
    scal = [float(w.reshape(-1)[i]) for _, i in pairs]
    return topk, gate, hist, scal


@pytest.mark.parametrize("ep", [False, True])
def test_routing_tensors_against_loop(ep):
    kw = dict(local_num_experts=4, local_expert_offset=4) if ep else {}
    case = small_case(num_tokens=33, **kw)
    inp = build_inputs(case)
    ids, w = vllm_routing_inputs(inp.local_topk_ids, inp.topk_weights)
    assert ids.dtype == torch.int16 and w.dtype == torch.bfloat16
    assert bool((w.float()[ids == -1] == -1).all())
    rt = routing_tensors(inp.local_topk_ids, w, case.local_num_experts)
    topk, gate, hist, scal = _routing_loop(inp.local_topk_ids, w, case.local_num_experts)
    assert rt.topk_indx.tolist() == topk and rt.gate_indx.tolist() == gate and rt.hist.tolist() == hist
    assert rt.gate_scal[: len(scal)].float().tolist() == scal
    if ep:
        assert rt.num_local_pairs < 33 * case.top_k


def test_routing_no_local_pairs():
    ids = torch.full((3, 2), -1)
    rt = routing_tensors(ids, torch.ones(3, 2), 4)
    assert rt.num_local_pairs == 0 and rt.topk_indx.tolist() == [-1] * 6 and rt.gate_indx.tolist() == [-1] * 6


def _emulate_matmul_ogs(inp) -> torch.Tensor:
    """The two matmul_ogs calls on the converted rows and routing tensors, float64 (what the kernels compute)."""
    from fp4moe_diag.problem.quant import FP4Tensor
    c = inp.case
    d13, s13, b13 = gemm1_rows(inp)
    w13 = FP4Tensor(d13, s13, 32).dequantize(torch.float64)
    w2 = inp.w2.dequantize(torch.float64)
    _, w = vllm_routing_inputs(inp.local_topk_ids, inp.topk_weights)
    rt = routing_tensors(inp.local_topk_ids, w, c.local_num_experts)
    x = inp.hidden_states.double()
    starts = [0] + torch.cumsum(rt.hist, 0).tolist()
    scratch = torch.zeros(c.num_tokens * c.top_k, c.hidden_size, dtype=torch.float64)
    for e in range(c.local_num_experts):
        for pos in range(starts[e], starts[e + 1]):
            tok = int(rt.topk_indx[pos]) // c.top_k  # gather: flat pair index // n_expts_act
            # the backend passes the fp32 per-expert values (all equal) as the kernel's scalars
            a = _swiglu_tk(x[tok] @ w13[e].T + b13[e].double(), float(inp.swiglu_alpha[e]), float(inp.swiglu_limit[e]))
            scratch[pos] = (a @ w2[e].T + inp.w2_bias[e].double()) * float(rt.gate_scal[pos])
    out = torch.zeros(c.num_tokens, c.hidden_size, dtype=torch.float64)
    g = rt.gate_indx.view(c.num_tokens, c.top_k)
    for t in range(c.num_tokens):  # _reduce_grouped: sum the valid rows of the token's group
        for j in range(c.top_k):
            if int(g[t, j]) >= 0:
                out[t] += scratch[int(g[t, j])]
    return out


@pytest.mark.parametrize("ep", [False, True])
def test_emulated_matmul_ogs_equals_reference(ep):
    kw = dict(local_num_experts=4, local_expert_offset=2) if ep else {}
    inp = build_inputs(small_case(num_tokens=9, **kw))
    torch.testing.assert_close(_emulate_matmul_ogs(inp), reference_moe(inp, torch.float64), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------ triton_kernels' torch helpers (CPU)
tk_cpu = pytest.mark.skipif(_tk_or_none() is None, reason=f"triton_kernels not importable: {loader.import_error()}")


@tk_cpu
def test_loader_finds_35_generation():
    tk = loader.load()
    assert tk.generation == "3.5.1" and hasattr(tk.matmul_ogs, "matmul_ogs")
    assert sys.modules["triton_kernels"] is tk.package
    assert {"update_opt_flags_constraints", "reset_opt_flags_constraints"} <= set(dir(tk.opt_flags))


@tk_cpu
@pytest.mark.parametrize("num_warps", [4, 8])
def test_hopper_layouts_round_trip_our_bytes(num_warps):
    from fp4moe_diag.backends.oai_triton_kernels.layout import hopper_scale, hopper_value
    tk = loader.load()
    inp = build_inputs(small_case(hidden_size=192, intermediate_size=64))
    d13, s13, _ = gemm1_rows(inp)
    v = hopper_value(tk, d13)
    assert v.storage.layout.name == "HOPPER_VALUE" and list(v.shape) == [8, 192, 128]  # [L, K, N]
    back = v.storage.layout.unswizzle_data(v.storage.data)
    assert torch.equal(back, d13.transpose(-2, -1))
    s = hopper_scale(tk, s13, num_warps)
    assert s.storage.layout.name == "HOPPER_SCALE" and s.storage.layout.num_warps == num_warps
    sb = s.storage.layout.unswizzle_data(s.storage.data)
    k_groups = 192 // 32  # 6 -> padded to 8
    assert sb.shape[-2] >= 8 and torch.equal(sb[:, :k_groups, :128], s13.transpose(-2, -1))
    assert int(sb[:, k_groups:8, :128].sum()) == 0


@tk_cpu
def test_torch_routing_data_structure():
    from fp4moe_diag.backends.oai_triton_kernels.routing import routing_torch
    tk = loader.load()
    inp = build_inputs(small_case(num_tokens=20, local_num_experts=4, local_expert_offset=4))
    rd, gi, si = routing_torch(tk, inp.local_topk_ids, inp.topk_weights, 4, 2)
    assert rd.n_expts_tot == 4 and rd.n_expts_act == 2 and rd.gate_scal.dtype == torch.bfloat16
    assert torch.equal(gi.src_indx, si.dst_indx) and torch.equal(gi.dst_indx, si.src_indx)
    assert set(rd.expt_data.block_pid_map) == {16, 32, 64, 128}
    assert rd.expt_data.token_offs_raw.tolist() == [0] + torch.cumsum(rd.expt_hist, 0).tolist()


# ------------------------------------------------------------------ GPU
def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not _sm90(), reason="needs an SM90 GPU")
@pytest.mark.parametrize("num_tokens, ep, hidden", [(1, False, 2880), (37, False, 2880), (64, True, 2880),
                                                    (4, False, 3072), (512, True, 3072)])
def test_gpu_every_tactic_against_reference(num_tokens, ep, hidden):
    from fp4moe_diag.measure.correctness import error_metrics, poison_
    b = backend_class("triton_kernels")()
    s = b.supports("cuda")
    if not s:
        pytest.skip(s.reason)
    ep_kw = dict(local_num_experts=16, local_expert_offset=16) if ep else {}
    case = MoECase(num_tokens=num_tokens, hidden_size=hidden, intermediate_size=hidden, num_experts=32, top_k=4,
                   model="gpt-oss-20b-like", **ep_kw)
    inp = build_inputs(case, "cuda")
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    assert prep.routing_source.startswith("triton_kernels")
    out = torch.empty_like(inp.hidden_states)
    bad = {}
    for t in b.tactics(case):
        poison_(out)
        y = b.run(prep, t, out)
        torch.cuda.synchronize()
        m = error_metrics(y, ref)
        if not m["correct"]:
            bad[t.label] = {k: m[k] for k in ("rel_l2", "cosine", "nan_count", "unwritten_rows")}
    assert not bad, bad
    flags = b.resolved_opt_flags(prep, b.default_tactic(case))
    assert len(flags) == 2 and all(f["split_k"] == 1 and f["num_warps"] == 8 for f in flags)


@pytest.mark.gpu
@pytest.mark.skipif(not _sm90(), reason="needs an SM90 GPU")
@pytest.mark.parametrize("ep", [False, True])
def test_gpu_routing_kernels_match_torch(ep):
    from fp4moe_diag.backends.oai_triton_kernels.routing import routing_torch, routing_triton
    tk = _tk_or_none()
    if tk is None:
        pytest.skip(loader.import_error())
    kw = dict(local_num_experts=16, local_expert_offset=16) if ep else {}
    inp = build_inputs(MoECase(num_tokens=300, hidden_size=128, intermediate_size=64, num_experts=32, top_k=4,
                               **kw), "cuda")
    a = routing_triton(tk, inp.local_topk_ids, inp.topk_weights, 32 if not ep else 16, 4)
    b = routing_torch(tk, inp.local_topk_ids, inp.topk_weights, 32 if not ep else 16, 4)
    n = int(b[0].expt_hist.sum())
    assert torch.equal(a[0].expt_hist, b[0].expt_hist)
    assert torch.equal(a[1].src_indx[:n], b[1].src_indx[:n]) and torch.equal(a[1].dst_indx, b[1].dst_indx)
    assert torch.equal(a[0].gate_scal[:n], b[0].gate_scal[:n])
    for bm in (16, 32, 64, 128):
        assert torch.equal(a[0].expt_data.token_offs_pad[bm], b[0].expt_data.token_offs_pad[bm])
        assert torch.equal(a[0].expt_data.block_pid_map[bm], b[0].expt_data.block_pid_map[bm])
