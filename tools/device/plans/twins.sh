#!/usr/bin/env bash
# A tactic family against its plain twins, one sweep of our kernels: TACTICS (a regular expression of triton tactic
# labels, required) at MODELS (default 20b EP1, 20b EP2, 120b EP4) x TOKENS (default 1, 4, 16, 64), every tactic timed in
# full (no screening cut), one method (CUDA-graph replays, L2 flushed, CUPTI kernel time). Read it with
#   python -m fp4moe_diag twins data/runs/<run> --variant=SUFFIX [--base=SUFFIX]
# Session 20: -pk (s20c, configs_peel),
#   TACTICS='^(m16n64k256w4s3-ps(-pk)?-sk[24]|m16n128k128w4s[34]-ps(-pk)?|m16n128k128w4s3-ps(-pk)?-g2sk2|m16n128k256w8s3-ps(-pk)?-sk2-pdl)(-pdl)?(-fs)?$'
# and -g2sN (configs_stages),
#   TACTICS='^(m16n128k128w4s3-ps(-pk)?(-g2sk2)?|m16n64k256w4s3-ps-sk[24])(-g2s[45])?-pdl(-fs)?$'
# Session 24: -rN under the Triton 3.9.0 kit (configs_regcap; KIT as evidence.sh's, the run named twins-tritonX.Y.Z),
#   KIT=.carry/triton-3.9.0-cp312.tar.xz TACTICS='^(m64n128k64w8s4-ps(-t32)?|m16n128k128w4s3-ps-g2sk2-pdl)(-r1[26]8)?$'
# Session 27: -u2 (configs_unroll), the prefill winners with and without their K loops unrolled (timed s28a, H100:
#   1.058, since run by label only: a sweep, this one too, times offered tactics),
#   TOKENS=4096,16384 TACTICS='^m128n128k64w16s3-ps-gu(-tm)?(-u2)?-g2n256(-t64)?(-pdl)?$'
# Session 33: -t32 (the 16-warp tile's 32-row tails, configs_tail; timed s34a, H100: median 0.982), read with
#   --variant=-t32 --base=-t64,
#   TOKENS=1024,4096,16384 MODELS=gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096
#   TACTICS='^m128n128k64w16s3-ps-gu(-tm)?-g2n256-t(32|64)-pdltt$'
# Session 34: -t32f (the tails in the last block's program, _kernels_over; s34g, H100: median 0.971 of -t32), read
#   with --variant=-t32f-pdl --base=-t32-pdltt, the same MODELS and TOKENS,
#   TACTICS='^m128n128k64w16s3-ps-gu-tm-g2n256-t(32|64)-pdltt$|^m128n128k64w16s3-ps-gu(-tm)?-g2n256-t32f(-pdl)?$'
# Run from the repository root on the device with .whl and .git_commit carried (our kernels only):
#   run(command="TACTICS='...' bash tools/device/plans/twins.sh", carry=[".whl", ".git_commit"])
# About 3-5 minutes cold. $OUT/runs.tgz: the run folder (import_gpu_bundle.py).
set -u
[ -n "${TACTICS:-}" ] || { echo "TACTICS: expected a regular expression of triton tactic labels" >&2; exit 2; }
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
kit_check
plan_start twins
use_kit
timeout $(left ${TWINS_S:-540}) python3 -m fp4moe_diag sweep --backends triton \
  --models ${MODELS:-gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4} --tokens ${TOKENS:-1,4,16,64} $SWEEP_ARGS \
  --screen-top 60 --tactics "triton=$TACTICS" --out /tmp/r/${NAME:-twins}$TV 2>&1 | grep -v "^ *gpt-oss" | tail -3
say "sweep done"
plan_finish
