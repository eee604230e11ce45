#!/usr/bin/env bash
# The main job on the sample application; `make demo` runs it with the project's venv python.
set -euo pipefail
PY=${1:-.venv/bin/python}
cd "$(dirname "$0")/.."
rm -rf demo && mkdir -p demo
"$PY" -m instrumentor.cli testdata/sample_code -o demo/build
"$PY" demo/build/main.py --epochs 2 --steps-per-epoch 5
