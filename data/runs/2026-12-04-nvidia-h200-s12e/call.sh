#!/usr/bin/env bash
# session 12, device call 5 (issue #25): the prefill goal shapes (T >= 1024: 20b EP1 / EP2, 120b EP4) through every
# bf16 backend in one run with the tail-block tactics (-tN: each expert's last n mod BLOCK_M pairs in a block of N rows,
# a second launch pair) beside the same tiles without; then Nsight Compute of our best at 20b EP1 T=4096 and 120b EP4
# T=4096.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s12c5 +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/fi074:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
export FP4MOE_GIT_COMMIT=$(cat .git_commit) FP4MOE_CUTLASS_MODULE=$PWD/.carry/fused_moe_90_slim074_full.so.xz
mkdir -p /tmp/r /tmp/p
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 8 --max-seconds-per-tactic 0.3 --no-progress"
TT='triton=^(m256n64k64w8s3-ps-gu-g2n128(-t128)?|m128n128k64w8s3-ps-g2n256(-t64)?|m64n128k64w8s4-ps(-t32)?|m64n128k128w4s3-ps)$'
TK='triton_kernels=^tk-(mautokautow[48]|m64k128w4|m128kautow8s3|m128k128w8)$'
TC='cutlass=^(default|g1:(72|73)|g2:(188|189))'
timeout $(left 450) python3 -m fp4moe_diag sweep --backends triton,triton_kernels,cutlass \
  --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096 --tokens 1024,4096,16384 $A --tactics "$TT" --tactics "$TK" \
  --tactics "$TC" --out /tmp/r/s12-prefill 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "prefill done"
P=0
for pe in "gpt-oss-20b|1|4096" "gpt-oss-120b|4|4096"; do
  IFS='|' read -r pm pep pt <<< "$pe"; P=$((P + 1))
  ptac=$(python3 - "$pm" "$pep" "$pt" <<'PY'
import sys, pandas as pd
m, ep, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = pd.read_parquet('/tmp/r/s12-prefill/results.parquet')
g = d[(d.status == 'ok') & (d.backend == 'triton') & (d.model == m) & (d.ep_size == ep) & (d.num_tokens == t)]
print(g.sort_values('time_median_us').tactic_label.iloc[0] if len(g) else 'none')
PY
)
  say "best at $pm EP$pep T=$pt: $ptac"
  L=$(left 585); [ "$L" -gt 40 ] && [ "$ptac" != none ] || break
  timeout $L python3 -m fp4moe_diag profile --backend triton --model "$pm" --ep "$pep" --tokens "$pt" --tactics "$ptac" \
    --stalls --out /tmp/p/$P-triton-$pm-ep$pep-t$pt 2>&1 | tail -6 | cut -c1-240
  tar -czf $OUT/profiles.tgz -C /tmp p; say "profile $P done"
done
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
