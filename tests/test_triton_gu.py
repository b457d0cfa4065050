"""gemm1 with gate/up interleaved in every slab (mode ps, tactic suffix ``-gu``; :mod:`._kernels_ps_gu`).

* Host side: the ``gate_up`` field and its label, the -gu tactic lists, the w13 row order of
  :func:`.ps_layout.gate_up_rows` (a hand-checked example) and its ps copy, the launcher's refusal outside mode ps.
* Interpreter (TRITON_INTERPRET=1, one subprocess): -gu tactics against the float32 reference and against the same
  tactic without -gu (gemm1's bf16 intermediate and the output), with bias / no bias, SwiGLU / the gpt-oss clamped
  activation, K = 192 in steps of 128 (a half-empty last K tile), I = 320 in tiles of 128 / 256 output columns (the
  last tile's slabs past 2I / 16 read as zeros), split-K (the lin / gate partials to the ``part`` planes), 8 warps
  (scale words), one dot per K step and one per 64-K chunk (``CHUNK_DOTS``), the (N tiles, M blocks) grid, and 4
  of 8 experts on this rank (a local expert offset).
"""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag import MoECase
from fp4moe_diag.backends.triton import ps_layout
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import PS_CONFIGS, PS_PDL_CONFIGS, KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_gu import (PS_GU_CONFIGS, PS_GU_DECODE_CONFIGS, PS_GU_DECODE_PDL_CONFIGS,
                                                   PS_GU_PDL_CONFIGS, PS_GU_WIDE_CONFIGS,
                                                   ps_gu_chunk_dots)
from interpreter import HAS_TRITON, SECOND_TRITON, bundled_tools, interpreter_fixture

TOL = 1e-2  # relative L2 against the fp32 reference, as tests/test_triton_backend.py
SAME = 1e-5  # relative L2 against the same tactic without -gu: the same products (fp32 sums of another shape)


def test_gate_up_labels_round_trip_and_checks():
    kc = parse_config("m128n128k64w8s3-ps-gu-g2n256")
    assert kc == KernelConfig(128, 128, 64, 8, 3, "ps", block_n2=256, gate_up=True)
    assert kc.label == "m128n128k64w8s3-ps-gu-g2n256" and kc.params()["gate_up"] is True
    full = "m16n128k128w4s3-ps-gu-sk2-g2sk4-g2n256-pdl"
    assert parse_config(full).label == full and parse_config(full).gate_up
    for old in ("m16n128k128w4s3-ps", "m128n128k64w8s3-ps-g2n256", "m16n128k128w4s3-ps-g2sk2-pdl", "m16n64k128w4s3"):
        assert parse_config(old).label == old and not parse_config(old).gate_up
        assert "gate_up" not in parse_config(old).params()
    for bad in ("m16n128k128w4s3-ps-sk2-gu", "m16n128k128w4s3-x2-gu", "m16n128k128w4s3-gu", "m16n128k128w4s3-ps-gu-gu",
                "m16n128k128w4s3-ps-pdl-gu"):
        with pytest.raises(ValueError, match="expected a label"):
            parse_config(bad)
    for mode in ("bits", "x2", "sw", "ds"):
        with pytest.raises(ValueError, match="gate_up .* is a mode ps option"):
            KernelConfig(16, 64, 128, 4, 3, mode, gate_up=True)
    with pytest.raises(ValueError, match="gate_up"):
        KernelConfig(16, 64, 128, 4, 3, "ps", gate_up=1)


def test_gate_up_tactic_lists():
    """The prefill winners and the decode winner (and its -pdl) with -gu, each the gate_up twin of an offered tactic."""
    assert [c.label for c in PS_GU_CONFIGS] == ["m128n128k64w8s3-ps-gu-g2n256", "m128n128k128w8s3-ps-gu-g2n256",
                                                "m64n128k64w8s4-ps-gu", "m64n128k128w4s3-ps-gu", "m16n128k128w4s3-ps-gu"]
    assert [c.label for c in PS_GU_PDL_CONFIGS] == ["m16n128k128w4s3-ps-gu-pdl"]
    assert [ps_gu_chunk_dots(c.block_k, c.num_warps) for c in PS_GU_CONFIGS] == [False, False, False, True, True]
    plain = set(PS_CONFIGS + PS_PDL_CONFIGS)
    assert all(c.gate_up and KernelConfig(**{**c.__dict__, "gate_up": False}) in plain
               for c in PS_GU_CONFIGS + PS_GU_PDL_CONFIGS)
    # the wide tiles: 256 tokens, 8 warps over 128 weight rows, gemm2 on 128 rows; -gu only (no plain twin offered)
    assert [c.label for c in PS_GU_WIDE_CONFIGS] == ["m256n64k64w8s3-ps-gu-g2n128", "m256n64k64w8s4-ps-gu-g2n128"]
    assert not any(KernelConfig(**{**c.__dict__, "gate_up": False}) in plain for c in PS_GU_WIDE_CONFIGS)
    b = TritonMXFP4Backend()
    on = {t.label for t in b.tactics(MoECase(num_tokens=64, hidden_size=192, intermediate_size=320, num_experts=4,
                                             top_k=2))}
    assert {c.label for c in PS_GU_CONFIGS} <= on and not {c.label for c in PS_GU_WIDE_CONFIGS} & on  # decode
    # the k64 -gu decode tile (for Triton 3.7+: configs_gu), at decode only; its -pdl twin compiled only
    assert [c.label for c in PS_GU_DECODE_CONFIGS + PS_GU_DECODE_PDL_CONFIGS] == ["m16n128k64w4s6-ps-gu",
                                                                                  "m16n128k64w4s6-ps-gu-pdl"]
    from fp4moe_diag.backends.triton import backend

    compiled = not (backend.interpret_enabled() or backend.kernels_interpreted())
    assert "m16n128k64w4s6-ps-gu" in on and ("m16n128k64w4s6-ps-gu-pdl" in on) == compiled
    prefill = {t.label for t in b.tactics(MoECase(num_tokens=1024, hidden_size=192, intermediate_size=320,
                                                  num_experts=4, top_k=2))}
    assert {c.label for c in PS_GU_CONFIGS + PS_GU_WIDE_CONFIGS} <= prefill
    assert not {c.label for c in PS_GU_DECODE_CONFIGS} & prefill
    off = b.tactics(MoECase(num_tokens=64, hidden_size=96, intermediate_size=320, num_experts=4, top_k=2))
    assert not any(t.id.gate_up for t in off)  # no ps layout (H = 96), no -gu


def test_gate_up_rows_hand_checked():
    # I = 16: slab 0 = lin 0..7 then gate 0..7 (old rows 16..23), slab 1 = lin 8..15 then gate 8..15 (24..31)
    assert ps_layout.gate_up_rows(16).tolist() == (list(range(0, 8)) + list(range(16, 24)) + list(range(8, 16))
                                                   + list(range(24, 32)))
    assert ps_layout.gate_up_rows(8).tolist() == list(range(16))  # one slab: already lin 0..7, gate 0..7
    rows = ps_layout.gate_up_rows(320)
    assert sorted(rows.tolist()) == list(range(640))
    assert (rows[16 * 7 + 3], rows[16 * 7 + 8 + 3]) == (8 * 7 + 3, 320 + 8 * 7 + 3)  # column 59: lin, then gate
    for bad in (12, 0, 8.0):
        with pytest.raises(ValueError, match="^inter:"):
            ps_layout.gate_up_rows(bad)


def test_shuffle_gate_up_is_the_ps_layout_of_the_permuted_rows(monkeypatch):
    gen = torch.Generator().manual_seed(3)
    w13 = torch.randint(0, 256, (3, 32, 64), dtype=torch.uint8, generator=gen)  # L 3, I 16, K 128
    sc = torch.randint(100, 140, (3, 32, 4), dtype=torch.uint8, generator=gen)
    monkeypatch.setattr(ps_layout, "_TEMP_BYTES", 32 * 128 * 2)  # two experts per step: a short last step
    w, s = ps_layout.shuffle_gate_up(w13, sc)
    codes = ps_layout.unshuffle_codes(w, 128)
    orig = ps_layout.codes(w13)
    assert torch.equal(codes[:, 8], orig[:, 16]) and torch.equal(codes[:, 16], orig[:, 8])  # gate 0, lin 8
    assert torch.equal(codes[:, 31], orig[:, 31]) and torch.equal(codes[:, 7], orig[:, 7])
    assert torch.equal(codes, orig[:, ps_layout.gate_up_rows(16)])
    # scale bytes of (slab 0, chunk 1): [g 8, sb 2, rh 2]; rh 1 g 0 (new row 8) is gate row 0 (old row 16)
    assert s[1, 0, 1, 1].item() == sc[1, 16, 2].item() and s[1, 0, 1, 0].item() == sc[1, 0, 2].item()
    assert torch.equal(s, ps_layout.shuffle_scales(sc[:, ps_layout.gate_up_rows(16)]))
    with pytest.raises(ValueError, match="^w13_scale:"):
        ps_layout.shuffle_gate_up(w13, sc[:, :16])


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_launch_refuses_gate_up_outside_mode_ps():
    from fp4moe_diag.backends.triton import launch

    with pytest.raises(ValueError, match="^gate_up: only the pre-shuffled kernels"):
        launch._gate_up_rows(True, False, 64)
    assert (launch._gate_up_rows(True, True, 64), launch._gate_up_rows(False, True, 64)) == (128, 64)


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.problem.reference import reference_moe
from fp4moe_diag.backends.base import Tactic
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted
from fp4moe_diag.backends.triton.configs import parse_config

b = TritonMXFP4Backend()
base = dict(num_tokens=6, hidden_size=192, intermediate_size=320, num_experts=4, top_k=2)
cases = {
    "oai_bias": {}, "oai_nobias": dict(has_bias=False), "swiglu_bias": dict(activation="swiglu"),
    "swiglu_nobias": dict(activation="swiglu", has_bias=False),
    "ep_offset": dict(num_experts=8, local_num_experts=4, local_expert_offset=4),
}
# K = H = 192 in 128s (and 64s); I = 320 in 128 / 256 columns (last tile 64 valid); split-K 2 (short last split);
# 8 warps (scale words); BLOCK_M 64: the (N tiles, M blocks) grid; -pdl runs as plain launches here
# 4 warps with BLOCK_K 128: one dot per 64-K chunk (configs.ps_gu_chunk_dots); m32n64k128w8: one dot of 2 chunks
# m256n64k64w8-gu-g2n128: the wide prefill tile (PS_GU_WIDE_CONFIGS; one 256-token block, gemm2 on 128 rows: its
# second tile half past H)
labels = ["m16n128k128w4s1-ps-gu", "m32n64k64w8s1-ps-gu", "m16n256k64w4s1-ps-gu", "m16n64k128w4s1-ps-gu-sk2",
          "m64n128k64w4s1-ps-gu-g2sk2", "m32n64k128w8s1-ps-gu", "m16n64k128w4s1-ps-gu-sk2-fs",
          "m256n64k64w8s1-ps-gu-g2n128"]
FULL = ("oai_bias",) if SECOND_TRITON else ("oai_bias", "ep_offset")  # every tile; the other cases two
out = {}
for name, kw in cases.items():
    inp = build_inputs(MoECase(**{**base, **kw}))
    ref = reference_moe(inp)
    prep = b.prepare(inp)
    labs = labels + (["m16n128k128w4s1-ps-gu-pdl"] if name == "oai_bias" else [])
    if name not in FULL:  # the activation / bias variants: one decode and one prefill-sized tile (CI's time)
        labs = [labels[0], labels[4]]
    for lab in labs:
        plain = parse_config(lab).label.replace("-gu", "")
        y0 = b.run(prep, Tactic(id=plain, label=plain))
        if lab == labs[0]:
            out[f"{name}/lazy"] = prep.ps_gu is None  # no -gu run yet: no copy
        g = prep.grouping(parse_config(lab).block_m)
        valid = g.sorted_pair_ids < g.num_pairs  # rows of routed pairs: padding rows are never written
        inter0 = prep.inter_buf[:g.num_padded_pairs][valid].clone()
        y = b.run(prep, Tactic(id=lab, label=lab))
        inter = prep.inter_buf[:g.num_padded_pairs][valid]
        out[f"{name}/{lab}"] = float((y.float() - ref).norm() / ref.norm())
        out[f"{name}/{lab}/vs_plain"] = float((y.float() - y0.float()).norm() / y0.float().norm())
        out[f"{name}/{lab}/inter_vs_plain"] = float((inter.float() - inter0.float()).norm() / inter0.float().norm())
        out[f"{name}/{lab}/inter_equal"] = bool(torch.equal(inter, inter0))
    out[f"{name}/built"] = prep.ps_gu is not None and prep.ps_gu[0].shape == prep.ps[0].shape
"""

_CASES = ["oai_bias", "oai_nobias", "swiglu_bias", "swiglu_nobias", "ep_offset"]


interp_results = interpreter_fixture(_INTERP_SCRIPT)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
@pytest.mark.parametrize("name", _CASES)
def test_gate_up_tactics_match_the_reference_and_the_plain_ps_gemm1(interp_results: dict, name: str):
    assert interp_results["interpreted"] is True
    errs = {k: v for k, v in interp_results.items() if k.startswith(name + "/") and k.count("/") == 1
            and "-gu" in k}
    assert len(errs) == {"oai_bias": 9, "ep_offset": 2 if SECOND_TRITON else 8}.get(name, 2)  # SECOND_TRITON: CI
    assert not {k: v for k, v in errs.items() if not 0 < v < TOL}, errs
    for key in ("vs_plain", "inter_vs_plain"):
        vs = {k: v for k, v in interp_results.items() if k.startswith(name + "/") and k.endswith("/" + key)}
        assert len(vs) == len(errs) and not {k: v for k, v in vs.items() if not v < SAME}, vs
    assert interp_results[f"{name}/lazy"] is True and interp_results[f"{name}/built"] is True


@pytest.mark.skipif(not bundled_tools("ptxas"), reason="triton with its bundled CUDA tools is not installed")
@pytest.mark.parametrize("label", ["m16n64k128w4s3-ps-gu", "m128n128k64w8s3-ps-gu"])
def test_gate_up_split_is_register_local_in_the_sm90_build(label: str):
    """sm_90a, compiled on this host: after the K loop the fp32 accumulator goes from the wgmma layout through
    reshape / trans / reshape / split without a layout conversion (no shared-memory round trip); the only conversion
    of a 2-D tile after the loop is the bf16 output's, for the coalesced store, as in the plain ps gemm1."""
    import re

    from fp4moe_diag.profiling.sass import _compile

    ttgir = _compile(parse_config(label), "gemm1", 256, 90).asm["ttgir"]
    after = ttgir[ttgir.rindex("scf.yield"):]
    ops = [m.group(1) for m in re.finditer(r"= (tt\.reshape|tt\.trans|tt\.split|ttg\.convert_layout|ttg\.local_alloc)"
                                           r" %\S+(?: \{[^}]*\})? : tensor<[^>]*#(mma|linear\d*)>", after)]
    assert ops[:4] == ["tt.reshape", "tt.trans", "tt.reshape", "tt.split"], ops
    assert re.search(r"tt\.reshape %\S+ : tensor<\d+x\d+xf32, #mma>", after)  # straight from the accumulator
    tiles = re.findall(r"ttg\.convert_layout %\S+ : tensor<\d+x\d+x(\w+),", after)
    assert tiles == ["bf16"] and "local_alloc" not in after
