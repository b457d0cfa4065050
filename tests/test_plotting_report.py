"""Figures (fp4moe_diag.plotting), report helpers (fp4moe_diag.report) and the notebooks end to end."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from fp4moe_diag import plotting as P  # noqa: E402
from fp4moe_diag import report as R  # noqa: E402
from fp4moe_diag.measure.correctness import REL_L2_TOL  # noqa: E402
from fp4moe_diag.results import to_frame  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GPU = "NVIDIA H200"
FI = "0.5.2"
TOKENS = [1, 8, 64, 512]
CUTLASS = ["default(-1,-1)", "g1:0", "g1:1", "g2:0"]


# --------------------------------------------------------------------------- synthetic frame
def _row(backend, label, i, tokens, ep, status="ok", t_us=None, rel=1e-3, is_default=False, is_best=False):
    r = dict(run_id="2026-12-01-nvidia-h200", gpu_name=GPU, compute_capability="9.0", driver_version="580.1",
             torch_version="2.11", cuda_version="13.0", flashinfer_version=FI, triton_version="3.6",
             git_commit="abc", time_method="cuda-events", model="gpt-oss-20b", num_tokens=tokens,
             hidden_size=3072, intermediate_size=3072, num_experts=32, local_num_experts=32 // ep,
             local_expert_offset=0, ep_size=ep, ep_rank=0, top_k=4, routing_method="Renormalize",
             weight_format="mxfp4", activation_format="bf16", activation="swiglu_oai", has_bias=True, seed=0,
             backend=backend, tactic=str(i), tactic_label=label, is_default_tactic=is_default, is_best=is_best,
             status=status, ceiling_copy_GBps=4300.0)
    if status in ("ok", "incorrect"):
        r.update(time_median_us=t_us, time_p10_us=t_us * 0.95, time_p90_us=t_us * 1.1, rel_l2=rel, cosine=0.9999,
                 correct=status == "ok", frac_tokens_over_tol=0.0 if status == "ok" else 0.5, worst_token=0,
                 nan_count=0, inf_count=0, unwritten_rows=0, frac_bw_roofline=0.3 + 0.1 * i / (1 + math.log2(tokens)),
                 achieved_GBps=1000.0)
    else:
        r.update(stage="run", error_type="RuntimeError", error_message="CUDA error: an illegal memory access")
    return r


def synthetic_frame() -> pd.DataFrame:
    rows = []
    for ep in (1, 2):
        for t in TOKENS:
            base = 20 + 0.05 * t
            times = {}
            for i, lab in enumerate(CUTLASS):
                status = "failed" if (lab == "g2:0" and t == 512) else ("incorrect" if (lab == "g1:1" and t == 8) else "ok")
                tm = base * (1.6 if i == 0 else 1 + 0.2 * i) * (1 if ep == 1 else 0.7)
                rows.append(_row("cutlass", lab, i, t, ep, status, tm, rel=5e-3 if status == "ok" else 0.3,
                                 is_default=i == 0))
                if status == "ok":
                    times[len(rows) - 1] = tm
            rows[min(times, key=times.get)]["is_best"] = True
            rows.append(_row("reference", "torch fp32", 0, t, ep, "ok", base * 5, rel=1e-3, is_default=True,
                             is_best=True))
    return to_frame(rows)


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return synthetic_frame()


def _lines(ax):
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") or len(ln.get_xdata()) > 0]


def _title(fig: Figure) -> str:
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


# --------------------------------------------------------------------------- figures
def test_tactic_heatmap(df):
    fig = P.tactic_heatmap(df, "cutlass", "gpt-oss-20b", 2)
    ax = fig.axes[0]
    img = ax.get_images()[0]
    assert img.get_array().shape == (len(TOKENS), len(CUTLASS))
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == len(CUTLASS) and labels[0].startswith("default(-1,-1)")  # default column first
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "8", "64", "512"]
    assert "tokens" in ax.get_ylabel()
    assert "×" in fig.axes[1].get_ylabel()  # colour bar: ratio to the best
    arr = np.ma.filled(img.get_array(), np.nan)
    assert np.nanmin(arr, axis=1) == pytest.approx([1.0] * len(TOKENS))
    assert np.isnan(arr[TOKENS.index(512), labels.index("g2:0")])  # the failed cell is grey (masked)
    assert GPU in _title(fig) and f"flashinfer {FI}" in _title(fig)


def test_time_vs_tokens(df):
    fig = P.time_vs_tokens(df, "cutlass", "gpt-oss-20b", 1)
    ax = fig.axes[0]
    assert len(ax.get_lines()) == len(CUTLASS) + 1  # one per tactic + the best-per-T envelope
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "cutlass: best tactic per T"
    assert "cutlass: default(-1,-1)" in legend
    assert all(lab.startswith("cutlass: ") for lab in legend)
    assert "µs" in ax.get_ylabel() and "tokens" in ax.get_xlabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert GPU in _title(fig)


def per_t_default_frame() -> pd.DataFrame:
    """Triton-like: the library's default tactic depends on the token count."""
    rows = []
    labels = ["m16", "m32", "m64"]
    default_at = {1: "m16", 8: "m16", 64: "m32", 512: "m64"}
    for t in TOKENS:
        times = {lab: (10 + t * 0.01) * (1 + 0.3 * i) for i, lab in enumerate(labels)}
        for i, lab in enumerate(labels):
            rows.append(_row("triton", lab, i, t, 2, "ok", times[lab], is_default=default_at[t] == lab,
                             is_best=lab == "m16"))
    return to_frame(rows)


def test_defaults_that_change_with_tokens():
    d = per_t_default_frame()
    assert P.default_by_tokens(d) == {1: "m16", 8: "m16", 64: "m32", 512: "m64"}
    assert P.describe_defaults(P.default_by_tokens(d)) == "m16 (T 1–8); m32 (T 64); m64 (T 512)"
    ax = P.time_vs_tokens(d).axes[0]
    assert len(ax.get_lines()) == 3 + 2  # tactics + best envelope + default-per-T envelope
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1].startswith("triton: library default per T:") and "m32 (T 64)" in legend[1]
    default_line = [ln for ln in ax.get_lines() if ln.get_label().startswith("triton: library default")][0]
    assert list(default_line.get_ydata()) == pytest.approx([10.01, 10.08, (10.64) * 1.3, (15.12) * 1.6])
    hm = P.tactic_heatmap(d, "triton", "gpt-oss-20b", 2).axes[0]
    red = [p for p in hm.patches if p.get_edgecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=1e-2)]
    assert len(red) == len(TOKENS)  # one default marker per row
    top = P.best_vs_default(d).axes[0]
    assert any("library default (per T)" in t.get_text() for t in top.get_legend().get_texts())


def test_time_vs_tokens_needs_a_choice_when_ambiguous(df):
    with pytest.raises(ValueError, match="backend"):
        P.time_vs_tokens(df)


def test_best_vs_default(df):
    fig = P.best_vs_default(df)
    assert len(fig.axes) == 4  # (times, speedup) x (cutlass, reference)
    top = fig.axes[0]
    assert top.get_title() == "backend: cutlass"
    assert len(top.get_lines()) == 4  # best + default for EP1 and EP2
    assert "µs" in top.get_ylabel()
    bottom = fig.axes[2]
    assert "×" in bottom.get_ylabel() and "tokens" in bottom.get_xlabel()
    speed = [ln for ln in bottom.get_lines() if ln.get_label().startswith("gpt-oss")]
    assert len(speed) == 2 and all(np.all(np.asarray(ln.get_ydata()) >= 1.0) for ln in speed)
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert any("library default = default(-1,-1)" in lab for lab in labels)


def test_roofline_fraction(df):
    fig = P.roofline_fraction(df)
    ax = fig.axes[0]
    goal = [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [P.ROOFLINE_GOAL, P.ROOFLINE_GOAL]]
    assert goal, "the 60% goal line is missing"
    data = [ln for ln in ax.get_lines() if "(best tactic)" in ln.get_label()]
    assert len(data) == 4  # cutlass + reference, EP1 + EP2
    assert "%" in ax.get_ylabel() and "tokens" in ax.get_xlabel()
    assert any("decode" in t.get_text() for t in ax.get_legend().get_texts())


def test_roofline_fraction_without_ceilings_raises(df):
    no_roof = df.assign(frac_bw_roofline=np.nan)
    with pytest.raises(ValueError, match="frac_bw_roofline"):
        P.roofline_fraction(no_roof)


def test_error_boxplot(df):
    fig = P.error_boxplot(df)
    ax = fig.axes[0]
    assert len(ax.get_xticklabels()) == len(CUTLASS) + 1
    assert {t.get_text() for t in ax.get_xticklabels()} == {f"cutlass: {c}" for c in CUTLASS} | {"reference: torch fp32"}
    tol = [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [REL_L2_TOL, REL_L2_TOL]]
    assert tol
    assert ax.get_yscale() == "log" and "ratio" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "backend: cutlass" in legend and "backend: reference" in legend


def test_backend_comparison(df):
    fig = P.backend_comparison(df)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2  # gpt-oss-20b EP1, EP2
    for ax in panels:
        assert [ln.get_label() for ln in ax.get_lines()] == ["cutlass (best tactic)", "reference (best tactic)"]
        assert "µs" in ax.get_ylabel() and "tokens" in ax.get_xlabel()


def test_token_error_plot():
    tok = pd.DataFrame({"token": range(8), "rel_err": [1e-3] * 7 + [0.2], "backend": "x", "tactic_label": "t"})
    fig = P.token_error_plot(tok)
    ax = fig.axes[0]
    over = [ln for ln in ax.get_lines() if ln.get_label() == "token over tolerance"][0]
    assert list(over.get_xdata()) == [7]
    assert "ratio" in ax.get_ylabel() and "token" in ax.get_xlabel()


@pytest.mark.parametrize("fn", [
    lambda d: P.tactic_heatmap(d, "cutlass", "gpt-oss-20b", 2),
    lambda d: P.time_vs_tokens(d, "cutlass", "gpt-oss-20b", 2),
    P.best_vs_default, P.roofline_fraction, P.error_boxplot, P.backend_comparison,
])
def test_empty_or_unusable_frames_raise(fn, df):
    with pytest.raises(ValueError, match="df"):
        fn(to_frame([]))
    failed_only = df.assign(status="failed", time_median_us=np.nan, rel_l2=np.nan, frac_bw_roofline=np.nan)
    with pytest.raises(ValueError):
        fn(failed_only)
    with pytest.raises(ValueError):
        fn(None)


def test_heatmap_unknown_shape_names_what_exists(df):
    with pytest.raises(ValueError, match="gpt-oss-20b"):
        P.tactic_heatmap(df, "trtllm", "gpt-oss-20b", 2)


def test_save_figure_writes_png_and_svg(df, tmp_path):
    paths = P.save_figure(P.backend_comparison(df), tmp_path / "sub" / "cmp")
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths["svg"].read_text()[:2000]
    with pytest.raises(ValueError, match="fig"):
        P.save_figure("not a figure", tmp_path / "x")


def test_best_per_shape(df):
    best = P.best_per_shape(df)
    assert len(best) == 2 * 2 * len(TOKENS)  # backend x EP x T
    c = best[(best["backend"] == "cutlass") & (best["ep_size"] == 1) & (best["num_tokens"] == 8)].iloc[0]
    assert c["default_tactic"] == "default(-1,-1)" and c["best_tactic"] == "g1:0"
    assert c["speedup"] == pytest.approx(1.6 / 1.2)
    assert P.provenance(df) == f"{GPU} · flashinfer {FI}"


# --------------------------------------------------------------------------- report helpers
def test_summary_tables(df):
    t = R.summary_tables(df)
    assert set(t) >= {"best_per_shape", "backend_summary", "status_counts", "failures", "correctness", "provenance"}
    assert len(t["best_per_shape"]) == 16
    bs = t["backend_summary"].set_index("backend")
    assert bs.loc["cutlass", "fastest_backend_on_shapes"] == 8
    assert bs.loc["reference", "median_speedup_vs_default"] == pytest.approx(1.0)
    dec_best, dec_med = bs["best_roofline_decode(T<=64)"], bs["median_roofline_decode(T<=64)"]
    assert (dec_best >= dec_med).all() and dec_best.notna().all()
    assert t["failures"]["rows"].sum() == 2 and t["failures"]["tactic_label"].eq("g2:0").all()
    assert t["provenance"].loc[0, "gpu_name"] == GPU and t["provenance"].loc[0, "flashinfer_version"] == FI
    with pytest.raises(ValueError):
        R.summary_tables(to_frame([]))


def test_correctness_tables(df):
    table = R.correctness_table(df)
    assert set(table["verdict"]) == {"PASS", "FAIL", "no output (failed)"}
    assert (table["verdict"] == "FAIL").sum() == 2  # g1:1 at T=8, EP1 and EP2
    summary = R.correctness_summary(df).set_index(["backend", "tactic_label"])
    assert summary.loc[("cutlass", "g1:1"), "failed"] == 2
    assert "background-color" in R.style_pass_fail(table).to_html()
    assert R.worst_tokens(df, 3)["frac_tokens_over_tol"].iloc[0] == 0.5
    assert R.worst_measurement(df)["tactic_label"] == "g1:1"


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
    assert R.extract_kwargs_log("\n".join(lines)).count("\n") == 9
    f = tmp_path / "seed.txt"
    f.write_text("\n".join(lines))
    try:
        case, note = R.seed_case(f)
    except ValueError as e:  # the parser may want more of the log; then the real seed must parse
        pytest.skip(f"minimal log not enough for the parser: {e}")
    assert case.num_experts == 32 and case.local_num_experts == 16 and str(f) in note
    small = R.scaled_case(case.with_tokens(16), 24)
    assert (small.hidden_size, small.intermediate_size, small.num_tokens) == (128, 128, 16)
    with pytest.raises(ValueError, match="kwarg"):
        R.extract_kwargs_log("no log here")
    missing, note = R.seed_case(tmp_path / "absent.txt")
    assert "SEED_CASE" in note


def test_tuner_input_table_highlights_meta():
    from fp4moe_diag.bugrepro import BugVerdict
    from fp4moe_diag.backends.flashinfer.hooks import InputInfo

    ins = [InputInfo(0, "output", "tensor", "cpu", "bfloat16", (16, 128)),
           InputInfo(1, "routing_logits", "tensor", "meta", "bfloat16", (16, 32))]
    v = BugVerdict("reproduced", "RuntimeError: Cannot pack tensors on meta", "stub", FI, "cpu",
                   tuner_inputs=ins, meta_inputs=[ins[1]])
    t = R.tuner_input_table(v)
    assert t["is_meta"].tolist() == [False, True]
    html = R.style_meta_rows(t).to_html()
    assert html.count("background-color: #f8d0d0") >= 1
    assert "routing_logits[16, 32]" in R.verdict_table(v).set_index("field").loc["meta tuner inputs", "value"]


def test_committed_verdicts_and_fmt(tmp_path):
    import json

    run = tmp_path / "2026-12-02-nvidia-h200"
    run.mkdir()
    (run / "verdict_h200.json").write_text(json.dumps({
        "status": "not-applicable", "reason": "needs SM100", "mode": "kernel", "flashinfer_version": FI,
        "device": "NVIDIA H200 (SM90)", "meta_inputs": [{"name": "routing_logits", "shape": [16, 16]}]}))
    v = R.committed_verdicts(tmp_path)
    assert v.loc[0, "meta tuner inputs"] == "routing_logits[16, 16]" and v.loc[0, "run"] == run.name
    assert R.committed_verdicts(tmp_path / "none").empty
    html = R.fmt(pd.DataFrame({"sig": ["x" * 200], "v": [1.234567]}), max_chars=20).to_html()
    assert "x" * 19 + "…" in html and "x" * 21 not in html and "1.2346" in html


def test_kernels_table_groups_launches_per_annotation():
    raw = pd.DataFrame({
        "annotation": ["best: g1:0"] * 6 + ["default: default(-1,-1)"] * 4,
        "kernel": ["route", "gemm1", "gemm2"] * 2 + ["route", "gemm"] * 2,
        "gpu__time_duration.sum": [1000, 5000, 3000, 1200, 5200, 3200, 1000, 9000, 1000, 11000],
        "gpu__time_duration.sum.unit": ["nsecond"] * 10,
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": [10, 80, 70, 10, 82, 72, 10, 50, 10, 52],
        "dram__bytes_read.sum": [1, 10, 6, 1, 10.8, 6, 1, 9, 1, 11],
        "dram__bytes_read.sum.unit": ["Mbyte"] * 10,
    })
    k = R.kernels_table(raw)
    g1 = k[(k["role"] == "best") & (k["kernel"] == "gemm1")].iloc[0]
    assert g1["dram_read_bytes"] == pytest.approx(10.4e6) and g1["dram_read_GBps"] == pytest.approx((10e6 / 5e3 + 10.8e6 / 5.2e3) / 2)  # mean of per-launch rates
    assert len(k) == 5 and k["runs"].tolist() == [2] * 5
    g1 = k[(k["role"] == "best") & (k["kernel"] == "gemm1")].iloc[0]
    assert g1["duration_us"] == pytest.approx(5.1) and g1["dram_throughput_pct"] == pytest.approx(81)
    assert k["tactic_label"].tolist()[-1] == "default(-1,-1)"
    tune_rows = pd.DataFrame({"tactic_label": ["g1:0", "default(-1,-1)"], "time_median_us": [9.5, 11.0],
                              "time_p10_us": [9.0, 10.5], "time_p90_us": [10.0, 11.5], "frac_bw_roofline": [0.6, 0.5]})
    s = R.profile_vs_events(k, tune_rows).set_index("role")
    assert s.loc["best", "ncu_sum_us"] == pytest.approx(9.3) and s.loc["best", "event_median_us"] == 9.5


def test_nsight_status_on_cpu_is_a_clear_no():
    ok, why = R.nsight_status("cpu")
    assert not ok and "GPU" in why


def test_list_notebooks_in_order():
    names = [p.name for p in R.list_notebooks()]
    assert names == sorted(names) and [n[:2] for n in names] == ["01", "02", "03", "04", "05"]
    assert [p.name[:2] for p in R.list_notebooks(["05", "01"])] == ["01", "05"]
    with pytest.raises(ValueError, match="only"):
        R.list_notebooks(["99"])


def test_notebooks_have_tagged_parameters():
    import nbformat

    for nb_path in R.list_notebooks():
        nb = nbformat.read(str(nb_path), as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, nb_path.name
        src = cells[0].source
        for name in ("backend", "shapes_file", "device", "out_dir", "quick"):
            assert f"\n{name} = " in "\n" + src, (nb_path.name, name)
        assert nb.cells[0].cell_type == "markdown"


# --------------------------------------------------------------------------- a real (CPU) run
@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> pd.DataFrame:
    """A small CPU reference sweep through the CLI, like the one the notebooks fall back to."""
    out = tmp_path_factory.mktemp("cpu_run")
    cp = subprocess.run([sys.executable, "-m", "fp4moe_diag", "sweep", "--backends", "reference", "--models",
                         "gpt-oss-20b", "--ep", "2", "--tokens", "1,4", "--hidden-scale", "24", "--repeats", "2",
                         "--warmup", "1", "--out", str(out), "--no-progress"], cwd=REPO, capture_output=True,
                        text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    from fp4moe_diag.results import load_runs

    return load_runs(out.parent, pattern=f"{out.name}/results.parquet")


def test_figures_on_a_cpu_run(cpu_run, tmp_path):
    assert len(cpu_run) == 2 and set(cpu_run["status"]) == {"ok"}
    figs = {
        "heatmap": P.tactic_heatmap(cpu_run, "reference", "gpt-oss-20b", 2),
        "tvt": P.time_vs_tokens(cpu_run),
        "bvd": P.best_vs_default(cpu_run),
        "err": P.error_boxplot(cpu_run),
        "cmp": P.backend_comparison(cpu_run),
    }
    for name, fig in figs.items():
        assert "CPU" in _title(fig), name
        P.save_figure(fig, tmp_path / name)
    assert len(list(tmp_path.glob("*.png"))) == len(figs) == len(list(tmp_path.glob("*.svg")))
    with pytest.raises(ValueError, match="frac_bw_roofline"):
        P.roofline_fraction(cpu_run)  # CPU runs measure no ceilings
    t = R.summary_tables(cpu_run)
    assert t["best_per_shape"]["best_tactic"].eq("torch fp32").all()


def test_figures_on_committed_runs(tmp_path):
    """Every report figure over whatever is committed under data/runs (skipped while it is empty)."""
    from fp4moe_diag.results import load_runs

    committed = load_runs()
    if committed.empty:
        pytest.skip("no committed runs under data/runs")
    figs = R.build_report_figures(committed, tmp_path, max_shape_figures=2, show=False)
    made = [f for f in figs if "paths" in f]
    assert made, [f.get("skipped") for f in figs]
    for f in made:
        assert f["paths"]["png"].stat().st_size > 10_000
    assert R.summary_tables(committed)["provenance"]["gpu_name"].str.len().gt(0).all()


# --------------------------------------------------------------------------- every notebook, headless
@pytest.mark.slow
def test_all_notebooks_execute_in_quick_mode(tmp_path):
    out = R.run_notebooks(tmp_path, quick=True, html=True)
    names = {p.name for p in out}
    for nb in R.list_notebooks():
        assert nb.name in names and nb.with_suffix(".html").name in names
        assert R.notebook_errors(tmp_path / nb.name) == [], nb.name
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert report.count("<img") >= 3
    assert "data:image/png;base64" in report
    pngs = sorted((tmp_path / "figures").glob("*.png"))
    assert pngs and all(p.with_suffix(".svg").exists() for p in pngs)


def test_cli_profile_on_cpu_says_why_not():
    from fp4moe_diag.cli import main

    assert main(["profile", "--tactics", "m16n64k128w4s3-ds-sk2", "--device", "cpu"]) == 2


@pytest.mark.parametrize("mod", ["report_profile", "report_bug", "report_correctness"])
def test_report_helper_modules_import_first(mod: str):
    # nsight-python's driver script imports report_profile before report: no import cycle may bite
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", f"import fp4moe_diag.{mod}; from fp4moe_diag.report import "
                        f"nsight_status, kernels_table, committed_verdicts, token_errors"],
                       capture_output=True, text=True, cwd=str(R.REPO_ROOT))
    assert r.returncode == 0, r.stderr[-2000:]


def test_latest_per_shape_keeps_the_newest_run_of_each_shape():
    from fp4moe_diag.plotting import best_per_shape, latest_per_shape

    old = [_row("triton", "a", 0, t, 1, t_us=100.0 * t, is_best=True) for t in (1, 64, 512)]
    new = [_row("triton", "a", 0, t, 1, t_us=10.0 * t, is_best=True) for t in (1, 64)]  # a later, partial run
    for r in old:
        r.update(run_id="z-older-but-later-name", timestamp="2026-12-01T10:00:00")
    for r in new:
        r.update(run_id="a-newer", timestamp="2026-12-03T10:00:00")
    df = to_frame(old + new)
    best = best_per_shape(df)
    assert len(best) == 5
    kept = latest_per_shape(best, df).set_index("num_tokens")
    assert sorted(kept.index) == [1, 64, 512]
    assert kept.loc[1, "run_id"] == "a-newer" and kept.loc[1, "best_us"] == 10.0
    assert kept.loc[512, "run_id"] == "z-older-but-later-name" and kept.loc[512, "best_us"] == 51200.0
    single = best[best["run_id"] == "a-newer"]
    assert latest_per_shape(single, df).equals(single)  # one run: unchanged
    # a CUDA-graph-timed run wins over an eager one for the shapes both have, whatever the dates
    for r in old:
        r.update(time_method="cuda-graph")
    kept = latest_per_shape(best_per_shape(to_frame(old + new)), to_frame(old + new)).set_index("num_tokens")
    assert set(kept["run_id"]) == {"z-older-but-later-name"}


# ------------------------------------------------------------------ Nsight Compute tables without ncu_report
CALLS_CSV = REPO / "tests" / "data" / "nsight_calls_triton_t64.csv"  # nsight-python's table, H200 run


def test_kernels_from_calls_on_the_h200_table():
    k = R.kernels_from_calls(pd.read_csv(CALLS_CSV)).set_index("tactic_label")
    assert list(k.index) == ["m16n64k128w4s3-ds-sk2", "m16n64k128w4s3"]
    best = k.loc["m16n64k128w4s3-ds-sk2"]
    assert best["duration_us"] == pytest.approx(358.272) and best["runs"] == 3 and best["role"] == "t0"
    assert best["dram_read_GBps"] == pytest.approx(533428309.3333333 / 358272.0)  # bytes / ns = GB/s
    assert "issue_slots_busy_pct" not in k  # percentages summed over kernels are not reported


def _ncu_csv(calls: pd.DataFrame, runs: int, rename=None) -> str:
    seq = [(a, ks.split("|")) for a, ks in calls.drop_duplicates("Annotation")[["Annotation", "Kernel"]].values]
    lines = ['"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"', '"","","nsecond","Mbyte"']
    i = 0
    for r in range(runs):
        for a, ks in seq:
            for j, kname in enumerate(ks):
                shown = (rename or {}).get(kname, kname)
                lines.append(f'"{i}","{shown}(int, float*)","{1000 * (j + 1) + r}","{10 * (j + 1)}"')
                i += 1
    return "\n".join(["==PROF== Disconnected", *lines])


def test_per_kernel_rows_from_the_ncu_csv_export():
    calls = pd.read_csv(CALLS_CSV)
    raw = R.raw_from_ncu_csv(_ncu_csv(calls, runs=3), calls)
    assert len(raw) == 3 * (5 + 4) and set(raw["annotation"]) == set(calls["Annotation"])
    k = R.kernels_table(raw)
    g1 = k[(k["tactic_label"] == "m16n64k128w4s3-ds-sk2") & (k["kernel"] == "_moe_mxfp4_gemm1_kernel")].iloc[0]
    assert g1["runs"] == 3 and g1["duration_us"] == pytest.approx(1.001)  # (1000 + 1001 + 1002) ns / 3
    assert g1["dram_read_bytes"] == pytest.approx(10e6) and g1["dram_read_GBps"] == pytest.approx(10e6 / 1001)
    # launches that do not follow the annotated sequence: no guessing
    assert R.raw_from_ncu_csv(_ncu_csv(calls, runs=3, rename={"_moe_mxfp4_gemm2_kernel": "other"}), calls).empty
    assert R.raw_from_ncu_csv(_ncu_csv(calls, runs=3) + '\n"99","x","1","1"', calls).empty
    assert R.raw_from_ncu_csv("", calls).empty


def test_cli_profile_splits_labels_with_commas():
    from fp4moe_diag.cli import split_labels

    assert split_labels("default(-1,-1),g1:20, m16n64k128w4s3-ds-sk2") == ["default(-1,-1)", "g1:20",
                                                                           "m16n64k128w4s3-ds-sk2"]
