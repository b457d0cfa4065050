# Sourced by the device plans (warps.sh, tritons.sh): what every plan call does the same way.
#   plan_start NAME  the clock (say, left), the carried wheels (.whl) into /tmp/site, PYTHONPATH and FP4MOE_* for a
#                    sweep, /tmp/r, and a snapshot of /tmp/r into $OUT/partial.tgz every 30 s (a call cut off at its
#                    time limit still brings back its finished cases)
#   plan_finish      stops the snapshot and packs /tmp/r into $OUT/runs.tgz
#   SWEEP_ARGS       the one timing method of every plan (CUDA graphs, L2 flushed, CUPTI kernel time, screened);
#                    a plan adds its own --screen-top
plan_start() {
  PLAN=$1
  export OUT=${OUT:-/tmp/out}
  T0=$(date +%s)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
  export PYTHONPATH=$PWD:/tmp/site FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
  FP4MOE_GIT_COMMIT=$(cat .git_commit); export FP4MOE_GIT_COMMIT
  mkdir -p /tmp/r
  ( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; \
    done ) &
  SNAP=$!
}
say() { echo "[$PLAN +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }  # seconds left of $1 since plan_start
plan_finish() {
  kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
  tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
}
SWEEP_ARGS="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --max-seconds-per-tactic 0.3"
SWEEP_ARGS="$SWEEP_ARGS --no-progress"
