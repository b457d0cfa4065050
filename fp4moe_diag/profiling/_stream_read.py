"""The streaming-read kernel of :mod:`.read_floor`: each program reads ``CHUNK`` contiguous int32 words, ``BLOCK`` a
step (``BLOCK / (32 * num_warps)`` words a thread a step, all loads of a step in flight at once), and stores their
int32 sum (wrapping), so that nothing is written but one word a program and every word read counts in the result.
Imported on first use (it imports triton)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _stream_read_kernel(src, out, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * CHUNK
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for off in range(0, CHUNK, BLOCK):
        acc += tl.load(src + base + off + tl.arange(0, BLOCK))
    tl.store(out + tl.program_id(0), tl.sum(acc, axis=0))


def stream_read_launch(words, sums, chunk_words: int, block_words: int, num_warps: int, num_stages: int):
    """The bare launch of one read of ``words`` (int32, a whole number of ``chunk_words``) into ``sums`` (one int32 a
    chunk): a callable with nothing of ours inside but the launch."""
    grid = (words.numel() // chunk_words,)
    kernel = _stream_read_kernel[grid]

    def launch() -> None:
        kernel(words, sums, CHUNK=chunk_words, BLOCK=block_words, num_warps=num_warps, num_stages=num_stages)

    return launch
