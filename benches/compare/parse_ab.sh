#!/usr/bin/env bash
# Alternate two coo-assembler binaries (OLD, NEW) on the same MatrixMarket
# and text inputs, --threads 2 and 1, and print wall, user and system time
# and peak RSS of each run: a same-run before/after of the text parsers.
#
#   OLD=/tmp/old-cli NEW=target/release/coo-assembler DIR=/var/tmp/perf2 \
#       benches/compare/parse_ab.sh
#
# DIR must hold fe.mtx (benches/compare/gen.py --mtx N); fe.txt (the same
# lines without the MatrixMarket header: `tail -n +4 fe.mtx > fe.txt`) is
# made when missing. Environment: REPS (default 3), BUDGET (default 256MiB).
set -euo pipefail
: "${OLD:?set OLD to the binary to compare against}"
NEW=${NEW:-target/release/coo-assembler}
DIR=${DIR:?set DIR to the directory holding fe.mtx}
REPS=${REPS:-3}
BUDGET=${BUDGET:-256MiB}
[ -f "$DIR/fe.txt" ] || tail -n +4 "$DIR/fe.mtx" > "$DIR/fe.txt"
size=$(awk '!/^%/ {print $1 + 1; exit}' "$DIR/fe.mtx")
out=$(mktemp -d "${TMPDIR:-/tmp}/parse_ab.XXXXXX")
trap 'rm -rf "$out"' EXIT
lscpu | grep 'Model name' || true
uptime
for rep in $(seq "$REPS"); do
    for which in old new; do
        if [ "$which" = old ]; then bin=$OLD; else bin=$NEW; fi
        for t in 2 1; do
            /usr/bin/time -f "mtx $which t$t %e s wall %U u %S s %M KB" "$bin" assemble \
                --input "$DIR/fe.mtx" --output "$out/o.hrry" --memory-budget "$BUDGET" --threads "$t" -q
            /usr/bin/time -f "txt $which t$t %e s wall %U u %S s %M KB" "$bin" assemble \
                --format text --shape "$size,$size" --input "$DIR/fe.txt" --output "$out/o.hrry" \
                --memory-budget "$BUDGET" --threads "$t" -q
        done
    done
done
uptime
