"""Figures (fp4moe_diag.plotting) on synthetic frames and on a CPU run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fp4moe_diag import plotting as P  # noqa: E402
from fp4moe_diag.plotting.common import ROOFLINE_GOAL  # noqa: E402
from fp4moe_diag import analysis as A  # noqa: E402
from fp4moe_diag.measure.correctness import REL_L2_TOL  # noqa: E402
from fp4moe_diag.results import to_frame  # noqa: E402
from frames import CUTLASS, FI, GPU, TOKENS, _row, suptitle as _title  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- figures
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


def test_defaults_that_change_with_tokens():
    d = per_t_default_frame()
    assert A.default_by_tokens(d) == {1: "m16", 8: "m16", 64: "m32", 512: "m64"}
    assert A.describe_defaults(A.default_by_tokens(d)) == "m16 (T 1–8); m32 (T 64); m64 (T 512)"
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
    goal = [ln for ln in ax.get_lines() if list(ln.get_ydata()) == [ROOFLINE_GOAL, ROOFLINE_GOAL]]
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
        assert [ln.get_label() for ln in ax.get_lines()] == ["cutlass @ abc (run 2026-12-01-nvidia-h200)",
                                                             "reference @ abc (run 2026-12-01-nvidia-h200)"]
        assert "µs" in ax.get_ylabel() and "tokens" in ax.get_xlabel()


OLD_RUN, NEW_RUN = "2026-12-02-nvidia-h200-a", "2026-12-03-nvidia-h200-b"


def two_commit_frame() -> pd.DataFrame:
    """Triton measured by two commits (the newer run covers T <= 64 only, 2x slower), cutlass by the older."""
    rows = []
    for run, commit, when, scale, tokens in ((OLD_RUN, "aaa1111", "2026-12-02T10:00:00", 1.0, TOKENS),
                                             (NEW_RUN, "bbb2222", "2026-12-03T10:00:00", 2.0, TOKENS[:3])):
        for t in tokens:
            rows.append(_row("triton", "m16", 0, t, 1, "ok", scale * (10 + t), is_default=True, is_best=True))
            rows[-1].update(run_id=run, git_commit=commit, timestamp=when)
            if run == OLD_RUN:
                rows.append(_row("cutlass", "g1:0", 1, t, 1, "ok", 30.0 + t, is_default=True, is_best=True))
                rows[-1].update(run_id=run, git_commit=commit, timestamp=when)
    return to_frame(rows)


def _lines(fig) -> dict[str, tuple[list, list]]:
    (ax,) = [a for a in fig.axes if a.get_visible()]
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()}


def test_backend_comparison_draws_one_run_per_line_with_its_commit():
    lines = _lines(P.backend_comparison(two_commit_frame()))
    assert set(lines) == {f"triton @ bbb2222 (run {NEW_RUN})", f"cutlass @ aaa1111 (run {OLD_RUN})"}
    x, y = lines[f"triton @ bbb2222 (run {NEW_RUN})"]
    assert x == [1.0, 8.0, 64.0] and y == [22.0, 36.0, 148.0]  # the newer run only: no T=512 point of the older
    assert lines[f"cutlass @ aaa1111 (run {OLD_RUN})"][1] == [31.0, 38.0, 94.0, 542.0]


def test_backend_comparison_draws_the_run_the_caller_chooses():
    lines = _lines(P.backend_comparison(two_commit_frame(), runs={"triton": OLD_RUN}))
    assert lines[f"triton @ aaa1111 (run {OLD_RUN})"] == ([1.0, 8.0, 64.0, 512.0], [11.0, 18.0, 74.0, 522.0])
    assert set(_lines(P.backend_comparison(two_commit_frame(), runs=NEW_RUN))) == {f"triton @ bbb2222 (run {NEW_RUN})"}
    with pytest.raises(ValueError, match="runs: 'nope' is not a run"):
        P.backend_comparison(two_commit_frame(), runs="nope")
    with pytest.raises(ValueError, match=f"runs: run '{NEW_RUN}' has no rows of backend 'cutlass'"):
        P.backend_comparison(two_commit_frame(), runs={"cutlass": NEW_RUN})


def test_roofline_labels_name_the_ceiling_used(df):
    copy_only = P.roofline_fraction(df)  # the synthetic rows have a copy ceiling and no read ceiling
    assert "measured copy ceiling" in copy_only.axes[0].get_ylabel() and "copy ceiling: 4300 GB/s" in _title(copy_only)
    read = P.roofline_fraction(df.assign(ceiling_read_GBps=4400.0))
    ax = read.axes[0]
    assert "measured read ceiling" in ax.get_ylabel() and "copy" not in ax.get_ylabel()
    assert "read ceiling: 4400 GB/s" in _title(read) and "copy" not in _title(read)
    assert "goal: 60% of the measured read ceiling" in [t.get_text() for t in ax.get_legend().get_texts()]


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
    from fp4moe_diag.run_folder import load_runs

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
    t = A.summary_tables(cpu_run)
    assert t["best_per_shape"]["best_tactic"].eq("torch fp32").all()


def test_commit_label_is_short_and_names_every_commit():
    from fp4moe_diag.analysis.per_shape import commit_label

    rows = pd.DataFrame({"git_commit": ["5e627f9c0ffee1234", "5e627f9c0ffee1234", "83adb3b99", None]})
    assert commit_label(rows) == "5e627f9/83adb3b"
    assert commit_label(rows.iloc[3:]) == "commit unknown"
