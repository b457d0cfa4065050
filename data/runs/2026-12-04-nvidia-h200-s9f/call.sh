#!/usr/bin/env bash
# session 9, device call 6 (issue #25): Nsight Compute with warp-stall reasons of our best tactic (run of record s9d)
# at the shapes where triton_kernels is ahead (T >= 1024) and at one decode shape per model; stops starting profiles
# at 150 s.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s9c6 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_GIT_COMMIT=$(cat .git_commit)
mkdir -p /tmp/p; P=0
for pe in "gpt-oss-20b|1|1024|m64n128k64w8s4-ps" "gpt-oss-20b|2|4096|m128n128k64w8s3-ps-g2n256" \
          "gpt-oss-120b|4|4096|m64n128k64w8s4-ps" "gpt-oss-20b|1|16384|m128n128k64w8s3-ps-g2n256" \
          "gpt-oss-120b|4|1024|m64n128k64w8s4-ps" "gpt-oss-20b|2|1024|m64n128k128w4s3-ps" "gpt-oss-20b|1|16|m16n128k128w4s3-ps-g2sk2"; do
  IFS='|' read -r pm pep pt ptac <<< "$pe"; P=$((P + 1))
  [ $(( $(date +%s) - T0 )) -gt 150 ] && { say "skip profile $P (time)"; continue; }
  timeout 45 python3 -m fp4moe_diag profile --backend triton --model "$pm" --ep "$pep" --tokens "$pt" --tactics "$ptac" --stalls \
    --out /tmp/p/$P-triton-$pm-ep$pep-t$pt 2>&1 | tail -4 | cut -c1-260
  say "profile $P done"
done
tar -czf $OUT/profiles.tgz -C /tmp p; say "all done"
