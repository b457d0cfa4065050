"""quant.py against FlashInfer's own FP4 code (GPU host only: FlashInfer's fp4 module needs CUDA).

Skipped on CPU machines.  On the GPU host: ``python -m pytest -m gpu tests`` (``tools/device/gpu_session.sh``
phase ``gputests``); ``FP4MOE_FP4QUANT_MODULE`` may point at a prebuilt ``fp4_quantization_90``
(``tools/cutlass_slim/build_fp4_quant_sm90.py``) so FlashInfer does not JIT-compile it there.

* FlashInfer's dequantizers (``mxfp4_dequantize_host``, ``e2m1_and_ufp8sf_scale_to_float``; host
  code, any GPU) must decode our packed codes and scales to exactly our values.
* FlashInfer's quantizer ``fp4_quantize`` must produce our bytes bit for bit on SM100+.  On SM90
  it cannot: in FlashInfer 0.5.2 the bodies of its quantization kernels are compiled only for
  ``__CUDA_ARCH__ >= 1000`` (``quantization.cuh``), so on an H200 the call returns without error and
  leaves its outputs unwritten (measured 2026-12-02: MXFP4 scale bytes all 0, NVFP4 scales
  garbage).  That case is a strict xfail: it starts failing the day FlashInfer writes them there.
"""

import pytest
import torch

from fp4moe_diag.problem.quant import dequantize_mxfp4, dequantize_nvfp4, quantize_mxfp4, quantize_nvfp4

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SM100_PLUS = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 10
QUANTIZER_NOOP = pytest.mark.xfail(
    not SM100_PLUS, strict=True,
    reason="FlashInfer 0.5.2 compiles its fp4 quantization kernel bodies only for __CUDA_ARCH__ >= 1000: "
           "on SM90 fp4_quantize leaves its outputs unwritten",
)


def _fi():
    fi = pytest.importorskip("flashinfer")
    from fp4moe_diag.backends.flashinfer import prebuilt

    prebuilt.install_from_env()  # FP4MOE_FP4QUANT_MODULE: a prebuilt fp4_quantization_90 (no JIT)
    return fi


def _data(rows: int, cols: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * torch.logspace(-3, 3, cols)  # many scale exponents
    x[0, :32] = 0.0  # an all-zero block
    return x.to(torch.bfloat16).float()


def test_mxfp4_decodes_identically_in_flashinfer_host_dequantizer():
    fi = _fi()
    q = quantize_mxfp4(_data(64, 512, 0))
    theirs = fi.mxfp4_dequantize_host(q.data.cpu(), q.scale.view(torch.uint8).cpu(), 32)
    ours = dequantize_mxfp4(q.data, q.scale)
    assert theirs.shape == ours.shape == (64, 512)
    assert ours.abs().max() > 0
    assert torch.equal(theirs.float(), ours.float())


def test_mxfp4_and_nvfp4_decode_identically_in_e2m1_and_ufp8sf_scale_to_float():
    fi = _fi()
    x = _data(32, 256, 1)
    q = quantize_mxfp4(x)
    theirs = fi.e2m1_and_ufp8sf_scale_to_float(q.data.cpu(), q.scale.view(torch.uint8).cpu().reshape(-1),
                                              torch.tensor([1.0]), 32, 0, False)
    assert torch.equal(theirs.float(), dequantize_mxfp4(q.data, q.scale).float())
    qn = quantize_nvfp4(x)
    theirs = fi.e2m1_and_ufp8sf_scale_to_float(qn.data.cpu(), qn.scale.view(torch.uint8).cpu().reshape(-1),
                                              (1.0 / qn.global_scale).reshape(1).float().cpu(), 16, 1, False)
    ours = dequantize_nvfp4(qn.data, qn.scale, qn.global_scale)
    assert ours.abs().max() > 0
    torch.testing.assert_close(theirs.float(), ours.float(), rtol=1e-6, atol=0)


@QUANTIZER_NOOP
def test_mxfp4_bit_exact_with_flashinfer_fp4_quantize():
    fi = _fi()
    x = _data(128, 512, 2).to(torch.bfloat16).cuda()
    q, sf = fi.fp4_quantize(x, torch.tensor([1.0], device="cuda"), sf_vec_size=32, sf_use_ue8m0=True,
                            is_sf_swizzled_layout=False)
    ours = quantize_mxfp4(x.float())
    assert torch.equal(sf.view(torch.uint8).reshape(128, 512 // 32), ours.scale.view(torch.uint8))
    assert torch.equal(q.view(torch.uint8).reshape(128, 256), ours.data)


@QUANTIZER_NOOP
def test_nvfp4_bit_exact_with_flashinfer_fp4_quantize():
    fi = _fi()
    x = _data(64, 256, 3).to(torch.bfloat16).cuda()
    gs = (448.0 * 6.0) / x.float().abs().max()
    q, sf = fi.fp4_quantize(x, gs.reshape(1), sf_vec_size=16, sf_use_ue8m0=False, is_sf_swizzled_layout=False)
    ours = quantize_nvfp4(x.float(), gs)
    assert torch.equal(sf.view(torch.uint8).reshape(64, 16), ours.scale.view(torch.uint8))
    assert torch.equal(q.view(torch.uint8).reshape(64, 128), ours.data)
