#!/usr/bin/env bash
# One whole GPU session on the lent H200 (or any CUDA machine without network):
# install the carried wheels, record the environment, reproduce the bug, measure ceilings,
# sweep the backends over the vLLM shapes, (optionally) profile with Nsight Compute and
# execute the notebooks, then pack everything into $OUT/bundle.tgz (+ $OUT/log.txt); a second invocation with
# the same $OUT packs into bundle-2.tgz, bundle-3.tgz, ... (never over an earlier bundle).
#
#   OUT=/tmp/out PHASES="env reproduce sweep" tools/device/gpu_session.sh
#
# Phases (default: all but 'cutlass-build', 'fi074-*' and 'profile'): env reproduce versions sweep notebooks
# cutlass-build profile; fi074-build (the slim SM90 CUTLASS module of FlashInfer 0.7.4, built here in the
# background from .carry/fi074_{py,data}.tar.xz with tools/cutlass_slim/build_cutlass_sm90_slim_074.py: 116 kernels, all
# cores; FI074_TACTICS=fast builds the 4-tactic fast build instead) and fi074-wait (waits for it, copies the .so.xz
# to $OUT).  A sweep entry's 6th field 'fi074' ('fi074fast': the fast build) runs it
# under FlashInfer 0.7.4 (/tmp/fi074 first on PYTHONPATH, FP4MOE_CUTLASS_MODULE = that build; 'fi074humming': the carried
# .carry/fused_moe_90_humming074.so.xz, bf16 x MXFP4 + Humming, for cutlass,cutlass_w4a16,cutlass_humming in one sweep). (PROFILES="backend|model|ep|tokens|tactic labels;...": Nsight Compute tables)
# (notebook 04 does the Nsight Compute profile; every sweep re-times each best tactic: noise_ratio)
# TRITON_CACHE_OUT=0: do not pack Triton's compile cache into $OUT (it can pass the size of what comes back).
# Knobs: SWEEP_BACKENDS (triton,cutlass,reference), SWEEP_MODELS, SWEEP_EP, SWEEP_TOKENS,
#        SWEEP_REPEATS, SWEEP_ARGS (extra args), FP4MOE_CUTLASS_MODULE (prebuilt slim module),
#        FP4MOE_FP4QUANT_MODULE (prebuilt flashinfer fp4 quantization module, for gputests).
# Several sweeps in one call: SWEEPS="backends|models|out|timeout_s|extra args;..." (one entry per
# sweep, run in order; each writes its own run folder; empty fields fall back to the SWEEP_* knobs).
# Phase 'gputests' runs the GPU-only tests (pytest -m gpu; GPUTESTS_PATHS, default tests) into $B/gputests.txt.
# Presets (PRESET=...): the runs committed under data/runs/2026-12-03-nvidia-h200-s3-*:
#   full20b       whole gpt-oss-20b sweep (EP1+EP2, T=1..16384, cutlass+triton+reference), ~530 s
#   120b-ep4      gpt-oss-120b EP4 T=1..4096, cutlass+triton+reference, ~160 s
#   decode-graph  T<=64 for 20b EP1/EP2 and 120b EP4 as CUDA-graph replays, cutlass+triton, ~90 s
set -u
case "${PRESET:-}" in
  "") ;;
  full20b) SWEEPS=${SWEEPS:-"cutlass,triton,reference|gpt-oss-20b:1,gpt-oss-20b:2|/tmp/r/full20b|560|"} ;;
  120b-ep4) SWEEPS=${SWEEPS:-"cutlass,triton,reference|gpt-oss-120b:4:4096|/tmp/r/120b-ep4|300|"} ;;
  decode-graph) SWEEPS=${SWEEPS:-"cutlass,triton|gpt-oss-20b:1:64,gpt-oss-20b:2:64,gpt-oss-120b:4:64|/tmp/r/decode-graph|300|--cuda-graph"} ;;
  *) echo "unknown PRESET=$PRESET (full20b, 120b-ep4, decode-graph)" >&2; exit 2 ;;
esac
if [ -n "${PRESET:-}" ]; then
  PHASES=${PHASES:-"env sweep"}
  SWEEP_REPEATS=${SWEEP_REPEATS:-20}
  SWEEP_ARGS=${SWEEP_ARGS:-"--warmup 3 --max-seconds-per-tactic 0.5 --screen 3 --screen-top 4"}
  export FP4MOE_CUTLASS_MODULE=${FP4MOE_CUTLASS_MODULE:-$PWD/.carry/fused_moe_90_slim_full.so.xz}
fi
OUT=${OUT:-/tmp/fp4moe_out}
B=$OUT/bundle
mkdir -p "$B"
export PYTHONUNBUFFERED=1
PHASES=${PHASES:-"env reproduce versions sweep notebooks"}
T0=$(date +%s)
log() { echo "[gpu_session +$(( $(date +%s) - T0 ))s] $*"; }

if ls .whl/*.whl >/dev/null 2>&1; then
  log "installing carried wheels"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { log "wheel install failed"; exit 3; }
  export PYTHONPATH=/tmp/site
  export JUPYTER_PATH=/tmp/site/share/jupyter  # nbconvert templates of the --target install
fi
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | head -1)
export PYTHONPATH=${PYTHONPATH:-}:$PWD${NCU_PY:+:$NCU_PY}
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/fi_ws}
export FP4MOE_GIT_COMMIT=${FP4MOE_GIT_COMMIT:-$(cat .git_commit 2>/dev/null || echo unknown)}
export MPLBACKEND=Agg
# Triton's compile cache: seeded from a carried .carry/triton_cache.tgz (brought back by an earlier
# call from $OUT/triton_cache.tgz) so that the sweep's timing budget does not pay the JIT again.
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton_cache}
mkdir -p "$TRITON_CACHE_DIR"
if [ -f .carry/triton_cache.tgz ]; then tar -C "$TRITON_CACHE_DIR" -xzf .carry/triton_cache.tgz && log "triton cache seeded"; fi
export PATH=$PATH:$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)" 2>/dev/null)

# SNAPSHOT_S=N: every N s the run folders (/tmp/r, one atomic part file per finished case) and the bundle so far
# are packed into $OUT/partial.tgz (written beside, then renamed), so a call cut off at its time limit still
# brings back every finished case (tools/device/import_gpu_bundle.py imports it, marked partial).
if [ -n "${SNAPSHOT_S:-}" ]; then
  mkdir -p /tmp/r
  ( while sleep "$SNAPSHOT_S"; do
      tar -czf "$OUT/partial.tgz.tmp" -C /tmp r -C "$OUT" bundle 2>/dev/null && mv -f "$OUT/partial.tgz.tmp" "$OUT/partial.tgz"
    done ) &
  SNAP_PID=$!
fi

has() { case " $PHASES " in *" $1 "*) return 0;; *) return 1;; esac; }

if has env; then
  log "environment"
  { nvidia-smi; python3 - <<'PY'
import torch, platform
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
props = torch.cuda.get_device_properties(0)
print("SMs", props.multi_processor_count, "L2 bytes", getattr(props, "L2_cache_size", None))
import time; t = time.time(); import flashinfer; print("flashinfer", flashinfer.__version__, "import s", round(time.time() - t, 2))
import triton; print("triton", triton.__version__)
try:
    import nsight; print("nsight-python", getattr(nsight, "__version__", "?"))
except Exception as e:
    print("nsight-python not importable:", e)
PY
  which ncu && ncu --version; } > "$B/env.txt" 2>&1
  cat "$B/env.txt"
fi

FI074=/tmp/fi074
FI074_OUT=/tmp/cs074
unpack_fi074() {
  [ -d "$FI074/flashinfer" ] && return 0
  mkdir -p "$FI074" "$FI074_OUT/deps/nvidia/cu13"
  tar -C "$FI074" -xJf .carry/fi074_py.tar.xz && tar -C "$FI074" -xJf .carry/fi074_data.tar.xz \
    && tar -C "$FI074_OUT/deps/nvidia/cu13" -xJf .carry/cu13_headers.tar.xz
}
fi074_so() { ls "$FI074_OUT"/dist/fused_moe_90_slim074_full.so.xz 2>/dev/null || ls .carry/fused_moe_90_slim074_full.so.xz 2>/dev/null; }
# the fast build (stock use_fast_build=True: 4 tactics per GEMM), built here with FI074_TACTICS=fast
fi074_fast_so() { ls "$FI074_OUT"/dist/fused_moe_90_slim074.so.xz 2>/dev/null || ls .carry/fused_moe_90_slim074.so.xz 2>/dev/null; }
# bf16 x MXFP4 + MXFP4 x FP8 Humming, fast tactics (build_cutlass_sm90_slim_074.py --paths both, built on the CPU host)
fi074_humming_so() { ls .carry/fused_moe_90_humming074.so.xz 2>/dev/null; }
fi074_want() { if [ "${FI074_TACTICS:-full}" = fast ]; then fi074_fast_so; else fi074_so; fi; }

if has fi074-build; then
  if [ -n "$(fi074_want)" ]; then log "0.7.4 slim module already at $(fi074_want)"; else
    unpack_fi074 || { log "cannot unpack the FlashInfer 0.7.4 kit"; exit 4; }
    log "building FlashInfer 0.7.4's slim SM90 CUTLASS module (--tactics ${FI074_TACTICS:-full}) in the background (-j ${FI074_JOBS:-12})"
    setsid nohup nice -n 10 env PYTHONPATH="$FI074:${PYTHONPATH:-}" FI_SLIM_OUT="$FI074_OUT" python3 \
      tools/cutlass_slim/build_cutlass_sm90_slim_074.py --build --tactics "${FI074_TACTICS:-full}" -j "${FI074_JOBS:-12}" --out "$FI074_OUT" \
      > "$OUT/fi074_build.log" 2>&1 < /dev/null &
  fi
fi

if has cutlass-build; then
  log "slim CUTLASS SM90 build"
  python3 tools/cutlass_slim/build_cutlass_sm90_slim.py --build 2>&1 | tail -40 | tee "$B/cutlass_build.txt"
fi

if has reproduce; then
  log "reproduce (seed case)"
  python3 -m fp4moe_diag reproduce --json "$B/verdict_h200.json" --traceback 2>&1 | grep -v "autotuner.py" | tail -60 | tee "$B/reproduce.txt"
fi

if has versions; then
  log "flashinfer version matrix (static check per version, on this GPU)"
  if [ -f .carry/fi_py.tar.xz ]; then mkdir -p /tmp/fi_py && tar -C /tmp/fi_py -xJf .carry/fi_py.tar.xz; fi
  python3 -m fp4moe_diag versions /tmp/site /tmp/fi_py/fi_py_* --csv "$B/version_matrix.csv" 2>&1 | tail -5
fi

if has gputests; then
  log "GPU-only tests"
  # shellcheck disable=SC2086  # GPUTESTS_PATHS is a list of test paths
  timeout "${GPUTESTS_TIMEOUT:-240}" python3 -m pytest -q -m gpu -p no:cacheprovider ${GPUTESTS_PATHS:-tests} 2>&1 | tee "$B/gputests.txt" | tail -30
fi

run_sweep() {  # backends models out timeout flashinfer extra...
  local backends=${1:-${SWEEP_BACKENDS:-triton,cutlass,reference}} models=${2:-${SWEEP_MODELS:-gpt-oss-20b}}
  local out=${3:-${SWEEP_OUT:-$B/run}} tmo=${4:-${SWEEP_TIMEOUT:-420}} fi=${5:-}
  shift 5
  local envs=()
  if [ "$fi" = fi074 ] || [ "$fi" = fi074fast ] || [ "$fi" = fi074humming ]; then
    unpack_fi074
    local so; case "$fi" in fi074fast) so=$(fi074_fast_so) ;; fi074humming) so=$(fi074_humming_so) ;; *) so=$(fi074_so) ;; esac
    [ -n "$so" ] || { log "sweep $out skipped: no FlashInfer 0.7.4 module ($fi) built"; return 0; }
    envs=(PYTHONPATH="$FI074:$PYTHONPATH" FP4MOE_CUTLASS_MODULE="$so")
  fi
  log "sweep $backends $models -> $out (timeout ${tmo}s) ${fi:+[flashinfer $fi]} $*"
  env "${envs[@]}" timeout "$tmo" python3 -m fp4moe_diag sweep --backends "$backends" --models "$models" \
    ${SWEEP_EP:+--ep $SWEEP_EP} ${SWEEP_TOKENS:+--tokens $SWEEP_TOKENS} \
    --repeats "${SWEEP_REPEATS:-30}" --out "$out" --no-progress ${SWEEP_ARGS:-} "$@" 2>&1 \
    | tee -a "$B/sweep.txt" | tail -60
  case "$out" in
    "$B"/*) ;;  # already inside the bundle (the default $B/run)
    *) if [ -d "$out" ]; then mkdir -p "$B/runs/$(basename "$out")" && cp "$out"/results.* "$B/runs/$(basename "$out")/"; fi ;;
  esac
}

if has sweep; then
  if [ -n "${SWEEPS:-}" ]; then
    IFS=';' read -ra entries <<< "$SWEEPS"
    for e in "${entries[@]}"; do
      IFS='|' read -r sb sm so st sx sf <<< "$e"
      # shellcheck disable=SC2086  # extra args are meant to split
      run_sweep "$sb" "$sm" "$so" "$st" "$sf" $sx
    done
  else
    run_sweep "" "" "" "" ""
  fi
fi

if has profile; then  # PROFILES="backend|model|ep|tokens|tactic,labels;..." -> $B/profile/<n>/kernels.csv
  IFS=';' read -ra profs <<< "${PROFILES:-triton|gpt-oss-20b|1|64|m16n64k128w4s3-ds-sk2}"
  n=0
  for pe in "${profs[@]}"; do
    IFS='|' read -r pb pm pep pt ptac <<< "$pe"
    n=$((n + 1))
    log "ncu profile $pb $pm EP$pep T=$pt: $ptac"
    timeout "${PROFILE_TIMEOUT:-180}" python3 -m fp4moe_diag profile --backend "$pb" --model "$pm" --ep "$pep" \
      --tokens "$pt" --tactics "$ptac" --out "$B/profile/$n-$pb-$pm-ep$pep-t$pt" 2>&1 | tee -a "$B/profile.txt" | tail -25
  done
fi

if has fi074-wait; then
  log "waiting for the 0.7.4 build (up to ${FI074_WAIT:-300}s)"
  for _ in $(seq "${FI074_WAIT:-300}"); do [ -n "$(fi074_want)" ] && break; sleep 1; done
  if [ -n "$(fi074_want)" ]; then log "0.7.4 module: $(fi074_want)"; case "$(fi074_want)" in .carry/*) ;; *) cp "$(fi074_want)" "$OUT/";; esac
  else log "0.7.4 build not done"; fi
  tail -25 "$OUT/fi074_build.log" 2>/dev/null
fi

if has notebooks; then
  log "notebooks"
  timeout "${NOTEBOOK_TIMEOUT:-300}" python3 -m fp4moe_diag report --out "$B/reports" --only "${NOTEBOOKS:-02,04}" \
    ${NOTEBOOK_ARGS:-} 2>&1 | tail -20
fi

log "packing"
if [ -n "${SNAP_PID:-}" ]; then kill "$SNAP_PID" 2>/dev/null; wait "$SNAP_PID" 2>/dev/null; rm -f "$OUT"/partial.tgz*; fi
if [ "${TRITON_CACHE_OUT:-1}" = 1 ] && [ -n "$(ls -A "$TRITON_CACHE_DIR" 2>/dev/null)" ]; then tar -C "$TRITON_CACHE_DIR" -czf "$OUT/triton_cache.tgz" . ; fi
# a second invocation in the same call (same $OUT) must not replace the first one's bundle: next free name
pack="$OUT/bundle.tgz"; n=2
while [ -e "$pack" ]; do pack="$OUT/bundle-$n.tgz"; n=$((n + 1)); done
tar -C "$OUT" -czf "$pack.tmp" bundle && mv "$pack.tmp" "$pack" && rm -rf "$B"
ls -la "$OUT"
log "done"
