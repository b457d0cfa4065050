"""The fused ends of our ps kernels (tactic suffix ``-fs``, issue #25): gemm2 sums the top-k rows, a split gemm1
finalizes its own planes, each in the last program to arrive at an int32 counter (:mod:`._kernels_fused`).

* Host side: the label / params round trip, the ``fused`` field's checks, the launchers' refusals (before any
  kernel), and the launch list of one call: two kernels with ``-fs``, PDL switches on both with ``-pdl``.
* Interpreter (TRITON_INTERPRET=1, one subprocess): ``-fs`` tactics against the float32 reference and bit-for-bit
  against the same tactic without ``-fs`` (split-K 2 and 4, gemm2-only split, uneven K, both grid orders, gemm2's own
  BLOCK_N, expert parallelism with tokens that have some or no local pair, T = 1, 4 and a T where an expert has
  several M blocks); the counters are zero after every call and a second call of the same launcher (a replay) gives
  the same bits.
* Compiled for sm_90a on this CPU host: one ``atom.acq_rel.gpu`` between two barriers, no spills.
"""

from __future__ import annotations

import re

import pytest
import torch

from interpreter import HAS_TRITON, SECOND_TRITON, bundled_tools, interpreter_fixture

from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.configs import PS_PDL_CONFIGS, KernelConfig, parse_config

TOL = 1e-2  # as tests/test_triton_backend.py: relative L2 against the fp32 reference


def test_fused_labels_round_trip_and_checks():
    kc = parse_config("m16n64k256w4s3-ps-sk2-pdl-fs")
    assert (kc.fused, kc.pdl, kc.split_k, kc.label) == (True, 1, 2, "m16n64k256w4s3-ps-sk2-pdl-fs")
    assert kc.params()["fused"] is True and kc == KernelConfig(16, 64, 256, 4, 3, "ps", 2, pdl=1, fused=True)
    kc = parse_config("m16n128k128w4s3-ps-fs")
    assert (kc.fused, kc.pdl, kc.label) == (True, 0, "m16n128k128w4s3-ps-fs")
    old = parse_config("m16n128k128w4s3-ps-g2sk2-pdl")  # older labels: unchanged, no new key
    assert old.fused is False and "fused" not in old.params() and old.label == "m16n128k128w4s3-ps-g2sk2-pdl"
    assert parse_config("m16n128k128w4s3-ps-g2sk2-pdl-fs") == KernelConfig(16, 128, 128, 4, 3, "ps", 1, 2, pdl=1,
                                                                           fused=True)
    with pytest.raises(ValueError, match="expected a label"):
        parse_config("m16n128k128w4s3-ps-fs-pdl")  # -fs comes last
    with pytest.raises(ValueError, match=r"^tactic: fused .* is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", fused=True)
    with pytest.raises(ValueError, match=r"^tactic: fused"):
        parse_config("m16n64k128w4s3-sw-fs")
    with pytest.raises(ValueError, match=r"^tactic: fused"):
        KernelConfig(16, 64, 128, 4, 3, "ps", fused=1)
    fs = {c.label for c in PS_PDL_CONFIGS if c.fused}
    assert fs == {"m16n64k256w4s3-ps-sk2-pdl-fs", "m16n64k256w4s3-ps-sk4-pdl-fs", "m16n128k128w4s3-ps-pdl-fs",
                  "m16n128k128w4s4-ps-pdl-fs", "m16n128k128w4s3-ps-g2sk2-pdl-fs"}
    assert {lab[:-3] for lab in fs} <= {c.label for c in PS_PDL_CONFIGS if not c.fused}  # variants of the winners


def _prepared(**kw):
    from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend

    case = MoECase(**{**dict(num_tokens=3, hidden_size=192, intermediate_size=128, num_experts=4, top_k=2), **kw})
    b = TritonMXFP4Backend()
    return b, b.prepare(build_inputs(case))


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_launchers_refuse_fused_outside_ps_before_any_kernel():
    from fp4moe_diag.backends.triton import launch

    _, p = _prepared()
    g = p.grouping(16)
    planes = p.gemm2_planes(1)
    fused = p.fused_sum(p.out_bf16, 3)
    common = (g.sorted_pair_ids, g.block_expert_ids, g.num_pairs)
    with pytest.raises(ValueError, match="^fused: only the pre-shuffled kernels"):
        launch.gemm2_calls(p.inter_buf, p.w2, p.w2_scale, None, p.topk_weights, planes, *common, 16, 64, 64, 4, 1,
                           x2=True, fused=fused)
    with pytest.raises(ValueError, match="^counters: only the pre-shuffled kernels"):
        launch.gemm1_calls(p.hidden, p.w13, p.w13_scale, None, None, None, None, p.inter_buf, *common, 2, 0,
                           16, 64, 64, 4, 1, x2=True, split_k=2, part=p.gemm1_partials(2, 64),
                           counters=p.arrival_counters("gemm1", 8))
    w2, w2s = p.ps[2], p.ps[3]
    bad_out = launch.FusedSum(**{**fused.__dict__, "out": torch.zeros(3, 192)})
    with pytest.raises(ValueError, match=r"^fused: out expected a bf16 \[3, 192\]"):
        launch.gemm2_calls(p.inter_buf, w2, w2s, None, p.topk_weights, planes, *common, 16, 64, 64, 4, 1, ps=True,
                           fused=bad_out)
    bad_cnt = launch.FusedSum(**{**fused.__dict__, "counters": torch.zeros(9, dtype=torch.int64)})
    with pytest.raises(ValueError, match="^fused: expected contiguous int32 arrival counters, at least 9"):
        launch.gemm2_calls(p.inter_buf, w2, w2s, None, p.topk_weights, planes, *common, 16, 64, 64, 4, 1, ps=True,
                           fused=bad_cnt)
    with pytest.raises(ValueError, match="^counters: expected contiguous int32"):
        launch.gemm1_calls(p.hidden, p.ps[0], p.ps[1], None, None, None, None, p.inter_buf, *common, 2, 0,
                           16, 64, 64, 4, 1, ps=True, split_k=2, part=p.gemm1_partials(2, 64),
                           counters=torch.zeros(1, dtype=torch.int32))


def _kernel_calls(calls) -> list[dict]:
    """The keyword arguments of each kernel launch in ``calls`` (torch copies left out)."""
    return [c.keywords for c in calls if "num_warps" in c.keywords]


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_launch_list_and_pdl_switches_with_fs():
    """One call's launches, as bound (nothing runs): ``-fs`` drops the finalize and the top-k sum, and with ``-pdl``
    both remaining kernels are programmatic dependents (compiled kernels in this process; under the interpreter the
    launcher passes no PDL switch, see test_triton_pdl.py)."""
    from fp4moe_diag.backends.triton import launch

    b, p = _prepared()
    pdl = {} if launch.INTERPRETED else {"PDL": 1, "launch_pdl": True}
    kw = {lab: _kernel_calls(b.calls(p, Tactic(id=lab, label=lab))) for lab in (
        "m16n64k64w4s1-ps-sk2-pdl", "m16n64k64w4s1-ps-sk2-pdl-fs", "m16n64k64w4s1-ps-sk2-fs",
        "m16n64k64w4s1-ps-g2sk2-pdl-fs", "m16n64k64w4s1-ps-pdl")}
    assert [len(v) for v in kw.values()] == [4, 2, 2, 2, 3]
    g1, fin, g2, top = kw["m16n64k64w4s1-ps-sk2-pdl"]
    assert "FUSED" not in g1 and "FUSED" not in g2 and "launch_pdl" not in fin and top["TOP_K"] == 2
    assert all(k.get("launch_pdl") == pdl.get("launch_pdl") for k in (g1, g2, top))
    g1, g2 = kw["m16n64k64w4s1-ps-sk2-pdl-fs"]
    assert g1["FUSED"] is True and g1["SPLIT_K"] == 2 and g2["FUSED"] is True and g2["TOP_K"] == 2
    assert {k: g1.get(k) for k in pdl} == pdl and {k: g2.get(k) for k in pdl} == pdl
    assert g2["y_ptr"] is p.out_bf16 and g2["ORPH"] == 0 and g2["cnt_ptr"] is p.counter_bufs["gemm2"]
    assert g1["cnt_ptr"] is p.counter_bufs["gemm1"] and int(g1["cnt_ptr"].abs().sum()) == 0
    assert all("launch_pdl" not in k and "PDL" not in k for k in kw["m16n64k64w4s1-ps-sk2-fs"])
    g1, g2 = kw["m16n64k64w4s1-ps-g2sk2-pdl-fs"]  # gemm1 unsplit: no fused end there; gemm2 sums 2 planes
    assert "FUSED" not in g1 and g2["FUSED"] is True and g2["SPLIT_K"] == 2
    # tokens with no local pair (EP): listed for gemm2's zero rows; token_pairs counts the local ones
    b, p = _prepared(num_tokens=6, num_experts=8, local_num_experts=2, local_expert_offset=2)
    fs = p.fused_sum(p.out_bf16, 3)
    local = (p.inputs.local_topk_ids >= 0).sum(dim=1)
    assert fs.token_pairs.tolist() == local.tolist() and fs.orphans.numel() % 16 == 0
    assert fs.orphans[fs.orphans >= 0].tolist() == torch.nonzero(local == 0).flatten().tolist()


_INTERP_SCRIPT = r"""
import dataclasses, json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
small = dict(hidden_size=192, intermediate_size=320, top_k=2, num_experts=4)  # K = 192 / 320: uneven in 128s
cases = {  # (case, labels run with and without -fs)
    "ep": (dict(small, num_tokens=6, num_experts=8, local_num_experts=2, local_expert_offset=2),  # some / no local
           ("m16n64k128w4s1-ps", "m16n64k128w4s1-ps-sk2", "m16n64k64w4s1-ps-g2sk2", "m16n64k128w4s1-ps-sk2-pdl")),
    # K = 448 in 4 splits of 64-steps: 128, 128, 128, 64
    "t1": (dict(small, num_tokens=1, hidden_size=448, intermediate_size=448),
           ("m16n64k64w4s1-ps-sk4", "m16n64k128w4s1-ps-sk2")),
    "t4": (dict(small, num_tokens=4), ("m16n64k128w4s1-ps", "m16n64k64w4s1-ps-g2sk2", "m32n64k64w4s1-ps-sk2")),
    # 48 pairs on 2 experts: several 16-row M blocks per expert; gemm2's own BLOCK_N; the N-fastest grid (BLOCK_M 32)
    "blocks": (dict(small, num_tokens=24, num_experts=2),
               ("m16n64k128w4s1-ps-sk2", "m16n64k64w4s1-ps-sk2-g2n128", "m32n64k64w4s1-ps-sk2")),
}
if SECOND_TRITON:  # CI's second Triton (tests/interpreter.py): EP and T = 1 with split-K 4
    cases = {k: cases[k] for k in ("ep", "t1")}
out = {}
for name, (kw, labels) in cases.items():
    inp = build_inputs(MoECase(**kw))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    local = (inp.local_topk_ids >= 0).sum(dim=1)
    out[f"{name}:orphans"] = int((local == 0).sum())
    out[f"{name}:partial_tokens"] = int(((local > 0) & (local < inp.case.top_k)).sum())
    out[f"{name}:max_blocks"] = max(-(-int(c) // 16) for c in prep.grouping(16).expert_counts)
    for lab in labels:
        t_fs = Tactic(id=lab + "-fs", label=lab + "-fs")
        y0 = b.run(prep, Tactic(id=lab, label=lab))
        # into a NaN-filled output: every row must be written (tokens without a local pair too)
        buf = torch.full(y0.shape, float("nan"), dtype=torch.bfloat16)
        launch = b.launcher(prep, t_fs, output=buf)
        y1 = launch().clone()
        zero1 = all(int(c.abs().sum()) == 0 for c in prep.counter_bufs.values())
        buf.fill_(float("nan"))
        y2 = launch()  # a replay: writes every row again
        zero2 = all(int(c.abs().sum()) == 0 for c in prep.counter_bufs.values())
        base_lab = lab.replace("-pdl", "")
        kernels = lambda t: sum("num_warps" in c.keywords for c in b.calls(prep, t))  # torch copies left out
        out[f"{name}/{lab}-fs"] = dict(err=float((y1.float() - ref).norm() / ref.norm()), same_bits=torch.equal(y0, y1),
                                       replay_bits=torch.equal(y1, y2), counters_zero=zero1 and zero2,
                                       kernels=kernels(t_fs), kernels_unfused=kernels(Tactic(id=base_lab, label=base_lab)))
# no pair on this rank: the fused call writes zeros (the top-k sum of zero rows)
case = MoECase(**{**small, "num_tokens": 3, "num_experts": 8, "local_num_experts": 4, "local_expert_offset": 4})
inp = build_inputs(case)
inp = dataclasses.replace(inp, topk_ids=torch.randint(0, 4, inp.topk_ids.shape, dtype=torch.int32))
buf = torch.full((3, 192), float("nan"), dtype=torch.bfloat16)
b.run(b.prepare(inp), Tactic(id="m16n64k128w4s1-ps-sk2-fs", label="-fs"), output=buf)
out["no_local_pairs"] = [float(buf.float().abs().max()), bool(torch.isnan(buf.float()).any())]
# the summation order itself, on planes where it shows in bf16: split 0 holds 1 and -1 (slots 0, 1), split 1 holds
# 2**-30 and 0: (1 + -1) + 2**-30 + 0 = 2**-30 in the top-k sum's order (splits, then slots); 0 in any order that
# adds 2**-30 to 1 first.  The fused sum runs in a probe kernel (one token, 2 pairs, 2 splits: 4 arrivals).
import importlib, sys, tempfile
from fp4moe_diag.backends.triton import launch as L
probe_dir = tempfile.mkdtemp()
with open(probe_dir + "/fs_probe.py", "w") as f:
    f.write('''import triton
import triton.language as tl
from fp4moe_diag.backends.triton._kernels_fused import _gemm2_fused_topk_sum


@triton.jit
def probe(planes, cnt, tok_pairs, y):
    offs_m = tl.arange(0, 16)
    mask_m = offs_m < 2
    offs_n = tl.arange(0, 16)
    _gemm2_fused_topk_sum(tl.program_id(0), tl.program_id(1), tl.program_id(2), tl.where(mask_m, offs_m, 2), mask_m,
                          offs_n, offs_n < 16, planes, 32, 16, cnt, tok_pairs, tok_pairs, y, 16, 16, 2, 2, 16, 16, 0,
                          True)
''')
sys.path.insert(0, probe_dir)
probe = importlib.import_module("fs_probe").probe
planes = torch.zeros(2, 2, 16)
planes[0, 0], planes[0, 1], planes[1, 0] = 1.0, -1.0, 2.0 ** -30
cnt, y = torch.zeros(16, dtype=torch.int32), torch.full((1, 16), 7.0, dtype=torch.bfloat16)
y_ref = torch.zeros(1, 16, dtype=torch.bfloat16)
probe[(1, 1, 2)](planes, cnt, torch.tensor([2], dtype=torch.int32), y)
L.launch_topk_sum(planes, y_ref, 2)
out["order_probe"] = [float(y[0, 0]), bool(torch.equal(y, y_ref)), int(cnt.abs().sum())]
"""


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name, n", [("ep", 4), ("t1", 2), ("t4", 3), ("blocks", 3)])
def test_fused_tactics_match_the_reference_and_the_unfused_bits(interp_results: dict, name: str, n: int):
    if SECOND_TRITON and name not in ("ep", "t1"):
        pytest.skip("CI's second Triton runs the ep and t1 cases (tests/interpreter.py)")
    assert interp_results["interpreted"] is True
    runs = {k: v for k, v in interp_results.items() if k.startswith(name + "/")}
    assert len(runs) == n, runs
    for lab, r in runs.items():
        assert r["err"] < TOL, (lab, r)
        assert r["same_bits"] is True and r["replay_bits"] is True and r["counters_zero"] is True, (lab, r)
        assert r["kernels"] == 2, (lab, r)  # gemm1, gemm2: no finalize, no top-k sum
        split = "-sk" in lab
        assert r["kernels_unfused"] == 3 + split, (lab, r)  # gemm1, [finalize], gemm2, top-k sum


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_the_cases_cover_what_they_claim(interp_results: dict):
    assert interp_results["ep:orphans"] >= 1 and interp_results["ep:partial_tokens"] >= 1  # EP: none / some local
    assert interp_results["t1:max_blocks"] == 1
    assert SECOND_TRITON or interp_results["blocks:max_blocks"] >= 2
    assert interp_results["no_local_pairs"] == [0.0, False]
    assert interp_results["order_probe"] == [2.0 ** -30, True, 0]  # the top-k sum's order, its bits, counter reset


def _build(label: str, gemm: str) -> tuple[str, dict]:
    from fp4moe_diag.profiling.sass import _compile, resource_usage

    cc = _compile(parse_config(label), gemm, 2880, 90)
    return cc.asm["ptx"], resource_usage(cc)


@pytest.mark.skipif(not bundled_tools("ptxas", "cuobjdump"), reason="triton with its bundled CUDA tools is not installed")
@pytest.mark.parametrize("label, gemm", [("m16n128k128w4s3-ps", "gemm2"), ("m16n64k256w4s3-ps-sk2-pdl", "gemm1")])
def test_fused_sm90_build_orders_its_stores_and_does_not_spill(label: str, gemm: str):
    ptx0, use0 = _build(label, gemm)
    ptx1, use1 = _build(label + "-fs", gemm)
    atom = re.compile(r"atom\.global\.gpu\.acq_rel\.add\.u32")
    assert not atom.search(ptx0) and len(atom.findall(ptx1)) == 1
    body = ptx1[:atom.search(ptx1).start()]
    assert body.rstrip().rfind("bar.sync") > body.rfind("st.global")  # the barrier after the plane stores
    assert "ld.global.cg" in ptx1[atom.search(ptx1).end():]  # the other programs' rows, from L2
    assert use1["local"] == use0["local"] == 0 and use1["stack"] == 0
    ctas = lambda reg: 65536 // (-(-reg // 8) * 8 * 128)  # noqa: E731 -- per SM by registers, 4 warps
    assert ctas(use1["reg"]) == ctas(use0["reg"]), (use0, use1)  # the fused end costs no occupancy step
