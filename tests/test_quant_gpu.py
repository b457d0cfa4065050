"""quant.py against FlashInfer's own quantizer (GPU only; FlashInfer JIT-builds its fp4 module).

Skipped on CPU machines.  On the GPU host: ``python -m pytest -m gpu tests`` (``scripts/gpu_session.sh``
phase ``gputests``); ``FP4MOE_FP4QUANT_MODULE`` may point at a prebuilt ``fp4_quantization_90``
(``scripts/build_fp4_quant_sm90.py``) so FlashInfer does not JIT-compile it there.
"""

import pytest
import torch

from fp4moe_diag.quant import quantize_mxfp4, quantize_nvfp4

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _fp4_quantize():
    fi = pytest.importorskip("flashinfer")
    from fp4moe_diag import prebuilt

    prebuilt.install_from_env()  # FP4MOE_FP4QUANT_MODULE: a prebuilt fp4_quantization_90 (no JIT)
    return fi.fp4_quantize


def test_mxfp4_bit_exact_with_flashinfer_fp4_quantize():
    fp4_quantize = _fp4_quantize()
    torch.manual_seed(0)
    x = torch.randn(128, 512, device="cuda", dtype=torch.bfloat16)
    q, sf = fp4_quantize(x, torch.tensor([1.0], device="cuda"), sf_vec_size=32, sf_use_ue8m0=True,
                         is_sf_swizzled_layout=False)
    ours = quantize_mxfp4(x.float())
    assert torch.equal(sf.view(torch.uint8).reshape(128, 512 // 32), ours.scale)
    assert torch.equal(q.view(torch.uint8).reshape(128, 256), ours.data)


def test_nvfp4_bit_exact_with_flashinfer_fp4_quantize():
    fp4_quantize = _fp4_quantize()
    torch.manual_seed(1)
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    gs = (448.0 * 6.0) / x.float().abs().max()
    q, sf = fp4_quantize(x, gs.reshape(1), sf_vec_size=16, sf_use_ue8m0=False, is_sf_swizzled_layout=False)
    ours = quantize_nvfp4(x.float(), gs)
    assert torch.equal(sf.view(torch.uint8).reshape(64, 16), ours.scale.view(torch.uint8))
    assert torch.equal(q.view(torch.uint8).reshape(64, 128), ours.data)
