#!/usr/bin/env bash
# The persistent tactics (backends/triton/configs_persist.py: -pt, each program loops over tiles with its K loop
# pipelined per tile; -ptf, the tile and K loops flattened into one, pipelined across tiles) against their plain twins,
# one sweep: the decode winners at 20b EP1 and 120b EP4 (MODELS), T = 1, 4, 16, 64 (TOKENS), with and without -pdl,
# all of them timed in full (no screening cut), one method (CUDA-graph replays, L2 flushed, CUPTI kernel time). Read it
#   python -m fp4moe_diag twins data/runs/<run> --variant=-pt --base=   (and --variant=-ptf)
# Run from the repository root on the device with .whl and .git_commit carried (our kernels only):
#   run(command="bash tools/device/plans/persist.sh", carry=[".whl", ".git_commit"])
# About 5 minutes cold (each tactic compiles once per model). $OUT/runs.tgz: the run folder (import_gpu_bundle.py).
set -u
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
plan_start persist
timeout $(left ${PERSIST_S:-420}) python3 -m fp4moe_diag sweep --backends triton \
  --models ${MODELS:-gpt-oss-20b:1,gpt-oss-120b:4} --tokens ${TOKENS:-1,4,16,64} $SWEEP_ARGS --screen-top 40 \
  --tactics 'triton=^(m16n64k256w4s3-ps-sk[24]|m16n128k128w4s[34]-ps|m16n128k128w4s3-ps-g2sk2|m16n128k256w8s3-ps-sk2)(-ptf?)?(-pdl)?$' \
  --out /tmp/r/persist 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "sweep done"
plan_finish
