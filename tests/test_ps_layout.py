"""The pre-shuffled MXFP4 layout of the Triton ``ps`` kernels (ps_layout) and its tactics (the sweep's ``--tactics``
filter: ``test_tactic_filter.py``).  CPU only, no kernels: the layout's positions and bit patterns are checked against
constants worked out by hand from the ps_layout module docstring (not from the module's own encoder)."""

from __future__ import annotations


import pytest
import torch

from fp4moe_diag import MoECase
from fp4moe_diag.backends.triton import ps_layout as P
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import PS_CONFIGS, PS_DECODE_CONFIGS, KernelConfig, parse_config
from fp4moe_diag.backends.triton.configs_warps import PS_DECODE8_CONFIGS, PS_GU16_CONFIGS
from fp4moe_diag.backends.triton.configs_gu import PS_GU_CONFIGS, PS_GU_WIDE_CONFIGS
from fp4moe_diag.backends.triton.configs_tail import PS_TAIL_CONFIGS


#: e2m1 value of each code 0..15 (sign bit 3, exponent bits 2..1, mantissa bit 0)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _pack(codes: torch.Tensor) -> torch.Tensor:
    """int codes [L, N, K] -> packed bytes [L, N, K/2] (low nibble = even K)."""
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def _words(ps: torch.Tensor) -> torch.Tensor:
    """ps layout [L, N/16, K/64, 512] bytes -> int64 words [L, N/16, K/64, 128] (little-endian, unsigned)."""
    return ps.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _bf16_value(pattern: int) -> float:
    """A 16-bit bf16 pattern -> its value times 2**126 (the factor the kernels fold back)."""
    signed = pattern - 0x10000 if pattern & 0x8000 else pattern
    return torch.tensor([signed], dtype=torch.int16).view(torch.bfloat16).float().item() * 2.0 ** 126


# ================================================================== 1. round trip
@pytest.mark.parametrize("shape", [(2, 32, 128), (1, 48, 192)])
def test_shuffle_then_unshuffle_gives_the_codes(shape):
    nl, n, k = shape
    g = torch.Generator().manual_seed(n + k)
    data = torch.randint(0, 256, (nl, n, k // 2), dtype=torch.uint8, generator=g)
    ps = P.shuffle_weights(data)
    assert ps.dtype == torch.uint8 and tuple(ps.shape) == (nl, n // 16, k // 64, 512)
    codes = P.unshuffle_codes(ps, k)
    expected = P.codes(data)
    assert codes.dtype == torch.int32 and tuple(codes.shape) == (nl, n, k)
    assert torch.equal(codes, expected)
    # codes itself: low nibble = even K
    assert P.codes(torch.tensor([[0x5A]], dtype=torch.uint8)).tolist() == [[0xA, 0x5]]
    # every code occurs, so the round trip covered all 16
    assert set(expected.unique().tolist()) == set(range(16))


def test_unshuffle_rejects_a_wrong_k():
    ps = P.shuffle_weights(torch.zeros((1, 16, 64), dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"^k:"):
        P.unshuffle_codes(ps, 64)


# ================================================================== 2. one element, known answer
# (row, k, code, slot, half, slab, chunk, byte offset in the 512-byte chunk, the 32-bit word), all worked out by
# hand from the docstring: rh = (row%16)//8, g = row%8, s = (k%64)//16, kh = (k%16)//8, t = (k%8)//2, e = k%2,
# slot j = 2kh + rh, lane = 4g + t, offset = 16 lane + 4 s.  Bits of a code (s e1 e0 m) in one half:
# slot 0: e1 e0 m at 8, 7, 6, s at 15; slot 1: 5, 4, 3 and 12; slot 2: 2, 1, 0 and 9; slot 3: m 10, s 11, e0 13, e1 14.
KNOWN = [
    # row 0, k 0: rh0 g0 / s0 kh0 t0 e0 -> slot 0, lane 0; 0b1011: m@6 e0@7 s@15
    (0, 0, 0b1011, 0, 0, 0, 0, 0, 0x000080C0),
    # row 3, k 1: rh0 g3 / s0 kh0 t0 e1 -> slot 0 high, lane 12; 0b0110: e0@7 e1@8 -> 0x0180 << 16
    (3, 1, 0b0110, 0, 1, 0, 0, 192, 0x01800000),
    # row 16, k 80: slab 1 rh0 g0 / chunk 1 s1 kh0 t0 e0 -> slot 0, lane 0, offset 4; 0b0100: e1@8
    (16, 80, 0b0100, 0, 0, 1, 1, 4, 0x00000100),
    # row 9, k 70: rh1 g1 / chunk 1, s0 kh0 t3 e0 -> slot 1, lane 7; 0b1101: m@3 e1@5 s@12
    (9, 70, 0b1101, 1, 0, 0, 1, 112, 0x00001028),
    # row 15, k 19: rh1 g7 / s1 kh0 t1 e1 -> slot 1 high, lane 29, offset 468; 0b0011: m@3 e0@4 -> 0x18 << 16
    (15, 19, 0b0011, 1, 1, 0, 0, 468, 0x00180000),
    # row 2, k 10: rh0 g2 / s0 kh1 t1 e0 -> slot 2, lane 9; 0b1110: e0@1 e1@2 s@9
    (2, 10, 0b1110, 2, 0, 0, 0, 144, 0x00000206),
    # row 21, k 127: slab 1 rh0 g5 / chunk 1 s3 kh1 t3 e1 -> slot 2 high, lane 23, offset 380; 0b0101: m@0 e1@2
    (21, 127, 0b0101, 2, 1, 1, 1, 380, 0x00050000),
    # row 14, k 88: rh1 g6 / chunk 1 s1 kh1 t0 e0 -> slot 3, lane 24, offset 388; 0b0011: m@10 e0@13
    (14, 88, 0b0011, 3, 0, 0, 1, 388, 0x00002400),
    # row 8, k 8: rh1 g0 / s0 kh1 t0 e0 -> slot 3, lane 0; 0b1100: s@11 e1@14
    (8, 8, 0b1100, 3, 0, 0, 0, 0, 0x00004800),
    # row 28, k 45: slab 1 rh1 g4 / s2 kh1 t2 e1 -> slot 3 high, lane 18, offset 296; 0b1100: (s@11 e1@14) << 16
    (28, 45, 0b1100, 3, 1, 1, 0, 296, 0x48000000),
    # row 31, k 63: slab 1 rh1 g7 / s3 kh1 t3 e1 -> slot 3 high, lane 31, offset 508; 0b1111: 0x6C00 << 16
    (31, 63, 0b1111, 3, 1, 1, 0, 508, 0x6C000000),
    # row 7, k 7: rh0 g7 / s0 kh0 t3 e1 -> slot 0 high, lane 31, offset 496; 0b1000 (-0): s@15 -> 0x8000 << 16
    (7, 7, 0b1000, 0, 1, 0, 0, 496, 0x80000000),
]


@pytest.mark.parametrize("row,k,code,slot,half,slab,chunk,offset,word", KNOWN)
def test_one_element_lands_where_the_docstring_says(row, k, code, slot, half, slab, chunk, offset, word):
    # the hand-written table agrees with the docstring's formulas
    rh, g, s, kh, t, e = (row % 16) // 8, row % 8, (k % 64) // 16, (k % 16) // 8, (k % 8) // 2, k % 2
    assert (slot, half, slab, chunk, offset) == (2 * kh + rh, e, row // 16, k // 64, (4 * g + t) * 16 + s * 4)
    for expert in (0, 1):
        codes = torch.zeros((2, 32, 128), dtype=torch.int32)
        codes[expert, row, k] = code
        ps = P.shuffle_weights(_pack(codes))
        w = _words(ps)
        nz = torch.nonzero(w).tolist()
        assert nz == [[expert, slab, chunk, offset // 4]]
        assert w[expert, slab, chunk, offset // 4].item() == word
        # the bytes, little-endian, at that byte offset of the chunk
        assert ps[expert, slab, chunk, offset:offset + 4].tolist() == list(word.to_bytes(4, "little"))
        assert torch.equal(P.unshuffle_codes(ps, 128), codes)


def test_hand_built_word_decodes_every_slot():
    # low half: slot0 0b1011 (0x80C0) | slot1 0b1101 (0x1028) | slot2 0b1110 (0x0206) | slot3 0b0011 (0x2400)
    # high half: slot0 0b0110 (0x0180) | slot1 0b0011 (0x0018) | slot2 0b0101 (0x0005) | slot3 0b1100 (0x4800)
    # and a second word with the sign bit of the high half set (negative int32)
    words = torch.tensor([0x499DB6EE, 0x80C06C00 - (1 << 32)], dtype=torch.int32)  # 2nd: slot0 0b1011 high, slot3 0b1111 low
    # expected bf16 patterns (s at 15, e1 e0 m at 8..6) per slot: (low, high) of each word
    expected = {
        0: [(0x80C0, 0x0180), (0x0000, 0x80C0)],  # -1.5, 4 | 0, -1.5
        1: [(0x8140, 0x00C0), (0x0000, 0x0000)],  # -3, 1.5
        2: [(0x8180, 0x0140), (0x0000, 0x0000)],  # -4, 3
        3: [(0x00C0, 0x8100), (0x81C0, 0x0000)],  # 1.5, -2 | -6, 0
    }
    values = {0: [(-1.5, 4.0), (0.0, -1.5)], 1: [(-3.0, 1.5), (0.0, 0.0)], 2: [(-4.0, 3.0), (0.0, 0.0)],
              3: [(1.5, -2.0), (-6.0, 0.0)]}
    for slot in range(4):
        u = P._decode(words, slot).tolist()
        got = [(v & 0xFFFF, (v >> 16) & 0xFFFF) for v in u]
        assert got == expected[slot], slot
        assert [(_bf16_value(lo), _bf16_value(hi)) for lo, hi in got] == values[slot]


# ================================================================== 3. every code in every slot decodes to its value
def test_every_code_in_every_slot_decodes_to_its_e2m1_value():
    n, k = 16, 64  # one slab, one chunk: 128 words, each (slot, half) holds 128 elements
    row = torch.arange(n).view(n, 1)
    col = torch.arange(k).view(1, k)
    codes = ((row * 5 + col * 3 + col // 8) % 16).to(torch.int32).view(1, n, k)
    w = _words(P.shuffle_weights(_pack(codes)))[0, 0, 0]  # [128] words: index 4 lane + s
    decoded = {slot: P._decode(w, slot).tolist() for slot in range(4)}
    seen: dict[tuple[int, int], set[int]] = {(j, e): set() for j in range(4) for e in range(2)}
    for r in range(n):
        for kk in range(k):
            rh, g, s, kh, t, e = (r % 16) // 8, r % 8, kk // 16, (kk % 16) // 8, (kk % 8) // 2, kk % 2
            slot, c = 2 * kh + rh, int(codes[0, r, kk])
            pat = (decoded[slot][4 * (4 * g + t) + s] >> (16 * e)) & 0xFFFF
            # the pattern: s at 15, e1 e0 m at 8..6, nothing else
            assert pat == ((c >> 3) << 15) | ((c & 7) << 6), (r, kk, c, slot)
            v = _bf16_value(pat)
            assert v == E2M1[c] and (pat >> 15) == (c >> 3), (r, kk, c, slot, v)
            seen[(slot, e)].add(c)
    assert all(v == set(range(16)) for v in seen.values()), seen


def test_decoded_values_table():
    # the value of each bf16 pattern times 2**126, independent of the layout: (code, expected value)
    for c, want in enumerate((0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6)):
        assert _bf16_value(((c >> 3) << 15) | ((c & 7) << 6)) == want


# ================================================================== 4. scales
def test_shuffle_scales_positions():
    nl, n, nb = 2, 32, 4  # K = 128: 2 chunks of 2 blocks
    row = torch.arange(n).view(1, n, 1)
    blk = torch.arange(nb).view(1, 1, nb)
    scale = (torch.arange(nl).view(nl, 1, 1) * 128 + row * 4 + blk).to(torch.uint8)  # unique byte per (l, row, b)
    out = P.shuffle_scales(scale)
    assert out.dtype == torch.uint8 and tuple(out.shape) == (nl, n // 16, 2, 32)
    # hand-checked: (l, row, block) -> (slab, chunk, index g*4 + sb*2 + rh)
    for l, r, b, slab, chunk, idx in ((0, 0, 0, 0, 0, 0),
                                      (0, 8, 0, 0, 0, 1),      # rh 1
                                      (0, 0, 1, 0, 0, 2),      # sb 1
                                      (0, 9, 1, 0, 0, 7),      # g1 sb1 rh1
                                      (0, 12, 3, 0, 1, 19),    # g4 chunk 1 sb1 rh1
                                      (0, 21, 2, 1, 1, 20),    # slab 1 g5 rh0, chunk 1 sb0
                                      (1, 31, 3, 1, 1, 31),    # the last byte
                                      (1, 6, 0, 0, 0, 24)):    # g6
        assert out[l, slab, chunk, idx].item() == l * 128 + r * 4 + b, (l, r, b)
    assert out[0, 0, 0, :8].tolist() == [0, 32, 1, 33, 4, 36, 5, 37]  # g0: (r0 b0) (r8 b0) (r0 b1) (r8 b1), g1 ...
    assert out[1, 1, 1, 28:].tolist() == [128 + 23 * 4 + 2, 128 + 31 * 4 + 2, 128 + 23 * 4 + 3, 255]
    # and everywhere, by the formula
    for l in range(nl):
        for r in range(n):
            for b in range(nb):
                idx = (r % 8) * 4 + (b % 2) * 2 + (r % 16) // 8
                assert out[l, r // 16, b // 2, idx].item() == scale[l, r, b].item()


# ================================================================== 5. refusals
@pytest.mark.parametrize("bad", [
    torch.zeros((1, 16, 32), dtype=torch.int8),     # dtype
    torch.zeros((16, 32), dtype=torch.uint8),       # ndim
    torch.zeros((1, 1, 16, 32), dtype=torch.uint8),  # ndim
    torch.zeros((1, 24, 32), dtype=torch.uint8),    # N = 24
    torch.zeros((1, 16, 48), dtype=torch.uint8),    # K = 96
])
def test_shuffle_weights_refuses(bad):
    with pytest.raises(ValueError, match=r"^data:"):
        P.shuffle_weights(bad)


@pytest.mark.parametrize("bad", [
    torch.zeros((1, 16, 2), dtype=torch.float32),   # dtype
    torch.zeros((16, 2), dtype=torch.uint8),        # ndim
    torch.zeros((1, 24, 2), dtype=torch.uint8),     # N = 24
    torch.zeros((1, 16, 3), dtype=torch.uint8),     # K = 96
])
def test_shuffle_scales_refuses(bad):
    with pytest.raises(ValueError, match=r"^scale:"):
        P.shuffle_scales(bad)


def test_refusal():
    assert P.refusal(16, 64) is None and P.refusal(48, 192) is None and P.refusal(6144, 3072) is None
    for n, k, what in ((24, 64, "rows=24"), (16, 96, "K=96"), (8, 32, "rows=8")):
        why = P.refusal(n, k)
        assert isinstance(why, str) and what in why, why
    # gpt-oss-20b: H = I = 2880 = 45 x 64 -> both GEMMs have the layout
    assert P.refusal(2 * 2880, 2880) is None and P.refusal(2880, 2880) is None
    assert "K=2912" in P.refusal(2880, 2912)


# ================================================================== 6. KernelConfig mode ps
def test_kernel_config_ps():
    kc = parse_config("m16n128k128w4s3-ps")
    assert kc == KernelConfig(16, 128, 128, 4, 3, "ps")
    assert kc.label == "m16n128k128w4s3-ps" and str(kc) == kc.label and parse_config(kc.label) == kc
    assert kc.ps and kc.x2_scales and not kc.x2 and not kc.swap and not kc.dot_scaled
    assert kc.params()["ps"] is True and kc.params()["x2"] is False and kc.params()["swap"] is False
    sk = parse_config("m16n64k256w4s3-ps-sk2")
    assert (sk.mode, sk.split_k, sk.label) == ("ps", 2, "m16n64k256w4s3-ps-sk2")
    for cfg in PS_CONFIGS + PS_DECODE_CONFIGS:
        assert cfg.ps and parse_config(cfg.label) == cfg and cfg.label.endswith(
            ("-ps", f"-ps-sk{cfg.split_k}", f"-g2sk{cfg.split_k2}", f"-ps-g2n{cfg.block_n2}"))
    assert len(set(PS_CONFIGS + PS_DECODE_CONFIGS)) == len(PS_CONFIGS) + len(PS_DECODE_CONFIGS)
    for other in ("bits", "x2", "sw", "ds"):
        assert not KernelConfig(16, 64, 128, 4, 3, other).ps


@pytest.mark.parametrize("bm,bn,bk", [(16, 8, 128), (16, 128, 32), (8, 128, 128), (16, 48, 128), (16, 128, 192),
                                      (24, 128, 128), (16, 8, 64)])
def test_kernel_config_ps_refuses(bm, bn, bk):
    with pytest.raises(ValueError, match=r"^tactic:"):
        KernelConfig(bm, bn, bk, 4, 3, "ps")
    with pytest.raises(ValueError, match=r"^tactic:"):
        parse_config(f"m{bm}n{bn}k{bk}w4s3-ps")
    # the same tiles are fine in the other modes (the ps checks are ps-only)
    KernelConfig(bm, bn, bk, 4, 3, "sw")


# ================================================================== 7. tactics offered
def _case(**kw) -> MoECase:
    base = dict(num_tokens=5, hidden_size=64, intermediate_size=64, num_experts=4, top_k=2)
    base.update(kw)
    return MoECase(**base)


def _ps_ids(case: MoECase) -> list[KernelConfig]:
    """The ps tactics offered, less the -pdl ones (compiled only; tests/test_triton_backend.py counts those), the
    -gu ones (PS_GU_CONFIGS, offered after them wherever ps is: tests/test_triton_gu.py), the -tm ones (where
    their tiles are whole: tests/test_triton_tm.py), the -pk ones (at decode: tests/test_triton_peel.py) and the -rN
    ones (compiled by Triton 3.7+: tests/test_triton_regcap.py)."""
    return [t.id for t in TritonMXFP4Backend().tactics(case)
            if t.id.ps and not t.id.pdl and not t.id.gate_up and not t.id.tile_major and not t.id.peel
            and not t.id.reg_cap]


def test_tactics_offer_ps_where_the_layout_exists():
    # H = I = 64, prefill-sized (T * k > 256): every PS_CONFIGS tactic and the tail-block ones, no decode ones
    tails = [c for c in PS_TAIL_CONFIGS if not c.gate_up]
    assert _ps_ids(_case(num_tokens=4096)) == list(PS_CONFIGS) + tails
    # decode, H = I = 64: no split-K fits (one block_k step of 128 >= 64), so PS_CONFIGS and the unsplit decode8 ones
    unsplit8 = [c for c in PS_DECODE8_CONFIGS if c.split_k == 1]
    assert [c.label for c in unsplit8] == ["m16n128k128w8s3-ps", "m16n128k128w8s4-ps"]
    assert _ps_ids(_case()) == list(PS_CONFIGS) + unsplit8
    # decode at 3072: every decode tactic fits
    assert _ps_ids(_case(hidden_size=3072, intermediate_size=3072, num_tokens=64, top_k=4)) == \
        list(PS_CONFIGS + PS_DECODE_CONFIGS + PS_DECODE8_CONFIGS)
    # gpt-oss-20b sizes (2880 = 45 x 64), prefill
    assert _ps_ids(_case(hidden_size=2880, intermediate_size=2880, num_tokens=4096)) == list(PS_CONFIGS) + tails
    # T * k = 260 > 256: not decode
    assert _ps_ids(_case(hidden_size=3072, intermediate_size=3072, num_tokens=65, top_k=4)) == list(PS_CONFIGS) + tails
    # decode at 256: k128 sk2 (128 + 128) and k64 sk2 (128 + 128) fit, k128 sk4 (a split of 128, three of them
    # already cover 384 >= 256) and k256 sk2/sk4 (one split takes all 256) do not
    assert _ps_ids(_case(hidden_size=256, intermediate_size=256)) == list(PS_CONFIGS) + [
        KernelConfig(16, 64, 128, 4, 6, "ps", 2), KernelConfig(16, 128, 64, 4, 6, "ps", 2),
        KernelConfig(16, 128, 128, 4, 3, "ps", 2),
        KernelConfig(16, 128, 128, 4, 3, "ps", 1, 2)] + unsplit8  # gemm2 alone in 2 splits fits; in 3 not;
    # m16n128k256w8s3-ps-sk2 not (one split takes all 256)
    tac = [t for t in TritonMXFP4Backend().tactics(_case(num_tokens=4096)) if t.id.ps]
    gu = list(PS_GU_CONFIGS + PS_GU_WIDE_CONFIGS + PS_GU16_CONFIGS) + [c for c in PS_TAIL_CONFIGS if c.gate_up]
    assert [t.id for t in tac if t.id.gate_up and not t.id.pdl] == gu
    assert all(t.label == t.id.label and t.params["ps"] is True and not t.params["x2"] for t in tac)


@pytest.mark.parametrize("h,i", [(96, 64), (64, 96), (32, 64), (64, 32), (160, 128), (2880, 2912)])
def test_tactics_offer_no_ps_without_the_layout(h, i):
    case = _case(hidden_size=h, intermediate_size=i)
    tac = TritonMXFP4Backend().tactics(case)
    assert tac and not any(t.id.ps for t in tac)  # the other modes are still offered
    assert not any(t.label.endswith(("-ps",)) or "-ps-" in t.label for t in tac)


def test_shuffle_in_steps_of_experts_is_the_same(monkeypatch):
    """shuffle_weights bounds its temporaries by doing a few experts per step: one expert per step, two, or all
    at once give the same bytes."""
    data = torch.randint(0, 256, (5, 32, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(7))
    whole = P.shuffle_weights(data)
    for experts_per_step in (1, 2):
        monkeypatch.setattr(P, "_TEMP_BYTES", 4 * 32 * 128 * experts_per_step)
        assert torch.equal(P.shuffle_weights(data), whole)
    assert torch.equal(P.unshuffle_codes(whole, 128), P.codes(data))
