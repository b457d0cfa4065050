"""What a prepared case of our Triton backend holds (:class:`TritonPrepared`): contiguous weights, the pair groupings
per BLOCK_M (and the tail-block pairs of the ``-tN`` tactics), workspaces and output buffers, all made before any
timed call.  No triton."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ...problem.inputs import MoEInputs
from . import ps_layout
from .grouping import ExpertGrouping, fused_tail_grouping, group_pairs_by_expert, tail_groupings
from .loading import load_kernels


@dataclass
class TritonPrepared:
    """Everything ``run`` needs: contiguous weights, groupings per BLOCK_M, workspaces."""

    inputs: MoEInputs
    hidden: torch.Tensor  # bf16 [T, H], contiguous
    w13: torch.Tensor
    w13_scale: torch.Tensor
    w2: torch.Tensor
    w2_scale: torch.Tensor
    w13_bias: Optional[torch.Tensor]
    w2_bias: Optional[torch.Tensor]
    alpha: Optional[torch.Tensor]
    beta: Optional[torch.Tensor]
    limit: Optional[torch.Tensor]
    topk_weights: torch.Tensor  # fp32 [T * k]
    activation: int
    pair_out: torch.Tensor  # bf16 [T * k, H]: gemm2's one plane (split 1); rows of non-local pairs stay zero
    out_bf16: torch.Tensor  # bf16 [T, H]: the top-k sum when the caller passes no output
    groupings: dict[int, ExpertGrouping] = field(default_factory=dict)
    inter_buf: Optional[torch.Tensor] = None  # bf16 [max padded pairs, I]
    part_bufs: dict[int, torch.Tensor] = field(default_factory=dict)  # split_k -> fp32 [S, rows, 2I]
    pair_planes: dict[int, torch.Tensor] = field(default_factory=dict)  # split_k > 1 -> fp32 [S, T*k, H]
    x2_refusal: Optional[str] = None  # why the x2 tactics cannot run these weights exactly (None: they can)
    ps: Optional[tuple[torch.Tensor, ...]] = None  # (w13, w13_scale, w2, w2_scale) in the ps layout, made in prepare
    ps_gu: Optional[tuple[torch.Tensor, torch.Tensor]] = None  # (w13, w13_scale) gate/up-interleaved: gate_up_weights
    counter_bufs: dict[str, torch.Tensor] = field(default_factory=dict)  # -fs: "gemm1" / "gemm2" -> int32 zeros
    local_buf: Optional[torch.Tensor] = None  # int32 [T * k]: local expert id per pair, -1 on another rank
    tail_groups: dict[tuple[int, int], tuple[ExpertGrouping, ExpertGrouping]] = field(default_factory=dict)
    fused_groups: dict[tuple[int, int], tuple[ExpertGrouping, int]] = field(default_factory=dict)  # -tNf
    tm_copies: dict[tuple[str, int, int], tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # -tm

    def local_pairs(self) -> Optional[torch.Tensor]:
        """The top-k sum's local-pair mask (int32 ``[T * k]``, < 0: the pair's expert is on another rank), made on
        first use; None when every expert is local (EP1: the sum reads every row, no mask to load)."""
        c = self.inputs.case
        if c.local_num_experts == c.num_experts:
            return None
        if self.local_buf is None:
            self.local_buf = self.inputs.local_topk_ids.to(device=self.pair_out.device, dtype=torch.int32).flatten()
        return self.local_buf

    def grouping(self, block_m: int) -> ExpertGrouping:
        """The grouping for ``block_m`` (made on first use), with an intermediate buffer large enough."""
        if block_m not in self.groupings:
            c = self.inputs.case
            weights = self.topk_weights.view(self.inputs.topk_weights.shape)
            g = group_pairs_by_expert(self.inputs.local_topk_ids, c.local_num_experts, block_m, weights)
            self.groupings[block_m] = g
            self._inter_rows(g.num_padded_pairs)
        return self.groupings[block_m]

    def tail_groupings(self, block_m: int, tail_m: int) -> tuple[ExpertGrouping, ExpertGrouping]:
        """The two groupings of a ``-tN`` tactic (made on first use; :func:`.grouping.tail_groupings`): each
        expert's pairs in blocks of ``block_m``, and its last ``<= tail_m`` pairs in one block of ``tail_m``; the
        intermediate buffer holds both, the tail grouping's rows after the other's."""
        key = (block_m, tail_m)
        if key not in self.tail_groups:
            c = self.inputs.case
            weights = self.topk_weights.view(self.inputs.topk_weights.shape)
            gs = tail_groupings(self.inputs.local_topk_ids, c.local_num_experts, block_m, tail_m, weights)
            self.tail_groups[key] = gs
            self._inter_rows(gs[0].num_padded_pairs + gs[1].num_padded_pairs)
        return self.tail_groups[key]

    def fused_tail_grouping(self, block_m: int, over_m: int) -> tuple[ExpertGrouping, int]:
        """The grouping of a ``-tNf`` tactic and its blocks with a tail (made on first use;
        :func:`.grouping.fused_tail_grouping`), with an intermediate buffer large enough."""
        key = (block_m, over_m)
        if key not in self.fused_groups:
            c = self.inputs.case
            weights = self.topk_weights.view(self.inputs.topk_weights.shape)
            self.fused_groups[key] = fused_tail_grouping(self.inputs.local_topk_ids, c.local_num_experts, block_m,
                                                         over_m, weights)
            self._inter_rows(self.fused_groups[key][0].num_padded_pairs)
        return self.fused_groups[key]

    def _inter_rows(self, rows: int) -> None:
        """Grow the intermediate buffer (bf16 ``[rows, I]``) to at least ``rows`` rows."""
        if self.inter_buf is None or self.inter_buf.shape[0] < rows:
            self.inter_buf = torch.empty((max(rows, 1), self.inputs.case.intermediate_size), dtype=torch.bfloat16,
                                         device=self.pair_out.device)

    def gate_up_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """w13 and its scales in the ps layout with gate / up interleaved per slab (tactics ``-gu``,
        :func:`.ps_layout.shuffle_gate_up`): made on the first -gu launcher of this case (not timed), then kept.
        It costs the ps w13 bytes once more (gpt-oss-20b, 32 experts: 265 MB + 17 MB of scales; 120b EP1: 1.06 GB
        + 66 MB), only in runs that use -gu."""
        if self.ps_gu is None:
            self.ps_gu = ps_layout.shuffle_gate_up(self.w13, self.w13_scale)
        return self.ps_gu

    def tile_major_weights(self, which: str, slabs: int, chunks: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``which`` ("w13", "w13_gu" or "w2") and its scales stored tile by tile for tiles of ``slabs`` slabs by
        ``chunks`` chunks (tactics ``-tm``, :func:`.ps_layout.tile_major`): made on first use (not timed); the last two
        kept, so a sweep holds at most two more copies of the weights."""
        key = (which, slabs, chunks)
        if key not in self.tm_copies:
            if which == "w13_gu":
                w, sc = self.gate_up_weights()
            elif which in ("w13", "w2") and self.ps is not None:
                w, sc = self.ps[:2] if which == "w13" else self.ps[2:]
            else:
                raise ValueError(f"which: expected w13, w13_gu or w2 of weights with a ps layout, got {which!r} "
                                 f"(ps layout: {self.ps is not None})")
            while len(self.tm_copies) >= 2:
                self.tm_copies.pop(next(iter(self.tm_copies)))
            self.tm_copies[key] = (ps_layout.tile_major(w, slabs, chunks, which),
                                   ps_layout.tile_major(sc, slabs, chunks, which))
        return self.tm_copies[key]

    def gemm1_partials(self, split_k: int, rows: int) -> Optional[torch.Tensor]:
        """gemm1's fp32 partials ``[split_k, >= rows, 2I]`` for ``split_k`` > 1 (None for one split)."""
        if split_k == 1:
            return None
        part = self.part_bufs.get(split_k)
        if part is None or part.shape[1] < rows:
            part = torch.empty((split_k, max(rows, 1), 2 * self.inputs.case.intermediate_size), dtype=torch.float32,
                               device=self.pair_out.device)
            self.part_bufs[split_k] = part
        return part

    def gemm2_planes(self, split_k: int) -> torch.Tensor:
        """gemm2's output planes ``[split_k, T*k, H]``.  They start as zeros: rows of pairs routed to other ranks are
        never written.  One split writes its per-pair products as bf16 (as triton_kernels does before its reduction):
        half the bytes of fp32 for gemm2 to write and the top-k sum to read (at 20b EP1 T=4096, 94 of 189 MB; the
        top-k sum kernel took 53 us reading fp32, Nsight Compute s7-profile); several splits keep fp32 partial sums,
        which are not yet products."""
        if split_k == 1:
            return self.pair_out.unsqueeze(0)
        planes = self.pair_planes.get(split_k)
        if planes is None:
            planes = torch.zeros((split_k, *self.pair_out.shape), dtype=torch.float32, device=self.pair_out.device)
            self.pair_planes[split_k] = planes
        return planes


    def arrival_counters(self, gemm: str, n: int) -> torch.Tensor:
        """The int32 arrival counters (at least ``n``) of ``gemm``'s fused end (tactics ``-fs``): zeroed here, once
        (bind time, never in the timed call); each call leaves them zero (the kernels reset what they count)."""
        buf = self.counter_bufs.get(gemm)
        if buf is None or buf.numel() < n:
            buf = torch.zeros(max(n, 1), dtype=torch.int32, device=self.pair_out.device)
            self.counter_bufs[gemm] = buf
        return buf

    def fused_sum(self, out: torch.Tensor, n_tiles: int) -> Any:
        """gemm2's fused top-k sum into ``out`` (:class:`.launch.FusedSum`): counters per (token, N tile), each
        token's local pairs (pairs on other ranks never arrive), and the tokens with none (their rows get zeros)."""
        t, k = self.inputs.local_topk_ids.shape
        per_token = (self.inputs.local_topk_ids >= 0).sum(dim=1).to(device=self.pair_out.device, dtype=torch.int32)
        none = torch.nonzero(per_token == 0).flatten().to(torch.int32)
        orphans = torch.full((-(-none.numel() // 16) * 16,), -1, dtype=torch.int32, device=self.pair_out.device)
        orphans[:none.numel()] = none
        return load_kernels().FusedSum(out=out, counters=self.arrival_counters("gemm2", t * n_tiles),
                                       token_pairs=per_token.contiguous(), orphans=orphans, top_k=k)
