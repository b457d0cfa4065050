#!/usr/bin/env bash
# Download (here, with network) the wheels that the lent H200 machine lacks into .whl/ for `carry`.
# The device image already has torch 2.11, triton 3.6, pandas, pyarrow, matplotlib, tqdm, pytest
# (device KINDS.md package list); this adds FlashInfer 0.5.2 (the bug's version), nsight-python and
# the notebook stack (papermill/nbclient/nbconvert/ipykernel) minus what the image holds, and nvidia-ml-py (NVML:
# the SM clock each timed row records, time_sm_clock_mhz).
# nsight-python's own 'ncu-report' dependency is not on PyPI: it comes from ncu's extras/python on
# the device (gpu_session.sh puts it on PYTHONPATH). Total ~40 MB (the carry limit is 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.whl}
mkdir -p "$DEST"
grep -qxF "/.whl/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; printf '/.whl/\n/.carry/\n/.git_commit\n' >> .git/info/exclude; }
PLAT=()
for p in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
  PLAT+=(--platform "${p}_x86_64")
done
PKGS=(
  flashinfer-python==0.5.2 apache-tvm-ffi==0.1.15.post2 nvidia-cudnn-frontend==1.32.0
  nsight-python==0.9.6 deepdiff orderly-set nvtx cachebox nvidia-ml-py==13.615.71
  papermill==2.7.0 nbclient==0.11.0 nbconvert==7.17.2 ipykernel==7.4.0 comm==0.2.3 debugpy==1.8.22
  ipython==9.18.1 jupyter_client==8.10.0 jupyter_core==5.9.1 matplotlib-inline==0.2.2 mistune==3.4.0
  nbformat==5.11.1 nest-asyncio2==1.7.4 pandocfilters==1.5.1 pyzmq==27.3.0 tenacity==9.2.1
  tornado==6.6.1 traitlets==5.16.1 beautifulsoup4==4.15.0 defusedxml==0.7.1 entrypoints==0.4.2
  jupyterlab_pygments==0.3.0 fastjsonschema==2.22.3 ipython_pygments_lexers==1.1.1 jedi==0.20.1
  jsonschema==4.26.0 pexpect==4.9.0 platformdirs==4.14.9 prompt_toolkit==3.0.53 soupsieve==4.1.3
  stack-data==0.6.3 tinycss2==1.5.1 webencodings==0.6.1 bleach==6.4.0 asttokens==3.0.2
  executing==2.3.0 jsonschema-specifications==2025.9.1 parso==0.8.7 ptyprocess==0.7.0
  referencing==0.37.0 rpds-py==2026.9.1 wcwidth==0.9.4 pure_eval==0.2.4 tzdata==2026.6
)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLAT[@]}" -d "$DEST" "${PKGS[@]}"
du -sh "$DEST"
