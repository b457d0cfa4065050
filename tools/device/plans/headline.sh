#!/usr/bin/env bash
# The README's headline in one run (issue #25, "Done means": every bf16 peer in the same run as ours, one method): our
# Triton kernels, triton_kernels (vLLM's) and FlashInfer 0.7.4's SM90 CUTLASS (the full prebuilt module) at every goal
# shape (20b EP1 / EP2 at T = 1 .. 16384, 120b EP4 at T = 1 .. 4096), under the image's Triton, each backend given the
# tactics that won at these shapes in the committed runs (s10f, s11b, s12e-g, s15a: the top two per shape and backend;
# for CUTLASS the gemm1 / gemm2 tactics those winners combine; ours also the 16-warp -fs tiles and the winners' -tm
# twins (configs_tm.py), not timed before; from session 25 the -pdl twins of the prefill ones, from session 29 their
# -pdlt twins where they have tails, from session 32 their -pdltt twins, configs_tail.py), screened and the top six
# re-timed in full. Two sweeps:
# decode (T <= 256) first, then prefill; a sweep cut off by the time limit still brings back its finished cases.
# MODELS, DECODE_TOKENS and PREFILL_TOKENS narrow it (an empty token list skips that sweep), e.g. to re-measure shapes.
# Then, in the time left, a duel (30 alternating rounds) at each shape where goal 1 is undecided (session 25).
# Run from the repository root on the device with .carry/triton_kernels, .carry/fi074_py.tar.xz (FlashInfer 0.7.4's
# Python files: tools/README_cutlass_slim.md), .carry/fused_moe_90_slim074_full.so.xz (the module built by
# tools/cutlass_slim/build_cutlass_sm90_slim_074.py --tactics full), .whl and .git_commit carried:
#   run(command="bash tools/device/plans/headline.sh", carry=[".carry/triton_kernels", ".carry/fi074_py.tar.xz",
#       ".carry/fused_moe_90_slim074_full.so.xz", ".whl", ".git_commit"])
# About 9 minutes of device time; import $OUT/runs.tgz as one run (tools/device/import_gpu_bundle.py).
set -u
MODULE=.carry/fused_moe_90_slim074_full.so.xz
[ -f "$MODULE" ] || { echo "MODULE: $MODULE not carried (tools/cutlass_slim/README)" >&2; exit 2; }
[ -f .carry/fi074_py.tar.xz ] || { echo "FlashInfer: .carry/fi074_py.tar.xz not carried" >&2; exit 2; }
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
plan_start headline
mkdir -p /tmp/fi074 && tar -C /tmp/fi074 -xJf .carry/fi074_py.tar.xz
export PYTHONPATH=$PYTHONPATH:/tmp/fi074 FP4MOE_CUTLASS_MODULE=$PWD/$MODULE
A="$SWEEP_ARGS --screen-top 6"
MODELS=${MODELS:-gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4:4096}
DECODE_TOKENS=${DECODE_TOKENS-1,4,16,64,256} PREFILL_TOKENS=${PREFILL_TOKENS-1024,4096,16384}
sweep() {  # $1: name, $2: tokens, $3: seconds, then the --tactics regexes
  local name=$1 tokens=$2 secs=$3; shift 3
  [ -n "$tokens" ] || { say "sweep $name skipped (no tokens)"; return; }
  local tac=(); for t in "$@"; do tac+=(--tactics "$t"); done
  timeout "$secs" python3 -m fp4moe_diag sweep --backends triton,triton_kernels,cutlass --models $MODELS \
    --tokens "$tokens" $A "${tac[@]}" --out /tmp/r/headline-$name 2>&1 | grep -v "^ *gpt-oss" | tail -3
  say "sweep $name done"
}
# CUTLASS at decode: its winners at T <= 64 (g1:53 / 57, g2:165-172) and at 20b T=256 (g1:73 + g2:180 / 188 / 189)
sweep decode "$DECODE_TOKENS" $(left 270) \
  'triton=^(m16n64k256w4s3-ps(-tm)?-sk[24]-pdl(-fs)?|m16n128k128w4s3-ps(-tm)?(-g2sk2)?(-pdl)?(-fs)?|m16n128k256w8s3-ps-sk2-pdl|m32n128k128w4s3-ps|m64n128k64w8s4-ps)$' \
  'triton_kernels=^tk-(mautokautow4|m16k128w[48]|m32k128w4)$' \
  'cutlass=^(default|g1:(53|57|73)|g2:(165|168|169|172|180|188|189))'
sweep prefill "$PREFILL_TOKENS" $(left 570) \
  'triton=^(m128n128k64w16s[34]-ps-gu(-tm)?-g2n256(-t64|-t32f?|-fs)?(-pdl(tt?)?)?|m256n64k64w8s3-ps-gu(-tm)?-g2n128(-t128)?(-pdl(tt?)?)?|m128n128k64w8s3-ps-g2n256-t64-pdl(tt?)?|m64n128k64w8s4-ps(-t32)?)$' \
  'triton_kernels=^tk-(mautokautow8|m64k128w4|m128kautow8s3|m128k128w8)$' \
  'cutlass=^(default|g1:(73)|g2:(180|188|189))'
# goal 1 where the sweeps' medians cannot decide it (ours behind, or ahead by under 2 %): ours' best against the
# fastest peer's best in alternating rounds (profiling.duel, one clock for both), in the same call (HEADLINE_DUELS=0:
# none); `goals` reads the duel-*.csv the import copies beside the run
if [ "${HEADLINE_DUELS:-1}" != 0 ]; then
  DUELS=$(python3 -m fp4moe_diag goals $(ls -d /tmp/r/headline-* 2>/dev/null) --ours triton --duels 2>/dev/null | tr '\n' ' ')
  say "duels: ${DUELS:-none}"
  duels 590
fi
plan_finish
