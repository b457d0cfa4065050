"""A bug bundle: ``bundle --from-log F | --from-dump D | --case JSON --out bug.tar.gz``.

The tarball holds ``repro.py`` (generated from the case: the bug's call, ``autotune(True)`` +
``trtllm_fp4_block_scale_routed_moe``, with the case's exact arguments; tensors built from the case's seed, or
loaded from ``dump/inputs.pt`` when the evidence is a dump of that call; it needs only torch and flashinfer and
prints ``VERDICT: <status>``), ``case.json`` (the case and where each field came from), ``environment.json``,
``verdict.json`` (the suite's verdict for the installed FlashInfer: :func:`fp4moe_diag.bugrepro.static_meta_check`
over the TVM-FFI stub on machines without SM100, the real kernel on SM100), ``rows.csv`` (the case's rows of
``--runs``) and ``report.md``.
"""

from __future__ import annotations

import io
import json
import pprint
import tarfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from ..problem.case import MoECase
from .derive import ROUTED, SourcedCase

#: a dump bigger than this is not packed into a bundle (a small routed call is a few MB)
MAX_DUMP_BYTES = 256 * 2**20

_SCRIPT = '''#!/usr/bin/env python3
"""fp4moe-diag bug bundle: reproduce {label} with FlashInfer's routed FP4 MoE under autotune(True).

Needs only torch and flashinfer.  Prints "VERDICT: reproduced" when the call fails with the upstream error
("Cannot pack tensors on meta"), "VERDICT: fixed-upstream" when it goes through, "VERDICT: inconclusive" on any
other failure.  The bundle's verdict.json says what fp4moe-diag found for its FlashInfer.
"""
import inspect
import os
import sys

import torch

CASE = {case}
SEED = {seed}
DUMP = {dump}  # tensors of the user's call (dump/inputs.pt beside this script), or None: built from SEED
EXPECTED = {expected!r}


def tensors():
    here = os.path.dirname(os.path.abspath(__file__))
    if DUMP is not None:
        t = torch.load(os.path.join(here, DUMP), map_location="cpu", weights_only=True)
        return {{k.removeprefix("kwarg_"): v for k, v in t.items()}}
    c, g = CASE, torch.Generator().manual_seed(SEED)
    T, H, I, E, K = c["num_tokens"], c["hidden_size"], c["intermediate_size"], c["num_experts"], c["top_k"]
    L, B = c["local_num_experts"], 32 if c["weight_format"] == "mxfp4" else 16
    logits = torch.randn(T, E, generator=g)
    top_v, top_i = logits.topk(K, dim=-1)
    w = torch.softmax(top_v, -1).to(torch.bfloat16)
    packed = (top_i.to(torch.int32) << 16) | (w.view(torch.int16).to(torch.int32) & 0xFFFF)
    sdt = torch.float8_e4m3fn
    out = dict(topk_ids=packed, hidden_states=torch.randn(T, H, generator=g).to(torch.bfloat16),
               gemm1_weights=torch.randint(0, 256, (L, 2 * I, H // 2), generator=g, dtype=torch.uint8),
               gemm1_weights_scale=torch.randint(118, 127, (L, 2 * I, H // B), generator=g, dtype=torch.uint8).view(sdt),
               gemm2_weights=torch.randint(0, 256, (L, H, I // 2), generator=g, dtype=torch.uint8),
               gemm2_weights_scale=torch.randint(118, 127, (L, H, I // B), generator=g, dtype=torch.uint8).view(sdt))
    if c["has_bias"]:
        out["gemm1_bias"] = torch.randn(L, 2 * I, generator=g) * 0.1
        out["gemm2_bias"] = torch.randn(L, H, generator=g) * 0.1
    if c["activation"] == "swiglu_oai":
        out["gemm1_alpha"] = torch.full((L,), c["swiglu_alpha"])
        out["gemm1_beta"] = torch.full((L,), c["swiglu_beta"])
        out["gemm1_clamp_limit"] = torch.full((L,), c["swiglu_limit"])
    return out


def kwargs(device):
    c = CASE
    kw = dict(routing_bias=None, hidden_states_scale=None, gemm1_bias=None, gemm1_alpha=None, gemm1_beta=None,
              gemm1_clamp_limit=None, gemm2_bias=None, output1_scale_scalar=None, output1_scale_gate_scalar=None,
              output2_scale_scalar=None, num_experts=c["num_experts"], top_k=c["top_k"], n_group=c["n_group"],
              topk_group=c["topk_group"], intermediate_size=c["intermediate_size"],
              local_expert_offset=c["local_expert_offset"], local_num_experts=c["local_num_experts"],
              routed_scaling_factor=c["routed_scaling_factor"], routing_method_type={routing},
              do_finalize=True, tune_max_num_tokens=max(1, c["num_tokens"]))
    kw.update({{k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in tensors().items()}})
    kw["enable_pdl"] = None if torch.cuda.is_available() else False
    return kw


def main(device=None):
    import flashinfer
    from flashinfer import autotune
    from flashinfer.fused_moe import trtllm_fp4_block_scale_routed_moe as fn

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    kw = kwargs(device)
    params = inspect.signature(fn).parameters
    unknown = sorted(k for k in kw if k not in params)
    if unknown:
        print(f"flashinfer {{flashinfer.__version__}} does not take {{unknown}}; not passed")
    kw = {{k: v for k, v in kw.items() if k in params}}
    try:
        with autotune(True):
            fn(**kw)
        status = "fixed-upstream"
    except Exception as e:  # noqa: BLE001
        status = "reproduced" if "Cannot pack tensors on meta" in str(e) else "inconclusive"
        print(f"{{type(e).__name__}}: {{str(e).splitlines()[0] if str(e) else ''}}")
    print(f"VERDICT: {{status}} (flashinfer {{flashinfer.__version__}}; the bundle expected {{EXPECTED}})")
    return status


if __name__ == "__main__":
    sys.exit(0 if main() == EXPECTED else 1)
'''


def repro_script(case: MoECase, expected: str, dump: Optional[str] = None) -> str:
    """The standalone script of ``case`` (``dump``: the path of the recorded ``inputs.pt`` in the bundle)."""
    rec = case.to_record()
    return _SCRIPT.format(label=case.label, case=pprint.pformat(rec, indent=4, sort_dicts=False), seed=case.seed,
                          dump=repr(dump), expected=expected, routing=int(case.routing_method))


def _evidence(source: Optional[str], case: Optional[MoECase]) -> tuple[SourcedCase, Optional[Path]]:
    from .source import parse_source, source_cases  # noqa: PLC0415

    if source is None:
        if not isinstance(case, MoECase):
            raise ValueError("case: expected a MoECase (or a --from-log / --from-dump source)")
        import dataclasses  # noqa: PLC0415

        return SourcedCase(case, ROUTED, None, {f.name: "--case" for f in dataclasses.fields(MoECase)}, "--case"), None
    cases, _ = source_cases(source)
    if len(cases) > 1:
        raise ValueError(f"source: {len(cases)} distinct cases ({', '.join(c.case.label for c in cases)}); pick one "
                         "with --call N")
    sc = cases[0]
    src = parse_source(source)
    folder = None
    if src.kind == "dump" and sc.entry_point == ROUTED:
        folder = src.path if (src.path / "metadata.jsonl").is_file() else src.path / sc.calls[0]
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        if size > MAX_DUMP_BYTES:
            raise ValueError(f"dump: {folder} is {size} bytes, over the {MAX_DUMP_BYTES} a bundle packs")
    return sc, folder


def _rows(runs: Sequence[Any], case: MoECase) -> Any:
    import pandas as pd  # noqa: PLC0415

    from ..run_folder import load_runs  # noqa: PLC0415

    if not runs:
        return pd.DataFrame()
    df = pd.concat([load_runs(r, allow_empty=False) for r in runs], ignore_index=True)
    keep = pd.Series(True, index=df.index)
    for k in ("num_tokens", "hidden_size", "intermediate_size", "num_experts", "local_num_experts",
              "local_expert_offset", "top_k"):
        keep &= df[k] == getattr(case, k)
    return df[keep]


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


def write_bundle(out: Any, *, source: Optional[str] = None, case: Optional[MoECase] = None,
                 runs: Sequence[Any] = (), device: str = "cpu") -> Path:
    """Write the bug bundle of the evidence (see the module docstring); returns its path."""
    from ..bugrepro import reproduce_meta_bug, static_meta_check  # noqa: PLC0415
    from ..environment import environment_info  # noqa: PLC0415

    sc, folder = _evidence(source, case)
    c = sc.case
    v = static_meta_check(c, device) if device == "cpu" else reproduce_meta_bug(c, device)
    rows = _rows(runs, c)
    dump_name = "dump/inputs.pt" if folder is not None and (folder / "inputs.pt").is_file() else None
    report = [f"# fp4moe-diag bug bundle: {c.label}", "", f"Evidence: {sc.origin} ({sc.entry_point}, FlashInfer "
              f"{sc.flashinfer_version or '?'})", "", f"Verdict: **{v.status}** -- {v.reason}", "",
              "| field | value | from |", "| --- | --- | --- |"]
    report += [f"| {k} | {c.to_record()[k]} | {s} |" for k, s in sc.sources.items()]
    if len(rows):
        cols = [x for x in ("backend", "tactic_label", "status", "rel_l2", "time_median_us") if x in rows]
        report += ["", f"## Rows ({len(rows)})", "", rows[cols].to_markdown(index=False)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        _add(tar, "bundle/repro.py", repro_script(c, v.status, dump_name).encode())
        _add(tar, "bundle/case.json", json.dumps(sc.to_dict(), indent=2, default=str).encode())
        _add(tar, "bundle/environment.json", json.dumps(environment_info(device), indent=2, default=str).encode())
        _add(tar, "bundle/verdict.json", json.dumps(v.to_dict(), indent=2, default=str).encode())
        _add(tar, "bundle/rows.csv", rows.to_csv(index=False).encode())
        _add(tar, "bundle/report.md", "\n".join(report).encode())
        if dump_name:
            tar.add(str(folder / "inputs.pt"), arcname=f"bundle/{dump_name}")
            tar.add(str(folder / "metadata.jsonl"), arcname="bundle/dump/metadata.jsonl")
    return out
