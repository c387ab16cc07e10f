#!/usr/bin/env bash
# Build the MPI extension (`coo_assembler_mpi`, ca.DistBuilder / ca.DistPlan)
# against the system's MPI into the Python package's venv and run its tests
# under mpirun (1 to 4 ranks).
#   bash python/run_tests.sh && bash python-mpi/run_tests.sh
# Needs Open MPI (Debian: openmpi-bin libopenmpi-dev) and libclang-dev for
# the MPI bindings; mpi4py comes from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-target/python-venv}
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
    echo "no venv at $VENV: run bash python/run_tests.sh first (it builds the coo_assembler package)" >&2
    exit 1
fi
"$PY" -m pip install -q mpi4py
PATH="$(cd "$VENV/bin" && pwd):$PATH" "$PY" -m pip install -q --force-reinstall --no-deps \
    --no-build-isolation ./python-mpi
cd python-mpi/tests
"../../$PY" -m pytest -q "$@"
