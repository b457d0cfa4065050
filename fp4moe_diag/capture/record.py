"""Record a real FlashInfer log or Flight-Recorder dump of one MoE call: ``python -m fp4moe_diag.capture.record``.

FlashInfer's ``@flashinfer_api`` reads ``FLASHINFER_LOGLEVEL``/``FLASHINFER_LOGDEST``/``FLASHINFER_DUMP_DIR`` when
``flashinfer.api_logging`` is imported, so :func:`record` runs this module in a fresh subprocess with them set.
The call is the suite's case through FlashInfer's own entry point with the weights prepared as that entry point's
kernel takes them.  On a GPU it is the real call (``cutlass_fused_moe`` on SM90, with
``FP4MOE_CUTLASS_MODULE`` for the prebuilt module); on a CPU machine it runs FlashInfer's real Python over the
suite's stubs (:mod:`fp4moe_diag.backends.flashinfer.stubs`, :func:`~..stubs.stub_trtllm_gen_module`), whose
"kernel" writes ``--output`` (the float32 reference, a corrupted one, or nothing) into the output tensor, so
the dump's ``outputs.pt`` is known.  ``--no-stub`` on CPU: the call fails for lack of a GPU after FlashInfer
logged / dumped its inputs (a dump without outputs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

ENTRY = {"routed": "trtllm_fp4_block_scale_routed_moe", "logits": "trtllm_fp4_block_scale_moe",
         "cutlass": "cutlass_fused_moe"}


def _case(args: argparse.Namespace):
    from ..problem.case import MoECase  # noqa: PLC0415
    from ..problem.shapes import load_vllm_cases  # noqa: PLC0415

    if args.model:
        cases = load_vllm_cases(models=[args.model], ep_sizes=[args.ep], token_counts=[args.tokens])
        if not cases:
            raise ValueError(f"--model/--ep: no {args.model} EP{args.ep} in data/vllm_shapes.csv")
        case = cases[0]
        return case.replace(local_expert_offset=args.ep_rank * case.local_num_experts, seed=args.seed)
    local = args.experts // args.ep
    return MoECase(num_tokens=args.tokens, hidden_size=args.hidden, intermediate_size=args.hidden,
                   num_experts=args.experts, top_k=args.top_k, local_num_experts=local,
                   local_expert_offset=args.ep_rank * local, seed=args.seed, model="small")


def _output(inputs: Any, mode: str) -> Optional[torch.Tensor]:
    if mode == "none":
        return None
    from ..problem.reference import reference_moe  # noqa: PLC0415

    ref = reference_moe(inputs, torch.float32).to(torch.bfloat16)
    return ref if mode == "reference" else ref + 1.0


def _trtllm_kwargs(inputs: Any, entry: str, out: torch.Tensor) -> dict:
    from ..backends.flashinfer.trtllm import prepare_trtllm_weights, routed_kwargs  # noqa: PLC0415
    from . import layouts  # noqa: PLC0415

    kw = routed_kwargs(inputs, output=out, tune_max_num_tokens=max(1, inputs.case.num_tokens))
    if out.is_cuda:
        kw = prepare_trtllm_weights(kw, inputs.case)
    else:  # FlashInfer's shuffle_matrix_sf_a needs CUDA: the same layout from the suite's port
        sdt = kw["gemm1_weights_scale"].dtype
        w13, s13, w2, s2, b13 = layouts.trtllm_shuffle(
            kw["gemm1_weights"], kw["gemm1_weights_scale"].view(torch.uint8), kw["gemm2_weights"],
            kw["gemm2_weights_scale"].view(torch.uint8), kw["gemm1_bias"], inputs.case.block_size)
        kw.update(gemm1_weights=w13, gemm1_weights_scale=s13.view(sdt), gemm2_weights=w2,
                  gemm2_weights_scale=s2.view(sdt), gemm1_bias=b13)
        kw["enable_pdl"] = False
    if entry == ENTRY["logits"]:
        kw["routing_logits"] = inputs.router_logits.to(torch.bfloat16)
        kw.pop("topk_ids")
    return kw


def _cutlass_kwargs(inputs: Any, out: torch.Tensor) -> dict:
    from ..backends.flashinfer.cutlass import CutlassBackend  # noqa: PLC0415

    if out.is_cuda:  # FlashInfer's own SM90 preparation (the prebuilt module of FP4MOE_CUTLASS_MODULE if set)
        from ..backends.flashinfer.cutlass import load_slim_module_if_configured  # noqa: PLC0415

        load_slim_module_if_configured()
        kw = CutlassBackend()._kwargs(inputs)
    else:  # interleave_moe_weights_for_sm90_mixed_gemm is CUDA only: the suite's port of it
        from flashinfer.fused_moe.prepare import interleave_moe_scales_for_sm90_mixed_gemm as fold  # noqa: PLC0415

        from . import layouts  # noqa: PLC0415

        kw = CutlassBackend(scale_layout="raw")._kwargs(inputs)
        kw.update(fc1_expert_weights=layouts.sm90_interleave_weights(inputs.w13.data),
                  fc2_expert_weights=layouts.sm90_interleave_weights(inputs.w2.data),
                  quant_scales=[fold(inputs.w13.scale).view(torch.int32), fold(inputs.w2.scale).view(torch.int32)])
        kw["enable_pdl"] = False
    kw["output"] = out
    return kw


@contextlib.contextmanager
def _stubs(entry: str, out: torch.Tensor, value: Optional[torch.Tensor]):
    """FlashInfer's Python over the suite's stubs; the stub kernel writes ``value`` into ``out``."""
    from ..backends.flashinfer import stubs  # noqa: PLC0415
    from ..backends.flashinfer.stubs import TvmFfiPackingStub, stub_trtllm_gen_module

    def fill(*a: Any) -> None:
        if value is not None:
            out.copy_(value)

    if entry == ENTRY["cutlass"]:
        saved = stubs.CutlassStubRunner.run_moe
        stubs.CutlassStubRunner.run_moe = lambda self, *a: (saved(self, *a), fill())
        try:
            with stubs.stub_cutlass_module():
                yield
        finally:
            stubs.CutlassStubRunner.run_moe = saved
        return
    saved_pack = TvmFfiPackingStub._pack

    def pack(self: Any, name: str, args: tuple) -> None:
        saved_pack(self, name, args)
        if name == "trtllm_fp4_block_scale_moe":
            fill()

    TvmFfiPackingStub._pack = pack
    try:
        with stub_trtllm_gen_module():
            yield
    finally:
        TvmFfiPackingStub._pack = saved_pack


def table_cases(tokens: int) -> list:
    """Every MXFP4 row of data/vllm_shapes.csv at ``tokens``, on its last EP rank."""
    from ..problem.shapes import load_vllm_cases  # noqa: PLC0415

    cases = [c for c in load_vllm_cases(token_counts=[tokens]) if c.weight_format.value == "mxfp4"]
    return [c.replace(local_expert_offset=c.num_experts - c.local_num_experts) for c in cases]


def meta_routed_kwargs(case: Any) -> dict:
    """The routed call's arguments for ``case`` as meta tensors: FlashInfer logs them (level 3) before the call
    fails, with no memory spent (the level-3 log of a full-size table shape on a CPU machine)."""
    t, h, i, k, n = case.num_tokens, case.hidden_size, case.intermediate_size, case.top_k, case.local_num_experts

    def m(*shape: int, dt: Any = torch.float32) -> torch.Tensor:
        return torch.empty(*shape, dtype=dt, device="meta")

    return dict(topk_ids=m(t, k, dt=torch.int32), routing_bias=None, hidden_states=m(t, h, dt=torch.bfloat16),
                hidden_states_scale=None, gemm1_weights=m(n, 2 * i, h // 2, dt=torch.uint8),
                gemm1_weights_scale=m(n, 2 * i, h // 32, dt=torch.float8_e4m3fn), gemm1_bias=m(n, 2 * i),
                gemm1_alpha=m(n), gemm1_beta=m(n), gemm1_clamp_limit=m(n), gemm2_weights=m(n, h, i // 2, dt=torch.uint8),
                gemm2_weights_scale=m(n, h, i // 32, dt=torch.float8_e4m3fn), gemm2_bias=m(n, h),
                output1_scale_scalar=None, output1_scale_gate_scalar=None, output2_scale_scalar=None,
                num_experts=case.num_experts, top_k=k, n_group=None, topk_group=None, intermediate_size=i,
                local_expert_offset=case.local_expert_offset, local_num_experts=n, routed_scaling_factor=None,
                routing_method_type=int(case.routing_method), do_finalize=True, output=None,
                tune_max_num_tokens=max(1, t), enable_pdl=False)


def run_meta_calls(cases: Sequence[Any]) -> None:
    import flashinfer.fused_moe as fm  # noqa: PLC0415

    for case in cases:
        try:
            fm.trtllm_fp4_block_scale_routed_moe(**meta_routed_kwargs(case))
        except Exception as e:  # noqa: BLE001 - meta tensors: the call fails after FlashInfer logged it
            print(f"record: {case.label}: {type(e).__name__} after logging")


def run_call(args: argparse.Namespace) -> None:
    import flashinfer.fused_moe as fm  # noqa: PLC0415  (after the FLASHINFER_* variables are set)

    from ..problem.inputs import build_inputs  # noqa: PLC0415

    if args.meta:
        return run_meta_calls(table_cases(args.tokens) if args.model == "all-mxfp4" else [_case(args)])
    case = _case(args)
    inputs = build_inputs(case, args.device)
    entry = ENTRY[args.entry]
    out = torch.full((case.num_tokens, case.hidden_size), float("nan"), dtype=torch.bfloat16, device=args.device)
    kw = _cutlass_kwargs(inputs, out) if entry == ENTRY["cutlass"] else _trtllm_kwargs(inputs, entry, out)
    fn = getattr(fm, entry)
    if args.device != "cpu" or args.no_stub:
        try:
            fn(**kw)
            if out.is_cuda:
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - on CPU the call fails after FlashInfer recorded its inputs
            print(f"record: the call failed after FlashInfer recorded it: {type(e).__name__}: {str(e)[:200]}")
        return
    with _stubs(entry, out, _output(inputs, args.output)):
        fn(**kw)


def record(entry: str, *, level: int, logdest: Any = None, dump_dir: Any = None, extra: Sequence[str] = (),
           timeout: float = 600) -> subprocess.CompletedProcess:
    """Run :func:`run_call` in a fresh interpreter with FlashInfer's logging variables set."""
    env = dict(os.environ, FLASHINFER_LOGLEVEL=str(level))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if logdest is not None:
        env["FLASHINFER_LOGDEST"] = str(logdest)
    if dump_dir is not None:
        env["FLASHINFER_DUMP_DIR"] = str(dump_dir)
    cmd = [sys.executable, "-m", "fp4moe_diag.capture.record", "--entry", entry, *extra]
    cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if cp.returncode:
        raise RuntimeError(f"record failed ({cp.returncode}): {cp.stderr[-2000:]}")
    return cp


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fp4moe_diag.capture.record", description=__doc__.split("\n")[0])
    p.add_argument("--entry", choices=sorted(ENTRY), default="routed")
    p.add_argument("--model", default=None, help="a model of data/vllm_shapes.csv (else the small case below)")
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--ep-rank", type=int, default=0)
    p.add_argument("--tokens", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256, help="H = I of the small case")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--output", choices=("reference", "corrupt", "none"), default="reference",
                   help="CPU stub: what the stub kernel writes into the output")
    p.add_argument("--no-stub", action="store_true", help="CPU: call without stubs (fails after logging)")
    p.add_argument("--meta", action="store_true", help="routed call of meta tensors: a level-3 log of any size, no "
                   "memory (--model all-mxfp4: every MXFP4 row of the table, last EP rank)")
    run_call(p.parse_args(argv))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
