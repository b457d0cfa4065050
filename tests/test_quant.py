import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fp4moe_diag.problem.quant import (
    E2M1_VALUES,
    FP4Tensor,
    dequantize_mxfp4,
    e2m1_decode,
    e2m1_encode,
    pack_e2m1,
    quantize_mxfp4,
    quantize_nvfp4,
    ue8m0_from_float,
    ue8m0_to_float,
    unpack_e2m1,
)


def test_all_16_codes_decode_to_the_e2m1_table():
    codes = torch.arange(16, dtype=torch.uint8)
    vals = e2m1_decode(codes)
    assert vals[:8].tolist() == list(E2M1_VALUES)
    assert vals[8:].abs().tolist() == list(E2M1_VALUES)
    assert all(math.copysign(1, v) < 0 for v in vals[8:].tolist())  # code 8 is -0.0


def test_encode_is_exact_on_grid_and_round_trips_every_code():
    codes = torch.arange(16, dtype=torch.uint8)
    assert torch.equal(e2m1_encode(e2m1_decode(codes)), codes)


@pytest.mark.parametrize(
    "x,code",
    [(0.25, 0), (0.26, 1), (0.75, 2), (0.74, 1), (1.25, 2), (1.75, 4), (2.5, 4), (2.51, 5),
     (3.5, 6), (5.0, 6), (5.01, 7), (6.0, 7), (100.0, 7), (-0.75, 10), (-100.0, 15)],
)
def test_round_to_nearest_even_and_saturation(x, code):
    assert int(e2m1_encode(torch.tensor([x]))[0]) == code


def test_pack_low_nibble_first():
    codes = torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8)
    packed = pack_e2m1(codes)
    assert packed.tolist() == [[0x21, 0x0F]]
    assert torch.equal(unpack_e2m1(packed), codes)


def test_ue8m0_rounds_up_to_power_of_two():
    v = torch.tensor([1.0, 1.5, 0.75, 2.0 ** -10, 3.0e-3, 448.0])
    b = ue8m0_from_float(v)
    assert b.tolist() == [127, 128, 127, 117, 119, 136]
    assert ue8m0_to_float(b).tolist() == [1.0, 2.0, 1.0, 2.0 ** -10, 2.0 ** -8, 512.0]


def test_mxfp4_known_block():
    # amax 6 -> scale 1 exactly; every grid value survives
    row = torch.tensor(list(E2M1_VALUES) * 2 + [-v for v in E2M1_VALUES] * 2)
    q = quantize_mxfp4(row.reshape(1, 32))
    assert q.scale.tolist() == [[127]]
    assert torch.equal(q.dequantize().reshape(-1), row)
    # amax 12 -> scale 2 (byte 128), values double
    q2 = quantize_mxfp4((row * 2).reshape(1, 32))
    assert q2.scale.tolist() == [[128]]
    assert torch.equal(q2.data, q.data)


def test_mxfp4_error_bound_on_random_data():
    torch.manual_seed(0)
    x = torch.randn(64, 256)
    d = quantize_mxfp4(x).dequantize()
    # each element is within half an e2m1 step of its block scale; step <= 2 * scale
    blocks = x.reshape(64, 8, 32)
    scale = 2.0 ** torch.ceil(torch.log2(blocks.abs().amax(-1) / 6))
    err = (d.reshape(64, 8, 32) - blocks).abs()
    assert bool((err <= scale.unsqueeze(-1) * 1.0 + 1e-7).all())
    rel = float((d - x).norm() / x.norm())
    assert 0.05 < rel < 0.2  # FP4 is coarse, but not broken


def test_nvfp4_round_trip_and_scale_dtype():
    torch.manual_seed(1)
    x = torch.randn(8, 64)
    q = quantize_nvfp4(x)
    assert q.scale.dtype == torch.float8_e4m3fn
    assert q.scale.shape == (8, 4)
    assert q.global_scale is not None and float(q.global_scale) == pytest.approx(448 * 6 / float(x.abs().max()))
    d = q.dequantize()
    assert float((d - x).norm() / x.norm()) < 0.15
    # the block amax is represented to within an e4m3 step
    assert torch.allclose(d.reshape(8, 4, 16).abs().amax(-1), x.reshape(8, 4, 16).abs().amax(-1), rtol=0.15)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_inf_rejected(bad):
    x = torch.zeros(1, 32)
    x[0, 3] = bad
    with pytest.raises(ValueError, match="x: expected finite"):
        quantize_mxfp4(x)
    with pytest.raises(ValueError, match="x: expected finite"):
        quantize_nvfp4(x)


def test_bad_shapes_and_dtypes_rejected():
    with pytest.raises(ValueError, match="multiple of the block size 32"):
        quantize_mxfp4(torch.randn(2, 48))
    with pytest.raises(ValueError, match="floating-point"):
        quantize_mxfp4(torch.ones(2, 32, dtype=torch.int32))
    with pytest.raises(ValueError, match="scale: expected shape"):
        dequantize_mxfp4(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, 2, dtype=torch.uint8))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4, allow_nan=False, width=32), min_size=32, max_size=32))
def test_mxfp4_dequant_never_exceeds_block_amax_rounded_up(vals):
    x = torch.tensor(vals).reshape(1, 32)
    d = quantize_mxfp4(x).dequantize()
    amax = float(x.abs().max())
    assert float(d.abs().max()) <= max(amax, 0) * 2 + 1e-30
    assert torch.isfinite(d).all()


def test_fp4tensor_per_expert_global_scale():
    torch.manual_seed(2)
    xs = [torch.randn(4, 32) * s for s in (1.0, 10.0)]
    qs = [quantize_nvfp4(x) for x in xs]
    stacked = FP4Tensor(torch.stack([q.data for q in qs]), torch.stack([q.scale for q in qs]), 16,
                        torch.stack([q.global_scale for q in qs]))
    d = stacked.dequantize()
    for i in range(2):
        assert torch.equal(d[i], qs[i].dequantize())


# --------------------------------------------------------------------------- OCP MX edge cases
F32_MAX = torch.finfo(torch.float32).max


def test_mxfp4_near_the_float32_maximum_stays_finite():
    q = quantize_mxfp4(torch.full((1, 32), 3e38))  # amax / 6 rounds up to 2**126, where 4 * 2**126 = inf
    assert q.scale.tolist() == [[127 + 125]]  # the OCP shared exponent floor(log2(3e38)) - 2 = 125
    assert q.dequantize().tolist() == [[6 * 2.0 ** 125] * 32]  # saturated at 6: 2.55e38, finite
    mixed = torch.tensor([F32_MAX, -F32_MAX, 2.0 ** 124, -(2.0 ** 126)] + [0.0] * 28).reshape(1, 32)
    d = quantize_mxfp4(mixed).dequantize().reshape(-1)
    assert d[:4].tolist() == [6 * 2.0 ** 125, -6 * 2.0 ** 125, 2.0 ** 124, -(2.0 ** 126)]
    below = quantize_mxfp4(torch.full((1, 32), 2e38))  # amax / 6 rounds up to 2**125 already: unchanged
    assert below.scale.tolist() == [[252]] and below.dequantize().tolist() == [[4 * 2.0 ** 125] * 32]  # 4.7 -> 4


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-F32_MAX, F32_MAX, allow_nan=False, allow_infinity=False, width=32), min_size=32,
                max_size=32))
def test_mxfp4_every_finite_float32_block_dequantizes_finite(vals):
    d = quantize_mxfp4(torch.tensor(vals, dtype=torch.float32).reshape(1, 32)).dequantize()
    assert torch.isfinite(d).all()
    assert torch.equal(torch.signbit(d[d != 0]), torch.signbit(torch.tensor(vals).reshape(1, 32)[d != 0]))


def test_ue8m0_byte_0xff_is_nan_and_makes_its_block_nan():
    assert [math.isnan(v) for v in ue8m0_to_float(torch.tensor([0xFF, 254, 0], dtype=torch.uint8)).tolist()] == [
        True, False, False]
    assert ue8m0_to_float(torch.tensor([254, 0], dtype=torch.uint8)).tolist() == [2.0 ** 127, 2.0 ** -127]
    q = quantize_mxfp4(torch.ones(1, 64))
    scale = q.scale.clone()
    scale[0, 1] = 0xFF
    d = dequantize_mxfp4(q.data, scale)
    assert d[0, :32].tolist() == [1.0] * 32 and torch.isnan(d[0, 32:]).all()
    e4m3_view = dequantize_mxfp4(q.data, scale.view(torch.float8_e4m3fn))  # vLLM's view of the same bytes
    assert torch.isnan(e4m3_view[0, 32:]).all() and e4m3_view[0, :32].tolist() == [1.0] * 32
