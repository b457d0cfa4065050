#!/usr/bin/env bash
# The measured reasons behind the goals still missed (issue #25, "Done means": per shape how far and why), one call:
#   1. a wider sweep at T=256 (20b EP1, 120b EP4: where ours and triton_kernels are level): every ps tactic with
#      16, 32 or 64 rows a tile (the headline ran 3 of them there), and every triton_kernels flag set;
#   2. ablations (profiling.ablate) at 120b EP4 T=64 with 100 repeats (30 gave a spread of 11 % there), at 20b EP1
#      T=4 (goal 3) and at 120b EP4 T=4096 (goal 4's farthest shape);
#   3. Nsight Compute per kernel, warp stalls included, of the best tactic at 20b EP1 T=1 (goal 3), 20b EP1 T=16
#      (goal 2) and 120b EP4 T=4096 (goal 4); PROFILES (space-separated MODEL|EP|T|[BACKEND=]TACTIC, triton where
#      no backend is named: plan_lib's profiles) names others: what
#      `python -m fp4moe_diag goals RUNS --unprofiled` prints (each missed shape no profile of its tactic explains),
#      e.g. PROFILES="$(python -m fp4moe_diag goals data/runs/<run> --unprofiled | tr '\n' ' ')".
# Run from the repository root on the device with .carry/triton_kernels, .whl and .git_commit carried:
#   run(command="bash tools/device/plans/evidence.sh", carry=[".carry/triton_kernels", ".whl", ".git_commit"])
#   4. (PARTS=duel) DUELS (space-separated MODEL|EP|T|BACKEND=TACTIC|BACKEND=TACTIC): each pair timed in alternating
#      rounds (profiling.duel), for the shapes where two medians taken one after the other cannot tell them apart;
#      (PARTS=energy) the same pairs' energy per call under a sustained load (profiling.energy, session 25: at 20b EP2
#      T=4096 on the H100 the duel said theirs by 0.5 %, the power-limited blocks ours by 2.4 %); (PARTS=conditions)
#      each pair four ways (plan_lib's conditions: plain, traced by CUPTI, traced with the GPU idle before each call,
#      idle; duel-NAME-c1..4.csv): which kernel loses the time, and whether the conditions turn a verdict. Its pairs:
#      CONDITIONS (what `goals RUNS --plan` names there), else DUELS.
#   5. (PARTS=floor) the read floor (profiling.read_floor): the fastest one-kernel read of each goal 2-3 shape's weight
#      bytes (FLOOR_BYTES, default the eight of gpt-oss-20b EP1 / EP2 and 120b EP4 at T <= 64 with the seed's routing),
#      and of 2 GiB, and (--chain) as two dependent reads, gemm1's 2/3 then gemm2's 1/3; /tmp/r/read-floor-goals.csv,
#      which goals reads beside the runs. About 20 s without the chains (H100, -s39a).
# KIT (a .carry/triton-X.Y.Z-cp312.tar.xz, tools/device/triton_kit.sh): every step under that Triton release instead of
# the image's, its outputs named -tritonX.Y.Z (the Triton releases' question, tritons.sh, per kernel).
# PARTS (default "sweep ablate profile") picks the steps. About 7 minutes. $OUT/runs.tgz: the sweep's run folder and the ablation CSVs (one run: import_gpu_bundle.py);
# $OUT/profiles.tgz: the profiles (import_gpu_bundle.py --profiles: beside the run, kernels.csv as ncu_<name>.csv).
set -u
PARTS=${PARTS:-sweep ablate profile}
for p in $PARTS; do case $p in sweep|ablate|profile|duel|energy|conditions|floor) ;; *)
  echo "PARTS: expected sweep, ablate, profile, duel, energy, conditions or floor, got $p" >&2; exit 2 ;; esac; done
FLOOR_BYTES=${FLOOR_BYTES:-15077376,45232128,60309504,75386880,180928512,407089152,422166528,482476032}
has() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
. "$(dirname "$0")/plan_lib.sh"
export TRITON_CACHE_DIR=/tmp/tc
kit_check
plan_start evidence  # ONLY_ON stops it here on another card, before the kit is unpacked
use_kit
ncu_env
mkdir -p /tmp/p
has floor && timeout $(left 120) python3 -m fp4moe_diag.profiling.read_floor --bytes "$FLOOR_BYTES" --chain \
  --out /tmp/r/read-floor-goals$TV.csv 2>&1 | tail -12
has floor && say "read floor done"
has sweep && timeout $(left 170) python3 -m fp4moe_diag sweep --backends triton,triton_kernels \
  --models gpt-oss-20b:1,gpt-oss-120b:4:4096 --tokens 256 $SWEEP_ARGS --screen-top 8 \
  --tactics 'triton=^m(16|32|64)n[0-9]+k[0-9]+w[0-9]+s[0-9]-ps' --tactics 'triton_kernels=^tk-' \
  --out /tmp/r/wide-t256$TV 2>&1 | grep -v "^ *gpt-oss" | tail -3
has sweep && say "sweep done"
has ablate && ablate 120b-ep4-t64-r100$TV gpt-oss-120b 4 64 $(left 230) --repeats 100 m16n128k128w4s3-ps-g2sk2-pdl
has ablate && ablate 20b-ep1-t4$TV gpt-oss-20b 1 4 $(left 270) m16n64k256w4s3-ps-sk2-pdl m16n128k128w4s3-ps-g2sk2-pdl
has ablate && ablate 120b-ep4-t4096$TV gpt-oss-120b 4 4096 $(left 320) m128n128k64w16s3-ps-gu-g2n256-t64
has duel && duels 560
has energy && duels 560 energy
has conditions && DUELS="${CONDITIONS:-${DUELS:-}}" duels 560 conditions
PROFILES=${PROFILES:-"gpt-oss-20b|1|1|m16n64k256w4s3-ps-sk2-pdl gpt-oss-20b|1|16|m16n128k128w4s3-ps-g2sk2-pdl \
gpt-oss-120b|4|4096|m128n128k64w16s3-ps-gu-g2n256-t64"}
has profile && profiles 560
plan_finish
