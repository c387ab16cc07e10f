#!/usr/bin/env bash
# Two coo-assembler binaries alternating on one bin input, in one loop, for
# same-run before/after figures on a shared machine: per run the wall,
# user and system seconds and peak RSS (/usr/bin/time), and a `cmp` of the
# two outputs (prints DIFFER when they are not byte-identical).
#
#   OLD=/path/old NEW=/path/new IN=fe.bin SHAPE=830584,830584 \
#     benches/compare/bin_ab.sh 4GiB/2 4GiB/1 256MiB/2
#
# Arguments: budget/threads pairs. REPS (default 3) rounds; NICE=-19 runs
# both under `nice -n -19` (root), which gives them most of the CPU against
# other jobs at nice 0; OUT (default a temporary directory) holds outputs
# and spills. The CPU model and the load average are printed first.
set -euo pipefail
: "${OLD:?OLD=old binary}" "${NEW:?NEW=new binary}" "${IN:?IN=bin input}" "${SHAPE:?SHAPE=extents}"
REPS=${REPS:-3}
PRE=()
if [ -n "${NICE:-}" ]; then PRE=(nice -n "$NICE"); fi
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; else OUT=$(mktemp -d "${TMPDIR:-/tmp}/bin-ab-XXXXXX"); trap 'rm -rf "$OUT"' EXIT; fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%F %H:%M') UTC"
for _ in $(seq "$REPS"); do
    for cfg in "$@"; do
        budget=${cfg%/*}
        threads=${cfg#*/}
        for which in old new; do
            if [ $which = old ]; then bin=$OLD; else bin=$NEW; fi
            "${PRE[@]}" /usr/bin/time -f "$which $budget t$threads %e s wall %U s user %S s sys %M KiB" \
                "$bin" assemble --input "$IN" --format bin --shape "$SHAPE" --memory-budget "$budget" \
                --threads "$threads" --temp-dir "$OUT" --output "$OUT/$which.hrry" -q 2>&1 | tail -1
        done
        cmp -s "$OUT/old.hrry" "$OUT/new.hrry" || echo "DIFFER: $budget t$threads"
    done
done
rm -f "$OUT/old.hrry" "$OUT/new.hrry"
echo "load at end $(cut -d' ' -f1-3 /proc/loadavg)"
