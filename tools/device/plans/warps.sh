#!/usr/bin/env bash
# Planned device calls (issue #25; session 13 had no GPU): the tactics of configs_warps.py, more warps per SM
# scheduler, each beside the winners it should beat and triton_kernels in the same run (CUDA graphs, L2 flushed,
# CUPTI kernel time).
#   PART=decode  the 8-warp decode tiles at every decode shape (T = 1..64), then Nsight
#                Compute (stalls) of m16n128k128w8s3-ps at 20b EP1 T=64; about 8 minutes of device time
#   PART=prefill the 16-warp -gu tiles at T = 1024..16384 beside the s12 winners, then Nsight Compute of
#                m128n128k64w16s3-ps-gu-g2n256 at 20b EP2 T=4096 (the shape where triton_kernels leads by 5 %)
# Run from the repository root on the device, with .carry/triton_kernels (vLLM's triton_kernels), .whl
# (tools/device/fetch_device_wheels.sh) and .git_commit (git rev-parse HEAD > .git_commit) carried:
#   run(command="PART=decode bash tools/device/plans/warps.sh", carry=[".carry/triton_kernels", ".whl", ".git_commit"])
# and import $OUT/runs.tgz with tools/device/import_gpu_bundle.py (profiles.tgz: its ncu tables beside the run).
set -u
PART=${PART:-decode}
case "$PART" in decode|prefill) ;; *) echo "PART: expected decode or prefill, got $PART" >&2; exit 2 ;; esac
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
plan_start "warps-$PART"
ncu_env
mkdir -p /tmp/p
A="$SWEEP_ARGS --screen-top 8"
MODELS=gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096
case "$PART" in
  decode)
    TT='^(m16n64k256w4s3-ps(-sk[24])?(-pdl)?(-fs)?|m16n128k128w4s[34]-ps(-g2sk2)?(-pdl)?(-fs)?'
    TT="triton=$TT"'|m16n128k(128|256)w8s[34]-ps(-sk2|-g2sk2)?(-pdl)?)$'
    TK='triton_kernels=^tk-(mautokautow4|m16k128w[48]|m32k128w4)$'
    TOKENS=1,4,16,64 PROF="gpt-oss-20b|1|64|m16n128k128w8s3-ps" ;;
  prefill)
    TT='triton=^(m256n64k64w8s3-ps-gu-g2n128(-t128)?|m128n128k64w8s3-ps-g2n256(-t64)?|m64n128k64w8s4-ps-t32'
    TT="$TT"'|m(64|128)n128k64w16s[34]-ps-gu-g2n256(-t64)?)$'
    TK='triton_kernels=^tk-(mautokautow8|m64k128w4|m128kautow8s3|m128k128w8)$'
    TOKENS=1024,4096,16384 PROF="gpt-oss-20b|2|4096|m128n128k64w16s3-ps-gu-g2n256" ;;
esac
timeout $(left 470) python3 -m fp4moe_diag sweep --backends triton,triton_kernels --models $MODELS --tokens $TOKENS \
  $A --tactics "$TT" --tactics "$TK" --out /tmp/r/warps-$PART 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "sweep done"
PROFILES="$PROF" profiles 585
plan_finish
