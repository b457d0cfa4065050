#!/usr/bin/env bash
# session 9, device call 2 (issue #25): Nsight Compute with warp-stall reasons at prefill (20b EP1 T=4096): ours
# (4-warp best, 8-warp tile) against triton_kernels' best; plus the bf16 gemm2 plane against the last run's timing.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s9c2 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
ncu --query-metrics --chip gh100 2>/dev/null | grep -E "^(sm__pipe_tensor_op_gmma_cycles_active|smsp__warp_issue_stalled_(long_scoreboard|wait|math_pipe_throttle|barrier|mio_throttle|short_scoreboard|selected)_per_warp_active|launch__occupancy_limit_registers) " | cut -c1-90 > /tmp/metrics.txt; wc -l /tmp/metrics.txt
mkdir -p /tmp/r/profile; P=0
for pe in "triton|m64n128k128w4s3-ps" "triton|m128n128k64w8s3-ps" "triton_kernels|tk-m128kautow8s3"; do
  IFS='|' read -r pb ptac <<< "$pe"; P=$((P + 1))
  timeout 100 python3 -m fp4moe_diag profile --backend "$pb" --model gpt-oss-20b --ep 1 --tokens 4096 --tactics "$ptac" --stalls \
    --out /tmp/r/profile/$P-$pb-gpt-oss-20b-ep1-t4096 2>&1 | tail -5 | cut -c1-400
  say "profile $P done"
done
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress --no-ceilings"
timeout 120 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1 --tokens 64,4096 $A \
  --tactics 'triton=^m(64n128k128w4s3-ps|16n128k128w4s3-ps(-pdl)?)$' --tactics 'triton_kernels=^tk-(m128kautow8s3|m16k128w4)$' \
  --out /tmp/r/bf16plane 2>&1 | grep -v "^ *$" | tail -8
cp /tmp/metrics.txt /tmp/r/profile/ 2>/dev/null
tar -czf $OUT/runs.tgz -C /tmp r; say "all done"
