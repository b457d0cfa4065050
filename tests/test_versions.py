"""compare_versions (one subprocess per FlashInfer), the version-ratio tables and the figure."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fp4moe_diag.measure.options import MeasureOptions
from fp4moe_diag.run_folder import load_run
from fp4moe_diag.runs import SweepSpec
from fp4moe_diag.analysis.versions import kind_rows, ratio_summary, version_ratio_table
from fp4moe_diag.plotting.versions import version_ratio_figure
from fp4moe_diag.compare_versions import compare_versions


def _fake_site(tmp_path, name, init):
    d = tmp_path / name / "flashinfer"
    d.mkdir(parents=True)
    (d / "__init__.py").write_text(init)
    return d.parent


def test_compare_versions_runs_each_version_in_its_own_process(tmp_path):
    dirs = {"broken": _fake_site(tmp_path, "broken", "raise ImportError('no libcudart here')\n"),
            "v063": _fake_site(tmp_path, "v063", "__version__ = '0.6.3'\n"),
            "fake074": _fake_site(tmp_path, "fake074", "__version__ = '0.7.4'\n")}
    real = [d for d in ("/work/fi/074", "/work/fi/052") if Path(d, "flashinfer").is_dir()]
    for d in real:
        dirs[Path(d).name] = d
    opts = MeasureOptions(warmup=0, repeats=2, screen=1, screen_top=1, tactic_filters=("reference=fp32",))
    spec = SweepSpec(models=("gpt-oss-20b",), ep_sizes=(2,), tokens=(1,), hidden_scale=24, device="cpu", options=opts)
    df = compare_versions(spec, dirs, tmp_path / "out")
    by = {lab: g for lab, g in df.groupby("flashinfer_label")}
    b = by["broken"].iloc[0]
    assert len(by["broken"]) == 1 and b["status"] == "unsupported" and b["stage"] == "import"
    assert "no libcudart here" in b["error_message"] and b["flashinfer_version"] == "broken"
    v = by["v063"].iloc[0]
    assert v["flashinfer_version"] == "0.6.3" and "PR #2916" in v["error_message"]
    f = by["fake074"]  # a version that runs: its child wrote a run folder, rows like a sweep's
    assert list(f["status"]) == ["ok"] and list(f["backend"]) == ["reference"] and list(f["flashinfer_version"]) == ["0.7.4"]
    assert list(f["timing_pass"]) == ["full"] and list(f["time_repeats"]) == [2]  # screened, then timed in full
    assert list(f["run_id"]) == ["run"] and (tmp_path / "out" / "fake074" / "run" / "results.parquet").is_file()
    assert load_run(tmp_path / "out" / "fake074" / "run")["tactic_label"].tolist() == ["torch fp32"]
    for d in real:
        g = by[Path(d).name]
        assert list(g["status"]) == ["ok"] and list(g["backend"]) == ["reference"]
        assert g["flashinfer_version"].iloc[0] == {"074": "0.7.4", "052": "0.5.2"}[Path(d).name]
    assert (tmp_path / "out" / "v063" / "log.txt").exists()


def frame():
    rows = []
    # shape T=1 and T=16; version 0.5.2 slower at T=16 except the default
    times = {("0.5.2", 1): (100.0, 200.0, 90.0), ("0.7.4", 1): (50.0, 100.0, 45.0),
             ("0.5.2", 16): (400.0, 800.0, 390.0), ("0.7.4", 16): (100.0, 1600.0, 95.0)}
    for (ver, t), (best, dflt, tuned) in times.items():
        base = {"model": "m", "ep_size": 1, "ep_rank": 0, "num_tokens": t, "hidden_size": 64, "intermediate_size": 32,
                "num_experts": 4, "top_k": 2, "backend": "cutlass", "flashinfer_version": ver, "status": "ok"}
        rows += [
            {**base, "tactic_label": "default(-1,-1)", "is_default_tactic": True, "is_best": False, "time_median_us": dflt},
            {**base, "tactic_label": "g1:3", "is_default_tactic": False, "is_best": False, "time_median_us": best},
            {**base, "tactic_label": "g1:3+g2:9", "is_default_tactic": False, "is_best": True, "time_median_us": tuned},
            {**base, "tactic_label": "g2:1", "is_default_tactic": False, "is_best": False, "time_median_us": 1.0,
             "status": "incorrect"},  # fast but wrong: never counted
        ]
    rows.append({"flashinfer_version": "0.6.3", "status": "unsupported", "backend": "", "error_message": "x"})
    return pd.DataFrame(rows)


def test_version_ratio_table_values():
    t = version_ratio_table(frame())
    assert (t.attrs["base"], t.attrs["other"]) == ("0.5.2", "0.7.4") and t.attrs["refused"].empty
    assert list(t["kind"]) == ["best", "default", "tuned"] * 2 and list(t["num_tokens"]) == [1, 1, 1, 16, 16, 16]
    np.testing.assert_allclose(t["ratio"], [45 / 90, 0.5, 0.5, 95 / 390, 2.0, 95 / 390])
    # "best" is the is_best row (here the combined one); "tuned" is the g1+g2 row
    assert list(t["tactic_0.7.4"]) == ["g1:3+g2:9", "default(-1,-1)", "g1:3+g2:9"] * 2
    assert t.loc[3, "time_0.5.2_us"] == 390.0 and t.loc[4, "time_0.7.4_us"] == 1600.0
    rev = version_ratio_table(frame(), base="0.7.4", other="0.5.2", kinds=["default"])
    np.testing.assert_allclose(rev["ratio"], [2.0, 0.5])
    s = ratio_summary(t).set_index("kind")
    assert s.loc["default", "geomean_ratio"] == pytest.approx(1.0) and s.loc["best", "shapes"] == 2
    assert s.loc["default", "min_ratio"] == 0.5 and s.loc["default", "max_ratio"] == 2.0


def test_version_ratio_table_refuses_a_single_version_and_unknown_kinds():
    one = frame()[frame()["flashinfer_version"] != "0.7.4"]
    with pytest.raises(ValueError, match="need two flashinfer versions"):
        version_ratio_table(one)
    with pytest.raises(ValueError, match="kinds: unknown"):
        version_ratio_table(frame(), kinds=["fastest"])
    assert set(kind_rows(frame())["kind"]) == {"best", "default", "tuned"}


def test_version_ratio_figure_has_a_panel_per_backend():
    df = frame()
    df2 = df[df["backend"] == "cutlass"].assign(backend="trtllm")
    fig = version_ratio_figure(pd.concat([df, df2], ignore_index=True))
    assert len(fig.axes) == 2
    ys = sorted(np.concatenate([ln.get_ydata() for ln in fig.axes[0].lines if ln.get_linestyle() == "None"]))
    np.testing.assert_allclose(ys, sorted([45 / 90, 95 / 390, 0.5, 2.0, 0.5, 95 / 390]))
    assert "0.7.4 / 0.5.2" in fig.axes[0].get_ylabel()


def _with_builds(df: pd.DataFrame, builds: dict) -> pd.DataFrame:
    df = df.copy()
    df["flashinfer_build"] = df["flashinfer_version"].map(builds)
    return df


def test_a_fast_build_is_not_compared_with_a_full_one():
    """Issue #22: 0.7.4's fast build (4 + 4 tactics) against 0.5.2's full build is a build comparison: refused,
    naming the shapes, the builds and the tactic counts; shown only when asked, as different builds."""
    df = frame()
    fast = df["flashinfer_version"] == "0.7.4"
    df = pd.concat([df[~fast], df[fast & (df["tactic_label"] != "g1:3")]], ignore_index=True)  # 0.7.4 ran fewer
    df = _with_builds(df, {"0.5.2": "fused_moe_90_slim_full", "0.7.4": "fused_moe_90_slim074"})
    with pytest.raises(ValueError, match=r"2 shape\(s\) were measured with different FlashInfer builds") as e:
        version_ratio_table(df)
    msg = str(e.value)
    assert "fused_moe_90_slim_full (full, 3 tactics)" in msg and "fused_moe_90_slim074 (fast, 2 tactics)" in msg
    shown = version_ratio_table(df, builds="any")
    assert not shown["like_for_like"].any() and shown["why"].str.startswith("different builds").all()
    with pytest.raises(ValueError, match="builds: expected one of"):
        version_ratio_table(df, builds="some")


def test_like_builds_are_compared_and_the_rest_listed_as_refused():
    df = _with_builds(frame(), {"0.5.2": "fused_moe_90_slim_full", "0.7.4": "fused_moe_90_slim074_full"})
    extra = df[(df["flashinfer_version"] == "0.7.4") & (df["num_tokens"] == 1)].assign(
        flashinfer_build="fused_moe_90_slim074", time_median_us=1e4)  # the fast build of the same shape: ignored
    t16 = df[(df["num_tokens"] == 16)].copy()
    t16.loc[t16["flashinfer_version"] == "0.7.4", "flashinfer_build"] = "fused_moe_90_slim074"  # T=16: fast only
    df = pd.concat([df[df["num_tokens"] == 1], extra, t16], ignore_index=True)
    t = version_ratio_table(df)
    assert list(t["num_tokens"]) == [1, 1, 1] and set(t["build_kind"]) == {"full"}
    np.testing.assert_allclose(t["ratio"], [45 / 90, 0.5, 0.5])  # the fast rows of T=1 never enter
    ref = t.attrs["refused"]
    assert list(ref["num_tokens"]) == [16] and "fast" in ref["build_0.7.4"].iloc[0]
