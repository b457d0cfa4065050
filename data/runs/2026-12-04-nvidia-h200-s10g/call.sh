#!/usr/bin/env bash
# session 10, device call 7 (issue #25, goal 5): our W4A8 family beside FlashInfer 0.7.4's MXFP4 x FP8 runner
# (cutlass_humming; the session's slim build, fast tactic set) and our bf16 prefill winners, on the bias-free gpt-oss
# shapes (data/shapes/gpt-oss-nobias.csv: the unified runners take no expert biases and no EP), 20b EP1 T >= 1024.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c7 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/apache_tvm_ffi*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
export PYTHONPATH=$PWD:/tmp/fi074:/tmp/site FP4MOE_GIT_COMMIT=$(cat .git_commit)
export FP4MOE_CUTLASS_MODULE=$PWD/.carry/fused_moe_90_humming074.so.xz
mkdir -p /tmp/r
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress --no-ceilings"
timeout 270 python3 -m fp4moe_diag sweep --backends triton_w4a8,cutlass_humming,triton --shapes-file data/shapes/gpt-oss-nobias.csv \
  --models gpt-oss-20b:1 --tokens 4096,1024,16384 $A --tactics 'triton=^m128n128k64w8s3-ps-g2n256$' --out /tmp/r/s10-humming 2>&1 | tail -30 | cut -c1-220
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"
