"""Run folders -> a FlashInfer-Bench trace set: ``export-fib RUN... --out DIR``.

Layout (``flashinfer_bench.data.TraceSet.from_path``): ``definitions/<name>.json`` (one per op and fixed
sizes), ``workloads/<name>.jsonl`` (one workload trace per case), ``solutions/<name>/<solution>.json`` (one per
backend x tactic), ``traces/<name>.jsonl`` (one per row).  Status: ok and correct -> ``PASSED``, incorrect ->
``INCORRECT_NUMERICAL``, failed/aborted -> ``RUNTIME_ERROR``; unsupported rows and rows without a correctness
check are left out and counted.  The definition is FlashInfer's own ``fi_trace`` one where it has one for the op
*and* it loads in the installed flashinfer-bench; otherwise ours (gpt-oss MXFP4 has none in FlashInfer-Bench's
dataset), and the report says why (FlashInfer 0.7.4's ``cutlass_fused_moe`` definition declares ``uint8``
tensors, a dtype flashinfer-bench 0.1.2 lacks).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

_REFERENCE = '''import torch

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _dequant(w, s):
    lut = torch.tensor(E2M1, device=w.device)
    v = torch.stack([lut[(w & 15).long()], lut[(w >> 4).long()]], -1).flatten(-2)
    scale = torch.pow(2.0, s.view(torch.uint8).float() - 127)
    return (v.unflatten(-1, (-1, 32)) * scale.unsqueeze(-1)).flatten(-2)


def run(hidden_states, topk_ids, topk_weights, w13, w13_scale, w2, w2_scale, w13_bias, w2_bias,
        local_expert_offset, swiglu_alpha, swiglu_beta, swiglu_limit):
    """gpt-oss MXFP4 MoE (fp4moe-diag's float32 reference): rows [0, I) of w13 are up, [I, 2I) gate."""
    x = hidden_states.float()
    out = torch.zeros_like(x)
    inter = w2.shape[-1] * 2
    for e in range(w13.shape[0]):
        tok, slot = torch.nonzero(topk_ids == e + local_expert_offset, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x[tok] @ _dequant(w13[e], w13_scale[e]).T + w13_bias[e].float()
        up, gate = h[:, :inter], h[:, inter:]
        gate = gate.clamp(max=swiglu_limit)
        up = up.clamp(-swiglu_limit, swiglu_limit)
        y = (gate * torch.sigmoid(swiglu_alpha * gate)) * (up + swiglu_beta)
        y = y @ _dequant(w2[e], w2_scale[e]).T + w2_bias[e].float()
        out.index_add_(0, tok, y * topk_weights[tok, slot].float().unsqueeze(-1))
    return out.to(torch.bfloat16)
'''


@dataclass
class ExportReport:
    out: Path
    definitions: dict = field(default_factory=dict)  # name -> "flashinfer fi_trace" | "fp4moe-diag (why)"
    workloads: int = 0
    solutions: int = 0
    traces: dict = field(default_factory=dict)  # status -> count
    left_out: dict = field(default_factory=dict)  # reason -> count

    def summary(self) -> str:
        lines = [f"FlashInfer-Bench trace set -> {self.out}: {len(self.definitions)} definition(s), "
                 f"{self.workloads} workload(s), {self.solutions} solution(s), {sum(self.traces.values())} trace(s) "
                 f"{self.traces}"]
        lines += [f"  definition {n}: {why}" for n, why in self.definitions.items()]
        lines += [f"  left out: {n} {why}" for why, n in self.left_out.items()]
        return "\n".join(lines)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_")


def definition_name(row: Any) -> str:
    ep = f"_ep{row['ep_size']}r{row['ep_rank']}" if int(row["local_num_experts"]) != int(row["num_experts"]) else ""
    return (f"fp4moe_{row['weight_format']}_{row['activation']}_e{row['num_experts']}_k{row['top_k']}"
            f"_h{row['hidden_size']}_i{row['intermediate_size']}{ep}")


def our_definition(row: Any, why: str) -> dict:
    """The fp4moe-diag definition of a row's op and fixed sizes (the flashinfer-bench Definition schema)."""
    axes = {"num_tokens": {"type": "var"}}
    for k, key in (("hidden_size", "H"), ("intermediate_size", "I"), ("num_experts", "E"),
                   ("local_num_experts", "L"), ("top_k", "K")):
        axes[key] = {"type": "const", "value": int(row[k])}
    axes["H2"] = {"type": "const", "value": int(row["hidden_size"]) // 2}
    axes["I2"] = {"type": "const", "value": int(row["intermediate_size"]) // 2}
    axes["G1"] = {"type": "const", "value": 2 * int(row["intermediate_size"])}
    axes["HB"] = {"type": "const", "value": int(row["hidden_size"]) // 32}
    axes["IB"] = {"type": "const", "value": int(row["intermediate_size"]) // 32}
    t = lambda shape, dtype, d=None: {"shape": shape, "dtype": dtype, "description": d}  # noqa: E731
    inputs = {
        "hidden_states": t(["num_tokens", "H"], "bfloat16"),
        "topk_ids": t(["num_tokens", "K"], "int32", "global expert ids"),
        "topk_weights": t(["num_tokens", "K"], "float32"),
        "w13": t(["L", "G1", "H2"], "int8", "packed e2m1 pairs (uint8 bit pattern; flashinfer-bench has no uint8)"),
        "w13_scale": t(["L", "G1", "HB"], "int8", "ue8m0 exponents, block 32 (uint8 bit pattern)"),
        "w2": t(["L", "H", "I2"], "int8", "packed e2m1 pairs (uint8 bit pattern)"),
        "w2_scale": t(["L", "H", "IB"], "int8", "ue8m0 exponents, block 32 (uint8 bit pattern)"),
        "w13_bias": t(["L", "G1"], "float32"), "w2_bias": t(["L", "H"], "float32"),
        "local_expert_offset": t(None, "int32", "first local expert id"),
        "swiglu_alpha": t(None, "float32"), "swiglu_beta": t(None, "float32"), "swiglu_limit": t(None, "float32"),
    }
    return {"name": definition_name(row), "op_type": "moe", "axes": axes, "inputs": inputs,
            "outputs": {"output": t(["num_tokens", "H"], "bfloat16")}, "reference": _REFERENCE,
            "tags": ["fp4moe-diag", f"model:{row['model'] or 'unknown'}", "quantization:mxfp4"],
            "description": f"Routed MXFP4 x BF16 MoE of {row['model'] or 'a captured call'} as fp4moe-diag runs it "
                           f"(definition by fp4moe-diag: {why})"}


def _fi_trace_kwargs(row: Any) -> dict:
    """``cutlass_fused_moe``'s arguments for a row's sizes as meta tensors (fi_trace reads shapes only)."""
    import torch  # noqa: PLC0415

    t, h, i = int(row["num_tokens"]), int(row["hidden_size"]), int(row["intermediate_size"])
    n, k = int(row["local_num_experts"]), int(row["top_k"])

    def m(*shape: int, dt: Any = torch.uint8) -> Any:
        return torch.empty(*shape, dtype=dt, device="meta")

    return dict(input=m(t, h, dt=torch.bfloat16), token_selected_experts=m(t, k, dt=torch.int32),
                token_final_scales=m(t, k, dt=torch.float32), fc1_expert_weights=m(n, 2 * i, h // 2),
                fc2_expert_weights=m(n, h, i // 2), output_dtype=torch.bfloat16,
                quant_scales=[m(n, 2 * i // 64, h // 128, 16, 4, dt=torch.int32),
                              m(n, h // 64, i // 128, 16, 4, dt=torch.int32)],
                fc1_expert_biases=m(n, 2 * i, dt=torch.bfloat16), fc2_expert_biases=m(n, h, dt=torch.bfloat16),
                swiglu_alpha=m(n, dt=torch.float32), swiglu_beta=m(n, dt=torch.float32),
                swiglu_limit=m(n, dt=torch.float32), ep_size=int(row["ep_size"]), ep_rank=int(row["ep_rank"]),
                use_w4_group_scaling=True)


def _flashinfer_definition(row: Any) -> tuple[Any, str]:
    """FlashInfer's own ``fi_trace`` Definition of the op (``cutlass_fused_moe``, the SM90 MXFP4 x BF16 call)
    when it loads in the installed flashinfer-bench; else ``(None, why)``."""
    from flashinfer_bench.data import Definition  # noqa: PLC0415

    try:
        from flashinfer.fused_moe import cutlass_fused_moe  # noqa: PLC0415

        d = cutlass_fused_moe.fi_trace(**_fi_trace_kwargs(row))
    except Exception as e:  # noqa: BLE001 - no fi_trace here: ours, saying why
        return None, f"FlashInfer's cutlass_fused_moe.fi_trace failed: {type(e).__name__}: {str(e)[:200]}"
    try:
        return Definition.model_validate(d), ""
    except ValueError as e:
        bad = sorted({ln.strip() for ln in str(e).splitlines() if ln.strip().startswith("inputs.")})
        return None, (f"FlashInfer's fi_trace definition {d.get('name')!r} does not load in flashinfer-bench "
                      f"({', '.join(bad) or str(e).splitlines()[0]}: uint8 is not a flashinfer-bench dtype)")


def _evaluation(row: Any, default_ms: float, env: dict) -> Any:
    status = str(row["status"])
    ev: dict = {"environment": env, "timestamp": str(row.get("timestamp") or "") or "unknown"}
    corr = None
    if row.get("rel_l2") == row.get("rel_l2") and row.get("rel_l2") is not None:
        corr = {"max_relative_error": float(row["rel_l2"]), "max_absolute_error": float(row["max_abs_err"])}
    if status == "ok" and row.get("correct") is True:
        ms = float(row["time_median_us"]) / 1000.0
        ev.update(status="PASSED", correctness=corr, performance={
            "latency_ms": ms, "reference_latency_ms": default_ms,
            "speedup_factor": default_ms / ms if ms > 0 and default_ms > 0 else 0.0})
    elif status == "incorrect":
        ev.update(status="INCORRECT_NUMERICAL", correctness=corr)
    elif status in ("failed", "aborted"):
        ev.update(status="RUNTIME_ERROR", log=f"{row.get('error_type') or ''}: {row.get('error_message') or ''}")
    else:
        return None
    return ev


def export_fib(runs: Sequence[Any], out: Any) -> ExportReport:
    """Write the trace set of ``runs`` under ``out`` and check it loads with flashinfer-bench's TraceSet."""
    import pandas as pd  # noqa: PLC0415
    from flashinfer_bench.data import Definition, Solution, Trace, TraceSet, Workload  # noqa: PLC0415

    from ..run_folder import load_runs  # noqa: PLC0415

    df = pd.concat([load_runs(r, allow_empty=False) for r in runs], ignore_index=True)
    df = df.astype(object).where(df.notna(), None)
    rep = ExportReport(Path(out))
    dirs = {k: rep.out / k for k in ("definitions", "workloads", "solutions", "traces")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    workloads: dict = {}
    names: dict = {}
    for _, row in df.iterrows():
        if str(row["weight_format"]) != "mxfp4" or str(row["activation"]) != "swiglu_oai":
            rep.left_out["(not a gpt-oss MXFP4 case)"] = rep.left_out.get("(not a gpt-oss MXFP4 case)", 0) + 1
            continue
        ours = definition_name(row)
        if ours not in names:
            fi, why = _flashinfer_definition(row)
            d = fi or Definition.model_validate(our_definition(row, why))
            names[ours] = d.name
            rep.definitions[d.name] = "flashinfer fi_trace" if fi else f"fp4moe-diag ({why})"
            (dirs["definitions"] / f"{d.name}.json").write_text(d.model_dump_json(indent=2))
        name = names[ours]
        key = (name, int(row["num_tokens"]), int(row["seed"] or 0), str(row.get("input_source") or ""))
        if key not in workloads:
            wl = Workload(axes={"num_tokens": key[1]}, uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, "|".join(map(str, key)))),
                          inputs={**{n: {"type": "random"} for n in ("hidden_states", "topk_ids", "topk_weights",
                                                                     "w13", "w13_scale", "w2", "w2_scale",
                                                                     "w13_bias", "w2_bias")},
                                  "local_expert_offset": {"type": "scalar", "value": int(row["local_expert_offset"])},
                                  "swiglu_alpha": {"type": "scalar", "value": 1.702},
                                  "swiglu_beta": {"type": "scalar", "value": 1.0},
                                  "swiglu_limit": {"type": "scalar", "value": 7.0}})
            workloads[key] = wl
            with open(dirs["workloads"] / f"{name}.jsonl", "a") as f:
                f.write(Trace(definition=name, workload=wl).model_dump_json() + "\n")
        _trace(row, name, workloads[key], df, dirs, rep, Solution, Trace)
    rep.workloads = len(workloads)
    ts = TraceSet.from_path(str(rep.out))  # the written files load with flashinfer-bench's own models
    assert len(ts.definitions) == len(rep.definitions)
    return rep


def _trace(row, name, wl, df, dirs, rep, Solution, Trace) -> None:  # noqa: N803
    sol = f"fp4moe-diag_{_safe(row['backend'])}_{_safe(row['tactic_label'])}"
    same = df[(df["backend"] == row["backend"]) & (df["num_tokens"] == row["num_tokens"])
              & (df["hidden_size"] == row["hidden_size"]) & (df["is_default_tactic"] == True)]  # noqa: E712
    default_ms = float(same["time_median_us"].iloc[0]) / 1000 if len(same) and same["time_median_us"].iloc[0] else 0.0
    env = {"hardware": str(row.get("gpu_name") or "unknown"),
           "libs": {k: str(row.get(f"{k}_version") or "") for k in ("torch", "flashinfer", "triton")}}
    ev = _evaluation(row, default_ms, env)
    if ev is None:
        why = f"{row['status']} rows" + ("" if row["status"] != "ok" else " without a correctness check")
        rep.left_out[why] = rep.left_out.get(why, 0) + 1
        return
    path = dirs["solutions"] / name / f"{sol}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        s = Solution(name=sol, definition=name, author="fp4moe-diag",
                     spec={"language": "python", "target_hardware": [env["hardware"]], "entry_point": "main.py::run"},
                     sources=[{"path": "main.py", "content": (
                         f"# fp4moe-diag backend {row['backend']}, tactic {row['tactic_label']} (id {row['tactic']}):\n"
                         f"# python -m fp4moe_diag sweep --backends {row['backend']} "
                         f"--tactics '{row['backend']}=^{re.escape(str(row['tactic_label']))}$'\n"
                         "def run(*args, **kwargs):\n    raise NotImplementedError('run it through fp4moe-diag')\n")}],
                     description=f"{row['backend']} tactic {row['tactic_label']}")
        path.write_text(s.model_dump_json(indent=2))
        rep.solutions += 1
    t = Trace(definition=name, workload=wl, solution=sol, evaluation=ev)
    with open(dirs["traces"] / f"{name}.jsonl", "a") as f:
        f.write(t.model_dump_json() + "\n")
    rep.traces[ev["status"]] = rep.traces.get(ev["status"], 0) + 1
