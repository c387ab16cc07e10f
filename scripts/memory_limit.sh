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
MARGIN_MIB=${MARGIN_MIB:-16}      # code, thread stacks, allocator slack
TIGHT_MIB=${TIGHT_MIB:-4}         # second run: a limit it may not fit, must fail cleanly
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
prlimit --data=$limit -- "$TIME" -v "$BIN" assemble --shape 16777216,16777216 --dtype f64 \
    --format bin --input "$W/in.bin" --memory-budget "${BUDGET_MIB}MiB" --threads 2 \
    --temp-dir "$W" --output "$W/out.hrry" 2> "$W/err"
rc=$?
summary=$(grep -m1 '^wrote' "$W/err" || true)
echo "$summary" >&2
rss_kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$W/err")
rss_mib=$(( ${rss_kib:-0} / 1024 ))
echo "input ${in_mib} MiB ($n records), budget ${BUDGET_MIB} MiB, RLIMIT_DATA $((limit / 1048576)) MiB: exit $rc, peak RSS ${rss_mib} MiB" >&2
if [ "$rc" != 0 ]; then
    grep -v '^\s' "$W/err" | head -5 >&2
    fail "assembly under RLIMIT_DATA=budget+${MARGIN_MIB}MiB failed (exit $rc): $(grep -m1 'error' "$W/err")"
fi
"$BIN" verify "$W/out.hrry" >/dev/null || fail "output does not verify"
[ "$rss_mib" -le $((BUDGET_MIB + MARGIN_MIB)) ] || fail "peak RSS ${rss_mib} MiB > budget ${BUDGET_MIB} MiB + ${MARGIN_MIB} MiB"
# Too tight a limit: the run may fail, but cleanly (exit 1 with a message,
# no abort, no panic, nothing left behind).
rm -f "$W/out.hrry"
prlimit --data=$(( (BUDGET_MIB + TIGHT_MIB) * 1048576 )) -- "$BIN" assemble --shape 16777216,16777216 --dtype f64 \
    --format bin --input "$W/in.bin" --memory-budget "${BUDGET_MIB}MiB" --threads 2 \
    --temp-dir "$W" --output "$W/out.hrry" -q 2> "$W/err2"
rc2=$?
tight="RLIMIT_DATA budget+${TIGHT_MIB}MiB: exit $rc2 ($(head -c 200 "$W/err2"))"
echo "$tight" >&2
case $rc2 in 0|1) ;; *) fail "$tight: not a clean failure" ;; esac
if grep -q "internal error\|panicked" "$W/err2"; then fail "$tight: panic"; fi
left=$(ls -A "$W" | grep -v '^in\.bin$\|^err2\?$\|^out\.hrry$' || true)
[ -z "$left" ] || fail "$tight: left behind: $left"
pass "${summary#*: } | ${in_mib} MiB of contributions, budget ${BUDGET_MIB} MiB, RLIMIT_DATA $((limit / 1048576)) MiB: peak RSS ${rss_mib} MiB ($(( rss_mib * 100 / BUDGET_MIB ))% of budget); tight limit budget+${TIGHT_MIB}MiB: exit $rc2"
