#!/usr/bin/env bash
# Real disk-full: mount a small tmpfs privately (unshare -m, or a user
# namespace when not root) and assemble more than fits, with the tmpfs
# first as the temp dir (spill), then as the output dir. Each time: exit
# status 1, a message naming the cause, nothing left on either disk, and
# the previous file at the target intact.
#
#   scripts/disk_full.sh     # PASS/FAIL/SKIP line, exit 1 on FAIL
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" != "--inner" ]; then
    ensure_bin
    command -v python3 >/dev/null || skip "python3 not found (needed to make the input)"
    command -v unshare >/dev/null || skip "unshare not found"
    if unshare -m --propagation private true 2>/dev/null; then
        exec unshare -m --propagation private "$0" --inner
    elif unshare -r -m --propagation private true 2>/dev/null; then
        exec unshare -r -m --propagation private "$0" --inner
    else
        skip "no private mount namespace (unshare -m and unshare -rm not permitted here)"
    fi
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/disk_full.XXXXXX")
cleanup() { umount "$W/small" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
mkdir -p "$W/small" "$W/big" "$W/big/tmp"
mount -t tmpfs -o size=4m tmpfs "$W/small" 2>/dev/null || skip "mount -t tmpfs not permitted"
gen_records 1200000 7 12 > "$W/in.bin"     # 29 MB of contributions, ~1.1M distinct of 16.7M
gen_records 100 8 12 > "$W/prev.bin"
COMMON=(assemble --shape 4096,4096 --dtype f64 --format bin --threads 2 -q)
"$BIN" "${COMMON[@]}" --input "$W/prev.bin" --output "$W/prev.hrry" || fail "could not make the previous file"
PREV=$(sha "$W/prev.hrry")

check_case() { # label target-dir temp-dir budget
    local label=$1 outdir=$2 tmpdir=$3 budget=$4
    local T="$outdir/k.hrry"
    cp "$W/prev.hrry" "$T" || fail "$label: cannot place the previous file"
    "$BIN" "${COMMON[@]}" --input "$W/in.bin" --memory-budget "$budget" \
        --temp-dir "$tmpdir" --output "$T" 2> "$W/err"
    local rc=$?
    local msg; msg=$(head -c 400 "$W/err")
    echo "$label: exit $rc: $msg" >&2
    [ "$rc" = 1 ] || fail "$label: exit status $rc, expected 1 ($msg)"
    # Checked last (after the leftovers), so that one failure does not hide
    # another: collected in PROBLEMS.
    grep -q "No space left on device" "$W/err" || PROBLEMS+="$label: message does not give the cause ($msg); "
    if grep -q "internal error\|panicked" "$W/err"; then fail "$label: panic: $msg"; fi
    [ "$(sha "$T")" = "$PREV" ] || fail "$label: the previous file changed"
    local left; left=$(cd "$outdir" && ls -A | grep -vx 'k.hrry\|tmp' || true)
    [ -z "$left" ] || fail "$label: left in the output dir: $left"
    left=$(ls -A "$tmpdir")
    [ -z "$left" ] || fail "$label: left in the temp dir: $left"
    rm -f "$T"
    [ -z "$(ls -A "$W/small")" ] || fail "$label: the small disk is not empty: $(ls -A "$W/small")"
}

PROBLEMS=""
# 1. Spill to a 4 MiB temp dir: runs of ~1.1M entries do not fit.
check_case "temp dir full" "$W/big" "$W/small" 8MiB
# 2. Output to a 4 MiB dir: the ~27 MB output does not fit (no spill).
check_case "output dir full" "$W/small" "$W/big/tmp" 512MiB
[ -z "$PROBLEMS" ] || fail "$PROBLEMS(previous file intact and nothing left behind in both cases)"
pass "ENOSPC on the temp dir and on the output dir: exit 1 with the cause, previous file intact, nothing left on either disk"
