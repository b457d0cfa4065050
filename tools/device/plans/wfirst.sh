#!/usr/bin/env bash
# The -pdlw tactics (backends/triton/configs_wfirst.py: gemm2 loads its routing tables and first K step's weights
# before its grid-dependency wait) against their -pdl twins, one sweep: every offered -pdl / -pdlw decode winner at
# 20b EP1, 20b EP2 and 120b EP4, T = 1, 4, 16, 64, all of them timed in full (no screening cut), one method (CUDA-graph
# replays, L2 flushed, CUPTI kernel time). Read it with
#   python -m fp4moe_diag twins data/runs/<run> --variant=-pdlw --base=-pdl
# Run from the repository root on the device with .whl and .git_commit carried (our kernels only):
#   run(command="bash tools/device/plans/wfirst.sh", carry=[".whl", ".git_commit"])
# About 4-5 minutes cold (each tactic compiles once per model). $OUT/runs.tgz: the run folder (import_gpu_bundle.py).
set -u
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
plan_start wfirst
timeout $(left 330) python3 -m fp4moe_diag sweep --backends triton --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4 \
  --tokens ${TOKENS:-1,4,16,64} $SWEEP_ARGS --screen-top 40 \
  --tactics 'triton=^(m16n64k256w4s3-ps(-tm)?-sk[24]-pdlw?(-fs)?|m16n128k128w4s3-ps(-tm)?(-g2sk2)?-pdlw?|m16n128k256w8s3-ps-sk2-pdlw?)$' \
  --out /tmp/r/wfirst 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "sweep done"
plan_finish
