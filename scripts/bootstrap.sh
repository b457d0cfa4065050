#!/usr/bin/env bash
# Set up fp4moe-diag with pip on a fresh machine and run the main job or the tests.
#
#   bash scripts/bootstrap.sh           # install, then run the notebooks headless -> reports/report.html
#   bash scripts/bootstrap.sh --test    # install, then run the test suite
#   bash scripts/bootstrap.sh --deps    # install only
#
# Every mode installs JupyterLab too; open the notebooks with:  jupyter lab notebooks/
#
# Every package CI installs is pinned in constraints-cpu.txt (the lock; requirements-cpu.txt names
# what we need directly). On a GPU machine install the [gpu] extra too: pip install -e .[gpu]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODE=${1:-report}
case "$MODE" in report|--deps|--test) ;; *) echo "bootstrap.sh: unknown mode '$MODE' (expected --test, --deps or nothing)" >&2; exit 2 ;; esac

# pip quietly: its output goes to a log that is shown (without the index-location noise) only on failure
pip_q() {
  local log; log=$(mktemp)
  if ! $PY -m pip install --disable-pip-version-check --no-input "$@" >"$log" 2>&1; then
    grep -v "^WARNING: Location '" "$log" >&2 || true
    echo "bootstrap.sh: pip install $* failed (log above)" >&2
    rm -f "$log"; exit 1
  fi
  rm -f "$log"
}

pip_q -r requirements-cpu.txt -c constraints-cpu.txt
# flashinfer-python: the current release (0.7.4, the lock); --no-deps keeps the CUDA wheels (cudnn frontend,
# cutlass-dsl, cuda-tile, nccl4py, ...) off CPU machines: its Python layer does not need them. triton: the
# interpreter runs our kernels on CPU. The bug's version, 0.5.2, goes beside it for the reproduction and the
# version comparison: bash scripts/install_alt.sh flashinfer-python==0.5.2  (-> .alt/flashinfer-python-0.5.2)
# flashinfer-bench: --no-deps too (its requirements name torch and flashinfer-python); its data models need
# only pydantic, safetensors and docstring-parser (requirements-cpu.txt).
pip_q --no-deps -c constraints-cpu.txt flashinfer-python triton flashinfer-bench
pip_q --no-deps -e .
$PY -m ipykernel install --user --name python3 >/dev/null 2>&1 || true
echo "bootstrap.sh: installed. Open the notebooks with:  jupyter lab notebooks/"

case "$MODE" in
  --deps) ;;
  --test) exec $PY -m pytest -q -n auto --dist loadfile ;;  # one test file per process, as many as cores
  *) exec $PY -m fp4moe_diag report --out reports ;;
esac
