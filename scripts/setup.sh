#!/usr/bin/env bash
# Creates .venv (or $GLMCOT_VENV) and installs glmcot with its test extras.
# On a machine without a GPU, torch is pinned to the CPU build 2.13.0 first; a GPU user who already
# has torch in the environment keeps it (set GLMCOT_KEEP_TORCH=1).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${GLMCOT_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
# The installer and build backend at versions we tested, and no isolated build: nothing in the
# install resolves against whatever the index published today.
"$py" -m pip install -q --progress-bar off "pip==26.3" "setuptools==84.2.1"
if [ "${GLMCOT_KEEP_TORCH:-0}" != "1" ] && ! "$py" -c "import torch" >/dev/null 2>&1; then
  "$py" -m pip install -q "torch==2.13.0"
fi
# constraints.txt holds the versions the suite passed with; GLMCOT_UNPINNED=1 resolves afresh instead.
pins=(-c constraints.txt)
[ "${GLMCOT_UNPINNED:-0}" = "1" ] && pins=()
"$py" -m pip install -q --progress-bar off "${pins[@]}" --no-build-isolation -e ".[dev]"
# Compile the CPU kernels now (a minute on two cores), so that no command or test pays for it later.
"$py" -m glmcot.engine.kernels >&2 || true
echo "$venv"
