#!/usr/bin/env bash
# session 10, device call 6 (issue #25, the run of record): every goal shape -- gpt-oss-20b EP1 and EP2 at
# T = 1..16384, gpt-oss-120b EP4 at T = 1..4096 -- through our Triton kernels (bf16 activations; s9d's winners plus the
# fused ends -fs and the gate/up-interleaved gemm1 -gu), triton_kernels and FlashInfer 0.7.4's CUTLASS (full prebuilt
# module); then, at T >= 1024, our W4A8 family beside FlashInfer 0.7.4's MXFP4 x FP8 runner (cutlass_humming, the
# session's slim build with the fast tactic set). One method: CUDA-graph replays, L2 flushed, --screen 2 --screen-top 3,
# median of 10 after 3 warm-ups, CUPTI kernel time. Then Nsight Compute (stall reasons) of the new best tactics.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c6 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/fi074:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
export FP4MOE_GIT_COMMIT=$(cat .git_commit)
FULL=$PWD/.carry/fused_moe_90_slim074_full.so.xz HUM=$PWD/.carry/fused_moe_90_humming074.so.xz
mkdir -p /tmp/r
( while sleep 40; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
TT='triton=^(m16n128k128w4s[34]-ps(-gu)?(-g2sk2)?(-pdl)?(-fs)?|m16n64k256w4s3-ps-sk[24](-pdl)?(-fs)?|m(16|32|64)n128k128w4s3-ps(-gu)?|m128n128k(64|128)w8s3-ps(-gu)?-g2n256|m64n128k64w8s4-ps(-gu)?)$'
TK='triton_kernels=^tk-(mautokautow[48]|m16k128w[48]|m32k128w4|m64k128w4|m128kautow8s3|m128k128w8)$'
TC='cutlass=^(default|g1:(1|52|53|56|57|64|72|73)|g2:(165|168|169|172|180|188|189))'
BK=triton,triton_kernels,cutlass
FP4MOE_CUTLASS_MODULE=$FULL timeout 300 python3 -m fp4moe_diag sweep --backends $BK --models gpt-oss-20b:1,gpt-oss-20b:2 \
  --tokens 1,4,16,64,256,1024,4096,16384 $A --tactics "$TT" --tactics "$TK" --tactics "$TC" --out /tmp/r/s10-20b 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "20b done"
FP4MOE_CUTLASS_MODULE=$FULL timeout 150 python3 -m fp4moe_diag sweep --backends $BK --models gpt-oss-120b:4 --tokens 1,4,16,64,256,1024,4096 \
  $A --tactics "$TT" --tactics "$TK" --tactics "$TC" --out /tmp/r/s10-120b --no-ceilings 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "120b done"
FP4MOE_CUTLASS_MODULE=$HUM timeout 150 python3 -m fp4moe_diag sweep --backends triton_w4a8,cutlass_humming \
  --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4 --tokens 1024,4096,16384 $A --no-ceilings --out /tmp/r/s10-w4a8 2>&1 | tail -25
say "w4a8 done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "packed"
# profiles: our best tactic at 20b EP1 T=4096 and T=1 (this run), cutlass_humming's best at 20b EP1 T=4096
BEST=$(python3 - <<'PY'
import pandas as pd, glob
d = pd.concat(pd.read_parquet(f) for f in glob.glob('/tmp/r/*/results.parquet'))
d = d[(d.status == 'ok') & (d.model == 'gpt-oss-20b') & (d.ep_size == 1)]
for b, t in (('triton', 4096), ('triton', 1), ('cutlass_humming', 4096)):
    g = d[(d.backend == b) & (d.num_tokens == t)].sort_values('time_median_us')
    print(f"{b}|{t}|{g.tactic_label.iloc[0] if len(g) else ''}")
PY
)
echo "$BEST"
mkdir -p /tmp/p; P=0
for pe in $BEST; do
  IFS='|' read -r pb pt ptac <<< "$pe"; P=$((P + 1)); [ -z "$ptac" ] && continue
  [ $(( $(date +%s) - T0 )) -gt 540 ] && { say "skip profile $P (time)"; continue; }
  M=$FULL; [ "$pb" = cutlass_humming ] && M=$HUM
  FP4MOE_CUTLASS_MODULE=$M timeout 50 python3 -m fp4moe_diag profile --backend "$pb" --model gpt-oss-20b --ep 1 --tokens $pt \
    --tactics "$ptac" --stalls --out /tmp/p/$P-$pb-gpt-oss-20b-ep1-t$pt 2>&1 | tail -4 | cut -c1-300
  tar -czf $OUT/profiles.tgz -C /tmp p
done
say "all done"; ls -la $OUT
