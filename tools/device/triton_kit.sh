#!/usr/bin/env bash
# Pack a Triton release for a device call (the carry limit is 64 MiB; a Triton wheel is 179-286 MiB): PyPI's wheel
# for the device's Python, without what an sm_90 run does not load (proton's libproton.so and CUPTI copy, the ptxas
# sm_90 does not call; from 3.9 also the Blackwell CUPTI and AMD's codegen library, each loaded only for its target)
# and with libtriton.so stripped of its symbol tables (461 -> 180 MB for 3.7.1), as one tar.xz of about 50-57 MB.
# Nothing of Triton is committed: the kit is made here from the wheel and lives in .carry/ (ignored).
#   bash tools/device/triton_kit.sh 3.7.1          # -> .carry/triton-3.7.1-cp312.tar.xz (the H200 image: Python 3.12)
#   bash tools/device/triton_kit.sh 3.7.1 3.11     # for this machine's Python, to check the kit here
# On the device: mkdir /tmp/t && tar -xJf .carry/triton-3.7.1-cp312.tar.xz -C /tmp/t, then PYTHONPATH=/tmp/t:...
# puts it before the image's triton (tools/device/plans/tritons.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
V=${1:-}; PYV=${2:-3.12}
[[ "$V" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "triton_kit.sh: version: expected X.Y.Z (e.g. 3.7.1), got '$V'" >&2; exit 2; }
[[ "$PYV" =~ ^3\.[0-9]+$ ]] || { echo "triton_kit.sh: python: expected 3.N (e.g. 3.12), got '$PYV'" >&2; exit 2; }
command -v strip >/dev/null || { echo "triton_kit.sh: strip (binutils) is needed" >&2; exit 2; }
TAG=cp${PYV/./}
OUTF=.carry/triton-$V-$TAG.tar.xz
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$TMP" "triton==$V"
python3 -m zipfile -e "$TMP"/triton-"$V"-*.whl "$TMP/site"
T="$TMP/site/triton"
# the ptxas sm_90 does not use: up to 3.8 "ptxas-blackwell" is for sm_100+ only; from 3.9 it is the one for sm_90+ and
# "ptxas" the one below sm_90 (compiler.get_ptxas)
if grep -A3 "def get_ptxas(arch" "$T/backends/nvidia/compiler.py" | grep -q "arch < 90"; then UNUSED=ptxas; else UNUSED=ptxas-blackwell; fi
rm -rf "$T/_C/libproton.so" "$T/backends/nvidia/lib/cupti" "$T/backends/nvidia/bin/$UNUSED" "$T/FileCheck" \
  "$T/backends/nvidia/lib/cupti-blackwell" "$T/backends/amd/lib/libtriton_amd_codegen.so"  # 3.9: 150 + 101 MB
rm -f "$T"/instrumentation/*TestLib.so "$T"/plugins/*TestLib.so  # 3.9: Triton's own test libraries, 2.4 MB packed
find "$TMP/site" -name __pycache__ -prune -exec rm -rf {} +
strip --strip-unneeded "$T/_C/libtriton.so"
chmod +x "$T"/backends/nvidia/bin/*
mkdir -p .carry
tar -C "$TMP/site" -cf - . | xz -T0 -6 > "$OUTF.tmp" && mv "$OUTF.tmp" "$OUTF"
echo "$OUTF $(du -m "$OUTF" | cut -f1) MB"
