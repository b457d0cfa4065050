#!/usr/bin/env bash
# Set up fp4moe-diag with pip on a fresh machine and run the main job or the tests.
#
#   bash scripts/bootstrap.sh           # install, then run the notebooks headless -> reports/report.html
#   bash scripts/bootstrap.sh --test    # install, then run the test suite
#   bash scripts/bootstrap.sh --deps    # install only
#
# On a GPU machine install the [gpu] extra too: pip install -e .[gpu]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODE=${1:-report}

$PY -m pip install -q --disable-pip-version-check -r requirements-cpu.txt
# flashinfer-python pinned to the version of the bug report; --no-deps keeps the CUDA
# wheels (cudnn frontend, cutlass-dsl) off CPU machines: its Python layer does not need them.
$PY -m pip install -q --disable-pip-version-check --no-deps "flashinfer-python==0.5.2"
$PY -m pip install -q --disable-pip-version-check triton 2>/dev/null || echo "triton not installable here: its tests will skip"
$PY -m pip install -q --disable-pip-version-check --no-deps -e .
$PY -m ipykernel install --user --name python3 >/dev/null 2>&1 || true

case "$MODE" in
  --deps) ;;
  --test) exec $PY -m pytest -q ;;
  *) exec $PY -m fp4moe_diag report --out reports ;;
esac
