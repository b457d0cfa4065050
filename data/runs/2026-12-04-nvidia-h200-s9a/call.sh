#!/usr/bin/env bash
# session 9, device call 1 (issue #25): new prefill ps tiles and -pdlpfe / -sk8 decode tactics against the current
# bests and triton_kernels' bests (same run, CUDA graphs, L2 flushed, CUPTI kernel time); Nsight Compute per kernel
# of ours and triton_kernels at the decode goal shapes.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s9c1 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress"
# warm Triton's cache for the new tactics in parallel (compiles only; each process one tactic group) while nothing else runs
say "sweeps"
timeout 240 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1,gpt-oss-20b:2 --tokens 4096 $A \
  --tactics 'triton=^m(64n128k128w4s3|128n128k64w8s[34]|64n256k64w8s3|64n128k64w4s5|64n128k128w4s4)-ps$' \
  --tactics 'triton_kernels=^tk-(m128kautow8s3|mautokautow8)$' --out /tmp/r/prefill 2>&1 | grep -v "^ *$" | tail -12
say "prefill 4096 done"
timeout 110 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1,gpt-oss-120b:4 --tokens 1,4,16,64 $A \
  --tactics 'triton=^m(16n128k128w4s3-ps(-g2sk2)?|16n64k256w4s3-ps-sk[24]|16n64k128w4s4-ps-sk8)(-pdl|-pdlpfe)?$' \
  --tactics 'triton_kernels=^tk-(m16k128w4|mautokautow4)$' --out /tmp/r/decode --no-ceilings 2>&1 | grep -v "^ *$" | tail -12
say "decode done"
timeout 100 python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models gpt-oss-20b:1 --tokens 16384 $A --no-ceilings \
  --tactics 'triton=^m(64n128k128w4s3|128n128k64w8s[34]|64n256k64w8s3)-ps$' \
  --tactics 'triton_kernels=^tk-(m128kautow8s3|mautokautow8)$' --out /tmp/r/prefill16k 2>&1 | grep -v "^ *$" | tail -8
say "prefill 16384 done"
mkdir -p /tmp/r/profile
P=0
for pe in "triton|gpt-oss-20b|1|64|m16n128k128w4s3-ps" "triton_kernels|gpt-oss-20b|1|64|tk-m16k128w4" \
          "triton|gpt-oss-120b|4|64|m16n128k128w4s3-ps" "triton_kernels|gpt-oss-120b|4|64|tk-m16k128w8" \
          "triton|gpt-oss-20b|1|1|m16n64k256w4s3-ps-sk2"; do
  IFS='|' read -r pb pm pep pt ptac <<< "$pe"; P=$((P + 1))
  [ $(( $(date +%s) - T0 )) -gt 470 ] && { say "skip profile $P (time)"; continue; }
  timeout 60 python3 -m fp4moe_diag profile --backend "$pb" --model "$pm" --ep "$pep" --tokens "$pt" --tactics "$ptac" \
    --out /tmp/r/profile/$P-$pb-$pm-ep$pep-t$pt 2>&1 | tail -6
  say "profile $P done"
done
tar -czf $OUT/runs.tgz -C /tmp r; say "all done"; ls -la $OUT
