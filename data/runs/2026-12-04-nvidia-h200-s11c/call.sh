#!/usr/bin/env bash
# session 11, device call 3 (issue #25): (1) goal 5: our W4A8 families -- f8 and the new p8 (byte-permute table
# decode of pre-shuffled e2m1 codes) -- beside FlashInfer 0.7.4's MXFP4 x FP8 runner (cutlass_humming, session-10 build,
# fast tactic set) and our bf16 prefill tactic, on the bias-free gpt-oss shapes (20b EP1 T=1024/4096/16384, 120b EP1
# T=4096); (2) Nsight Compute of the best p8 tactic (20b EP1 T=4096); (3) the prefill goal shapes (T >= 1024: 20b EP1 and
# EP2, 120b EP4) through every bf16 backend in one run, after the top-k sum's wide programs from T = 1024.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s11c3 +$(( $(date +%s) - T0 ))s] $*"; }
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
TW='triton_w4a8=(-p8|^m128n64k128w4s3-f8)$'  # every p8 tile, f8's winner of s10g / s11a
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
FP4MOE_CUTLASS_MODULE=$HUM timeout 200 python3 -m fp4moe_diag sweep --backends triton_w4a8,cutlass_humming,triton \
  --shapes-file data/shapes/gpt-oss-nobias.csv --models gpt-oss-20b:1 --tokens 4096,1024,16384 $A \
  --tactics 'triton=^m128n128k64w8s3-ps-g2n256$' --tactics "$TW" --out /tmp/r/s11-w4a8-20b 2>&1 | tail -40 | cut -c1-200
say "w4a8 20b done"
FP4MOE_CUTLASS_MODULE=$HUM timeout 90 python3 -m fp4moe_diag sweep --backends triton_w4a8,cutlass_humming \
  --shapes-file data/shapes/gpt-oss-nobias.csv --models gpt-oss-120b:1 --tokens 4096 $A --no-ceilings --tactics "$TW" \
  --out /tmp/r/s11-w4a8-120b 2>&1 | tail -20 | cut -c1-200
say "w4a8 120b done"
BEST=$(python3 - <<'PY'
import pandas as pd, glob
d = pd.concat(pd.read_parquet(f) for f in glob.glob('/tmp/r/s11-w4a8-20b/results.parquet'))
g = d[(d.status == 'ok') & (d.backend == 'triton_w4a8') & (d.num_tokens == 4096) & d.tactic_label.str.endswith('-p8')]
print(g.sort_values('time_median_us').tactic_label.iloc[0] if len(g) else 'none')
PY
)
P=0
for pe in "triton_w4a8|gpt-oss-20b|1|4096|$BEST"; do
  IFS='|' read -r pb pm pep pt ptac <<< "$pe"; P=$((P + 1)); [ "$ptac" = none ] && continue
  timeout 90 python3 -m fp4moe_diag profile --backend "$pb" --model "$pm" --ep "$pep" --tokens "$pt" --tactics "$ptac" --stalls \
    --out /tmp/p/$P-$pb-$pm-ep$pep-t$pt 2>&1 | tail -4 | cut -c1-240
  tar -czf $OUT/profiles.tgz -C /tmp p; say "profile $P done"
done
TT='triton=^(m128n128k(64|128)w8s3-ps-g2n256|m64n128k64w8s4-ps|m64n128k128w4s3-ps)$'
TK='triton_kernels=^tk-(mautokautow[48]|m64k128w4|m128kautow8s3|m128k128w8)$'
TC='cutlass=^(default|g1:(72|73)|g2:(188|189))'
FP4MOE_CUTLASS_MODULE=$FULL timeout $(left 585) python3 -m fp4moe_diag sweep --backends triton,triton_kernels,cutlass \
  --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096 --tokens 1024,4096,16384 $A --tactics "$TT" --tactics "$TK" --tactics "$TC" \
  --out /tmp/r/s11-prefill 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "prefill done"
L=$(left 590); [ "$L" -gt 45 ] && timeout $L python3 -m pytest -q -p no:cacheprovider tests/test_triton_p8.py -k gpu 2>&1 | tail -4
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
