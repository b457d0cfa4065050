#!/usr/bin/env bash
# session 10, device call 1 (issue #25): the ps layout decoded by rotations (13 instructions per 8 weights, was 15)
# and the -r128 register cap, against triton_kernels in the same run (CUDA graphs, L2 flushed, CUPTI kernel time):
# decode at 20b EP1 / 120b EP4 T = 1..64, prefill 20b EP1 T = 4096; Nsight Compute (with stall reasons) at the
# goal shapes not profiled before (20b EP1 T = 4, 16) and of -r128 at T = 64.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c1 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
mkdir -p /tmp/r
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress"
timeout 150 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1,gpt-oss-120b:4 --tokens 1,4,16,64 $A \
  --tactics 'triton=^(m16n128k128w4s[34]-ps(-g2sk2)?(-r128)?-pdl|m16n64k256w4s3-ps-sk[24](-pdl)?|m16n128k128w4s3-ps)$' \
  --tactics 'triton_kernels=^tk-(m16k128w4|mautokautow4)$' --out /tmp/r/decode 2>&1 | grep -v "^ *$" | tail -8
say "decode done"
timeout 120 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1 --tokens 4096 $A --no-ceilings \
  --tactics 'triton=^m(128n128k64w8s3-ps-g2n256|128n128k128w8s3-ps-g2n256|64n128k128w4s3-ps)$' \
  --tactics 'triton_kernels=^tk-(m128kautow8s3)$' --out /tmp/r/prefill 2>&1 | grep -v "^ *$" | tail -6
say "prefill done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "packed"
mkdir -p /tmp/p; P=0
for pe in "triton|4|m16n64k256w4s3-ps-sk2" "triton_kernels|4|tk-m16k128w4" "triton|16|m16n128k128w4s3-ps-g2sk2" \
          "triton_kernels|16|tk-m16k128w4" "triton|64|m16n128k128w4s3-ps-r128-pdl" "triton|64|m16n128k128w4s3-ps"; do
  IFS='|' read -r pb pt ptac <<< "$pe"; P=$((P + 1))
  [ $(( $(date +%s) - T0 )) -gt 500 ] && { say "skip profile $P (time)"; continue; }
  timeout 55 python3 -m fp4moe_diag profile --backend "$pb" --model gpt-oss-20b --ep 1 --tokens $pt --tactics "$ptac" --stalls \
    --out /tmp/p/$P-$pb-gpt-oss-20b-ep1-t$pt 2>&1 | tail -3 | cut -c1-400
  tar -czf $OUT/profiles.tgz -C /tmp p
done
say "all done"; ls -la $OUT
