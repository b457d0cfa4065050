# Sourced by the device plans (warps.sh, tritons.sh): what every plan call does the same way.
#   plan_start NAME  the clock (say, left), the carried wheels (.whl) into /tmp/site, PYTHONPATH and FP4MOE_* for a
#                    sweep, /tmp/r, and a snapshot of /tmp/r into $OUT/partial.tgz every 30 s (a call cut off at its
#                    time limit still brings back its finished cases)
#   plan_finish      stops the snapshot and packs /tmp/r into $OUT/runs.tgz
#   ablate NAME MODEL EP TOKENS SECONDS [--repeats N] TACTIC...
#                    profiling.ablate of the tactics into /tmp/r/ablate-NAME.csv, cut off after SECONDS
#   duel NAME MODEL EP TOKENS SECONDS A B
#                    profiling.duel of A against B (BACKEND=TACTIC each) into /tmp/r/duel-NAME.csv, cut off after
#                    SECONDS
#   kit_check, use_kit
#                    KIT (a .carry/triton-X.Y.Z-cp312.tar.xz, tools/device/triton_kit.sh; optional): kit_check (before
#                    plan_start) refuses a missing file (exit 2); use_kit (after it) unpacks it (into KIT_DIR, default
#                    /tmp/tnew) first on PYTHONPATH and sets TV=-tritonX.Y.Z ('' without KIT), what a plan names its
#                    outputs with
#   duels SECONDS [energy]
#                    every duel of DUELS (space-separated MODEL|EP|T|BACKEND=TACTIC|BACKEND=TACTIC) with duel, named
#                    MODEL-epEP-tT$TV (a second one at a shape -2, and so on), while more than 40 of SECONDS are left;
#                    with "energy" the same pairs through energy instead (profiling.energy: energy per call under a
#                    sustained load, 300 replays a block, 50 above T=4096; /tmp/r/energy-NAME.csv)
#   ncu_env          ncu on PATH and its extras/python on PYTHONPATH (Nsight Compute through nsight-python)
#   require_gpu      ONLY_ON (part of a GPU name, e.g. H200): on any other card the plan stops before it starts
#                    (exit 3), so a call meant for one card costs only the machine's start on another
#   gpu_state CSV    one line of nvidia-smi's clocks, power and temperature appended to CSV (header first); plan_start
#                    and plan_finish write /tmp/r/gpu-NAME.csv, which the import copies beside the run
#   SWEEP_ARGS       the one timing method of every plan (CUDA graphs, L2 flushed, CUPTI kernel time, screened forward
#                    and back, the finalists in alternating rounds: --interleave); a plan adds its own --screen-top
GPU_FIELDS=timestamp,name,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,temperature.gpu
require_gpu() {
  [ -z "${ONLY_ON:-}" ] && return 0
  local gpu; gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$gpu" in *"$ONLY_ON"*) return 0 ;; esac
  echo "ONLY_ON=$ONLY_ON: this machine's GPU is ${gpu:-unknown}; the plan stops here, nothing run"; exit 3
}
gpu_state() {  # an older driver without clocks_event_reasons: that column empty
  [ -s "$1" ] || echo "$GPU_FIELDS,clocks_event_reasons.active" > "$1"
  local line
  if line=$(nvidia-smi --query-gpu=$GPU_FIELDS,clocks_event_reasons.active --format=csv,noheader,nounits 2>/dev/null); then
    echo "$line" >> "$1"
  elif line=$(nvidia-smi --query-gpu=$GPU_FIELDS --format=csv,noheader,nounits 2>/dev/null); then
    echo "$line" | sed 's/$/,/' >> "$1"
  fi
}
plan_start() {
  PLAN=$1
  require_gpu
  export OUT=${OUT:-/tmp/out}
  T0=${PLAN_T0:-$(date +%s)}  # PLAN_T0: one clock for plans chained in one call
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
  export PYTHONPATH=$PWD:/tmp/site FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
  FP4MOE_GIT_COMMIT=$(cat .git_commit); export FP4MOE_GIT_COMMIT
  mkdir -p /tmp/r
  gpu_state /tmp/r/gpu-$PLAN.csv
  ( while sleep 30; do tar -czf $OUT/partial.tgz.tmp -C /tmp r 2>/dev/null && mv $OUT/partial.tgz.tmp $OUT/partial.tgz; \
    done ) &
  SNAP=$!
}
say() { echo "[$PLAN +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }  # seconds left of $1 since plan_start
plan_finish() {
  kill $SNAP 2>/dev/null; wait $SNAP 2>/dev/null; rm -f $OUT/partial.tgz.tmp
  gpu_state /tmp/r/gpu-$PLAN.csv
  tar -czf $OUT/runs.tgz -C /tmp r && rm -f $OUT/partial.tgz; say "all done"; ls -la $OUT
}
SWEEP_ARGS="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --screen 2 --max-seconds-per-tactic 0.3"
SWEEP_ARGS="$SWEEP_ARGS --no-progress --interleave"  # finalists interleaved (s22), screens both ways (s24)
ablate() {
  local name=$1 model=$2 ep=$3 tokens=$4 secs=$5; shift 5
  local args=(); while [ $# -gt 0 ]; do
    if [ "$1" = --repeats ]; then args+=(--repeats "$2"); shift 2; else args+=(--tactic "$1"); shift; fi
  done
  timeout "$secs" python3 -m fp4moe_diag.profiling.ablate --model "$model" --ep "$ep" --tokens "$tokens" "${args[@]}" \
    --out /tmp/r/ablate-$name.csv 2>&1 | grep -v -i "warn" | tail -12
  say "ablate $name done"
}
duel() {
  local name=$1 model=$2 ep=$3 tokens=$4 secs=$5 a=$6 b=$7
  timeout "$secs" python3 -m fp4moe_diag.profiling.duel --model "$model" --ep "$ep" --tokens "$tokens" --a "$a" \
    --b "$b" --out /tmp/r/duel-$name.csv 2>&1 | grep -v -i "warn" | tail -4
  say "duel $name done"
}
conditions() {  # one pair four ways: plain, traced (CUPTI on the same replays), traced with the GPU idle before
  # each call (a sweep's CUPTI pass), idle untraced (session 26: the two passes disagree in sign at 20b EP2 T=4096)
  local name=$1 model=$2 ep=$3 tokens=$4 secs=$5 a=$6 b=$7 i=0 f
  [ $(( secs / 4 )) -ge 20 ] || { say "conditions $name: no time (4 x 20 s needed, $secs s left)"; return; }
  for f in "" "--kernel-time" "--kernel-time --sync-after-flush" "--sync-after-flush"; do
    i=$((i + 1))
    timeout $(( secs / 4 )) python3 -m fp4moe_diag.profiling.duel --model "$model" --ep "$ep" --tokens "$tokens" \
      --a "$a" --b "$b" $f --out /tmp/r/duel-$name-c$i.csv 2>&1 | grep -v -i "warn" | tail -5
  done
  say "conditions $name done"
}
profiles() {  # PROFILES: MODEL|EP|T|[BACKEND=]TACTIC each (triton when no backend is named), Nsight Compute with the
  # warp stalls, each into /tmp/p/N-BACKEND-MODEL-epE-tT, packed into $OUT/profiles.tgz after each; $1: the plan's limit
  local p pm pep pt ptac pb L n=0
  for p in ${PROFILES:-}; do
    IFS='|' read -r pm pep pt ptac <<< "$p"; n=$((n + 1)); pb=triton
    case $ptac in *=*) pb=${ptac%%=*}; ptac=${ptac#*=} ;; esac
    L=$(left "$1"); [ "$L" -gt 45 ] || { say "no time left for the profile of $pb $ptac"; continue; }
    timeout "$L" python3 -m fp4moe_diag profile --backend "$pb" --model "$pm" --ep "$pep" --tokens "$pt" \
      --tactics "$ptac" --stalls --out /tmp/p/$n-$pb-$pm-ep$pep-t$pt${TV:-} 2>&1 | tail -4 | cut -c1-240
    tar -czf $OUT/profiles.tgz -C /tmp p; say "profile $n done"
  done
}
energy() {
  local name=$1 model=$2 ep=$3 tokens=$4 secs=$5 a=$6 b=$7 calls=300
  [ "$tokens" -gt 4096 ] && calls=50
  timeout "$secs" python3 -m fp4moe_diag.profiling.energy --model "$model" --ep "$ep" --tokens "$tokens" --a "$a" \
    --b "$b" --calls $calls --out /tmp/r/energy-$name.csv 2>&1 | grep -v -i "warn" | tail -2
  say "energy $name done"
}
ncu_env() {
  export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
  export PYTHONPATH=$PYTHONPATH:$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
}
kit_check() {
  [ -z "${KIT:-}" ] || [ -f "$KIT" ] || { echo "KIT: no file $KIT (tools/device/triton_kit.sh)" >&2; exit 2; }
}
use_kit() {
  TV=""
  [ -n "${KIT:-}" ] || return 0
  local dir=${KIT_DIR:-/tmp/tnew}
  mkdir -p "$dir" && tar -xJf "$KIT" -C "$dir" || { echo "KIT: $KIT does not unpack" >&2; plan_finish; exit 2; }
  export PYTHONPATH=$dir:$PYTHONPATH TRITON_CACHE_DIR=/tmp/tc-kit
  TV=-triton$(python3 -c "import triton; print(triton.__version__)") || { plan_finish; exit 3; }; say "KIT: ${TV#-}"
}
duels() {
  local d dm dep dt da db n L kind=${2:-duel}; local -A seen=()
  case $kind in duel|energy|conditions) ;; *) echo "duels: expected duel, energy or conditions, got $kind" >&2
    return 2 ;; esac
  for d in ${DUELS:-}; do
    IFS='|' read -r dm dep dt da db <<< "$d"
    L=$(left "$1"); [ "$L" -gt 40 ] || { say "no time left for the $kind $d"; continue; }
    n="${dm#gpt-oss-}-ep$dep-t$dt${TV:-}"; seen[$n]=$(( ${seen[$n]:-0} + 1 ))
    [ "${seen[$n]}" -gt 1 ] && n="$n-${seen[$n]}"
    $kind "$n" "$dm" "$dep" "$dt" "$L" "$da" "$db"
  done
}
