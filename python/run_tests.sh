#!/usr/bin/env bash
# Build the Python package into a fresh venv and run its pytest suite.
#   bash python/run_tests.sh            # venv in target/python-venv (reused if present)
#   PYTHON=python3.12 bash python/run_tests.sh
# Needs python3 with venv (Debian: python3-venv, installed here when missing
# and running as root) and network access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-target/python-venv}

if ! "$PYTHON" -m venv --help >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq python3-venv >/dev/null
    else
        echo "python3 venv support is missing (Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q maturin numpy scipy pytest scikit-fem pyhurray sparse
# The package as a user installs it (PEP 517, through maturin), with the
# venv's maturin rather than a fresh one in an isolated build env.
PATH="$(cd "$VENV/bin" && pwd):$PATH" "$PY" -m pip install -q --force-reinstall --no-deps \
    --no-build-isolation ./python
# Run from outside the source tree so the installed package is imported.
cd python/tests
"../../$PY" -m pytest -q "$@"
