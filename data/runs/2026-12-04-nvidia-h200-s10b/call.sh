#!/usr/bin/env bash
# session 10, device call 2 (issue #25): the -r168 register cap on the rotation-decoded ps decode tiles (3 programs
# per SM again), beside the same tiles uncapped, smaller-N decode tiles and triton_kernels, same run (CUDA graphs,
# L2 flushed, CUPTI kernel time); Nsight Compute of -r168 at 20b EP1 T=16.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c2 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
python3 -c "import triton, os; b=os.path.join(os.path.dirname(triton.__file__),'backends','nvidia','bin','ptxas'); print('triton', triton.__version__, b, os.popen(b+' --version').read().strip().splitlines()[-1])"
mkdir -p /tmp/r
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress"
timeout 170 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4 --tokens 4,16,64 $A \
  --tactics 'triton=^(m16n128k128w4s[34]-ps(-g2sk2)?(-r168)?-pdl|m16n64k256w4s3-ps-sk2-pdl|m16n64k128w4s6-ps|m16n128k64w4s6-ps)$' \
  --tactics 'triton_kernels=^tk-(m16k128w4)$' --out /tmp/r/decode 2>&1 | grep -v "^ *$" | tail -4
say "decode done"
tar -czf $OUT/runs.tgz -C /tmp r; say "packed"
mkdir -p /tmp/p
timeout 55 python3 -m fp4moe_diag profile --backend triton --model gpt-oss-20b --ep 1 --tokens 16 --tactics m16n128k128w4s3-ps-g2sk2-r168-pdl \
  --stalls --out /tmp/p/1-triton-gpt-oss-20b-ep1-t16 2>&1 | tail -5 | cut -c1-400
tar -czf $OUT/profiles.tgz -C /tmp p; say "all done"
