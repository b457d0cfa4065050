"""Ablations of the ps tactics (``LABEL~nodeq``, ``LABEL~load``: backends/triton/_kernels_ablate.py) and the tool that
times them (``python -m fp4moe_diag.profiling.ablate``).  Host side: labels, never offered, looked up only beside an
offered tactic, the table's shares, the command line's refusals; sm_90a build (CPU, Triton's bundled ptxas): ``~nodeq``
keeps every wgmma and load and drops the decode, ``~load`` keeps the weight and scale loads (cp.async) and nothing
else; interpreter (CPU): each ablation runs through the backend and is not the tactic's output."""

from __future__ import annotations

import pandas as pd
import pytest

from fp4moe_diag import MoECase
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend
from fp4moe_diag.backends.triton.configs import ABLATIONS, KernelConfig, parse_config
from fp4moe_diag.profiling import ablate
from cli_errors import refusal
from interpreter import interpreter_fixture, needs_sass_tools

GPT = dict(hidden_size=3072, intermediate_size=3072, num_experts=32, top_k=4)


def test_labels_round_trip_and_refusals():
    kc = parse_config("m16n128k128w4s3-ps-g2sk2-pdl-fs~load")
    assert (kc.ablate, kc.split_k2, kc.pdl, kc.fused) == ("load", 2, 1, True)
    assert kc.label == "m16n128k128w4s3-ps-g2sk2-pdl-fs~load" and kc.params()["ablate"] == "load"
    assert parse_config("m128n128k64w16s3-ps-gu-g2n256~nodeq").gate_up
    assert "ablate" not in parse_config("m16n128k128w4s3-ps").params()  # older rows keep their params
    assert ABLATIONS == {"": 0, "nodeq": 1, "load": 2, "seq": 3}
    with pytest.raises(ValueError, match="ablate is a mode ps option"):
        KernelConfig(16, 64, 128, 4, 3, "x2", ablate="load")
    with pytest.raises(ValueError, match="ablate is a mode ps option"):
        parse_config("m16n128k128w4s3-ps~fast")
    assert ablate.variant_labels("m16n128k128w4s3-ps-pdl") == [
        "m16n128k128w4s3-ps-pdl", "m16n128k128w4s3-ps-pdl~nodeq", "m16n128k128w4s3-ps-pdl~load",
        "m16n128k128w4s3-ps-pdl~seq"]
    for bad in ("m16n64k128w4s3-x2", "m16n128k128w4s3-ps~load"):
        with pytest.raises(ValueError, match="expected a -ps tactic"):
            ablate.variant_labels(bad)


def test_never_offered_and_looked_up_beside_an_offered_tactic():
    b = TritonMXFP4Backend()
    for t in (1, 64, 4096):
        assert not any("~" in x.label or x.id.ablate for x in b.tactics(MoECase(num_tokens=t, **GPT)))
    case = MoECase(num_tokens=64, **GPT)
    t = b.tactic_by_label(case, "m16n128k128w4s3-ps~nodeq")
    assert t.id == KernelConfig(16, 128, 128, 4, 3, "ps", ablate="nodeq") and not t.is_default
    assert t.label == "m16n128k128w4s3-ps~nodeq"
    with pytest.raises(ValueError, match="no tactic 'm16n128k128w4s3-ps-gu-g2n256'"):  # a prefill tile at decode
        b.tactic_by_label(case, "m16n128k128w4s3-ps-gu-g2n256~load")
    with pytest.raises(ValueError, match="ablate is a mode ps option"):
        b.tactic_by_label(case, "m16n128k128w4s3-ps~nope")


def _rows(times: dict, case=("gpt-oss-20b", 1, 64), tactic="m16n128k128w4s3-ps", weight_bytes=440_000_000,
          read_gbps=4400.0) -> list[dict]:
    out = []
    for v, us in times.items():
        tbps = weight_bytes / (us * 1e-6) / 1e12
        out.append(dict(model=case[0], ep_size=case[1], num_tokens=case[2], tactic=tactic, variant=v,
                        time_median_us=us, weight_bytes=weight_bytes, weight_TBps=tbps,
                        frac_read_ceiling=tbps * 1e3 / read_gbps))
    return out


def test_table_shares_and_markdown():
    df = pd.DataFrame(_rows({"tactic": 200.0, "nodeq": 160.0, "load": 110.0, "seq": 88.0})
                      + _rows({"tactic": 40.0, "nodeq": 38.0, "load": 30.0, "seq": 30.0}, case=("gpt-oss-20b", 1, 1)))
    t = ablate.ablation_table(df).set_index("num_tokens")
    assert t.loc[64, ["dequant_share", "loop_rest_share", "load_share"]].tolist() == pytest.approx([0.2, 0.25, 0.55])
    assert t.loc[64, "tactic_read_frac"] == pytest.approx(0.5)  # 440 MB in 200 us = 2.2 TB/s of 4.4
    assert t.loc[64, "load_read_frac"] == pytest.approx(2.2 / 4.4 * 200 / 110)
    assert t.loc[1, "dequant_share"] == pytest.approx(0.05) and t.loc[64, "seq_over_load"] == pytest.approx(0.8)
    md = ablate.markdown(ablate.ablation_table(df))
    assert ("| gpt-oss-20b | 1 | 64 | `m16n128k128w4s3-ps` | 200.0 (50%) | 160.0 | 110.0 (91%) | 88.0 (114%) | 20% | 25% "
            "| 55% | 0.80 |") in md
    with pytest.raises(ValueError, match=r"missing \['load', 'seq'\]"):
        ablate.ablation_table(pd.DataFrame(_rows({"tactic": 200.0, "nodeq": 160.0})))
    partial = _rows({"tactic": 200.0, "nodeq": 160.0, "load": 110.0, "seq": 90.0}) + _rows({"tactic": 40.0},
                                                                                          case=("x", 1, 1))
    with pytest.raises(ValueError, match="lacks one of the variants"):
        ablate.ablation_table(pd.DataFrame(partial))


def test_notes_pick_the_least_noisy_file_take_a_tm_tactics_twin_and_match_the_gpu(tmp_path):
    """Two files of one case stay apart (never one's tactic time beside the other's ~load); the note takes the least
    noisy and flags a spread above NOISY_SPREAD; a -tm tactic takes its ps twin's shares, named; another GPU's not."""
    from fp4moe_diag.analysis.ablations import NOISY_SPREAD, ablation_note, read_ablations

    for name, us, spread in (("a", 200.0, 0.11), ("b", 180.0, 0.02)):
        (tmp_path / name).mkdir()
        rows = pd.DataFrame(_rows({"tactic": us, "nodeq": 160.0, "load": 110.0, "seq": 88.0}, tactic="m16n128k128w4s3-ps"))
        rows.assign(time_spread=spread, gpu_name="NVIDIA H100 80GB HBM3").to_csv(tmp_path / name / "ablate-x.csv")
    t = ablate.ablation_table(read_ablations([tmp_path / "a", tmp_path / "b"]))
    assert sorted(t["source"]) == ["a/ablate-x.csv", "b/ablate-x.csv"]
    assert sorted(t["tactic_us"]) == [180.0, 200.0] and sorted(t["max_spread"]) == [0.02, 0.11] and NOISY_SPREAD == 0.05
    note = ablation_note(t, "gpt-oss-20b", 1, 64, "m16n128k128w4s3-ps", "NVIDIA H100 80GB HBM3")
    assert note.startswith("ablation: dequant 11%, rest of the loop 28%, weight stream 61% of 180.0 us") and "noisy" not in note
    twin = ablation_note(t, "gpt-oss-20b", 1, 64, "m16n128k128w4s3-ps-tm")
    assert twin.startswith("ablation [of the ps twin m16n128k128w4s3-ps]: dequant 11%")
    assert ablation_note(t, "gpt-oss-20b", 1, 64, "m16n128k128w4s3-ps", "NVIDIA H200") == ""
    noisy = ablation_note(t[t["source"] == "a/ablate-x.csv"], "gpt-oss-20b", 1, 64, "m16n128k128w4s3-ps")
    assert noisy.endswith("(spread up to 11%: noisy)")
    assert "(noisy: spread 11%) |" in ablate.markdown(t) and ablate.markdown(t).count("noisy") == 1


def test_committed_ablations_per_run_folder(tmp_path):
    from fp4moe_diag.analysis.ablations import committed_ablations

    assert committed_ablations(tmp_path).empty
    for run, us in (("2026-12-06-nvidia-h200-a", 200.0), ("2026-12-06-nvidia-h200-b", 100.0)):
        (tmp_path / run).mkdir()
        pd.DataFrame(_rows({"tactic": us, "nodeq": us * 0.8, "load": us * 0.5, "seq": us * 0.4})).to_csv(
            tmp_path / run / "ablate-x.csv")
    (tmp_path / "notes.txt").write_text("not a run")
    t = committed_ablations(tmp_path)
    assert t["run"].tolist() == ["2026-12-06-nvidia-h200-a", "2026-12-06-nvidia-h200-b"]
    assert t["tactic_us"].tolist() == [200.0, 100.0] and t["dequant_share"].tolist() == pytest.approx([0.2, 0.2])
    md = ablate.markdown(t).splitlines()  # the run folder last; one GPU (none recorded): no GPU column
    assert md[0].startswith("| model |") and md[0].endswith("| ~seq / ~load | run |")
    assert md[2].endswith("| 20% | 30% | 50% | 0.80 | 2026-12-06-nvidia-h200-a |")
    two = t.assign(gpu_name=["NVIDIA H200", "NVIDIA H100 80GB HBM3"])
    assert [ln.split(" | ")[0] for ln in ablate.markdown(two).splitlines()[2:]] == ["| H200", "| H100 80GB HBM3"]


def test_the_ablations_command_prints_repeats_side_by_side_and_refuses_a_folder_without_any(tmp_path, capsys):
    from fp4moe_diag.cli import main

    runs = []
    for run, us in (("2026-12-06-nvidia-h100-b", 190.0), ("2026-12-06-nvidia-h100-a", 200.0)):
        (tmp_path / run).mkdir()
        rows = _rows({"tactic": us, "nodeq": 160.0, "load": 110.0, "seq": 88.0}) + _rows(
            {"tactic": 40.0, "nodeq": 38.0, "load": 30.0, "seq": 30.0}, case=("gpt-oss-20b", 1, 1))
        pd.DataFrame(rows).to_csv(tmp_path / run / "ablate-x.csv")
        runs.append(str(tmp_path / run))
    assert main(["ablations", *runs, "--csv", str(tmp_path / "t.csv")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].endswith("| ~seq / ~load | run |") and len(lines) == 6
    # sorted by shape, then run: T=1 of both runs, then T=64 of both (the repeats of one case together)
    assert [ln.split(" | ")[2] for ln in lines[2:]] == ["1", "1", "64", "64"]
    assert lines[4].startswith("| gpt-oss-20b | 1 | 64 | `m16n128k128w4s3-ps` | 200.0 (")
    assert lines[4].endswith("| 20% | 25% | 55% | 0.80 | 2026-12-06-nvidia-h100-a |")
    assert lines[5].endswith("| 2026-12-06-nvidia-h100-b |") and "| 190.0 (" in lines[5]
    assert pd.read_csv(tmp_path / "t.csv")["tactic_us"].tolist() == [40.0, 40.0, 200.0, 190.0]
    (tmp_path / "empty").mkdir()
    assert main(["ablations", runs[0], str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"fp4moe-diag ablations: error: argument runs: {tmp_path / 'empty'} holds no ablate*.csv "
                   "(python -m fp4moe_diag.profiling.ablate)")


def test_cli_refuses_before_any_gpu_work(tmp_path, capsys):
    out = tmp_path / "a.csv"

    def refused(*extra: str) -> str:
        return refusal(ablate.main, ["--tokens", "64", "--out", str(out), *extra], capsys)

    assert "expected a -ps tactic" in refused("--tactic", "m16n64k128w4s3-x2", "--device", "cpu")
    assert "argument --tokens" in refused("--tactic", "m16n128k128w4s3-ps", "--tokens", "0")
    assert "argument --warmup" in refused("--tactic", "m16n128k128w4s3-ps", "--warmup", "-1")
    assert "argument --device: ablations are timed on a CUDA GPU" in refused("--tactic", "m16n128k128w4s3-ps",
                                                                             "--device", "cpu")
    out.write_text("kept")
    assert f"argument --out: {out} exists" in refused("--tactic", "m16n128k128w4s3-ps", "--device", "cpu")
    assert out.read_text() == "kept" and not any(p.name != "a.csv" for p in tmp_path.iterdir())


@needs_sass_tools()
@pytest.mark.parametrize("tactic", ["m16n128k128w4s3-ps", "m128n128k64w16s3-ps-gu-g2n256"])
def test_sm90_builds_take_out_what_they_say(tactic):
    """K = 3072: ``~nodeq`` keeps the wgmmas and the cp.async loads of the tactic's loop and drops the bf16x2 scale
    multiplies of the decode (and with them a fifth or more of the loop); ``~load`` keeps the weight and scale cp.async
    loads (the tactic's less the activation tile's) and has no wgmma, no upcast."""
    from fp4moe_diag.profiling.sass import count

    for gemm in ("gemm1", "gemm2"):
        full, nodeq, load, seq = (count(lab, gemm, 3072, 90) for lab in ablate.variant_labels(tactic))
        op = lambda r, o: r.opcodes.get(o, 0)  # noqa: E731
        assert op(full, "HMUL2") > 0 and op(nodeq, "HMUL2") == 0 == op(load, "HMUL2"), (gemm, full.opcodes)
        assert op(nodeq, "HGMMA") == op(full, "HGMMA") > 0 == op(load, "HGMMA")
        assert op(nodeq, "LDGSTS") == op(full, "LDGSTS")
        assert nodeq.registers <= full.registers and nodeq.loop_spills == 0  # capped: the same programs per SM
        assert 0 < op(load, "LDGSTS") < op(full, "LDGSTS") and op(load, "LDG") == 0  # pipelined, no activations
        assert nodeq.instructions_per_weight < 0.8 * full.instructions_per_weight
        assert load.instructions_per_weight < 0.5 * full.instructions_per_weight
        assert load.registers < full.registers  # hence more programs per SM: a floor, not the same schedule
        assert op(seq, "HGMMA") == 0 and 0 < op(seq, "LDGSTS") <= op(load, "LDGSTS")  # the same bytes, wider pieces


_INTERP_SCRIPT = r"""
import json, torch
from fp4moe_diag import MoECase, build_inputs
from fp4moe_diag.backends.triton.backend import TritonMXFP4Backend, kernels_interpreted

b = TritonMXFP4Backend()
out = {}
# decode-sized, EP offsets, uneven K (H = I = 320: 2.5 steps of 128); a prefill-sized -gu tile
for key, kw, labels in (
        ("decode", dict(num_tokens=8, hidden_size=320, intermediate_size=320, num_experts=8, local_num_experts=4,
                        local_expert_offset=4, top_k=2), ("m16n128k128w4s3-ps", "m16n64k256w4s3-ps-sk2")),
        ("gu", dict(num_tokens=160, hidden_size=192, intermediate_size=320, num_experts=4, top_k=2),
         ("m128n128k64w8s3-ps-gu-g2n256",))):
    case = MoECase(**kw)
    prep = b.prepare(build_inputs(case))
    for lab in labels:
        y0 = b.run(prep, b.tactic_by_label(case, lab, prep)).float()
        for v in ("nodeq", "load", "seq"):
            y = b.run(prep, b.tactic_by_label(case, f"{lab}~{v}", prep)).float()
            live = y0 != 0  # tokens routed to no local expert are zero in both
            same = torch.isfinite(y) & (y == y0)
            out[f"{key}/{lab}~{v}"] = [float(same[live].float().mean()), float(live.float().mean())]
# profiling.ablate's case loop as the GPU runs it, on the CPU (wall-clock timing; CUPTI kernel time stubbed: it needs a
# GPU): the roles, the lookups beside the offered tactic, the rows
import fp4moe_diag.measure.kernel_time as KT
from fp4moe_diag.measure.timing import summarize
from fp4moe_diag.profiling.ablate import ablate_case

KT.time_kernels = lambda fn, device, **kw: KT.KernelTimeStats(summarize([7.0], "stub"), summarize([7.0], "stub"), 3,
                                                               True, {"_moe_mxfp4_gemm1_ps_kernel": 7.0})
case = MoECase(num_tokens=8, hidden_size=320, intermediate_size=320, num_experts=4, top_k=2, model="tiny")
rows = ablate_case(case, "m16n128k128w4s3-ps", "cpu", 2, 4000.0, warmup=1)  # interpreter runs: few (CI time)
out["rows"] = [[r["variant"], r["label"], r["weight_bytes"], r["time_method"], r["time_kernel_median_us"],
                r["time_kernel_breakdown"], round(r["frac_read_ceiling"] * 4000.0 / (r["weight_TBps"] * 1e3), 9)]
               for r in rows]
"""
interp_results = interpreter_fixture(_INTERP_SCRIPT)


def test_interpreter_ablations_run_and_are_not_the_tactic(interp_results):
    assert interp_results["interpreted"]
    keys = [k for k in interp_results if "~" in k]
    assert len(keys) == 9
    for k in keys:
        same, live = interp_results[k]
        assert live > 0.5 and same < 0.01, (k, same, live)  # nearly every output element the tactic writes differs


def test_interpreter_ablate_case_rows(interp_results):
    """4 experts of 320 x 640 (gemm1) and 320 x 320 (gemm2) FP4 weights with their scales and fp32 biases, all
    routed to."""
    wb = 4 * (640 * 160 + 640 * 10 + 640 * 4 + 320 * 160 + 320 * 10 + 320 * 4)
    assert interp_results["rows"] == [
        [v, lab, wb, "wall-clock", 7.0, '{"_moe_mxfp4_gemm1_ps_kernel": 7.0}', 1.0]
        for v, lab in (("tactic", "m16n128k128w4s3-ps"), ("nodeq", "m16n128k128w4s3-ps~nodeq"),
                       ("load", "m16n128k128w4s3-ps~load"), ("seq", "m16n128k128w4s3-ps~seq"))]


def test_the_device_plans_ablate_tactics_offered_at_their_shapes(monkeypatch):
    """tools/device/plans/*.sh: each ``ablate NAME MODEL EP TOKENS SECONDS [--repeats N] TACTIC..`` line names tactics
    that the backend offers (as compiled on a GPU) at every one of its shapes, so that no device time goes to a
    refusal."""
    import re
    from pathlib import Path

    from fp4moe_diag.backends.triton import backend
    from fp4moe_diag.problem.shapes import default_case

    monkeypatch.setattr(backend, "interpret_enabled", lambda: False)
    monkeypatch.setattr(backend, "kernels_interpreted", lambda: False)
    monkeypatch.setattr(backend, "device_capability", lambda _: (9, 0))
    plans = sorted((Path(__file__).resolve().parents[1] / "tools" / "device" / "plans").glob("*.sh"))
    pattern = r"^(?:has ablate && )?ablate (\S+) (\S+) (\d+) ([\d,]+) \$\(left \d+\) (?:--repeats \d+ )?((?:[^\n\\]|\\\n)+)"
    calls = {p.name: re.findall(pattern, p.read_text(), flags=re.M) for p in plans}
    assert {k: len(v) for k, v in calls.items() if v} == {"ablate.sh": 4, "evidence.sh": 3}
    b = TritonMXFP4Backend()
    for name, model, ep, tokens, tactics in (c for v in calls.values() for c in v):
        labels = tactics.replace("\\\n", " ").split()
        assert labels and all(not lab.startswith("-") for lab in labels), name
        for t in map(int, tokens.split(",")):
            offered = {x.label for x in b.tactics(default_case(model, int(ep), t))}
            assert [lab for lab in labels if lab not in offered] == [], (name, t)
            for lab in labels:
                ablate.variant_labels(lab)
