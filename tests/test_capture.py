"""Capture: FlashInfer's own logs and dumps (written in the test by FlashInfer's decorator) -> cases, replays,
bundles and FlashInfer-Bench traces."""

import json
import runpy
import shutil
import tarfile

import pytest
import torch

pytest.importorskip("flashinfer")

from fp4moe_diag.measure.options import MeasureOptions  # noqa: E402
from fp4moe_diag.capture import layouts  # noqa: E402
from fp4moe_diag.capture.dump import read_dump  # noqa: E402
from fp4moe_diag.capture.flashinfer_log import cases_from_log, parse_flashinfer_log  # noqa: E402
from fp4moe_diag.capture.record import record  # noqa: E402
from fp4moe_diag.capture.source import detect_log_format  # noqa: E402
from fp4moe_diag.cli import main  # noqa: E402

SMALL = ["--tokens", "4", "--hidden", "256", "--experts", "8", "--top-k", "2", "--ep", "2", "--ep-rank", "1"]


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    """Logs and dumps written by FlashInfer 0.7.4's own @flashinfer_api (in subprocesses: it reads its
    environment at import)."""
    d = tmp_path_factory.mktemp("capture")
    record("routed", level=3, logdest=d / "l3.log", extra=["--model", "gpt-oss-20b", "--ep", "4", "--ep-rank", "2",
                                                           "--tokens", "4", "--no-stub"])
    record("routed", level=5, logdest=d / "l5.log", extra=SMALL)
    record("routed", level=10, logdest=d / "l10.log", dump_dir=d / "dump_routed", extra=SMALL)
    record("routed", level=10, logdest=d / "l10c.log", dump_dir=d / "dump_corrupt", extra=SMALL + ["--output", "corrupt"])
    record("cutlass", level=10, logdest=d / "l10x.log", dump_dir=d / "dump_cutlass", extra=SMALL)
    return d


def run_cli(capsys, *argv):
    rc = main(list(map(str, argv)))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_level3_log_of_the_table_shape_parses_to_its_case(ev, capsys):
    rc, out, _ = run_cli(capsys, "cases", "--from-log", ev / "l3.log", "--json")
    assert rc == 0
    (c,) = json.loads(out)
    rec = c["case"]
    assert (rec["model"], rec["num_tokens"], rec["hidden_size"], rec["intermediate_size"]) == ("gpt-oss-20b", 4, 3072, 3072)
    assert (rec["num_experts"], rec["local_num_experts"], rec["local_expert_offset"], rec["top_k"]) == (32, 8, 16, 4)
    assert (rec["ep_size"], rec["ep_rank"], rec["weight_format"], rec["activation"]) == (4, 2, "mxfp4", "swiglu_oai")
    assert c["entry_point"] == "trtllm_fp4_block_scale_routed_moe" and c["flashinfer_version"] == "0.7.4"
    text = (ev / "l3.log").read_text().splitlines()
    line = int(c["sources"]["num_experts"].split(":")[0].removeprefix("line "))
    assert text[line - 1].strip() == "num_experts=" and text[line].strip() == "32"
    assert "gpt-oss constant 1.702 is assumed" in c["sources"]["swiglu_alpha"]


def test_level5_log_gives_the_swiglu_values_from_the_statistics(ev):
    (sc,) = cases_from_log((ev / "l5.log").read_text(), "l5")
    assert sc.case.local_expert_offset == 4 and sc.case.num_experts == 8 and sc.case.swiglu_limit == 7.0
    assert sc.sources["swiglu_alpha"].endswith("every gemm1_alpha value is 1.702")
    assert parse_flashinfer_log((ev / "l5.log").read_text())[0].level == 5


def test_a_cut_log_is_refused_naming_its_line(ev, tmp_path):
    lines = (ev / "l3.log").read_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.strip() == "stride=(65536, 128, 1)" or "gemm1_weights=" in ln)
    p = tmp_path / "cut.log"
    p.write_text("\n".join(lines[: cut + 3]) + "\n")
    with pytest.raises(ValueError, match=r"line \d+: .*not closed"):
        cases_from_log(p.read_text(), "cut")
    with pytest.raises(ValueError, match="FlashInfer API log.*vLLM kwargs log"):
        detect_log_format("hello\nworld\n", "x")


def test_dump_replays_through_the_reference_with_correct_rows(ev, tmp_path, capsys):
    rc, out, err = run_cli(capsys, "sweep", "--from-dump", ev / "dump_routed", "--backends", "reference", "--device",
                           "cpu", "--warmup", "0", "--repeats", "1", "--no-ceilings", "--no-progress", "--out",
                           tmp_path / "run")
    assert rc == 0, err
    from fp4moe_diag.run_folder import load_runs

    df = load_runs(tmp_path / "run", allow_empty=False)
    assert list(df["status"]) == ["ok"] and df["correct"].all()
    assert df["matches_recorded"].all() and float(df["recorded_rel_l2"].iloc[0]) == 0.0  # shuffled layout inverted
    assert df["input_source"].iloc[0].startswith("dump:")


def test_a_tactic_that_disagrees_with_the_recorded_output_says_so(ev, tmp_path):
    from fp4moe_diag.runs import SweepSpec, run_sweep

    spec = SweepSpec(models=(), backends=("reference",), device="cpu", source=f"dump:{ev / 'dump_corrupt'}",
                     options=MeasureOptions(warmup=0, repeats=1), measure_ceilings=False)
    df, _ = run_sweep(spec, tmp_path / "run", progress_bar=False, log=lambda s: None)
    assert df["correct"].all() and not df["matches_recorded"].any() and float(df["recorded_rel_l2"].iloc[0]) > 0.1


def test_cutlass_dump_case_and_sm90_inverse(ev):
    (dc,) = read_dump(ev / "dump_cutlass")
    assert dc.function == "cutlass_fused_moe"
    assert (dc.case.num_experts, dc.case.local_num_experts, dc.case.local_expert_offset) == (8, 4, 4)
    from fp4moe_diag.capture.replay import inputs_from_dump
    from fp4moe_diag.problem.reference import reference_moe

    inp = inputs_from_dump(dc)
    ref = reference_moe(inp, torch.float32).to(torch.bfloat16)
    assert torch.equal(ref, inp.recorded_output)


def test_damaged_dumps_are_refused_naming_the_tensor(ev, tmp_path):
    src = next(p for p in (ev / "dump_routed").iterdir() if "routed_moe_call" in p.name)
    bad = tmp_path / src.name
    shutil.copytree(src, bad)
    t = torch.load(bad / "inputs.pt", weights_only=True)
    t["kwarg_gemm1_weights"] = t["kwarg_gemm1_weights"][:, :8]
    torch.save(t, bad / "inputs.pt")
    with pytest.raises(ValueError, match=r"inputs\[kwarg_gemm1_weights\].*metadata.jsonl says"):
        read_dump(bad)
    del t["kwarg_gemm1_weights"]
    torch.save(t, bad / "inputs.pt")
    with pytest.raises(ValueError, match=r"inputs\[kwarg_gemm1_weights\]: listed in metadata.jsonl but not"):
        read_dump(bad)
    (bad / "inputs.pt").unlink()
    with pytest.raises(ValueError, match="inputs.pt / inputs.safetensors missing"):
        read_dump(bad)


def test_layouts_round_trip():
    from flashinfer.fused_moe.prepare import interleave_moe_scales_for_sm90_mixed_gemm as fold

    g = torch.Generator().manual_seed(0)
    w = torch.randint(0, 256, (2, 256, 128), dtype=torch.uint8, generator=g)
    s = torch.randint(0, 256, (2, 256, 8), dtype=torch.uint8, generator=g)
    iw = layouts.sm90_interleave_weights(w)
    assert not torch.equal(iw, w) and torch.equal(layouts.sm90_deinterleave_weights(iw), w)
    assert torch.equal(layouts.sm90_unfold_scales(fold(s).view(torch.int32), 256, 256), s)
    w13 = torch.randint(0, 256, (2, 256, 128), dtype=torch.uint8, generator=g)
    s13 = torch.randint(0, 256, (2, 256, 8), dtype=torch.uint8, generator=g)
    b = torch.randn(2, 256, generator=g)
    out = layouts.trtllm_unshuffle(*layouts.trtllm_shuffle(w13, s13, w, s, b))
    assert all(torch.equal(x, y) for x, y in zip(out, (w13, s13, w, s, b)))
    # the 128x4 swizzle is FlashInfer's own (its Python inverse in the trace templates agrees)
    from flashinfer.trace.templates.gemm import _unswizzle_sf_128x4

    sf = torch.randint(0, 256, (256, 8), dtype=torch.uint8, generator=g)
    assert torch.equal(_unswizzle_sf_128x4(layouts.swizzle_128x4(sf), 256, 8), sf)
    assert torch.equal(layouts.unswizzle_128x4(layouts.swizzle_128x4(sf), 256, 8), sf)


def test_bundle_script_reproduces_the_stated_verdict_over_the_stub(ev, tmp_path, capsys):
    rc, _, err = run_cli(capsys, "bundle", "--from-dump", ev / "dump_routed", "--out", tmp_path / "bug.tar.gz")
    assert rc == 0, err
    with tarfile.open(tmp_path / "bug.tar.gz") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    b = tmp_path / "x" / "bundle"
    stated = json.loads((b / "verdict.json").read_text())["status"]
    assert stated in ("reproduced", "fixed-upstream")
    assert (b / "dump" / "inputs.pt").is_file() and "fp4moe_diag" not in (b / "repro.py").read_text()
    from fp4moe_diag.backends.flashinfer.stubs import stub_trtllm_gen_module

    ns = runpy.run_path(str(b / "repro.py"), run_name="repro")
    with stub_trtllm_gen_module():
        assert ns["main"]("cpu") == stated


def test_export_fib_loads_in_flashinfer_bench(ev, tmp_path, capsys):
    from flashinfer_bench.data import TraceSet

    from fp4moe_diag.runs import SweepSpec, run_sweep

    spec = SweepSpec(models=(), backends=("reference",), device="cpu", source=f"dump:{ev / 'dump_routed'}",
                     options=MeasureOptions(warmup=0, repeats=2), measure_ceilings=False)
    run_sweep(spec, tmp_path / "run", progress_bar=False, log=lambda s: None)
    rc, out, err = run_cli(capsys, "export-fib", tmp_path / "run", "--out", tmp_path / "fib")
    assert rc == 0, err
    ts = TraceSet.from_path(str(tmp_path / "fib"))
    (name,) = ts.definitions
    assert name == "fp4moe_mxfp4_swiglu_oai_e8_k2_h256_i256_ep2r1"
    (t,) = ts.traces[name]
    assert t.evaluation.status.value == "PASSED" and t.solution == "fp4moe-diag_reference_torch_fp32"
    assert t.workload.axes == {"num_tokens": 4} and len(ts.workloads[name]) == 1


SAMPLE = "data/samples/flashinfer-0.7.4-l3-routed-gpt-oss-20b-ep2r1-T16.log"


def test_committed_sample_log_and_notebook_01_table():
    from fp4moe_diag.paths import repo_path
    from fp4moe_diag.report.nb01 import evidence_case

    case, note, table = evidence_case(SAMPLE)
    assert case.label == "gpt-oss-20b/ep2r1/T16/H3072/I3072/E32/k4/mxfp4" and "FlashInfer 0.7.4" in note
    assert list(table["field"])[:3] == ["num_tokens", "hidden_size", "intermediate_size"]
    assert table.set_index("field").loc["local_expert_offset", "from"].endswith("local_expert_offset=16")
    calls = parse_flashinfer_log(repo_path(SAMPLE).read_text())
    assert {c.function for c in calls} == {"shuffle_matrix_a", "trtllm_fp4_block_scale_routed_moe"}  # others skipped


def test_vllm_log_is_detected_and_flashinfer_log_feeds_reproduce(ev, tmp_path, capsys):
    vllm = tmp_path / "vllm.log"
    vllm.write_text("(EngineCore_DP0 pid=7) hidden_states : torch.bfloat16 torch.Size([4, 256]) (256, 1) cuda:0\n"
                    "(EngineCore_DP0 pid=7) num_experts : 8\n(EngineCore_DP0 pid=7) top_k : 2\n"
                    "(EngineCore_DP0 pid=7) intermediate_size : 256\n")
    assert detect_log_format(vllm.read_text()) == "vllm"
    assert detect_log_format((ev / "l5.log").read_text()) == "flashinfer"
    rc, out, _ = run_cli(capsys, "cases", "--from-log", vllm, "--json")
    assert rc == 0 and json.loads(out)[0]["case"]["num_experts"] == 8
    rc, out, err = run_cli(capsys, "reproduce", "--flashinfer-log", ev / "l5.log", "--static")
    assert rc == 0, err
    assert "on cpu (stub)" in out and ("fixed-upstream" in out or "reproduced" in out)


def test_bad_sources_are_one_line_errors(ev, tmp_path, capsys):
    from fp4moe_diag.runs import SweepSpec

    with pytest.raises(ValueError, match="tokens, ep_sizes, max_tokens and hidden_scale do not apply"):
        SweepSpec(models=(), source=f"dump:{ev / 'dump_routed'}", tokens=(4,))
    rc, _, err = run_cli(capsys, "cases", "--from-dump", tmp_path)
    assert rc == 2 and err.count("\n") == 1 and "holds no call folders" in err
    rc, _, err = run_cli(capsys, "cases", "--from-log", ev / "l5.log", "--call", "3")
    assert rc == 2 and "call: expected 1..1" in err


def test_a_vllm_prefixed_log_of_two_processes_lists_both_and_picks_one(ev, tmp_path):
    text = "".join(f"(EngineCore_DP0 pid=11) {ln}\n" for ln in (ev / "l5.log").read_text().splitlines())
    text += "".join(f"(EngineCore_DP1 pid=12) {ln}\n" for ln in (ev / "l10x.log").read_text().splitlines())
    both = cases_from_log(text, "mixed")
    assert [c.entry_point for c in both] == ["trtllm_fp4_block_scale_routed_moe", "cutlass_fused_moe"]
    assert [c.processes for c in both] == [("EngineCore_DP0 pid=11",), ("EngineCore_DP1 pid=12",)]
    assert both[1].calls == ("call 2: cutlass_fused_moe at line %d (EngineCore_DP1 pid=12)"
                             % int(both[1].calls[0].split(" at line ")[1].split()[0]),)
    (one,) = cases_from_log(text, "mixed", process="EngineCore_DP1")
    assert one.case == both[1].case and one.case.num_experts == 8 and one.case.local_expert_offset == 4
    (first,) = cases_from_log(text, "mixed", call=1)
    assert first.entry_point == "trtllm_fp4_block_scale_routed_moe"


def test_level1_logs_and_the_unified_api_are_refused(tmp_path):
    from fp4moe_diag.capture.derive import case_from_args

    record("routed", level=1, logdest=tmp_path / "l1.log", extra=SMALL + ["--no-stub"])
    with pytest.raises(ValueError, match=r"line \d+: the record of trtllm_fp4_block_scale_routed_moe has no "
                                         r"arguments: a level-1 log"):
        cases_from_log((tmp_path / "l1.log").read_text(), "l1")
    with pytest.raises(ValueError, match="MoELayer.__call__: the unified MoE API logs its packs as a repr"):
        case_from_args("MoELayer.__call__", {})


def test_level3_logs_of_every_mxfp4_table_shape_parse_to_their_cases(tmp_path):
    from fp4moe_diag.capture.record import table_cases

    record("routed", level=3, logdest=tmp_path / "all.log", extra=["--meta", "--model", "all-mxfp4", "--tokens", "64"])
    got = cases_from_log((tmp_path / "all.log").read_text(), "all")
    want = table_cases(64)
    assert len(want) == 8 and [sc.case for sc in got] == want  # gpt-oss-20b/120b x EP 1, 2, 4, 8, last rank
    assert [sc.calls[0].split(":")[0] for sc in got] == [f"call {i}" for i in range(1, 9)]


def test_bundle_from_a_case_builds_its_tensors_from_the_seed(tmp_path, capsys):
    case = {"num_tokens": 4, "hidden_size": 256, "intermediate_size": 256, "num_experts": 8, "top_k": 2,
            "local_num_experts": 4, "local_expert_offset": 4, "seed": 3}
    rc, _, err = run_cli(capsys, "bundle", "--case", json.dumps(case), "--out", tmp_path / "b.tar.gz")
    assert rc == 0, err
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "x", filter="data")
    assert "bundle/dump/inputs.pt" not in names and "bundle/environment.json" in names
    b = tmp_path / "x" / "bundle"
    stated = json.loads((b / "verdict.json").read_text())["status"]
    assert json.loads((b / "case.json").read_text())["case"]["seed"] == 3
    from fp4moe_diag.backends.flashinfer.stubs import stub_trtllm_gen_module

    ns = runpy.run_path(str(b / "repro.py"), run_name="repro")
    assert ns["DUMP"] is None and ns["SEED"] == 3
    with stub_trtllm_gen_module():
        assert ns["main"]("cpu") == stated
