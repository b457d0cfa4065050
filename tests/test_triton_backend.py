"""Tests of the Triton MXFP4 MoE backend.

* Host side (always run, no triton needed): expert grouping/padding, tactic list, case checks,
  input validation, ``supports`` without triton.
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
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, interpret_enabled, kernels_interpreted
from fp4moe_diag.backends.triton.configs import (
    CONFIGS,
    DECODE_CONFIGS,
    DOT_SCALED_CONFIGS,
    PS_CONFIGS,
    PS_DECODE_CONFIGS,
    PS_PDL_CONFIGS,
    SW_CONFIGS,
    SW_DECODE_CONFIGS,
    X2_CONFIGS,
    X2_DECODE_CONFIGS,
    KernelConfig,
    k_split,
    parse_config,
    split_k_fits,
)
from fp4moe_diag.backends.triton.defaults import default_config
from fp4moe_diag.backends.triton.configs_gu import (PS_GU_CONFIGS, PS_GU_DECODE_CONFIGS, PS_GU_DECODE_PDL_CONFIGS,
                                                   PS_GU_PDL_CONFIGS, PS_GU_WIDE_CONFIGS)
from fp4moe_diag.backends.triton.configs_warps import PS_DECODE8_CONFIGS, PS_DECODE8_PDL_CONFIGS, PS_GU16_CONFIGS
from fp4moe_diag.backends.triton.configs_peel import PS_PK_DECODE_CONFIGS
from fp4moe_diag.backends.triton.configs_tail import PS_TAIL_CONFIGS, PS_TAIL_PDL_CONFIGS
from fp4moe_diag.backends.triton.grouping import group_pairs_by_expert
from interpreter import HAS_TRITON, interpreter_fixture, sub_env


def interpreted_or_cpu() -> bool:
    return bool(interpret_enabled() or kernels_interpreted())

ROOT = Path(__file__).resolve().parents[1]


TOL = 1e-2  # relative L2 vs the fp32 reference; bf16 intermediate/output rounding gives ~4e-3


# ------------------------------------------------------------------ grouping
def test_grouping_hand_built_with_ep_mask():
    ids = torch.tensor([[0, 2], [2, -1], [1, 0]], dtype=torch.int32)  # pairs 0..5, pair 3 is remote
    g = group_pairs_by_expert(ids, num_local_experts=3, block_m=4)
    s = 6  # padding sentinel = T * k
    assert g.sorted_pair_ids.tolist() == [0, 5, s, s, 4, s, s, s, 1, 2, s, s]
    assert g.block_expert_ids.tolist() == [0, 1, 2]
    assert g.expert_counts.tolist() == [2, 1, 2]
    assert (g.num_pairs, g.num_valid_pairs, g.num_blocks, g.num_padded_pairs) == (6, 5, 3, 12)
    assert g.padding_pairs == 7 and g.top_k == 2 and g.block_m == 4
    assert g.sorted_pair_ids.dtype == torch.int32 and g.block_expert_ids.dtype == torch.int32


def test_grouping_skips_unused_experts_and_spans_blocks():
    ids = torch.tensor([[3, 3], [3, 3], [3, 1]], dtype=torch.int64)
    g = group_pairs_by_expert(ids, num_local_experts=5, block_m=2)
    assert g.block_expert_ids.tolist() == [1, 3, 3, 3]
    assert g.sorted_pair_ids.tolist() == [5, 6, 0, 1, 2, 3, 4, 6]
    assert g.expert_counts.tolist() == [0, 1, 0, 5, 0]


def test_grouping_block_m_one_has_no_padding():
    ids = torch.tensor([[1, 0], [0, 1]], dtype=torch.int32)
    g = group_pairs_by_expert(ids, 2, 1)
    assert g.sorted_pair_ids.tolist() == [1, 2, 0, 3]
    assert g.block_expert_ids.tolist() == [0, 0, 1, 1]
    assert g.padding_pairs == 0


def test_grouping_all_remote_is_empty():
    g = group_pairs_by_expert(torch.full((3, 2), -1, dtype=torch.int32), 4, 16)
    assert g.num_blocks == 0 and g.num_padded_pairs == 0 and g.num_valid_pairs == 0 and g.num_pairs == 6


@pytest.mark.parametrize("block_m", [1, 16, 64])
def test_grouping_invariants_random(block_m: int):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(-1, 6, (37, 4), generator=gen, dtype=torch.int32)
    g = group_pairs_by_expert(ids, 6, block_m)
    flat = ids.reshape(-1)
    sp = g.sorted_pair_ids.long()
    real = sp[sp < g.num_pairs]
    assert sorted(real.tolist()) == torch.nonzero(flat >= 0).flatten().tolist()  # every local pair once
    assert g.num_padded_pairs % block_m == 0 and g.num_padded_pairs == g.num_blocks * block_m
    rows = sp.view(-1, block_m)
    for blk, e in enumerate(g.block_expert_ids.tolist()):
        r = rows[blk][rows[blk] < g.num_pairs]
        assert bool((flat[r] == e).all()) and r.numel() > 0
        assert r.tolist() == sorted(r.tolist())  # stable: token order inside an expert
    assert g.block_expert_ids.tolist() == sorted(g.block_expert_ids.tolist())


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(local_topk_ids=torch.zeros(3, 2)), "local_topk_ids"),  # float dtype
        (dict(local_topk_ids=torch.zeros(6, dtype=torch.int32)), "local_topk_ids"),  # 1-D
        (dict(local_topk_ids=torch.zeros(3, 0, dtype=torch.int32)), "local_topk_ids"),  # k = 0
        (dict(local_topk_ids=torch.tensor([[0, 4]], dtype=torch.int32)), "local_topk_ids"),  # id >= L
        (dict(local_topk_ids=torch.tensor([[0, -2]], dtype=torch.int32)), "local_topk_ids"),  # id < -1
        (dict(local_topk_ids=torch.zeros(2, 2, dtype=torch.int32, device="meta")), "local_topk_ids"),
        (dict(local_topk_ids=[[0, 1]]), "local_topk_ids"),
        (dict(num_local_experts=0), "num_local_experts"),
        (dict(block_m=0), "block_m"),
        (dict(block_m=16.0), "block_m"),
        (dict(topk_weights=torch.ones(2, 2, dtype=torch.float16)), "topk_weights"),
        (dict(topk_weights=torch.ones(2, 3)), "topk_weights"),
        (dict(topk_weights=torch.ones(2, 2, device="meta")), "topk_weights"),
    ],
)
def test_grouping_validation(kwargs: dict, name: str):
    args = dict(local_topk_ids=torch.zeros(2, 2, dtype=torch.int32), num_local_experts=4, block_m=16)
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{name}:"):
        group_pairs_by_expert(**args)


# ------------------------------------------------------------------ backend host side
def _case(**kw) -> MoECase:
    base = dict(num_tokens=5, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2)
    base.update(kw)
    return MoECase(**base)


def test_tactics_list():
    b = TritonMXFP4Backend()
    compiled = not interpreted_or_cpu()
    # (case, ds decode configs, x2 decode configs, sw decode configs, ps configs, ps decode configs expected):
    # H = I = 64 admits only split_k 1; T*k > 256 gets no decode configs; H = 96 has no ps layout
    big = dict(hidden_size=3072, intermediate_size=3072, top_k=4)
    # n_pdl: the ps decode tactics with programmatic dependent launch (compiled only; K = 64 fits no split)
    # (n_ps counts the -gu variants of PS_GU_CONFIGS, above the decode sizes those of PS_GU_WIDE_CONFIGS and the
    # tail-block tactics of PS_TAIL_CONFIGS too; n_pdl those of PS_GU_PDL_CONFIGS at decode, of PS_TAIL_PDL_CONFIGS
    # above)
    # (PS_DECODE8_CONFIGS / PS_DECODE8_PDL_CONFIGS: at H = I = 64 only the unsplit ones fit: 2 and 2; the k64 -gu
    # decode tile of PS_GU_DECODE_CONFIGS and its -pdl fit everywhere: 1 and 1)
    n_gud = len(PS_GU_DECODE_CONFIGS)
    n_all = len(PS_CONFIGS) + len(PS_GU_CONFIGS)
    n_pdl_all = len(PS_PDL_CONFIGS) + 1 + len(PS_DECODE8_PDL_CONFIGS) + len(PS_GU_DECODE_PDL_CONFIGS)
    n_psd_all = len(PS_DECODE_CONFIGS) + len(PS_DECODE8_CONFIGS) + n_gud
    n_wide = n_all + len(PS_GU_WIDE_CONFIGS) + len(PS_GU16_CONFIGS) + len(PS_TAIL_CONFIGS)
    n_tpdl = len(PS_TAIL_PDL_CONFIGS)
    gu_tail = sum(c.gate_up for c in PS_TAIL_CONFIGS)  # as many -gu among PS_TAIL_PDL_CONFIGS
    for case, n_decode, n_x2, n_sw, n_ps, n_psd, n_pdl in (
            (_case(), 1, 0, 0, n_all, 3, 8),  # m16n128k128w4s3/s4 -pdl, their -fs, the 2 -gu -pdl, 2 -pdl of decode8
            (_case(num_tokens=4096), 0, 0, 0, n_wide, 0, n_tpdl),
            (_case(num_tokens=40, num_experts=2, hidden_size=96), 1, 0, 0, 0, 0, 0),
            (_case(num_tokens=64, **big), 7, 4, 3, n_all, n_psd_all, n_pdl_all),
            (_case(num_tokens=65, **big), 0, 0, 0, n_wide, 0, n_tpdl)):
        prefill = n_ps == n_wide
        n_gu = len(PS_GU_CONFIGS) + (len(PS_GU_WIDE_CONFIGS) + len(PS_GU16_CONFIGS) + gu_tail if prefill else 0)
        n_gu += n_gud if n_psd else 0  # the k64 -gu decode tile
        tac = [t for t in b.tactics(case) if not (t.id.tile_major or t.id.peel)]  # -tm / -pk twins: their own tests
        assert len(tac) == (len(CONFIGS) + len(X2_CONFIGS) + n_x2 + len(SW_CONFIGS) + n_sw + n_ps + n_psd
                            + (len(DOT_SCALED_CONFIGS) + n_decode + n_pdl if compiled else 0))
        assert sum(t.id.ps and not t.id.pdl for t in tac) == n_ps + n_psd
        assert sum(t.id.pdl > 0 for t in tac) == (n_pdl if compiled else 0)
        pdl_gu = (gu_tail if prefill else 1 + n_gud) if compiled and n_pdl > 0 else 0
        assert sum(t.id.gate_up for t in tac) == (n_gu + pdl_gu if n_ps else 0)
        assert sum(t.id.mode == "x2" for t in tac) == len(X2_CONFIGS) + n_x2
        assert sum(t.id.swap for t in tac) == len(SW_CONFIGS) + n_sw and all(t.id.x2 for t in tac if t.id.swap)
        labels = [t.label for t in tac]
        assert len(set(labels)) == len(labels) and len({t.id for t in tac}) == len(tac)
        assert sum(t.is_default for t in tac) == 1
        assert b.default_tactic(case).id == default_config(case)
        for t in tac:
            assert isinstance(t.id, KernelConfig)
            bm, bn, bk, nw, ns = t.id.block_m, t.id.block_n, t.id.block_k, t.id.num_warps, t.id.num_stages
            mode, sk = t.id.mode, t.id.split_k
            assert mode in ("bits", "ds", "x2", "sw", "ps") and sk in (1, 2, 4, 8)
            assert t.label == (f"m{bm}n{bn}k{bk}w{nw}s{ns}" + ("" if mode == "bits" else f"-{mode}")
                               + "-gu" * t.id.gate_up
                               + (f"-sk{sk}" if sk > 1 else "") + (f"-g2sk{t.id.split_k2}" if t.id.split_k2 else "")
                               + (f"-g2n{t.id.block_n2}" if t.id.block_n2 else "")
                               + (f"-t{t.id.tail_m}" if t.id.tail_m else "") + ("", "-pdl")[t.id.pdl]
                               + ("-fs" if t.id.fused else ""))
            assert bm in (16, 32, 64, 128, 256) and bk in (64, 128, 256) and bn in (16, 32, 64, 128, 256)
            assert t.params == dict(block_m=bm, block_n=bn, block_k=bk, num_warps=nw, num_stages=ns,
                                    dot_scaled=mode == "ds", x2=mode in ("x2", "sw"), swap=mode == "sw",
                                    ps=mode == "ps", split_k=sk, split_k2=t.id.gemm2_split,
                                    **({"pdl": t.id.pdl} if t.id.pdl else {}),
                                    **({"block_n2": t.id.block_n2} if t.id.block_n2 else {}),
                                    **({"gate_up": True} if t.id.gate_up else {}),
                                    **({"fused": True} if t.id.fused else {}),
                                    **({"tail_m": t.id.tail_m} if t.id.tail_m else {}))
    assert b.default_tactic(_case(num_tokens=1)).label == "m16n64k128w4s3"
    assert b.default_tactic(_case(num_tokens=4096)).params["block_m"] == 64
    every = (CONFIGS + DOT_SCALED_CONFIGS + DECODE_CONFIGS + X2_CONFIGS + X2_DECODE_CONFIGS + SW_CONFIGS
             + SW_DECODE_CONFIGS + PS_CONFIGS + PS_DECODE_CONFIGS + PS_PDL_CONFIGS + PS_GU_CONFIGS + PS_GU_PDL_CONFIGS
             + PS_GU_WIDE_CONFIGS + PS_TAIL_CONFIGS + PS_TAIL_PDL_CONFIGS + PS_DECODE8_CONFIGS + PS_DECODE8_PDL_CONFIGS
             + PS_GU16_CONFIGS + PS_GU_DECODE_CONFIGS + PS_GU_DECODE_PDL_CONFIGS)
    assert len(set(every)) == len(every)


def test_x2_bit_patterns_are_the_e2m1_values_times_the_scale():
    """The x2 upcast's arithmetic (in torch): every code x every accepted scale byte gives the exact
    MXFP4 value, and the backend refuses scale bytes outside that range (a row, not a wrong number)."""
    from fp4moe_diag.backends.triton.backend import X2_OFFSET, X2_SCALE_BYTES, x2_scale_refusal

    e2m1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)
    byte = torch.arange(256, dtype=torch.int32)
    lo_bits = ((byte & 7) << 6) | ((byte & 8) << 12)
    hi_bits = ((byte & 0x70) << 2) | ((byte & 0x80) << 8)
    as_bf16 = lambda b: (b.to(torch.int32) << 16).view(torch.float32).to(torch.bfloat16)  # noqa: E731
    lo, hi = as_bf16(lo_bits), as_bf16(hi_bits)
    assert torch.equal(lo.double() * 2.0 ** 126, e2m1[byte & 15]) and torch.equal(hi.double() * 2.0 ** 126, e2m1[byte >> 4])
    for s in range(X2_SCALE_BYTES[0], X2_SCALE_BYTES[1] + 1):
        factor = torch.tensor(2.0 ** (s - 1 - X2_OFFSET)).to(torch.bfloat16)  # what the kernel builds: (s + 94) << 7
        assert factor.view(torch.int16).item() == (s + 126 - X2_OFFSET) << 7
        got = (lo * factor).double() * 2.0 ** X2_OFFSET  # one bf16 multiply, then the accumulator's 2**32
        assert torch.equal(got, e2m1[byte & 15] * 2.0 ** (s - 127)), s
    lo_s, hi_s = X2_SCALE_BYTES
    ok = torch.tensor([lo_s, 127, hi_s], dtype=torch.uint8)
    assert x2_scale_refusal(ok, ok) is None
    for bad, seen in ((lo_s - 1, f"{lo_s - 1}..127"), (hi_s + 1, f"127..{hi_s + 1}")):
        why = x2_scale_refusal(ok, torch.tensor([127, bad], dtype=torch.uint8))
        assert why == (f"the x2 upcast is exact for ue8m0 scale bytes {lo_s}..{hi_s} (2**{lo_s - 127}..2**{hi_s - 127}); "
                       f"these weights have {seen}")


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


def test_parse_config_and_labels():
    assert parse_config((16, 64, 128, 4, 3)) == KernelConfig(16, 64, 128, 4, 3, "bits", 1)
    for kc in (CONFIGS + DOT_SCALED_CONFIGS + DECODE_CONFIGS + X2_CONFIGS + X2_DECODE_CONFIGS + SW_CONFIGS
               + SW_DECODE_CONFIGS + PS_CONFIGS + PS_DECODE_CONFIGS):  # id = config; str = label
        assert str(kc) == kc.label and parse_config(kc.label) == kc and parse_config(kc) is kc
    with pytest.raises(ValueError, match="tactic: expected a label"):
        parse_config("m16n64")
    with pytest.raises(ValueError, match="tactic: mode"):
        KernelConfig(16, 64, 128, 4, 3, "xx")
    assert parse_config((16, 32, 128, 4, 3, "ds")).label == "m16n32k128w4s3-ds"
    kc = parse_config((16, 32, 128, 4, 1, "ds", 4))
    assert (kc.label, kc.dot_scaled, kc.split_k) == ("m16n32k128w4s1-ds-sk4", True, 4)
    kc = parse_config("m16n64k128w4s3-sw-sk2")
    assert (kc.mode, kc.swap, kc.x2, kc.dot_scaled, kc.split_k) == ("sw", True, True, False, 2)
    # gemm2's own split: in the label only when it differs from gemm1's
    kc = parse_config("m16n128k128w4s3-ps-g2sk2")
    assert (kc.split_k, kc.split_k2, kc.gemm2_split, kc.params()["split_k2"]) == (1, 2, 2, 2)
    assert KernelConfig(16, 128, 128, 4, 3, "ps", 2, 2) == parse_config("m16n128k128w4s3-ps-sk2")
    assert KernelConfig(16, 128, 128, 4, 3, "ps", 2, 2).label == "m16n128k128w4s3-ps-sk2"
    assert parse_config("m16n64k64w4s1-ps-sk3-g2sk2").gemm2_split == 2
    assert parse_config("m16n64k128w4s3").params()["split_k2"] == 1
    with pytest.raises(ValueError, match="tactic: split_k2"):
        KernelConfig(16, 128, 128, 4, 3, "ps", 1, -1)
    for bad, word in (((16, 32, 128, 4), "tactic"), ((16, 32, 128, 4, 3, "fp8"), "mode"),
                      ((16, 32, 128, 4, 3, "dsp", 1), "mode"),
                      ((16, 32, 128, 4, 3, "ds", 0), "split_k"), ((16, 0, 128, 4, 3), "tactic")):
        with pytest.raises(ValueError, match=word):
            parse_config(bad)


@pytest.mark.parametrize("k, bk, sk, per, fits", [
    (3072, 128, 1, 3072, True), (3072, 128, 4, 768, True), (3072, 256, 8, 512, False),  # 512*7 > 3072
    (2880, 128, 2, 1536, True), (96, 64, 2, 64, True), (128, 32, 3, 64, False), (160, 32, 3, 64, True),
])
def test_split_k_arithmetic(k: int, bk: int, sk: int, per: int, fits: bool):
    assert k_split(k, bk, sk) == per and per % bk == 0
    assert split_k_fits(k, bk, sk) is fits


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
    assert sum(k.startswith("oai_bias/") and "-x2" in k for k in interp_results) == len(X2_CONFIGS) + 1
    assert interp_results["x2_equals_bits"] is True
    assert interp_results["sw_vs_x2"] < 1e-2  # bf16 outputs of the same products summed in another order
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


def test_ps_scale_words_where_bytes_would_leave_a_thread_less_than_4():
    """The ps kernels load the scale bytes of a tile as words below 4 bytes per thread (cp.async's minimum): every
    8-warp tile offered, the small 4-warp ones; bytes for the 4-warp tiles the H200 runs best (m16/m64 n128 k128)."""
    from fp4moe_diag.backends.triton.configs import PS_CONFIGS, ps_scale_words

    assert not ps_scale_words(128, 128, 4) and not ps_scale_words(64, 256, 4)  # 16 slab-chunks x 32 B = 4 per thread
    assert ps_scale_words(128, 64, 4) and ps_scale_words(128, 128, 8) and ps_scale_words(64, 64, 4)
    assert all(ps_scale_words(c.block_n, c.block_k, c.num_warps) for c in PS_CONFIGS if c.num_warps == 8)
    assert ps_scale_words(128, 128, 4) is False and ps_scale_words(32, 64, 4) is True  # the two interpreted above


def test_ps_tiles_first_only_where_both_tiles_and_accumulators_are_small():
    """gemm1 upcasts both weight tiles before its two dots only for tiles of <= 16 registers per thread each and <= 64
    accumulator registers (H200, s12c: m64n128k64w8s4 faster, m128n128k64w8s3 slower)."""
    from fp4moe_diag.backends.triton.configs import PS_CONFIGS, PS_DECODE_CONFIGS, ps_tiles_first

    assert ps_tiles_first(64, 128, 64, 8) and not ps_tiles_first(128, 128, 64, 8)  # 64 / 128 accumulator registers
    assert not ps_tiles_first(64, 128, 128, 4) and not ps_tiles_first(16, 128, 128, 4)  # 128 bf16 per thread a tile
    assert ps_tiles_first(16, 64, 64, 4) and not ps_tiles_first(16, 128, 64, 4)  # 32 / 64 bf16 per thread a tile
    assert [c.label for c in PS_CONFIGS + PS_DECODE_CONFIGS
            if ps_tiles_first(c.block_m, c.block_n, c.block_k, c.num_warps)] == ["m64n64k64w4s5-ps", "m64n128k64w8s4-ps"]


def test_gemm2_block_n_label_and_refusals():
    """``-g2nN``: gemm2's own BLOCK_N (mode ps), as triton_kernels runs its down GEMM on 256 weight rows per program
    while gate/up keeps 2 x 128; the same width as gemm1's is no option (one id per tactic)."""
    kc = parse_config("m128n128k128w8s3-ps-g2n256")
    assert (kc.block_n, kc.gemm2_block_n, kc.block_n2) == (128, 256, 256) and kc.label == "m128n128k128w8s3-ps-g2n256"
    assert kc.params()["block_n2"] == 256 and "block_n2" not in parse_config("m64n128k128w4s3-ps").params()
    assert parse_config("m16n128k128w4s3-ps-g2sk2-g2n256-pdl").label == "m16n128k128w4s3-ps-g2sk2-g2n256-pdl"
    assert KernelConfig(64, 128, 128, 4, 3, "ps", block_n2=128) == parse_config("m64n128k128w4s3-ps")
    for bad in (dict(mode="x2", block_n2=256), dict(mode="ps", block_n2=96), dict(mode="ps", block_n2=-1)):
        with pytest.raises(ValueError, match="block_n2"):
            KernelConfig(64, 128, 128, 4, 3, **bad)
