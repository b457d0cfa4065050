#!/usr/bin/env bash
# Planned device call (session 13 had no device; issue #25, decode goals 2 and 3): the 8-warp decode tiles and
# the unsplit m16n64k256 tile (configs_decode) beside the decode winners of s10f / s11b and triton_kernels' decode
# tactics, at every decode shape T = 1..64; Nsight Compute (stalls) of the 8-warp tile at 20b EP1 T=64.  About 8 minutes of device time.
# Run from the repository root on the device, carrying the script, .carry/triton_kernels, .whl (tools/device/
# fetch_device_wheels.sh) and .git_commit (git rev-parse HEAD > .git_commit):
#   run(command="bash tools/device/plans/decode8.sh", carry=[".carry/triton_kernels", ".whl", ".git_commit"])
# then: PYTHONPATH=. python3 tools/device/import_gpu_bundle.py runs.tgz RUN_ID --command ... (and profiles.tgz).
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s13c1 +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
export PYTHONPATH=$PWD:/tmp/site:$NCU_PY FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
export FP4MOE_GIT_COMMIT=$(cat .git_commit)
mkdir -p /tmp/r /tmp/p
( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; done ) &
SNAP=$!
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --screen-top 8 --max-seconds-per-tactic 0.3 --no-progress"
TT='triton=^(m16n64k256w4s3-ps(-sk[24])?(-pdl)?(-fs)?|m16n128k128w4s[34]-ps(-g2sk2)?(-pdl)?(-fs)?|m16n128k(128|256)w8s[34]-ps(-sk2|-g2sk2)?(-pdl)?)$'
TK='triton_kernels=^tk-(mautokautow4|m16k128w[48]|m32k128w4)$'
timeout $(left 470) python3 -m fp4moe_diag sweep --backends triton,triton_kernels \
  --models gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096 --tokens 1,4,16,64 $A --tactics "$TT" --tactics "$TK" \
  --out /tmp/r/s13-decode 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "decode done"
L=$(left 585); [ "$L" -gt 40 ] && (timeout $L python3 -m fp4moe_diag profile --backend triton --model gpt-oss-20b --ep 1 \
  --tokens 64 --tactics 'm16n128k128w8s3-ps' --stalls --out /tmp/p/1-triton-gpt-oss-20b-ep1-t64 2>&1 | tail -4 | cut -c1-240
  tar -czf $OUT/profiles.tgz -C /tmp p; say "profile done")
kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
