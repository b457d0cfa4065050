"""The notebooks' helpers (fp4moe_diag.report) and the headless notebook run."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fp4moe_diag.report import nb01, nb05, runner  # noqa: E402
from fp4moe_diag import analysis as A  # noqa: E402
from frames import FI  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_seed_case_from_the_report_text(tmp_path):
    lines = [
        "ERROR 11-01 12:49:12 [core.py:800] RuntimeError: Cannot pack tensors on meta",
        "prose that is not a kwarg line",
        "(EngineCore_DP0 pid=1) topk_ids : torch.int32 torch.Size([16384, 4]) (4, 1) cuda:0",
        "(EngineCore_DP0 pid=1) hidden_states : torch.bfloat16 torch.Size([16384, 3072]) (3072, 1) cuda:0",
        "(EngineCore_DP0 pid=1) gemm1_weights : torch.uint8 torch.Size([16, 6144, 1536]) (9437184, 1536, 1) cuda:0",
        "(EngineCore_DP0 pid=1) gemm2_weights : torch.uint8 torch.Size([16, 3072, 1536]) (4718592, 1536, 1) cuda:0",
        "(EngineCore_DP0 pid=1) num_experts : 32",
        "(EngineCore_DP0 pid=1) top_k : 4",
        "(EngineCore_DP0 pid=1) intermediate_size : 3072",
        "(EngineCore_DP0 pid=1) local_expert_offset : 0",
        "(EngineCore_DP0 pid=1) local_num_experts : 16",
        "(EngineCore_DP0 pid=1) routing_method_type : 1",
    ]
    assert nb01.extract_kwargs_log("\n".join(lines)).count("\n") == 9
    f = tmp_path / "seed.txt"
    f.write_text("\n".join(lines))
    try:
        case, note = nb01.seed_case(f)
    except ValueError as e:  # the parser may want more of the log; then the real seed must parse
        pytest.skip(f"minimal log not enough for the parser: {e}")
    assert case.num_experts == 32 and case.local_num_experts == 16 and str(f) in note
    small = nb01.scaled_case(case.with_tokens(16), 24)
    assert (small.hidden_size, small.intermediate_size, small.num_tokens) == (128, 128, 16)
    with pytest.raises(ValueError, match="kwarg"):
        nb01.extract_kwargs_log("no log here")
    missing, note = nb01.seed_case(tmp_path / "absent.txt")
    assert "SEED_CASE" in note


def test_tuner_input_table_highlights_meta():
    from fp4moe_diag.bugrepro import BugVerdict
    from fp4moe_diag.backends.flashinfer.hooks import InputInfo

    ins = [InputInfo(0, "output", "tensor", "cpu", "bfloat16", (16, 128)),
           InputInfo(1, "routing_logits", "tensor", "meta", "bfloat16", (16, 32))]
    v = BugVerdict("reproduced", "RuntimeError: Cannot pack tensors on meta", "stub", FI, "cpu",
                   tuner_inputs=ins, meta_inputs=[ins[1]])
    t = nb01.tuner_input_table(v)
    assert t["is_meta"].tolist() == [False, True]
    html = nb01.style_meta_rows(t).to_html()
    assert html.count("background-color: #f8d0d0") >= 1
    assert "routing_logits[16, 32]" in nb01.verdict_table(v).set_index("field").loc["meta tuner inputs", "value"]


def test_committed_verdicts_and_fmt(tmp_path):
    import json

    run = tmp_path / "2026-12-02-nvidia-h200"
    run.mkdir()
    (run / "verdict_h200.json").write_text(json.dumps({
        "status": "not-applicable", "reason": "needs SM100", "mode": "kernel", "flashinfer_version": FI,
        "device": "NVIDIA H200 (SM90)", "meta_inputs": [{"name": "routing_logits", "shape": [16, 16]}]}))
    v = nb01.committed_verdicts(tmp_path)
    assert v.loc[0, "meta tuner inputs"] == "routing_logits[16, 16]" and v.loc[0, "run"] == run.name
    assert nb01.committed_verdicts(tmp_path / "none").empty
    html = nb01.fmt(pd.DataFrame({"sig": ["x" * 200], "v": [1.234567]}), max_chars=20).to_html()
    assert "x" * 19 + "…" in html and "x" * 21 not in html and "1.2346" in html


def test_list_notebooks_in_order():
    names = [p.name for p in runner.list_notebooks()]
    assert names == sorted(names) and [n[:2] for n in names] == ["01", "02", "03", "04", "05"]
    assert [p.name[:2] for p in runner.list_notebooks(["05", "01"])] == ["01", "05"]
    with pytest.raises(ValueError, match="only"):
        runner.list_notebooks(["99"])


def test_notebooks_have_tagged_parameters():
    import nbformat

    for nb_path in runner.list_notebooks():
        nb = nbformat.read(str(nb_path), as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, nb_path.name
        src = cells[0].source
        for name in ("backend", "shapes_file", "device", "out_dir", "quick"):
            assert f"\n{name} = " in "\n" + src, (nb_path.name, name)
        assert nb.cells[0].cell_type == "markdown"
        ids = [c.get("id") for c in nb.cells]  # nbformat 4.5: every cell has an id (a missing one is a warning today)
        assert all(ids) and len(set(ids)) == len(ids), (nb_path.name, ids)


def test_notebook_02_reads_committed_runs_on_a_gpu_unless_asked(tmp_path, monkeypatch):
    import nbformat

    from fp4moe_diag.report import context as C
    from fp4moe_diag.run_folder import save_run
    from frames import synthetic_frame

    nb = nbformat.read(str(REPO / "notebooks" / "02_tactic_sweep.ipynb"), as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])][0].source
    assert "\nfresh_sweep = False\n" in "\n" + params + "\n"
    assert "R.load_report_data(ctx, fresh=fresh_sweep)" in "".join(c.source for c in nb.cells)
    save_run(synthetic_frame(), tmp_path / "runs" / "2026-12-01-nvidia-h200")
    gpu = C.ReportContext(None, REPO / "data" / "vllm_shapes.csv", "cuda", tmp_path / "out", quick=False)
    swept = []
    monkeypatch.setattr(C, "local_run", lambda ctx: swept.append(ctx) or synthetic_frame().assign(run_id="fresh"))
    df, note = C.load_report_data(gpu, runs_root=tmp_path / "runs")
    assert swept == [] and len(df) == len(synthetic_frame()) and "1 committed run(s)" in note
    df, note = C.load_report_data(gpu, runs_root=tmp_path / "runs", fresh=True)
    assert swept == [gpu] and sorted(df["run_id"].unique()) == ["2026-12-01-nvidia-h200", "fresh"]
    with pytest.raises(ValueError, match="fresh: expected True"):
        C.load_report_data(gpu, runs_root=tmp_path / "runs", fresh=None)


def test_notebook_05_provenance_table_is_under_its_heading():
    import nbformat

    cells = nbformat.read(str(REPO / "notebooks" / "05_report.ipynb"), as_version=4).cells
    (i,) = [k for k, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Provenance")]
    assert cells[i + 1].cell_type == "code" and "tables['provenance']" in cells[i + 1].source
    assert all("provenance" not in c.source for c in cells[i + 2:] if c.cell_type == "code")


def test_figures_on_committed_runs(tmp_path):
    """Every report figure over whatever is committed under data/runs (skipped while it is empty)."""
    from fp4moe_diag.run_folder import load_runs

    committed = load_runs()
    if committed.empty:
        pytest.skip("no committed runs under data/runs")
    figs = nb05.build_report_figures(committed, tmp_path, max_shape_figures=2, show=False)
    made = [f for f in figs if "paths" in f]
    assert made, [f.get("skipped") for f in figs]
    for f in made:
        assert f["paths"]["png"].stat().st_size > 10_000
    assert A.summary_tables(committed)["provenance"]["gpu_name"].str.len().gt(0).all()


# --------------------------------------------------------------------------- every notebook, headless
@pytest.mark.slow
def test_all_notebooks_execute_in_quick_mode(tmp_path):
    out = runner.run_notebooks(tmp_path, quick=True, html=True)
    names = {p.name for p in out}
    for nb in runner.list_notebooks():
        assert nb.name in names and nb.with_suffix(".html").name in names
        assert runner.notebook_errors(tmp_path / nb.name) == [], nb.name
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert report.count("<img") >= 3
    assert "data:image/png;base64" in report
    pngs = sorted((tmp_path / "figures").glob("*.png"))
    assert pngs and all(p.with_suffix(".svg").exists() for p in pngs)


def test_show_figure_saves_png_and_svg(tmp_path):
    from fp4moe_diag import plotting as P
    from fp4moe_diag.report.display import show_figure
    from frames import synthetic_frame

    paths = show_figure(P.backend_comparison(synthetic_frame()), save_as=tmp_path / "cmp")  # imported ..plotting
    assert paths["png"].read_bytes()[:4] == b"\x89PNG" and paths["svg"].name == "cmp.svg"
