#!/usr/bin/env bash
# One command on a fresh machine: install, then run the test suite.
# Then the vLLM plugin's tests (tests/vllm) run in vLLM's own environment, made by
# scripts/setup_vllm.sh: always with GLMCOT_VLLM_TESTS=1 (CI), never with 0, and by default only
# when no arguments were given.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(scripts/setup.sh | tail -n 1)
vllm_tests="${GLMCOT_VLLM_TESTS:-auto}"
[ "$vllm_tests" = "auto" ] && { [ "$#" -eq 0 ] && vllm_tests=1 || vllm_tests=0; }
if [ "$vllm_tests" != "1" ]; then
  exec "$venv/bin/python" -m pytest -q "$@"
fi
"$venv/bin/python" -m pytest -q "$@"
vllm_venv=$(scripts/setup_vllm.sh | tail -n 1)
# the scripted eval through vLLM runs glmcot's CLI with the main environment (vLLM's has no faiss)
case "$venv" in /*) main_python="$venv/bin/python" ;; *) main_python="$PWD/$venv/bin/python" ;; esac
GLMCOT_CLIENT_PYTHON="${GLMCOT_CLIENT_PYTHON:-$main_python}" exec "$vllm_venv/bin/python" -m pytest -q tests/vllm
