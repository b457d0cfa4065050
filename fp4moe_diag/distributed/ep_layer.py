"""Real expert parallelism across ranks: ``torchrun --nproc-per-node N -m fp4moe_diag.distributed.ep_layer ...``.

Every rank builds the same global case (same seed, so the same router and the same top-k) with
``ep_size = world_size`` and owns ``num_experts / world`` experts; it also owns a data-parallel slice of the
tokens.  One layer is then what vLLM's DP + EP path (DeepEP all-to-all, then the routed entry point) does:

1. **dispatch**: each (token, k) pair of the rank's tokens goes to the rank owning its expert,
   ``torch.distributed.all_to_all_single`` over the hidden rows (counts exchanged first), with the expert id and
   the routing weight beside it;
2. **expert compute**: the routed MoE backend runs on what the rank received, as a batch of ``top_k = 1`` tokens
   routed to its local experts (a ``MoEInputs`` of the received rows, this rank's expert weights);
3. **combine**: the weighted expert outputs go back to their tokens' ranks and are summed per token.

The combined output is checked against the single-process float32 reference of the whole case.  A backend that
fails on a rank still joins every collective (it sends zeros and a failure flag), so the others finish, and
its row says ``failed``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, Optional

import torch

from ..problem.case import MoECase
from ..problem.inputs import MoEInputs, build_inputs
from ..measure.correctness import error_metrics
from ..problem.reference import reference_moe
from ..problem.routing import pack_topk
from .env import Dist, finish, init


def token_slice(num_tokens: int, rank: int, world: int) -> slice:
    """The data-parallel tokens of ``rank``: contiguous, sizes differing by at most one."""
    base, extra = divmod(num_tokens, world)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


def local_case(case: MoECase, rank: int, world: int) -> MoECase:
    if case.num_experts % world:
        raise ValueError(f"world_size: {world} ranks must divide num_experts={case.num_experts}")
    per = case.num_experts // world
    return case.replace(local_num_experts=per, local_expert_offset=rank * per)


def slice_experts(full: MoEInputs, lc: MoECase) -> MoEInputs:
    """The global case's inputs restricted to the experts of ``lc`` (the same quantized weights the single-process
    reference uses; building the local case alone would draw other random weights)."""
    sl = slice(lc.local_expert_offset, lc.local_expert_offset + lc.local_num_experts)

    def fp4(t: Any) -> Any:
        gs = t.global_scale
        if gs is not None and gs.dim() > 0 and gs.numel() > 1:
            gs = gs[sl]
        return dataclasses.replace(t, data=t.data[sl], scale=t.scale[sl], global_scale=gs)

    opt = lambda v: None if v is None else v[sl]  # noqa: E731
    return dataclasses.replace(full, case=lc, w13=fp4(full.w13), w2=fp4(full.w2), w13_bias=opt(full.w13_bias),
                               w2_bias=opt(full.w2_bias), swiglu_alpha=opt(full.swiglu_alpha),
                               swiglu_beta=opt(full.swiglu_beta), swiglu_limit=opt(full.swiglu_limit),
                               _dequant_cache={})


def received_inputs(inputs: MoEInputs, hidden: torch.Tensor, experts: torch.Tensor, weights: torch.Tensor) -> MoEInputs:
    """The rank's received pairs as a routed MoE batch: one token per pair, ``top_k = 1``, this rank's weights."""
    n = int(hidden.shape[0])
    case = inputs.case.replace(num_tokens=max(n, 1), top_k=1)
    ids = experts.view(-1, 1).to(torch.int32)
    w = weights.view(-1, 1).to(torch.float32)
    if n == 0:  # a rank that received nothing runs one zero-weight pair on its first local expert
        hidden = torch.zeros((1, inputs.case.hidden_size), dtype=inputs.hidden_states.dtype, device=hidden.device)
        ids = torch.full((1, 1), inputs.case.local_expert_offset, dtype=torch.int32, device=hidden.device)
        w = torch.zeros((1, 1), dtype=torch.float32, device=hidden.device)
    return dataclasses.replace(
        inputs, case=case, hidden_states=hidden.contiguous(), topk_ids=ids, topk_weights=w,
        packed_topk_ids=pack_topk(ids, w), router_logits=torch.zeros((ids.shape[0], case.num_experts),
                                                                        dtype=torch.float32, device=hidden.device),
        _dequant_cache={})


def _exchange(x: torch.Tensor, send_counts: list[int], recv_counts: list[int]) -> torch.Tensor:
    import torch.distributed as dist

    out = torch.empty((sum(recv_counts), *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_to_all_single(out, x.contiguous(), recv_counts, send_counts)
    return out


def _sync(dev: torch.device) -> None:
    import torch.distributed as dist

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    dist.barrier()


def ep_layer(case: MoECase, backend_name: str, d: Dist, device: Any) -> dict[str, Any]:
    """One EP layer on this rank (inside an initialised process group); returns the rank's row."""
    import torch.distributed as dist

    from ..backends import get_backend

    dev = torch.device(device)
    world, rank = d.world_size, d.rank
    lc = local_case(case, rank, world)
    full = build_inputs(case.replace(local_num_experts=case.num_experts, local_expert_offset=0), dev)
    inputs = slice_experts(full, lc)
    per = lc.local_num_experts
    mine = token_slice(case.num_tokens, rank, world)
    ids = inputs.topk_ids[mine].long()  # [t, k] global
    tok = torch.arange(mine.start, mine.stop, device=dev).repeat_interleave(case.top_k)
    flat_e, flat_w = ids.reshape(-1), inputs.topk_weights[mine].reshape(-1).float()
    dest = flat_e // per
    order = torch.argsort(dest, stable=True)
    flat_e, flat_w, tok, dest = flat_e[order], flat_w[order], tok[order], dest[order]
    send = torch.bincount(dest, minlength=world)
    recv = torch.empty_like(send)
    _sync(dev)
    t0 = time.perf_counter()
    dist.all_to_all_single(recv, send)
    sc, rc = send.tolist(), recv.tolist()
    rh = _exchange(inputs.hidden_states[tok], sc, rc)
    re_ = _exchange(flat_e.to(torch.int32).view(-1, 1), sc, rc).view(-1)
    rw = _exchange(flat_w.view(-1, 1), sc, rc).view(-1)
    _sync(dev)
    t1 = time.perf_counter()
    row: dict[str, Any] = {"rank": rank, "world_size": world, "backend": backend_name, "status": "ok",
                           "tokens_owned": mine.stop - mine.start, "pairs_received": int(sum(rc))}
    y = torch.zeros((int(sum(rc)), case.hidden_size), dtype=torch.float32, device=dev)
    try:
        be = get_backend(backend_name)
        sup = be.supports(dev)
        if not sup.ok:
            raise RuntimeError(f"unsupported: {sup.reason}")
        local = received_inputs(inputs, rh, re_, rw)
        prepared = be.prepare(local)
        tactic = be.default_tactic(local.case) or be.tactics(local.case, prepared)[0]
        out = be.run(prepared, tactic).float()
        y = out[: int(sum(rc))] if sum(rc) else y
    except Exception as e:  # noqa: BLE001 - this rank's failure is its row; the collectives still complete
        row.update(status="failed", error_message=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    _sync(dev)
    t2 = time.perf_counter()
    back = _exchange(y, rc, sc)  # the weighted expert outputs, in this rank's send order
    combined = torch.zeros((case.num_tokens, case.hidden_size), dtype=torch.float32, device=dev)
    combined.index_add_(0, tok, back)
    _sync(dev)
    t3 = time.perf_counter()
    flags = torch.tensor([row["status"] == "ok"], dtype=torch.int32, device=dev)
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    ref = reference_moe(full, torch.float32)[mine]
    m = error_metrics(combined[mine].to(torch.bfloat16), ref)
    row.update(dispatch_us=(t1 - t0) * 1e6, compute_us=(t2 - t1) * 1e6, combine_us=(t3 - t2) * 1e6,
               layer_us=(t3 - t0) * 1e6, all_ranks_ok=bool(flags.item()), rel_l2=m["rel_l2"],
               correct=bool(m["correct"]) and row["status"] == "ok")
    return row


def main(argv: Optional[list[str]] = None) -> int:
    from ..problem.shapes import load_vllm_cases

    ap = argparse.ArgumentParser(prog="fp4moe-diag ep-layer", description="one EP layer over the ranks of torchrun")
    ap.add_argument("--model", default="gpt-oss-20b")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--hidden-scale", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", default=None, help="rank 0 writes every rank's row here")
    a = ap.parse_args(argv)
    if a.tokens < 1 or a.hidden_scale < 1:
        ap.error("argument --tokens/--hidden-scale: expected integers >= 1")
    d = init(a.device)
    if not d.distributed:
        ap.error("ep-layer needs torchrun with --nproc-per-node >= 2 (world size 1 has no expert parallelism)")
    from ..runs import scaled_case

    try:
        case = scaled_case(load_vllm_cases(models=[a.model], ep_sizes=[1], token_counts=[a.tokens])[0], a.hidden_scale)
    except ValueError as e:
        ap.error(f"argument --model: {e}")
    dev = f"cuda:{d.local_rank}" if a.device == "cuda" else "cpu"
    row = ep_layer(case, a.backend, d, dev)
    import torch.distributed as dist

    rows: list = [None] * d.world_size
    dist.all_gather_object(rows, row)
    if d.rank == 0:
        layer = max(r["layer_us"] for r in rows)
        text = json.dumps({"case": case.label, "layer_us_slowest_rank": layer, "ranks": rows}, indent=1, default=str)
        print(text)
        if a.json:
            with open(a.json, "w") as f:
                f.write(text)
    finish()
    return 0


if __name__ == "__main__":  # pragma: no cover - run by torchrun
    sys.exit(main())
