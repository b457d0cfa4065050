#!/usr/bin/env bash
# session 9, device call 4 (issue #25, the run of record): every goal shape of issue #25 -- gpt-oss-20b EP1 and EP2 at
# T = 1..16384, gpt-oss-120b EP4 at T = 1..4096 -- through our Triton kernels (bf16 activations), triton_kernels,
# FlashInfer 0.7.4's CUTLASS (full prebuilt module) and our W4A8 family, one method: CUDA-graph replays, L2 flushed,
# --screen 2 --screen-top 3, median of 10 after 3 warm-ups, CUPTI kernel time.  Snapshots of the run folders every 40 s.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s9c4 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/fi074:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
export FP4MOE_CUTLASS_MODULE=$PWD/.carry/fused_moe_90_slim074_full.so.xz FP4MOE_GIT_COMMIT=$(cat .git_commit)
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_triton_w4a8.py -k "gpu or cuda" 2>&1 | tail -3
say "w4a8 gpu tests done"
mkdir -p /tmp/r
( while sleep 40; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
TT='triton=^(m16n128k128w4s[34]-ps(-g2sk2)?(-pdl)?|m16n64k256w4s3-ps-sk[24](-pdl)?|m(16|32|64)n128k128w4s3-ps|m64n128k64w4s4-ps|m128n128k(64|128)w8s[34]-ps(-g2n256)?|m64n128k64w8s4-ps|m64n64k64w8s3-ds|m32n64k128w8s3-ds)$'
TK='triton_kernels=^tk-(mautokautow[48]|m16k128w[48]|m32k128w4|m64k128w4|m128kautow8s3|m128k128w8)$'
TC='cutlass=^(default|g1:(1|52|53|56|57|64|72|73)|g2:(165|168|169|172|180|188|189))'
BK=triton,triton_kernels,cutlass,triton_w4a8
timeout 330 python3 -m fp4moe_diag sweep --backends $BK --models gpt-oss-20b:1,gpt-oss-20b:2 --tokens 1,4,16,64,256,1024,4096,16384 \
  $A --tactics "$TT" --tactics "$TK" --tactics "$TC" --out /tmp/r/s9-20b 2>&1 | grep -v "^ *gpt-oss" | tail -6
say "20b done"
timeout 170 python3 -m fp4moe_diag sweep --backends $BK --models gpt-oss-120b:4 --tokens 1,4,16,64,256,1024,4096 \
  $A --tactics "$TT" --tactics "$TK" --tactics "$TC" --out /tmp/r/s9-120b 2>&1 | grep -v "^ *gpt-oss" | tail -6
say "120b done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "packed"
mkdir -p /tmp/p; P=0
for pe in "triton|4096|m128n128k128w8s3-ps-g2n256" "triton_w4a8|4096|m128n128k64w8s3-f8" "triton|64|m16n128k128w4s3-ps" \
          "triton_kernels|64|tk-m16k128w4"; do
  IFS='|' read -r pb pt ptac <<< "$pe"; P=$((P + 1)); [ -z "$ptac" ] && continue
  [ $(( $(date +%s) - T0 )) -gt 530 ] && { say "skip profile $P (time)"; continue; }
  timeout 50 python3 -m fp4moe_diag profile --backend "$pb" --model gpt-oss-20b --ep 1 --tokens $pt --tactics "$ptac" --stalls \
    --out /tmp/p/$P-$pb-gpt-oss-20b-ep1-t$pt 2>&1 | tail -4 | cut -c1-500
done
[ -d /tmp/p ] && tar -czf $OUT/profiles.tgz -C /tmp p; say "all done"; ls -la $OUT
