"""FlashInfer's autotuner as a measured row (issue #22): regret = pick / best of the same shape, version and
build; the default beside it; picks of another build never compared with it."""

import numpy as np
import pandas as pd
import pytest

from fp4moe_diag.analysis.tuner import regret_summary, tuner_regret
from fp4moe_diag.plotting.tuner import tuner_regret_figure


def frame():
    rows = []
    base = {"model": "gpt-oss-20b", "ep_size": 1, "ep_rank": 0, "hidden_size": 3072, "intermediate_size": 3072,
            "num_experts": 32, "top_k": 4, "has_bias": True, "flashinfer_version": "0.7.4", "status": "ok",
            "timing_pass": "full", "flashinfer_build": "fused_moe_90_slim074_full"}
    for t, best, dflt in ((64, 240.0, 297.0), (4096, 2653.0, 7990.0)):
        rows += [{**base, "num_tokens": t, "backend": "cutlass", "tactic": "(-1, -1)", "tactic_label": "default(-1,-1)",
                  "is_default_tactic": True, "time_median_us": dflt, "run_id": "r1"},
                 {**base, "num_tokens": t, "backend": "cutlass", "tactic": "(57, 169)", "tactic_label": "g1:57+g2:169",
                  "is_default_tactic": False, "time_median_us": best, "run_id": "r1"},
                 {**base, "num_tokens": t, "backend": "cutlass", "tactic": "(1, 2)", "tactic_label": "g1:1",
                  "is_default_tactic": False, "time_median_us": best / 2, "run_id": "r1", "timing_pass": "screen"},
                 {**base, "num_tokens": t, "backend": "cutlass_autotune", "tactic": "(-1, -1)",
                  "tactic_label": "fi-autotune[max=1]", "is_default_tactic": False, "time_median_us": dflt * 1.01,
                  "run_id": "r2"},
                 {**base, "num_tokens": t, "backend": "cutlass_autotune", "tactic": "(57, 169)",
                  "tactic_label": "fi-autotune[max=8192]", "is_default_tactic": False, "time_median_us": best,
                  "run_id": "r2"}]
    # the fast build's rows of T=64: another build, never the best of the full build's shape
    rows.append({**base, "num_tokens": 64, "backend": "cutlass", "tactic": "(0, 4)", "tactic_label": "g1:0",
                 "is_default_tactic": False, "time_median_us": 7000.0, "run_id": "r0",
                 "flashinfer_build": "fused_moe_90_slim074"})
    return pd.DataFrame(rows)


def test_regret_is_pick_over_best_of_the_same_build():
    t = tuner_regret(frame())
    assert list(t["setting"]) == ["max=1", "max=8192", "max=1", "max=8192"]
    np.testing.assert_allclose(t["regret"], [297 * 1.01 / 240, 1.0, 7990 * 1.01 / 2653, 1.0])
    np.testing.assert_allclose(t["default_x"], [297 / 240, 297 / 240, 7990 / 2653, 7990 / 2653])
    assert set(t["best_tactic"]) == {"g1:57+g2:169"}  # a screened row is not a best
    assert list(t["picked"]) == ["(-1, -1)", "(57, 169)"] * 2
    s = regret_summary(t).set_index("setting")
    assert s.loc["max=8192", "within_5pct"] == 2 and s.loc["max=1", "within_5pct"] == 0
    assert s.loc["max=1", "worst_shape"] == "gpt-oss-20b EP1 T=4096"


def test_regret_needs_picks_and_draws_them():
    with pytest.raises(ValueError, match="no ok rows of backend 'cutlass_autotune'"):
        tuner_regret(frame()[lambda d: d["backend"] == "cutlass"])
    fig = tuner_regret_figure(frame())
    ys = sorted(np.concatenate([ln.get_ydata() for ln in fig.axes[0].lines if ln.get_label().startswith("autotune")]))
    np.testing.assert_allclose(ys, sorted([297 * 1.01 / 240, 1.0, 7990 * 1.01 / 2653, 1.0]))
