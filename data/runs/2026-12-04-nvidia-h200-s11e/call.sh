#!/usr/bin/env bash
# session 11, device call 5 (issue #25, goal 5): gpt-oss-120b EP1 bias-free T=16384 -- our W4A8 (-p8's default tile and
# -f8's best) beside FlashInfer 0.7.4's MXFP4 x FP8 runner (cutlass_humming, session-10 build, fast tactic set), one run.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s11c5 +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/fi074:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
export FP4MOE_GIT_COMMIT=$(cat .git_commit)
FULL=$PWD/.carry/fused_moe_90_slim074_full.so.xz HUM=$PWD/.carry/fused_moe_90_humming074.so.xz
mkdir -p /tmp/r /tmp/p
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
TW='triton_w4a8=^m128n64k128w4s3-(p8|f8)$'  # the p8 default, f8's winner
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
FP4MOE_CUTLASS_MODULE=$HUM timeout 300 python3 -m fp4moe_diag sweep --backends triton_w4a8,cutlass_humming \
  --shapes-file data/shapes/gpt-oss-nobias.csv --models gpt-oss-120b:1 --tokens 16384 $A --no-ceilings --tactics "$TW" \
  --out /tmp/r/s11-w4a8-120b-t16384 2>&1 | tail -20 | cut -c1-200
say "w4a8 120b done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
