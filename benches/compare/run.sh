#!/usr/bin/env bash
# Compare coo-assembler with scipy (coo_array -> CSR) and DuckDB (GROUP BY at
# 256 MB) on the same FE bin file, in one run.
#
#   benches/compare/run.sh            # N=1e7
#   N=5e7 benches/compare/run.sh      # the full run (1.2 GB input)
#
# The input is written by the e2e bench (E2E_GEN_ONLY) into a temporary
# directory that is deleted at the end; set KEEP=dir to keep it there.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-1e7}
VENV=target/compare-venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q numpy scipy duckdb pandas
fi
cargo build --release --quiet --bin coo-assembler
if [ -n "${KEEP:-}" ]; then DIR=$KEEP; mkdir -p "$DIR"; else DIR=$(mktemp -d "${TMPDIR:-/tmp}/coo-compare-XXXXXX"); trap 'rm -rf "$DIR"' EXIT; fi
E2E_N=$N E2E_KEEP=$DIR E2E_GEN_ONLY=1 cargo bench --quiet --bench e2e
"$VENV/bin/python" benches/compare/compare.py --dir "$DIR" --cli target/release/coo-assembler "$@"
