#!/usr/bin/env bash
# session 9, device call 3 (issue #25): 8-warp ps tiles with the scale bytes loaded as words (no synchronous load in
# the K loop) against the 4-warp best and triton_kernels at prefill; warp-stall profiles of the same at T=4096.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s9c3 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress"
timeout 200 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1,gpt-oss-20b:2 --tokens 4096,16384 $A \
  --tactics 'triton=^m(64n128k128w4s3|128n128k64w8s[34]|128n128k128w8s3|64n128k64w8s4)-ps$' \
  --tactics 'triton_kernels=^tk-(m128kautow8s3|mautokautow8)$' --out /tmp/r/prefill8w 2>&1 | grep -v "^ *$" | tail -22
say "sweep done"
mkdir -p /tmp/r/profile; P=0
for pe in "triton|m64n128k128w4s3-ps" "triton|m128n128k64w8s3-ps" "triton_kernels|tk-m128kautow8s3"; do
  IFS='|' read -r pb ptac <<< "$pe"; P=$((P + 1))
  [ $(( $(date +%s) - T0 )) -gt 330 ] && { say "skip profile $P (time)"; continue; }
  timeout 100 python3 -m fp4moe_diag profile --backend "$pb" --model gpt-oss-20b --ep 1 --tokens 4096 --tactics "$ptac" --stalls \
    --out /tmp/r/profile/$P-$pb-gpt-oss-20b-ep1-t4096 2>&1 | tail -4 | cut -c1-600
  say "profile $P done"
done
tar -czf $OUT/runs.tgz -C /tmp r; say "all done"
