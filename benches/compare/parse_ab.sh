#!/usr/bin/env bash
# Alternate two coo-assembler binaries (OLD, NEW) on the same MatrixMarket
# and text inputs, --threads 2 and 1, and print wall, user and system time
# and peak RSS of each run: a same-run before/after of the text parsers.
# Every output of NEW is compared (`cmp`) with OLD's for the same input and
# thread count; a difference stops the script.
#
#   OLD=/tmp/old-cli NEW=target/release/coo-assembler DIR=/var/tmp/perf2 \
#       benches/compare/parse_ab.sh
#
# DIR must hold fe.mtx (benches/compare/gen.py --mtx N); fe.txt (the same
# lines without the MatrixMarket header: `tail -n +4 fe.mtx > fe.txt`) is
# made when missing (DIR may hold a symbolic link to a read-only fe.mtx:
# regular files behind links are mapped all the same). Each round prints
# the load average before it. Environment: REPS (default 3), BUDGET (default 256MiB),
# THREADS (default "2 1"), NICE (e.g. -19: run both under `nice -n NICE`,
# which needs root).
set -euo pipefail
: "${OLD:?set OLD to the binary to compare against}"
NEW=${NEW:-target/release/coo-assembler}
DIR=${DIR:?set DIR to the directory holding fe.mtx}
REPS=${REPS:-3}
BUDGET=${BUDGET:-256MiB}
THREADS=${THREADS:-2 1}
run=()
[ -n "${NICE:-}" ] && run=(nice -n "$NICE")
[ -f "$DIR/fe.txt" ] || tail -n +4 "$DIR/fe.mtx" > "$DIR/fe.txt"
size=$(awk '!/^%/ {print $1 + 1; exit}' "$DIR/fe.mtx")
out=$(mktemp -d "${TMPDIR:-/tmp}/parse_ab.XXXXXX")
trap 'rm -rf "$out"' EXIT
lscpu | grep 'Model name' || true
uptime
for rep in $(seq "$REPS"); do
    echo "round $rep, load $(cut -d' ' -f1-3 /proc/loadavg)"
    for which in old new; do
        if [ "$which" = old ]; then bin=$OLD; else bin=$NEW; fi
        for t in $THREADS; do
            "${run[@]}" /usr/bin/time -f "mtx $which t$t %e s wall %U u %S s %M KB" "$bin" assemble \
                --input "$DIR/fe.mtx" --output "$out/$which-mtx-$t.hrry" --memory-budget "$BUDGET" --threads "$t" -q
            "${run[@]}" /usr/bin/time -f "txt $which t$t %e s wall %U u %S s %M KB" "$bin" assemble \
                --format text --shape "$size,$size" --input "$DIR/fe.txt" --output "$out/$which-txt-$t.hrry" \
                --memory-budget "$BUDGET" --threads "$t" -q
        done
    done
    for t in $THREADS; do
        for f in mtx txt; do
            cmp "$out/old-$f-$t.hrry" "$out/new-$f-$t.hrry"
        done
    done
done
echo "outputs identical (cmp) for every input and thread count"
uptime
