#!/usr/bin/env bash
# Runs python with the PyPI `gguf` package (and numpy) from a venv cached outside the repository
# (~/.cache/kiln/venv), creating it on first use: scripts/gguf-py.sh SCRIPT.py ARGS...
set -euo pipefail
VENV="${KILN_CACHE:-$HOME/.cache/kiln}/venv"
if ! "$VENV/bin/python" -c "import gguf, numpy" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q gguf numpy
fi
exec "$VENV/bin/python" "$@"
