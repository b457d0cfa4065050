#!/usr/bin/env bash
# session 9, device call 5 (issue #25): the W4A8 family again at every goal shape, after its gemm2 grid-order fix and
# with its tolerance at 2e-2, beside our bf16 kernels' winners of the run of record (same run, same method).
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s9c5 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
mkdir -p /tmp/r
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
TT='triton=^(m16n128k128w4s3-ps(-g2sk2)?-pdl|m16n64k256w4s3-ps-sk[24]-pdl|m16n128k128w4s[34]-ps|m32n128k128w4s3-ps|m64n128k64w8s4-ps|m64n128k128w4s3-ps|m128n128k64w8s3-ps-g2n256)$'
timeout 200 python3 -m fp4moe_diag sweep --backends triton,triton_w4a8 --models gpt-oss-20b:1,gpt-oss-20b:2 \
  --tokens 1,4,16,64,256,1024,4096,16384 $A --tactics "$TT" --out /tmp/r/s9-w4a8-20b 2>&1 | grep -v "^ *gpt-oss" | tail -4
say "20b done"
timeout 100 python3 -m fp4moe_diag sweep --backends triton,triton_w4a8 --models gpt-oss-120b:4 --tokens 1,4,16,64,256,1024,4096 \
  $A --tactics "$TT" --out /tmp/r/s9-w4a8-120b 2>&1 | grep -v "^ *gpt-oss" | tail -4
say "120b done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"
