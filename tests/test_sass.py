"""profiling.sass: the MMA loop of our compiled Triton kernels, counted on a CPU host (no GPU)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from fp4moe_diag.profiling.sass import count, count_under, main, mma_loop, mma_sync, opcode, residency

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


def test_residency_hand_checked():
    # 168 registers x 32 x 4 warps = 21504 of 65536: 3 programs (the H200 ran the decode gemm1 so, s9d); 47 KB + 1 KB
    # of shared memory would allow 4
    assert residency(168, 47104, 4) == 3
    assert residency(113, 50000, 4) == 4  # 113 -> 120 allocated: 15360 a program; 233472 // 51024 = 4
    assert residency(255, 66560, 8) == 1 and residency(128, 66560, 16) == 1  # the register file, whole
    assert residency(32, 100000, 4) == 2  # shared memory: 233472 // 101024
    assert residency(16, 0, 32) == 2  # 64 warps per SM
    assert residency(8, 0, 1) == 32  # 32 blocks per SM
    for bad in ((0, 0, 4), (256, 0, 4), (32, -1, 4), (32, 0, 0)):
        with pytest.raises(ValueError, match="^residency:"):
            residency(*bad)


@pytest.mark.skipif(not _has_nvdisasm(), reason="triton with its bundled nvdisasm is not installed")
def test_count_reports_registers_spills_and_residency():
    r = count("m16n128k128w8s3-ps", "gemm1", 3072, 90)
    assert r.registers > 0 and r.stack_bytes == 0 and r.loop_spills == 0
    assert r.resident_programs == residency(r.registers, r.shared_bytes, 8) >= 1
    assert r.resident_warps == 8 * r.resident_programs


GROUPS = """
        WARPGROUP.ARRIVE ;
        HGMMA.64x16x16.F32.BF16 R32, R116, gdesc[UR12], R32 ;
        HGMMA.64x16x16.F32.BF16 R24, R112, gdesc[UR12], R24, gsb0 ;
        WARPGROUP.DEPBAR.LE gsb0, 0x7 ;
        QGMMA.64x16x32.F32.E4M3.E4M3 R40, R8, gdesc[UR8], R40, gsb0 ;
        WARPGROUP.DEPBAR.LE gsb0, 0xa ;
        WARPGROUP.DEPBAR.LE gsb0, 0x7 ;
"""


def test_mma_sync_counts_commit_groups_and_wait_depths():
    assert mma_sync(GROUPS.strip().splitlines()) == (2, [7, 10])  # two gsb0 closers; the depths are hex (0xa: ten)
    assert mma_sync(["HMMA.16816.F32.BF16 R8, R4, R6, R8"]) == (0, [])  # mma.sync: no groups, no waits


def test_count_under_refuses_a_folder_without_triton_and_a_bad_label_before_any_child(tmp_path, capsys, monkeypatch):
    with pytest.raises(ValueError, match="^triton: expected a folder holding triton/"):
        count_under(str(tmp_path), ["m16n128k128w4s3-ps"])
    with pytest.raises(ValueError, match="^tactic:"):
        count_under(str(tmp_path), ["m16n"])  # the label first: no child is started for it
    with pytest.raises(ValueError, match=r"^triton: 2\.0\.9 is not installed .*install_alt.sh triton==2\.0\.9\)"):
        count_under("2.0.9", ["m16n128k128w4s3-ps"])  # a release name: looked up in .alt/
    import fp4moe_diag.profiling.sass as sass

    monkeypatch.setattr(sass, "count", lambda *a: pytest.fail("built before every --triton folder was checked"))
    assert main(["--tactic", "m16n128k128w4s3-ps", "--triton", "installed", "--triton", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("sass: error: triton: expected a folder")  # before the installed build
    with pytest.raises(SystemExit) as e:
        main(["--tactic", "m16n128k128w4s3-ps", "--json", "--table"])  # one output form, not one silently
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


#: the decode winner's gemm1 (m16n128k128w4s3-ps, K = 3072, sm_90a) as each Triton release builds it: registers,
#: programs per SM, wgmma commit groups per K step, wait depths (docs/static-h200-s14.md).  From 3.7 on the
#: 32 wgmmas of a K step are 4 groups of 8 (3 in flight) instead of 16 of 2 (7 in flight), and 229-243 registers leave
#: 2 programs per SM instead of 3.
DECODE_BUILDS = {"3.6.0": (168, 3, 16, [7]), "3.7.1": (229, 2, 4, [3]), "3.8.0": (229, 2, 4, [3]),
                 "3.9.0": (243, 2, 4, [3])}
_ALT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".alt")
#: the other Triton releases installed beside this one (scripts/install_alt.sh; .ci/run installs 3.6.0, the GPU
#: image's, and 3.7.1, vLLM 0.34's, before the tests)
ALT_TRITONS = sorted(os.path.join(_ALT, d) for d in (os.listdir(_ALT) if os.path.isdir(_ALT) else [])
                     if d.startswith("triton-") and d[len("triton-"):] in DECODE_BUILDS)


@pytest.mark.skipif(not (_has_nvdisasm() and ALT_TRITONS),
                    reason="needs triton with nvdisasm and another release in .alt/ (bash scripts/install_alt.sh "
                           "triton==3.6.0; .ci/run installs it before the tests)")
def test_triton_releases_build_the_decode_gemm1_differently(capsys):
    argv = ["--tactic", "m16n128k128w4s3-ps", "--gemm", "gemm1", "--k", "3072", "--table"]
    releases = [d.rsplit("-", 1)[1] for d in ALT_TRITONS]  # by release name: .alt/triton-<release>
    assert main(argv + [a for r in releases for a in ("--triton", r)] + ["--triton", "installed"]) == 0
    rows = [r.split(" | ") for r in capsys.readouterr().out.splitlines() if r.startswith("| `")]
    assert [r[2] for r in rows[:-1]] == releases  # each build its own release
    for r in rows:
        if r[2] not in DECODE_BUILDS:
            continue  # an installed release not studied yet: its row is printed, nothing to compare
        regs, programs, groups, waits = DECODE_BUILDS[r[2]]
        assert (int(r[3]), int(r[4].split()[0])) == (regs, programs), r
        assert r[6] == f"{groups}, " + ", ".join(f"<= {w}" for w in waits), r
        assert r[7] == "0 |", r  # no spills in the loop in any release


#: one tactic of each family our backends offer on Hopper (decode k128 / k64 / split / fused, 8-warp, -gu, wide -gu
#: with tails, 16-warp -gu and the 32-row tail launch of its -t32 (session 33), W4A8 -f8 / -p8): each must build for
#: sm_90a under every release users have
FAMILIES = ("m16n128k128w4s3-ps-g2sk2-pdl", "m16n128k64w4s6-ps-sk2", "m16n64k256w4s3-ps-sk4-pdl-fs",
            "m16n128k128w8s3-ps", "m64n128k64w8s4-ps-gu", "m256n64k64w8s3-ps-gu-g2n128-t128",
            "m128n128k64w16s3-ps-gu-g2n256", "m32n128k64w16s3-ps-gu-g2n256", "m128n128k64w8s3-f8",
            "m128n64k128w4s3-p8")
#: (tactic, gemm, release) -> spill operations in the K loop where a release has some (docs/static-h200-s14.md)
KNOWN_SPILLS = {("m128n128k64w16s3-ps-gu-g2n256", "gemm2", "3.7.1"): 2,
                ("m128n128k64w16s3-ps-gu-g2n256", "gemm2", "3.8.0"): 2}


@pytest.mark.skipif(not (_has_nvdisasm() and ALT_TRITONS), reason="needs another Triton release in .alt/")
@pytest.mark.parametrize("gemm", ["gemm1", "gemm2"])
def test_every_tactic_family_builds_under_each_release_beside_the_lock(gemm):
    for folder in ALT_TRITONS:
        rows = count_under(folder, FAMILIES, gemm, 3072)  # raises where a build fails or has no MMA loop
        assert [r.tactic for r in rows] == list(FAMILIES)
        for r in rows:
            assert r.mma in ("HGMMA", "QGMMA") and r.resident_programs >= 1, r
            assert r.loop_spills == KNOWN_SPILLS.get((r.tactic, gemm, r.triton_version), 0), r
