#!/usr/bin/env bash
# Compare coo-assembler with scipy (coo_array -> CSR, and scipy.io.mmread ->
# CSR for MatrixMarket) and DuckDB (GROUP BY at 256 MB) on the same inputs,
# in one run; prints the CPU model and the load average.
#
#   benches/compare/run.sh                         # N=1e7, FE input, 256 MiB
#   N=5e7 benches/compare/run.sh --reps 3          # the 5e7 FE run
#   N=5e7 INPUTS=fe,rand,mtx benches/compare/run.sh --budgets 256MiB,4GiB --reps 3
#   INPUTS=mtx MTX_N=1e7 benches/compare/run.sh --budgets 256MiB
#
# Environment: N (records in fe.bin and rand.bin, default 1e7), INPUTS (any of
# fe,rand,mtx; default fe), MTX_N (entries in fe.mtx, the first MTX_N records
# of fe.bin; default 1e7, so it needs N >= MTX_N), KEEP=dir (write and keep
# the inputs there, reusing ones already there; default: a temporary
# directory deleted at the end). Other arguments go to compare.py
# (--budgets, --threads, --reps, --duckdb-limit, --no-duckdb, --scipy-views).
# scipy gets its best pipeline: the records loaded, then contiguous int32
# index columns and contiguous values (the conversion is in its time).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-1e7}
INPUTS=${INPUTS:-fe}
MTX_N=${MTX_N:-1e7}
VENV=target/compare-venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q numpy scipy duckdb pandas
fi
cargo build --release --quiet --bin coo-assembler
if [ -n "${KEEP:-}" ]; then DIR=$KEEP; mkdir -p "$DIR"; else DIR=$(mktemp -d "${TMPDIR:-/tmp}/coo-compare-XXXXXX"); trap 'rm -rf "$DIR"' EXIT; fi
# fe.bin is needed by fe and by mtx (its first MTX_N records).
want=$(python3 -c "print(int(float('$N')) * 24)")
if [ ! -f "$DIR/fe.bin" ] || [ "$(stat -L -c %s "$DIR/fe.bin")" != "$want" ]; then
    E2E_N=$N E2E_KEEP=$DIR E2E_GEN_ONLY=1 cargo bench --quiet --bench e2e
    rm -f "$DIR/fe.mtx" "$DIR/fe.mtx.count"
fi
gen=()
case ",$INPUTS," in *,rand,*) gen+=(--rand "$N") ;; esac
case ",$INPUTS," in *,mtx,*) gen+=(--mtx "$MTX_N") ;; esac
if [ ${#gen[@]} -gt 0 ]; then "$VENV/bin/python" benches/compare/gen.py --dir "$DIR" "${gen[@]}"; fi
"$VENV/bin/python" benches/compare/compare.py --dir "$DIR" --cli target/release/coo-assembler --inputs "$INPUTS" "$@"
