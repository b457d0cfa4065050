#!/usr/bin/env bash
# session 10, device call 5 (issue #25): the fused ends (-fs: gemm2 sums each token's top-k rows, a split gemm1
# finalizes its own planes, each in the last program to arrive; two kernels per call) against the same tactics without
# -fs and triton_kernels, at the decode shapes (CUDA graphs, L2 flushed, CUPTI kernel time); correctness on the GPU
# (arrival counters, memory ordering) is the sweep's check against the float32 reference.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c5 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress --no-ceilings"
timeout 240 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4 \
  --tokens 1,4,16,64 $A --tactics 'triton=^(m16n128k128w4s[34]-ps(-g2sk2)?|m16n64k256w4s3-ps-sk[24])-pdl(-fs)?$' \
  --tactics 'triton_kernels=^tk-m16k128w4$' --out /tmp/r/fused 2>&1 | grep -v "^ *$" | tail -3
say "sweep done"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_triton_fused.py tests/test_triton_pdl.py -m gpu 2>&1 | tail -2
tar -czf $OUT/runs.tgz -C /tmp r; say "all done"
