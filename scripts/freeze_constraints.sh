#!/usr/bin/env bash
# Rewrites constraints.txt from a virtual environment the test suite passed in (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-${GLMCOT_VENV:-.venv}}"
{
  echo "# The exact versions the test suite last passed with (torch is pinned by scripts/setup.sh itself)."
  echo "# scripts/setup.sh installs under these, so a fresh machine resolves nothing against a moving index."
  echo "# Regenerate: scripts/freeze_constraints.sh"
  "$venv/bin/python" -m pip freeze --exclude-editable | grep -v -i -E '^(torch|glmcot)=='
} > constraints.txt.tmp
mv constraints.txt.tmp constraints.txt
