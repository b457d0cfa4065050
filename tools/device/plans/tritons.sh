#!/usr/bin/env bash
# Planned device calls (issue #25; session 14 had no GPU): our kernels and triton_kernels as the GPU image's Triton
# (3.6.0) and as a newer release build them, on the same GPU in the same call, one sweep per release (each in its own
# process), the same cases, tactics, seeds and method (CUDA graphs, L2 flushed, CUPTI kernel time). Why:
# docs/static-h200-s14.md (from 3.7 on, our decode gemm1 builds with 229-243 registers instead of 168).
#   PART=decode  20b EP1 and 120b EP4 at T = 1, 4, 16, 64: the decode winners, their plain twins, the k64 tiles
#                (3-4 programs per SM under 3.7+), the 8-warp tile and triton_kernels' decode flags; about 8 minutes
#   PART=prefill the same models at T = 1024, 4096: the prefill winners (with the 16-warp -gu tiles) and triton_kernels'
#                prefill flags; TOKENS overrides either part's token counts (e.g. TOKENS=256,16384)
# The newer Triton comes as a kit (tools/device/triton_kit.sh 3.7.1: PyPI's cp312 wheel, slimmed to about 50 MB; the
# image's Python is 3.12). Run from the repository root on the device with the kit, .carry/triton_kernels, .whl and
# .git_commit carried (git rev-parse HEAD > .git_commit):
#   run(command="PART=decode bash tools/device/plans/tritons.sh", carry=[".carry/triton-3.7.1-cp312.tar.xz",
#       ".carry/triton_kernels", ".whl", ".git_commit"])
# Both run folders come back in $OUT/runs.tgz; import them as one run (tools/device/import_gpu_bundle.py): the rows
# carry triton_version, and the headline tells the releases apart (triton@3.6.0, triton@3.7.1, triton_kernels@...).
# The newer release runs first, the image's second: an order effect would favour the image's, not the new one.
# The newer release's sweep also times the -rN register-capped twins (configs_regcap.py, offered from Triton 3.7 on:
# -r168 and -r128 at decode, -r128 of the 64-row tile) beside their uncapped twins (twins RUN --variant=-r168;
# session 24: -s24a, -s24b).
# PTXAS=image adds a sweep under the kit's Triton with the ptxas the image's Triton calls for sm_90 (TRITON_PTXAS_PATH
# and TRITON_PTXAS_BLACKWELL_PATH; PTXAS=/path: that one), between the two: its rows' triton_version reads
# 3.9.0+ptxas12.8 (environment.triton_build). Triton 3.9 calls its CUDA 13.4 ptxas from sm_90 on, which serialises
# the -tNf kernels' wgmmas; 3.6-3.8 call 12.8 there (session 37, docs/evidence-s37.md).
# TNF_PTXAS=image (or a path) sets FP4MOE_TNF_PTXAS for the kit's sweeps: the ptxas our -tNf kernels are built with
# (backends.triton.assembler). Triton 3.9's wheel ships a 12.9 ptxas for that, which the kit leaves out (8.6 MB); the
# image Triton's 12.8 stands in (the same loops, waits and spills: docs/evidence-s37.md). Session 38.
set -u
PART=${PART:-decode}
case "$PART" in decode|prefill) ;; *) echo "PART: expected decode or prefill, got $PART" >&2; exit 2 ;; esac
KIT=${KIT:-$(ls .carry/triton-*-cp312.tar.xz 2>/dev/null | head -1)}
[ -f "$KIT" ] || { echo "KIT: no .carry/triton-X.Y.Z-cp312.tar.xz carried (tools/device/triton_kit.sh)" >&2; exit 2; }
. "$(dirname "$0")/plan_lib.sh"
mkdir -p /tmp/tnew && tar -xJf "$KIT" -C /tmp/tnew || { echo "KIT: $KIT does not unpack" >&2; exit 2; }
plan_start "tritons-$PART"
NEW=$(PYTHONPATH=/tmp/tnew:$PYTHONPATH python3 -c "import triton; print(triton.__version__)") \
  || { echo "KIT: the kit's triton does not import here" >&2; plan_finish; exit 3; }
OLD=$(python3 -c "import triton; print(triton.__version__)")
say "image triton $OLD, kit triton $NEW"
ptxas_of() {  # $1: the variable's name, $2: its value ('', 'image' or a path), $3: what it is for; prints the path
  local p=$2
  [ "$p" = image ] && p=$(python3 -c "from triton.backends.nvidia.compiler import get_ptxas; print(get_ptxas(90).path)")
  [ -z "$p" ] || [ -x "$p" ] || { echo "$1: expected 'image' or an executable ptxas, got $p" >&2; return 2; }
  [ -z "$p" ] || say "ptxas for $3: $p ($("$p" --version | tail -1))" >&2
  echo "$p"
}
PTXAS=$(ptxas_of PTXAS "${PTXAS:-}" "the second sweep") || { plan_finish; exit 2; }
TNF_PTXAS=$(ptxas_of TNF_PTXAS "${TNF_PTXAS:-}" "the kit's -tNf kernels") || { plan_finish; exit 2; }
A="$SWEEP_ARGS --screen-top 6"
case "$PART" in
  decode)
    # the winners under 3.6.0 (-pdl), their plain twins, and the k64 tiles (-gu too) that keep 3-4 programs per SM
    # from 3.7 on
    TT='triton=^(m16n64k256w4s3-ps-sk[24](-pdl)?(-fs)?|m16n128k128w4s3-ps(-g2sk2)?(-pdl)?(-fs)?'
    TT="$TT"'|m16n128k128w8s3-ps(-g2sk2)?-pdl|m16n128k64w4s6-ps(-sk2|-gu(-pdl)?)?|m16n64k128w4s6-ps-sk[24])(-r1[26]8)?$'
    TK='triton_kernels=^tk-(mautokautow4|m16k128w[48]|m32k128w4)$'
    MODELS=gpt-oss-20b:1,gpt-oss-120b:4; TOKENS=${TOKENS:-1,4,16,64} ;;
  prefill)
    TT='triton=^(m256n64k64w8s3-ps-gu-g2n128(-t128)?(-pdl)?|m128n128k64w8s3-ps-g2n256(-t64)?(-pdl)?'
    TT="$TT"'|m64n128k64w8s4-ps(-t32)?|m128n128k64w16s[34]-ps-gu-g2n256(-t64)?)(-r128)?$'  # 16-warp -gu: s15 winners
    TT="$TT"'|^m128n128k64w16s3-ps-gu(-tm)?-g2n256-t32f(-pdl)?$'  # session 35: -t32f (the default at <= 512 pairs an expert)
    TK='triton_kernels=^tk-(mautokautow8|m64k128w4|m128kautow8s3|m128k128w8)$'
    MODELS=gpt-oss-20b:1,gpt-oss-20b:2,gpt-oss-120b:4; TOKENS=${TOKENS:-1024,4096} ;;
esac
sweep() {  # $1: the Triton folder first on PYTHONPATH ('' for the image's), $2: its version, $3: seconds
  PYTHONPATH=${1:+$1:}$PYTHONPATH TRITON_CACHE_DIR=/tmp/tc-$2 timeout "$3" python3 -m fp4moe_diag sweep \
    --backends triton,triton_kernels --models $MODELS --tokens $TOKENS $A --tactics "$TT" --tactics "$TK" \
    --out /tmp/r/tritons-$PART-$2 2>&1 | grep -v "^ *gpt-oss" | tail -3
  say "sweep under triton $2 done"
}
if [ -n "$PTXAS" ]; then
  FP4MOE_TNF_PTXAS=$TNF_PTXAS sweep /tmp/tnew "$NEW" $(( ($(left 570)) / 3 ))
  TRITON_PTXAS_PATH=$PTXAS TRITON_PTXAS_BLACKWELL_PATH=$PTXAS sweep /tmp/tnew "$NEW-ptxas" $(( ($(left 570)) / 2 ))
else
  FP4MOE_TNF_PTXAS=$TNF_PTXAS sweep /tmp/tnew "$NEW" $(( ($(left 570)) / 2 ))
fi
sweep "" "$OLD" $(left 575)
plan_finish
