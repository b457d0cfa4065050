"""Synthetic result frames shared by the analysis, plotting and report tests."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from fp4moe_diag.results import to_frame

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


def plot_lines(ax):
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") or len(ln.get_xdata()) > 0]


def suptitle(fig: Figure) -> str:
    return fig._suptitle.get_text() if fig._suptitle is not None else ""
