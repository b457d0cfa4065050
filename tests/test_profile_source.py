"""profile --source: Nsight Compute's per-SASS-instruction warp-stall samples (fp4moe_diag.profiling.source), read
from the exports committed in data/runs/2026-12-04-nvidia-h200-s10c (H200, ncu 2025.3): gemm1 of ours and of
triton_kernels at gpt-oss-20b EP1 T=4096, ours at T=64.  CPU only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fp4moe_diag.profiling import source as S
from fp4moe_diag.profiling.source_driver import parse_argv

RUN = Path(__file__).resolve().parents[1] / "data" / "runs" / "2026-12-04-nvidia-h200-s10c"
OURS = RUN / "source_1-triton-gpt-oss-20b-ep1-t4096.csv.gz"
TK = RUN / "source_2-triton_kernels-gpt-oss-20b-ep1-t4096.csv.gz"
DECODE = RUN / "source_3-triton-gpt-oss-20b-ep1-t64.csv.gz"


def test_read_the_committed_exports():
    ours, tk = S.read_source_csv(OURS), S.read_source_csv(TK)
    assert ours["kernel"].iloc[0] == "_moe_mxfp4_gemm1_ps_kernel"
    assert tk["kernel"].iloc[0] == "_matmul_ogs_NNT_bf16xbf16xmxfp4_128x256x128x1_swiglu"
    assert (len(ours), ours[S.SAMPLES].sum(), ours[S.EXECUTED].sum()) == (2120, 139371.0, 420864288.0)
    assert tk[S.EXECUTED].sum() == 373675728.0  # triton_kernels executes 11 % fewer warp instructions
    # the opcode: no predicate, no modifiers
    assert set(ours["opcode"]) >= {"HGMMA", "LOP3", "SHF", "HMUL2", "LDGSTS", "LDS", "WARPGROUP"}
    assert not any(o.startswith("@") or "." in o for o in ours["opcode"])


def test_where_the_warps_wait():
    ours, tk, dec = (S.read_source_csv(p) for p in (OURS, TK, DECODE))
    r = S.stall_reasons(ours)
    assert r.index[0] == "stall_wait" and r["stall_wait"] == pytest.approx(30.1, abs=0.05)
    assert S.stall_reasons(tk)["stall_wait"] == pytest.approx(11.7, abs=0.05)
    assert 95 < r.sum() <= 100.0  # the reasons ncu names cover most samples
    op = S.by_opcode(ours)
    assert list(op.index[:2]) == ["LOP3", "SHF"]  # ours: the upcast
    assert op.loc["LOP3", "samples_pct"] == pytest.approx(21.4, abs=0.05)
    assert op.loc["SHF", "samples_pct"] == pytest.approx(20.3, abs=0.05)
    assert op.loc["HGMMA", "samples_pct"] == pytest.approx(6.7, abs=0.05)
    assert op.loc["HGMMA", "executed"] == S.by_opcode(tk).loc["HGMMA", "executed"] == 10616832  # the same MMAs
    tko = S.by_opcode(tk)
    assert tko.index[0] == "HGMMA" and tko.loc["HGMMA", "samples_pct"] == pytest.approx(24.2, abs=0.05)
    assert op["samples_pct"].sum() == pytest.approx(100.0)
    # decode: the warps mostly issue or wait for their turn -- issue-bound
    d = S.stall_reasons(dec)
    assert d["stall_selected"] + d["stall_not_selected"] == pytest.approx(46.9, abs=0.1)


def test_hot_instructions():
    hot = S.hot_instructions(S.read_source_csv(OURS), 3)
    assert hot.loc[0, "source"] == "SHF.L.U32 R154, R16, 0x4, RZ"  # waits on the LDS.128 of the gate tile
    assert hot.loc[0, "main_reason"] == "stall_short_sb" and hot.loc[0, "samples_pct"] == pytest.approx(7.12, abs=0.01)
    assert len(hot) == 3 and hot["samples_pct"].is_monotonic_decreasing


def test_commands():
    cmd = S.ncu_command("/x/ncu", "gemm1_ps", Path("/o/source"), ["python3", "-m", "d"])
    assert cmd == ["/x/ncu", "--section", "SourceCounters", "--section", "WarpStateStats", "--section", "SpeedOfLight",
                   "-k", "regex:gemm1_ps", "-s", "1", "-c", "1", "-f", "-o", "/o/source", "python3", "-m", "d"]
    assert S.export_command("ncu", Path("r.ncu-rep")) == ["ncu", "-i", "r.ncu-rep", "--page", "source", "--csv",
                                                          "--print-source", "sass"]


@pytest.mark.parametrize("bad,match", [("", "expected a regular expression"), ("  ", "expected a regular expression"),
                                       ("(", "not a valid regular expression"), (None, "expected a regular")])
def test_bad_kernel_regex(bad, match):
    with pytest.raises(ValueError, match="^source: .*" + match):
        S.check_kernel_regex(bad)


def test_bad_export_and_no_samples(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("kernel,duration\n")
    with pytest.raises(ValueError, match="expected ncu's source-page CSV"):
        S.read_source_csv(p)
    p.write_text('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)","stall_wait"\n'
                 '"0x1","NOP","0","0"\n')
    df = S.read_source_csv(p)
    assert df["opcode"].tolist() == ["NOP"] and df["kernel"].iloc[0] == "k"
    with pytest.raises(ValueError, match="no warp-stall samples"):
        S.stall_reasons(df)


@pytest.mark.parametrize("argv,match", [(["triton", "gpt-oss-20b", "1", "64"], "expected BACKEND MODEL EP TOKENS"),
                                        (["triton", "gpt-oss-20b", "0", "64", "t"], "EP must be a positive"),
                                        (["triton", "gpt-oss-20b", "1", "x", "t"], "TOKENS must be a positive")])
def test_driver_arguments(argv, match):
    with pytest.raises(ValueError, match=match):
        parse_argv(argv)
    assert parse_argv(["triton", "gpt-oss-20b", "2", "64", "m16n128k128w4s3-ps"]) == ("triton", "gpt-oss-20b", 2, 64,
                                                                                       "m16n128k128w4s3-ps")


def test_cli_refuses_a_bad_regex_before_any_work():
    p = subprocess.run([sys.executable, "-m", "fp4moe_diag", "profile", "--tactics", "x", "--source", "("],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "argument --source: source: '(' is not a valid regular expression" in p.stderr
