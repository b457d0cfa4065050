"""profiling.sass: the MMA loop of our compiled Triton kernels, counted on a CPU host (no GPU)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from fp4moe_diag.profiling.sass import count, main, mma_loop, opcode

SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/              @!P0 HMMA.16816.F32.BF16 R8, R4, R6, R8 ;
        /*0030*/                   ISETP.GE.AND P0, PT, R0, 0x3, PT ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0050*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0060*/                   BRA `(.L_x_1) ;
"""


def test_mma_loop_is_the_backward_branch_loop_that_holds_the_mma():
    body = mma_loop(SASS)
    assert [opcode(t) for t in body] == ["LDG", "HMMA", "ISETP", "BRA"]  # not the MMA-free loop at .L_x_1
    with pytest.raises(ValueError, match="no loop with an MMA"):
        mma_loop(SASS.replace("HMMA", "FFMA"))


def _has_nvdisasm() -> bool:
    if importlib.util.find_spec("triton") is None:
        return False
    import triton

    return os.path.exists(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm"))


@pytest.mark.skipif(not _has_nvdisasm(), reason="triton with its bundled nvdisasm is not installed")
def test_sm90_loops_x2_is_cheaper_than_bits_and_sw_takes_wgmma():
    x2, sw, bits = (count(t, "gemm2", 3072, 90) for t in ("m16n64k128w4s3-x2", "m16n64k128w4s3-sw", "m16n64k128w4s3"))
    assert x2.weights_per_thread == sw.weights_per_thread == 64  # 64 x 128 weights over 128 threads
    assert (x2.mma, sw.mma, bits.mma) == ("HMMA", "HGMMA", "HMMA")  # mma.sync m16; wgmma with A from registers
    assert x2.opcodes["HMUL2"] == 32 == sw.opcodes["HMUL2"]  # one bf16x2 scale multiply per two weights
    assert bits.instructions_per_weight > 2 * x2.instructions_per_weight  # fp32 decode + select + cvt vs x2
    assert x2.loop_instructions == sum(x2.opcodes.values())


def test_sass_refuses_bad_arguments_before_compiling(capsys):
    with pytest.raises(ValueError, match="^gemm:"):
        count("m16n64k128w4s3-x2", gemm="gemm3")
    with pytest.raises(ValueError, match="^k: expected a multiple of 32"):
        count("m16n64k128w4s3-x2", k=100)
    with pytest.raises(ValueError, match="^k: 256 in 4 splits"):
        count("m16n64k128w4s3-x2-sk4", k=256)
    assert main(["--tactic", "m16n64", "--k", "3072"]) == 2
    assert capsys.readouterr().err.startswith("sass: error: tactic:")
