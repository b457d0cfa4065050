#!/usr/bin/env bash
# session 11, device call 1 (issue #25, evidence): Nsight Compute with warp-stall reasons at the not-met goal shapes
# that had no profile (20b EP2 T=16384 ours and triton_kernels' best; 120b EP4 T=4, 20b EP2 T=1 and T=4 ours), then
# goal 5 on the other bias-free shape FlashInfer's Humming runner takes: gpt-oss-120b EP1 (our W4A8 family beside
# cutlass_humming, the session-10 Humming build with the fast tactic set), T = 4096 and 16384.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s11c1 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/fi074:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
export FP4MOE_GIT_COMMIT=$(cat .git_commit)
HUM=$PWD/.carry/fused_moe_90_humming074.so.xz
mkdir -p /tmp/p /tmp/r; P=0
for pe in "triton|gpt-oss-20b|2|16384|m128n128k64w8s3-ps-g2n256" "triton_kernels|gpt-oss-20b|2|16384|tk-mautokautow8" \
          "triton|gpt-oss-120b|4|4|m16n64k256w4s3-ps-sk2-pdl" "triton|gpt-oss-20b|2|1|m16n64k256w4s3-ps-sk4-pdl-fs" \
          "triton|gpt-oss-20b|2|4|m16n64k256w4s3-ps-sk2-pdl-fs"; do
  IFS='|' read -r pb pm pep pt ptac <<< "$pe"; P=$((P + 1))
  [ $(( $(date +%s) - T0 )) -gt 240 ] && { say "skip profile $P (time)"; continue; }
  timeout 80 python3 -m fp4moe_diag profile --backend "$pb" --model "$pm" --ep "$pep" --tokens "$pt" --tactics "$ptac" --stalls \
    --out /tmp/p/$P-$pb-$pm-ep$pep-t$pt 2>&1 | tail -5 | cut -c1-260
  tar -czf $OUT/profiles.tgz -C /tmp p; say "profile $P done"
done
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress --no-ceilings"
FP4MOE_CUTLASS_MODULE=$HUM timeout $(( 560 - ($(date +%s) - T0) )) python3 -m fp4moe_diag sweep --backends triton_w4a8,cutlass_humming \
  --shapes-file data/shapes/gpt-oss-nobias.csv --models gpt-oss-120b:1 --tokens 4096,16384 $A --out /tmp/r/s11-humming-120b 2>&1 | tail -20 | cut -c1-220
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
