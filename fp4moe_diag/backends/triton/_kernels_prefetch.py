"""The L2 prefetches of ``-pdlpf`` / ``-pdlpfe`` (:mod:`._kernels_ps`, gemm2 with ``PDL`` 2 / 3): gemm2's first weight
chunks into L2 before its grid-dependency wait.  Measured slower (``-pdlpf``) or level (``-pdlpfe``) with ``-pdl``
(configs.PS_PDL_CONFIGS' notes), kept for the labels of the runs that measured them."""

from __future__ import annotations

import triton
import triton.language as tl

# $1 / $2: a 512-byte chunk of the ps weights and its 32 scale bytes; into L2, no registers or shared memory touched
_PF_ASM = tl.constexpr("""
{
  cp.async.bulk.prefetch.L2.global [$1], 512;
  cp.async.bulk.prefetch.L2.global [$2], 32;
  mov.u32 $0, 0;
}
""")


# -pdlpfe: one thread per slab ($3: the slab's index in the tile == %tid.x) prefetches its whole range ($4 weight
# bytes at $1, $5 scale bytes at $2) with an L2 evict_last policy, so that gemm1's streaming reads do not evict it
_PF1_ASM = tl.constexpr("""
{
  .reg .pred p;
  .reg .b32 t;
  .reg .b64 pol;
  mov.u32 t, %tid.x;
  setp.eq.u32 p, t, $3;
  createpolicy.fractional.L2::evict_last.b64 pol, 1.0;
  @p cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], $4, pol;
  @p cp.async.bulk.prefetch.L2.global.L2::cache_hint [$2], $5, pol;
  mov.u32 $0, 0;
}
""")



@triton.jit
def _l2_prefetch(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S: tl.constexpr,
                 PF_C: tl.constexpr):
    """Prefetch into L2 the first ``PF_C`` chunks (512 weight bytes + 32 scale bytes each) of slabs ``slab0 ..
    slab0 + S - 1`` from chunk ``chunk0`` of one expert's ps matrices; indices past the matrix are clamped to its
    last slab / chunk (a repeated prefetch, never an address outside it)."""
    sl = tl.minimum(slab0 + tl.arange(0, S), n_slabs - 1).to(tl.int64)[:, None]
    ch = tl.minimum(chunk0 + tl.arange(0, PF_C), n_chunks - 1)[None, :]
    tl.inline_asm_elementwise(_PF_ASM, constraints="=r,l,l", args=[w_base + sl * stride_ws + ch * 512,
                                                                    s_base + sl * stride_ss + ch * 32],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _l2_prefetch_slabs(w_base, s_base, slab0, chunk0, n_slabs, n_chunks, stride_ws, stride_ss, S: tl.constexpr,
                       PF_C: tl.constexpr):
    """As :func:`_l2_prefetch`, one bulk prefetch per slab (its chunks are contiguous) issued by thread ``i`` for
    slab ``i`` of the tile (a slab whose holder is another thread is skipped: a hint, never a fault), evict_last."""
    i = tl.arange(0, S)
    sl = tl.minimum(slab0 + i, n_slabs - 1).to(tl.int64)
    n = tl.minimum(n_chunks - chunk0, PF_C)
    tl.inline_asm_elementwise(_PF1_ASM, constraints="=r,l,l,r,r,r",
                              args=[w_base + sl * stride_ws + chunk0 * 512, s_base + sl * stride_ss + chunk0 * 32, i,
                                    tl.full((S,), 512, tl.int32) * n, tl.full((S,), 32, tl.int32) * n],
                              dtype=tl.int32, is_pure=False, pack=1)
