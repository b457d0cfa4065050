#!/usr/bin/env bash
# session 11, device call 2 (issue #25): (1) Nsight Compute of the -fs decode tactics at 20b EP2 T=1 / T=4 (the profiled
# range now holds only the call's kernels); (2) the EP > 1 goal shapes again through every bf16 backend in one run (the
# top-k sum now skips other ranks' rows): 20b EP2 T=1..16384, 120b EP4 T=1..4096.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s11c2 +$(( $(date +%s) - T0 ))s] $*"; }
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
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
P=0
for pe in "triton|gpt-oss-20b|2|1|m16n64k256w4s3-ps-sk4-pdl-fs" "triton|gpt-oss-20b|2|4|m16n64k256w4s3-ps-sk2-pdl-fs"; do
  IFS='|' read -r pb pm pep pt ptac <<< "$pe"; P=$((P + 1))
  timeout 60 python3 -m fp4moe_diag profile --backend "$pb" --model "$pm" --ep "$pep" --tokens "$pt" --tactics "$ptac" --stalls \
    --out /tmp/p/$P-$pb-$pm-ep$pep-t$pt 2>&1 | tail -4 | cut -c1-240
  tar -czf $OUT/profiles.tgz -C /tmp p; say "profile $P done"
done
TT='triton=^(m16n128k128w4s[34]-ps(-g2sk2)?(-pdl)?(-fs)?|m16n64k256w4s3-ps-sk[24](-pdl)?(-fs)?|m(16|32|64)n128k128w4s3-ps|m128n128k(64|128)w8s3-ps-g2n256|m64n128k64w8s4-ps)$'
TK='triton_kernels=^tk-(mautokautow[48]|m16k128w[48]|m32k128w4|m64k128w4|m128kautow8s3|m128k128w8)$'
TC='cutlass=^(default|g1:(1|52|53|56|57|64|72|73)|g2:(165|168|169|172|180|188|189))'
FP4MOE_CUTLASS_MODULE=$FULL timeout $(left 585) python3 -m fp4moe_diag sweep --backends triton,triton_kernels,cutlass \
  --models gpt-oss-20b:2,gpt-oss-120b:4:4096 --tokens 1,4,16,64,256,1024,4096,16384 $A --tactics "$TT" --tactics "$TK" --tactics "$TC" \
  --out /tmp/r/s11-ep 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "ep done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
