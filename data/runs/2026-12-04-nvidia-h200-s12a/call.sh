#!/usr/bin/env bash
# session 12, device call 1 (issue #25): the ps kernels' weight mask without its chunk part where every chunk is inside
# K (EVEN_K: k64 tiles at K = 2880), A/B in one session: the base commit (.carry/base_pkg, HEAD before the change) and
# the new one, on the prefill goal shapes (T >= 1024: 20b EP1 / EP2, 120b EP4), triton_kernels in the new run; the k128
# tiles are unchanged by the edit (K = 2880 is not a multiple of 128): the in-run control.  Then base again (drift).
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s12c1 +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels FP4MOE_CUTLASS_MODULE=$PWD/.carry/fused_moe_90_slim074_full.so.xz
NEW=$PWD BASE=$PWD/.carry/base_pkg
mkdir -p /tmp/r /tmp/p
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 3 --max-seconds-per-tactic 0.3 --no-progress"
M="--models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096 --tokens 1024,4096,16384"
TT='triton=^(m128n128k64w8s3-ps(-gu)?-g2n256|m128n128k128w8s3-ps-g2n256|m64n128k64w8s4-ps|m64n128k128w4s3-ps)$'
TK='triton_kernels=^tk-(mautokautow[48]|m64k128w4|m128kautow8s3|m128k128w8)$'
run() {  # run <tree> <commit> <name> <backends> <tactic filters...>
  local tree=$1 commit=$2 name=$3 be=$4; shift 4
  (cd "$tree" && FP4MOE_GIT_COMMIT=$commit PYTHONPATH=$tree:/tmp/fi074:/tmp/site:$NCU_PY timeout $(left 560) \
    python3 -m fp4moe_diag sweep --backends "$be" $M $A "$@" --out /tmp/r/$name 2>&1 | grep -v "^ *gpt-oss" | tail -3)
  say "$name done"
}
run "$BASE" "$(cat $BASE/COMMIT)" s12-base1 triton --tactics "$TT"
run "$NEW" "$(cat .git_commit)" s12-new triton,triton_kernels --tactics "$TT" --tactics "$TK"
[ "$(left 560)" -gt 80 ] && run "$BASE" "$(cat $BASE/COMMIT)" s12-base2 triton --tactics "$TT" --no-ceilings
L=$(left 585); [ "$L" -gt 60 ] && (FP4MOE_GIT_COMMIT=$(cat .git_commit) PYTHONPATH=$NEW:/tmp/fi074:/tmp/site:$NCU_PY timeout $L \
  python3 -m fp4moe_diag profile --backend triton --model gpt-oss-20b --ep 1 --tokens 4096 \
  --tactics m128n128k64w8s3-ps-g2n256 --stalls --out /tmp/p/1-triton-gpt-oss-20b-ep1-t4096 2>&1 | tail -4 | cut -c1-240; \
  tar -czf $OUT/profiles.tgz -C /tmp p; say "profile done")
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
