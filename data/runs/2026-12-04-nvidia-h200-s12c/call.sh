#!/usr/bin/env bash
# session 12, device call 3 (issue #25): the ps gemm1 with both weight tiles upcast before its two dots (TILES_FIRST,
# the 8-warp k64 prefill tiles and the 4-warp k64 ones: tiling.ps_tiles_first) against the commit before, A/B/A/B in
# four processes (.carry/base_pkg = the commit before); the -gu and BLOCK_K 128 tiles are unchanged by the edit: the
# in-process control.  Prefill goal shapes where the affected tiles win (20b EP1 T=4096 / 16384, EP2 T=4096, 120b EP4
# T=1024 / 4096).
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s12c3 +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
NEW=$PWD BASE=$PWD/.carry/base_pkg
mkdir -p /tmp/r
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 4 --max-seconds-per-tactic 0.3 --no-progress --no-ceilings"
TT='triton=^(m256n64k64w8s3-ps-gu-g2n128|m128n128k64w8s3-ps-g2n256|m128n128k128w8s3-ps-g2n256|m64n128k64w8s4-ps)$'
run() {  # run <tree> <commit> <name>
  local tree=$1 commit=$2 name=$3
  for mt in "gpt-oss-20b:1|4096,16384" "gpt-oss-20b:2|4096" "gpt-oss-120b:4|1024,4096"; do
    IFS='|' read -r m t <<< "$mt"
    (cd "$tree" && FP4MOE_GIT_COMMIT=$commit PYTHONPATH=$tree:/tmp/fi074:/tmp/site:$NCU_PY timeout $(left 580) \
      python3 -m fp4moe_diag sweep --backends triton --models $m --tokens $t $A --tactics "$TT" \
      --out /tmp/r/$name-${m//[:.]/_} 2>&1 | grep -v "^ *gpt-oss" | tail -1)
  done
  say "$name done"
}
run "$BASE" "$(cat $BASE/COMMIT)" s12-a1
run "$NEW" "$(cat .git_commit)" s12-b1
run "$BASE" "$(cat $BASE/COMMIT)" s12-a2
run "$NEW" "$(cat .git_commit)" s12-b2
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
