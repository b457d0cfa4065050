#!/usr/bin/env bash
# session 11, device call 6 (issue #25): our W4A8 tactics (-p8's default tile, -f8's best) at the goal shapes with
# expert biases and EP (T = 4096, 16384), where FlashInfer's Humming runner does not run: our W4A8 times of today.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s11c6 +$(( $(date +%s) - T0 ))s] $*"; }
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
timeout 400 python3 -m fp4moe_diag sweep --backends triton_w4a8 --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096 \
  --tokens 4096,16384 $A --no-ceilings --tactics "$TW" --out /tmp/r/s11-w4a8-bias 2>&1 | tail -14 | cut -c1-200
say "w4a8 done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
