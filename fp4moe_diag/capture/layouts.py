"""Weights as an entry point took them -> the suite's canonical layout (the inverse of FlashInfer's preparation).

Canonical (:mod:`fp4moe_diag.problem.inputs`): ``w13 [L, 2I, H/2]`` packed e2m1 with rows ``[0, I)`` up and ``[I, 2I)``
gate, ``w2 [L, H, I/2]``, ue8m0 scale bytes ``[L, rows, K/32]``.

* trtllm-gen (``trtllm_fp4_block_scale_*_moe``, FlashInfer's own preparation as in its tests and
  :func:`fp4moe_diag.backends.flashinfer.trtllm.prepare_trtllm_weights`): gemm1 rows
  ``reorder_rows_for_gated_act_gemm`` (up/gate alternate), then ``shuffle_matrix_a`` (a row permutation,
  ``epilogue_tile_m=128``); scales the same rows, then ``block_scale_interleave`` (the 128x4 swizzle).
  Inverted with FlashInfer's own row indices / ``deinterleave_gated_rows`` and :func:`unswizzle_128x4`.
* SM90 CUTLASS (``cutlass_fused_moe``, ``use_w4_group_scaling``): FlashInfer >= 0.7
  ``interleave_moe_scales_for_sm90_mixed_gemm`` (a reshape/permute: ``[L, R/64, K/128, 16, 16]`` bytes) with
  ``interleave_moe_weights_for_sm90_mixed_gemm`` (a CUDA byte + bit interleave, ported in
  :func:`sm90_interleave_weights`); vLLM's / FlashInfer 0.5's ``[L, K/128, R*4]`` scales with raw weights.
"""

from __future__ import annotations

import functools

import torch

EPILOGUE_TILE_M = 128

# interleave_fp4_weights_for_sm90_mixed_gemm_kernel (moe_gemm_mixed_utils.cu): (mask, left shift) pairs
_SM90_BIT_MOVES = (
    (0x00000080, 24), (0x00000070, 18), (0x00000008, 12), (0x00000007, 6),
    (0x00008000, 13), (0x00007000, 7), (0x00000800, 1), (0x00000700, -5),
    (0x00800000, 2), (0x00700000, -4), (0x00080000, -10), (0x00070000, -16),
    (0x80000000, -1), (0x10000000, 1), (0x60000000, -3), (0x08000000, -13),
    (0x01000000, -11), (0x06000000, -15),
)


@functools.lru_cache(maxsize=None)
def _sm90_bit_perm() -> tuple[int, ...]:
    perm = [-1] * 32
    for mask, shift in _SM90_BIT_MOVES:
        for b in range(32):
            if mask >> b & 1:
                perm[b] = b + shift
    assert sorted(perm) == list(range(32)), perm  # a bijection of the 32 bits
    return tuple(perm)


@functools.lru_cache(maxsize=8)
def _sm90_byte_index(rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(source byte ids, destination byte ids), each ``[rows/2 * cols/64 * 16, 4]``, of one expert."""
    c2 = cols // 2
    blk = torch.arange(rows // 2).view(-1, 1, 1)
    part = torch.arange(cols // 64).view(1, -1, 1)
    lane = torch.arange(16).view(1, 1, -1)
    row = blk // 8 * 16 + blk % 8
    mma = lane // 4
    dst_row = row + (mma % 2) * 8
    col = part * 32 + mma * 8 + lane % 4
    dst_col = part * 32 + lane // 8 * 16 + (lane % 4) * 4
    first, second = row * c2 + col, (row + 8) * c2 + col
    src = torch.stack(torch.broadcast_tensors(first, second, first + 4, second + 4), -1).reshape(-1, 4)
    dst = (dst_row * c2 + dst_col).reshape(-1, 1) + torch.arange(4)
    return src, dst


def _permute_bits(words: torch.Tensor, perm: tuple[int, ...]) -> torch.Tensor:
    out = torch.zeros_like(words)
    for b, d in enumerate(perm):
        out |= ((words >> b) & 1) << d
    return out


def _sm90(w: torch.Tensor, inverse: bool) -> torch.Tensor:
    if w.dim() != 3 or w.dtype != torch.uint8:
        raise ValueError(f"weight: expected [L, n, k/2] uint8, got {tuple(w.shape)} {w.dtype}")
    n, cols = w.shape[1], w.shape[2] * 2
    if n % 16 or cols % 64:
        raise ValueError(f"weight: the SM90 interleave needs n % 16 == 0 and k % 64 == 0, got n={n}, k={cols}")
    src, dst = _sm90_byte_index(n, cols)
    perm = _sm90_bit_perm()
    if inverse:
        inv = [0] * 32
        for b, d in enumerate(perm):
            inv[d] = b
        src, dst, perm = dst, src, tuple(inv)
    flat = w.reshape(w.shape[0], -1).long()
    b = flat[:, src.to(w.device)]  # [L, groups, 4]
    words = b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16 | b[..., 3] << 24
    words = _permute_bits(words, perm)
    out = torch.empty_like(flat)
    bytes_ = torch.stack([(words >> (8 * i)) & 0xFF for i in range(4)], -1)
    out[:, dst.to(w.device).reshape(-1)] = bytes_.reshape(w.shape[0], -1)
    return out.to(torch.uint8).reshape(w.shape)


def sm90_interleave_weights(w: torch.Tensor) -> torch.Tensor:
    """A port of FlashInfer's ``interleave_moe_weights_for_sm90_mixed_gemm(w, "fp4")`` (CUDA only there)."""
    return _sm90(w, inverse=False)


def sm90_deinterleave_weights(w: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`sm90_interleave_weights`."""
    return _sm90(w, inverse=True)


def sm90_unfold_scales(folded: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """The inverse of FlashInfer's ``interleave_moe_scales_for_sm90_mixed_gemm`` for ue8m0 bytes (group 32):
    ``[L, rows/64, k/128, 16, 16]`` (any view of those bytes) -> ``[L, rows, k/32]``."""
    b = folded.contiguous().view(torch.uint8)
    n = b.numel() // (rows * (k // 32)) if rows and k >= 128 else 0
    if rows % 64 or k % 128 or n * rows * (k // 32) != b.numel():
        raise ValueError(f"scales: {tuple(folded.shape)} {folded.dtype} is not FlashInfer's SM90 fold of "
                         f"[L, {rows}, {k // 32}] ue8m0 scales")
    x = b.reshape(n, rows // 64, k // 128, 16, 4, 4)  # [e, r64, kb, folded_m, m_slices, groups]
    return x.permute(0, 1, 4, 3, 2, 5).reshape(n, rows, k // 32).contiguous()


def vllm_sm90_unfold_scales(s: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """The inverse of vLLM's ``_interleave_mxfp4_cutlass_sm90`` (``[L, K/128, R*4]`` bytes) -> ``[L, R, K/32]``."""
    b = s.contiguous().view(torch.uint8)
    n = b.numel() // (rows * (k // 32)) if rows and k >= 128 else 0
    if k % 128 or n * rows * (k // 32) != b.numel():
        raise ValueError(f"scales: {tuple(s.shape)} {s.dtype} is not vLLM's SM90 layout of [L, {rows}, {k // 32}]")
    return b.reshape(n, k // 128, rows, 4).permute(0, 2, 1, 3).reshape(n, rows, k // 32).contiguous()


def swizzle_128x4(s: torch.Tensor) -> torch.Tensor:
    """FlashInfer's ``block_scale_interleave`` (the 128x4 layout) of one ``[M, K]`` scale matrix, M % 128 == 0
    and K % 4 == 0 (no padding), as a flat tensor."""
    m, k = s.shape
    if m % 128 or k % 4:
        raise ValueError(f"scales: the 128x4 swizzle without padding needs M % 128 == 0, K % 4 == 0; got {m}x{k}")
    return s.reshape(m // 128, 4, 32, k // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1).contiguous()


def unswizzle_128x4(flat: torch.Tensor, m: int, k: int) -> torch.Tensor:
    """The inverse of :func:`swizzle_128x4`: ``M*K`` swizzled bytes -> ``[M, K]``."""
    if m % 128 or k % 4 or flat.numel() != m * k:
        raise ValueError(f"scales: {tuple(flat.shape)} is not the unpadded 128x4 swizzle of a {m}x{k} matrix")
    return flat.reshape(m // 128, k // 4, 32, 4, 4).permute(0, 3, 2, 1, 4).reshape(m, k).contiguous()


def _row_index(rows: int) -> torch.Tensor:
    from flashinfer.utils import get_shuffle_matrix_a_row_indices  # noqa: PLC0415

    return get_shuffle_matrix_a_row_indices(torch.empty(rows, 1), EPILOGUE_TILE_M)


def _unshuffle_rows(x: torch.Tensor) -> torch.Tensor:
    idx = _row_index(x.shape[0]).to(x.device)
    out = torch.empty_like(x)
    out[idx] = x  # shuffled[i] = original[idx[i]]
    return out


def _ungate(x: torch.Tensor) -> torch.Tensor:
    """The inverse of ``reorder_rows_for_gated_act_gemm`` (rows alternate up/gate -> [up; gate])."""
    return torch.cat([x[0::2], x[1::2]], 0)


def trtllm_unshuffle(w13, s13, w2, s2, b13, block: int = 32):
    """trtllm-gen's prepared gemm1/gemm2 weights, scales (ue8m0 bytes) and gemm1 bias -> canonical, per expert."""
    L, r1, k1 = w13.shape[0], w13.shape[1], w13.shape[2] * 2
    r2, k2 = w2.shape[1], w2.shape[2] * 2
    s13b, s2b = s13.contiguous().view(torch.uint8), s2.contiguous().view(torch.uint8)
    gw, gs, dw, ds = [], [], [], []
    for e in range(L):
        gw.append(_ungate(_unshuffle_rows(w13[e])))
        gs.append(_ungate(_unshuffle_rows(unswizzle_128x4(s13b[e].reshape(-1), r1, k1 // block))))
        dw.append(_unshuffle_rows(w2[e]))
        ds.append(_unshuffle_rows(unswizzle_128x4(s2b[e].reshape(-1), r2, k2 // block)))
    bias = None if b13 is None else torch.stack([_ungate(b13[e]) for e in range(L)])
    return torch.stack(gw), torch.stack(gs), torch.stack(dw), torch.stack(ds), bias


def trtllm_shuffle(w13, s13, w2, s2, b13, block: int = 32):
    """Canonical -> trtllm-gen's prepared layout (FlashInfer's row helpers, :func:`swizzle_128x4` for the
    scales): what :func:`trtllm_unshuffle` inverts (tests; on SM100 the backend uses FlashInfer's own)."""
    from flashinfer import reorder_rows_for_gated_act_gemm, shuffle_matrix_a  # noqa: PLC0415

    def rows(x: torch.Tensor) -> torch.Tensor:
        return x[_row_index(x.shape[0]).to(x.device)]

    L = w13.shape[0]
    gw = [shuffle_matrix_a(reorder_rows_for_gated_act_gemm(w13[e]), EPILOGUE_TILE_M) for e in range(L)]
    gs = [swizzle_128x4(rows(reorder_rows_for_gated_act_gemm(s13[e]))).reshape(s13[e].shape) for e in range(L)]
    dw = [shuffle_matrix_a(w2[e], EPILOGUE_TILE_M) for e in range(L)]
    ds = [swizzle_128x4(rows(s2[e])).reshape(s2[e].shape) for e in range(L)]
    bias = None if b13 is None else torch.stack(
        [reorder_rows_for_gated_act_gemm(b13[e].reshape(-1, 1)).reshape(-1) for e in range(L)])
    return torch.stack(gw), torch.stack(gs), torch.stack(dw), torch.stack(ds), bias
