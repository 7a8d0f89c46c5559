#!/usr/bin/env bash
# One command on a fresh machine: install, then run the main job (glmcot demo).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(scripts/setup.sh | tail -n 1)
exec "$venv/bin/glmcot" demo "$@"
