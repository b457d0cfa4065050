#!/usr/bin/env bash
# session 10, device call 4 (issue #25): A/B of the ps upcast's shifts as multiplies (B: mul.lo / mul.hi, which ptxas
# issues as IMAD / IMAD.HI on the FMA pipe instead of SHF on the ALU pipe; .carry/mulshift.py patches a copy of the
# package) -- A, B, A in one call, same tactics, triton_kernels as the anchor; then Nsight Compute's pipe utilization
# (ComputeWorkloadAnalysis, InstructionStats; raw page) of gemm1, A and B at T=64, A at T=4096; and profile --source of B.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c4 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); export PATH=$PATH:$(dirname $NCU)
mkdir -p /tmp/alt && for f in *; do [ "$f" = fp4moe_diag ] || ln -s "$PWD/$f" /tmp/alt/$f; done
cp -r fp4moe_diag /tmp/alt/ && python3 .carry/mulshift.py /tmp/alt/fp4moe_diag/backends/triton/_kernels_ps.py
# python3 -P: the working directory is not put first on sys.path, so PYTHONPATH picks the package (A: here, B: /tmp/alt)
G=$(cat .git_commit)
export FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
A="--cuda-graph --kernel-time --device cuda --warmup 3 --repeats 10 --max-seconds-per-tactic 0.3 --no-progress --no-ceilings"
TT='triton=^(m16n128k128w4s[34]-ps(-g2sk2)?-pdl|m16n64k256w4s3-ps-sk2-pdl|m128n128k64w8s3-ps-g2n256|m64n128k64w8s4-ps)$'
sweep() {  # $1: run name, $2: PYTHONPATH head, $3: commit label
  PYTHONPATH=$2:/tmp/site FP4MOE_GIT_COMMIT=$3 timeout 100 python3 -P -m fp4moe_diag sweep --backends triton,triton_kernels \
    --models gpt-oss-20b:1,gpt-oss-120b:4 --tokens 4,16,64 $A --tactics "$TT" --tactics 'triton_kernels=^tk-m16k128w4$' \
    --out /tmp/r/$1-decode 2>&1 | grep -v "^ *$" | tail -2
  PYTHONPATH=$2:/tmp/site FP4MOE_GIT_COMMIT=$3 timeout 60 python3 -P -m fp4moe_diag sweep --backends triton,triton_kernels \
    --models gpt-oss-20b:1 --tokens 4096 $A --tactics "$TT" --tactics 'triton_kernels=^tk-m128kautow8s3$' \
    --out /tmp/r/$1-prefill 2>&1 | grep -v "^ *$" | tail -2
  PYTHONPATH=$2:/tmp/site python3 -P -c "import fp4moe_diag.backends.triton._kernels_ps as k; print('upcast:', 'mul' if 'mul.hi' in k._PS_ASM.value else 'shift', k.__file__)"
  say "$1 done"
}
sweep A1 $PWD $G; sweep B /tmp/alt $G+mulshift; sweep A2 $PWD $G
tar -czf $OUT/runs.tgz -C /tmp r; say "packed"
mkdir -p /tmp/s
pipes() {  # $1 name $2 PYTHONPATH head $3 tokens $4 tactic
  PYTHONPATH=$2:/tmp/site timeout 120 $NCU --section ComputeWorkloadAnalysis --section InstructionStats --section SpeedOfLight \
    -k regex:gemm1_ps -s 1 -c 1 -f -o /tmp/s/$1 python3 -P -m fp4moe_diag.profiling.source_driver triton gpt-oss-20b 1 $3 $4 2>&1 | tail -1
  $NCU -i /tmp/s/$1.ncu-rep --page raw --csv > /tmp/s/pipes_$1.csv 2>/dev/null; say "$1: $(wc -c < /tmp/s/pipes_$1.csv) bytes"
}
pipes A-t64 $PWD 64 m16n128k128w4s3-ps; pipes B-t64 /tmp/alt 64 m16n128k128w4s3-ps; pipes A-t4096 $PWD 4096 m128n128k64w8s3-ps-g2n256
PYTHONPATH=/tmp/alt:/tmp/site timeout 100 python3 -P -m fp4moe_diag profile --backend triton --tokens 64 --tactics m16n128k128w4s3-ps \
  --source gemm1_ps --out /tmp/s/B-source-t64 2>&1 | tail -12
tar -czf $OUT/s.tgz -C /tmp s; say "all done"
