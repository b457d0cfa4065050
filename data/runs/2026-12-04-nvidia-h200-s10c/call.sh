#!/usr/bin/env bash
# session 10, device call 3 (issue #25, investigation): Nsight Compute's per-SASS-instruction warp-stall samples
# (SourceCounters) of gemm1 -- ours and triton_kernels' at 20b EP1 T=4096 (prefill, where we trail by 11 %), ours at
# T=64 (decode) -- exported as CSV (page source, SASS), to find the instructions behind our 'wait' stalls.
set -u
export OUT=${OUT:-/tmp/out} TRITON_CACHE_DIR=/tmp/tc
T0=$(date +%s); say() { echo "[s10c3 +$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export PYTHONPATH=$PWD:/tmp/site FP4MOE_TRITON_KERNELS_DIR=$PWD/.carry/triton_kernels
mkdir -p /tmp/s
for pe in "triton|4096|m128n128k64w8s3-ps-g2n256|gemm1_ps" "triton_kernels|4096|tk-m128kautow8s3|swiglu" \
          "triton|64|m16n128k128w4s3-ps|gemm1_ps"; do
  IFS='|' read -r pb pt ptac pk <<< "$pe"
  n=$pb-t$pt
  timeout 150 $NCU --section SourceCounters --section WarpStateStats --section SpeedOfLight -k regex:$pk -s 1 -c 1 \
    -f -o /tmp/s/$n python3 .carry/srcprof.py $pb gpt-oss-20b 1 $pt $ptac 2>&1 | grep -v "^==PROF==" | tail -2
  $NCU -i /tmp/s/$n.ncu-rep --page source --csv --print-source sass > /tmp/s/$n-source.csv 2>/tmp/s/$n-source.err
  $NCU -i /tmp/s/$n.ncu-rep --page details --csv > /tmp/s/$n-details.csv 2>/dev/null
  say "$n: $(wc -l < /tmp/s/$n-source.csv) source lines; $(head -c 300 /tmp/s/$n-source.err)"
done
tar -czf $OUT/src.tgz -C /tmp s; say "all done"; ls -la $OUT
