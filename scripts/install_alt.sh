#!/usr/bin/env bash
# Install another version of a package beside the main environment, without touching it:
#   bash scripts/install_alt.sh triton==3.6.0          # -> .alt/triton-3.6.0 (prints the folder)
#   PYTHONPATH=$(bash scripts/install_alt.sh triton==3.6.0) python3 -m pytest tests/test_triton_backend.py
# The folder goes first on PYTHONPATH, so that version shadows the installed one. --no-deps: the main
# environment provides the dependencies. Re-running with the folder present installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
spec=${1:?usage: install_alt.sh NAME==VERSION}
[[ "$spec" =~ ^([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)$ ]] || { echo "install_alt.sh: expected NAME==VERSION, got '$spec'" >&2; exit 2; }
dir=".alt/${BASH_REMATCH[1]}-${BASH_REMATCH[2]}"
if [ ! -f "$dir/.complete" ]; then
  rm -rf "$dir"
  log=$(mktemp)
  if ! $PY -m pip install --disable-pip-version-check --no-input --no-deps --target "$dir" "$spec" >"$log" 2>&1; then
    grep -v "^WARNING: Location '" "$log" >&2 || true; rm -f "$log"
    echo "install_alt.sh: pip install $spec failed (log above)" >&2; exit 1
  fi
  rm -f "$log"; touch "$dir/.complete"
fi
echo "$PWD/$dir"
