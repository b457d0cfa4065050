#!/usr/bin/env bash
# What each part of our Triton K loops costs (issue #25, the measured reason per shape): every decode and prefill
# winner of the headline (s15b-d) timed beside its ablations, LABEL~nodeq (the same loads and wgmmas, no dequant, at
# most the tactic's registers), LABEL~load (only the weight and scale loads, pipelined as deep) and LABEL~seq (those
# bytes, each program's from one contiguous range: a layout made for the tile), one method (CUDA-graph
# replays, L2 flushed, median of 30, CUPTI kernel time per kernel), the read ceiling measured in the same process
# (python -m fp4moe_diag.profiling.ablate; backends/triton/_kernels_ablate.py). Under the image's Triton (3.6.0).
# Run from the repository root on the device with .whl and .git_commit carried (no FlashInfer, no triton_kernels):
#   run(command="bash tools/device/plans/ablate.sh", carry=[".whl", ".git_commit"])
# About 7 minutes of device time (each variant compiles once); the CSVs come back in $OUT/runs.tgz (r/ablate-*.csv):
# put them in data/runs/<date>-nvidia-h200-<tag>/ with a PROVENANCE.md (the table: profiling.ablate.markdown).
set -u
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
plan_start ablate
# decode: the winners at 20b EP1 T = 1 / 16 / 64 and 120b EP4 T = 64 (goals 2 and 3)
ablate 20b-ep1-decode gpt-oss-20b 1 1,16,64 $(left 240) m16n64k256w4s3-ps-sk2-pdl m16n128k128w4s3-ps-g2sk2-pdl \
  m16n128k128w4s3-ps-pdl
ablate 120b-ep4-t64 gpt-oss-120b 4 64 $(left 300) m16n128k128w4s3-ps-g2sk2-pdl
# prefill: the 16-warp -gu tiles at 20b EP1 / EP2 T = 4096 (goal 4; EP2: the one shape where ours trails)
ablate 20b-ep2-t4096 gpt-oss-20b 2 4096 $(left 420) m128n128k64w16s4-ps-gu-g2n256
ablate 20b-ep1-t4096 gpt-oss-20b 1 4096 $(left 540) m128n128k64w16s3-ps-gu-g2n256-t64
plan_finish
