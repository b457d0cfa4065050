#!/usr/bin/env bash
# session 12, device call 6 (issue #25): the tail-block tactics with programmatic dependent launch (-tN-pdl: five
# kernels chained) beside the same without, triton_kernels in the same run, at the prefill shapes where triton_kernels
# still led in s12e (20b EP1 T=4096 / 16384, 20b EP2 T=1024 / 4096 / 16384); no profile.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s12c6 +$(( $(date +%s) - T0 ))s] $*"; }
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
TT='triton=^(m256n64k64w8s3-ps-gu-g2n128(-t128(-pdl)?)?|m128n128k64w8s3-ps-g2n256-t64(-pdl)?|m64n128k64w8s4-ps-t32(-pdl)?)$'
TK='triton_kernels=^tk-(mautokautow8|m64k128w4|m128kautow8s3|m128k128w8)$'
TC='cutlass=^(default|g1:(72|73)|g2:(188|189))'
timeout $(left 450) python3 -m fp4moe_diag sweep --backends triton,triton_kernels \
  --models gpt-oss-20b:1,gpt-oss-20b:2 --tokens 1024,4096,16384 $A --tactics "$TT" --tactics "$TK" \
  --out /tmp/r/s12-prefill 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "prefill done"
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
