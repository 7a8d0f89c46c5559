#!/usr/bin/env bash
# One command on a fresh machine: install, then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(scripts/setup.sh | tail -n 1)
exec "$venv/bin/python" -m pytest -q "$@"
