#!/usr/bin/env bash
# matvec against scipy, out-of-core matvec against a sequential read, and
# export MB/s, on the FE matrix of examples/assemble_fem (default --n 92:
# 4.98e7 contributions). See benches/compare/matvec.py.
#
#   benches/compare/matvec.sh                  # N=92, 3 alternating rounds
#   N=56 REPS=5 benches/compare/matvec.sh
#
# The cold runs go into a memory cgroup (v1, when writable: needs root)
# limited to CGROUP_MIB (default 256) so the page cache cannot hold the file.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-92}
REPS=${REPS:-3}
CGROUP_MIB=${CGROUP_MIB:-256}
VENV=${VENV:-target/python-venv}
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python" -m pip install -q maturin numpy scipy
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps ./python
DIR=$(mktemp -d "${TMPDIR:-/tmp}/coo-matvec-XXXXXX")
CG=""
if mkdir "/sys/fs/cgroup/memory/coo-matvec-$$" 2>/dev/null; then
    CG="/sys/fs/cgroup/memory/coo-matvec-$$"
    echo $((CGROUP_MIB * 1048576)) > "$CG/memory.limit_in_bytes"
fi
cleanup() { rm -rf "$DIR"; [ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true; }
trap cleanup EXIT
cargo run --release --quiet --example assemble_fem -- --n "$N" --output "$DIR/fe.hrry" | tail -3
lscpu | grep 'Model name' || true
"$VENV/bin/python" benches/compare/matvec.py "$DIR/fe.hrry" --reps "$REPS" ${CG:+--cgroup "$CG"}
