"""The Triton backend's tactics on the host side (no kernel runs): the tactic list per case, labels and their parsing,
split-K arithmetic, the x2 upcast's arithmetic, and the ps tile switches."""

from __future__ import annotations

import pytest
import torch

from fp4moe_diag import MoECase
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
from fp4moe_diag.backends.triton.configs_warps import (PS_DECODE8_CONFIGS, PS_DECODE8_PDL_CONFIGS, PS_GU16_CONFIGS,
                                                      PS_GU16_PDL_CONFIGS)
from fp4moe_diag.backends.triton.configs_tail import PS_TAIL_CONFIGS, PS_TAIL_PDL_CONFIGS, pdlt_twins, pdltt_twins


def interpreted_or_cpu() -> bool:
    return bool(interpret_enabled() or kernels_interpreted())


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
    n_tpdl = len(PS_TAIL_PDL_CONFIGS) + len(PS_GU16_PDL_CONFIGS)  # the 16-warp -gu -pdl twins too (session 25)
    pdlt = pdlt_twins(PS_TAIL_PDL_CONFIGS + PS_GU16_PDL_CONFIGS)  # and their -pdlt twins (session 28)
    pdlt += pdltt_twins(PS_TAIL_PDL_CONFIGS + PS_GU16_PDL_CONFIGS)  # and -pdltt (session 32)
    n_tpdl += len(pdlt)
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
        tac = [t for t in b.tactics(case) if not (t.id.tile_major or t.id.peel or t.id.reg_cap)]  # -tm / -pk / -rN
        # twins: their own tests
        assert len(tac) == (len(CONFIGS) + len(X2_CONFIGS) + n_x2 + len(SW_CONFIGS) + n_sw + n_ps + n_psd
                            + (len(DOT_SCALED_CONFIGS) + n_decode + n_pdl if compiled else 0))
        assert sum(t.id.ps and not t.id.pdl for t in tac) == n_ps + n_psd
        assert sum(t.id.pdl > 0 for t in tac) == (n_pdl if compiled else 0)
        pdl_gu = ((gu_tail + len(PS_GU16_PDL_CONFIGS) + sum(c.gate_up for c in pdlt) if prefill else 1 + n_gud)
                  if compiled and n_pdl > 0 else 0)
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
                               + (f"-t{t.id.tail_m}" if t.id.tail_m else "") + "f" * t.id.tail_fused
                               + {0: "", 1: "-pdl", 5: "-pdlt", 6: "-pdltt"}[t.id.pdl]
                               + ("-fs" if t.id.fused else ""))
            assert bm in (16, 32, 64, 128, 256) and bk in (64, 128, 256) and bn in (16, 32, 64, 128, 256)
            assert t.params == dict(block_m=bm, block_n=bn, block_k=bk, num_warps=nw, num_stages=ns,
                                    dot_scaled=mode == "ds", x2=mode in ("x2", "sw"), swap=mode == "sw",
                                    ps=mode == "ps", split_k=sk, split_k2=t.id.gemm2_split,
                                    **({"pdl": t.id.pdl} if t.id.pdl else {}),
                                    **({"block_n2": t.id.block_n2} if t.id.block_n2 else {}),
                                    **({"gate_up": True} if t.id.gate_up else {}),
                                    **({"fused": True} if t.id.fused else {}),
                                    **({"tail_m": t.id.tail_m} if t.id.tail_m else {}),
                                    **({"tail_fused": True} if t.id.tail_fused else {}))
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
