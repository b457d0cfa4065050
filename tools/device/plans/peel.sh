#!/usr/bin/env bash
# The -pk tactics (backends/triton/configs_peel.py: the K steps inside K without K masks, then the rest masked) against
# their plain twins, one sweep: the decode winners at 20b EP1, 20b EP2 and 120b EP4 (MODELS), T = 1, 4, 16, 64
# (TOKENS), with and without -pdl / -fs, all of them timed in full (no screening cut), one method (CUDA-graph
# replays, L2 flushed, CUPTI kernel time). Read it with
#   python -m fp4moe_diag twins data/runs/<run> --variant=-ps-pk --base=-ps
# Run from the repository root on the device with .whl and .git_commit carried (our kernels only):
#   run(command="bash tools/device/plans/peel.sh", carry=[".whl", ".git_commit"])
# About 5 minutes cold. $OUT/runs.tgz: the run folder (import_gpu_bundle.py).
set -u
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
plan_start peel
timeout $(left ${PEEL_S:-540}) python3 -m fp4moe_diag sweep --backends triton \
  --models ${MODELS:-gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4} --tokens ${TOKENS:-1,4,16,64} $SWEEP_ARGS --screen-top 40 \
  --tactics 'triton=^(m16n64k256w4s3-ps(-pk)?-sk[24]|m16n128k128w4s[34]-ps(-pk)?|m16n128k128w4s3-ps(-pk)?-g2sk2|m16n128k256w8s3-ps(-pk)?-sk2-pdl)(-pdl)?(-fs)?$' \
  --out /tmp/r/peel 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "sweep done"
plan_finish
