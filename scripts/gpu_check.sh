#!/usr/bin/env bash
# GPU check of the open-weight path at real model sizes, nothing downloaded (scripts/gpu_check.py).
#   scripts/gpu_check.sh              # on a GPU node: writes gpu_check.json (about 5 min on one H200)
#   scripts/gpu_check.sh --dry-run    # CI, no GPU: configs build on the meta device, shapes check
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" scripts/gpu_check.py "$@"
