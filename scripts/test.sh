#!/usr/bin/env bash
# One command on a fresh machine: install, then run the test suite.
# With no arguments it then runs the vLLM plugin's tests (tests/vllm) in vLLM's own environment,
# made by scripts/setup_vllm.sh; GLMCOT_VLLM_TESTS=0 skips that part.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(scripts/setup.sh | tail -n 1)
if [ "$#" -gt 0 ] || [ "${GLMCOT_VLLM_TESTS:-1}" = "0" ]; then
  exec "$venv/bin/python" -m pytest -q "$@"
fi
"$venv/bin/python" -m pytest -q
vllm_venv=$(scripts/setup_vllm.sh | tail -n 1)
exec "$vllm_venv/bin/python" -m pytest -q tests/vllm
