#!/usr/bin/env bash
# The memory budget under a hard limit: assemble ten times the budget of
# contributions (default 32 MiB budget, 320 MiB of records, mostly distinct
# coordinates, so the assembly spills and merges) under
# `prlimit --data=<budget + margin>`, and report peak RSS (VmHWM, via
# /usr/bin/time -v) against the budget.
#
#   scripts/memory_limit.sh                       # PASS/FAIL/SKIP line
#   BUDGET_MIB=256 FACTOR=10 scripts/memory_limit.sh   # long run
#
# FAIL when the run dies (allocation beyond the limit shows as an
# out-of-memory error or abort) or when peak RSS exceeds budget + MARGIN_MIB.
source "$(dirname "$0")/lib.sh"
BUDGET_MIB=${BUDGET_MIB:-32}
FACTOR=${FACTOR:-10}
MARGIN_MIB=${MARGIN_MIB:-32}      # code, thread stacks, allocator slack
ensure_bin
command -v prlimit >/dev/null || skip "prlimit not found (util-linux)"
command -v python3 >/dev/null || skip "python3 not found (needed to make the input)"
TIME=/usr/bin/time
[ -x "$TIME" ] || skip "/usr/bin/time not found (apt-get install time)"

W=$(mktemp -d "${TMPDIR:-/tmp}/memory_limit.XXXXXX")
trap 'rm -rf "$W"' EXIT
n=$(( BUDGET_MIB * FACTOR * 1048576 / 24 ))
gen_records "$n" 11 24 > "$W/in.bin"      # 2^24 x 2^24: nearly all distinct
in_mib=$(( $(stat -c %s "$W/in.bin") / 1048576 ))
limit=$(( (BUDGET_MIB + MARGIN_MIB) * 1048576 ))
set +e
prlimit --data=$limit -- "$TIME" -v "$BIN" assemble --shape 16777216,16777216 --dtype f64 \
    --format bin --input "$W/in.bin" --memory-budget "${BUDGET_MIB}MiB" --threads 2 \
    --temp-dir "$W" --output "$W/out.hrry" -q 2> "$W/err"
rc=$?
set -e
rss_kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$W/err")
rss_mib=$(( ${rss_kib:-0} / 1024 ))
echo "input ${in_mib} MiB ($n records), budget ${BUDGET_MIB} MiB, RLIMIT_DATA $((limit / 1048576)) MiB: exit $rc, peak RSS ${rss_mib} MiB" >&2
if [ "$rc" != 0 ]; then
    grep -v '^\s' "$W/err" | head -5 >&2
    fail "assembly under RLIMIT_DATA=budget+${MARGIN_MIB}MiB failed (exit $rc): $(grep -m1 'error' "$W/err")"
fi
"$BIN" verify "$W/out.hrry" >/dev/null || fail "output does not verify"
[ "$rss_mib" -le $((BUDGET_MIB + MARGIN_MIB)) ] || fail "peak RSS ${rss_mib} MiB > budget ${BUDGET_MIB} MiB + ${MARGIN_MIB} MiB"
pass "${in_mib} MiB of contributions, budget ${BUDGET_MIB} MiB, RLIMIT_DATA $((limit / 1048576)) MiB: peak RSS ${rss_mib} MiB ($(( rss_mib * 100 / BUDGET_MIB ))% of budget)"
