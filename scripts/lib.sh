# Shared helpers for the reliability scripts (sourced, not run).
# Sets ROOT, BIN; defines pass/fail/skip and gen_records.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${COO_ASSEMBLER_BIN:-$ROOT/target/release/coo-assembler}
NAME=${NAME:-$(basename "$0" .sh)}

pass() { echo "PASS $NAME: $*"; exit 0; }
fail() { echo "FAIL $NAME: $*"; exit 1; }
skip() { echo "SKIP $NAME: $*"; exit 0; }

ensure_bin() {
    if [ ! -x "$BIN" ]; then
        (cd "$ROOT" && cargo build --release --bin coo-assembler >&2) || fail "cargo build failed"
    fi
}

# gen_records N SEED BITS > file: N binary records for a rank-2 f64 tensor
# of shape 2^BITS x 2^BITS (BITS <= 32): two u64 LE indices, value 1.0..
gen_records() {
    python3 - "$1" "$2" "$3" <<'PY'
import random, struct, sys
n, seed, bits = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
out = sys.stdout.buffer
nb = (bits + 7) // 8
mask = (1 << bits) - 1
step = 1 << 18
done = 0
while done < n:
    k = min(step, n - done)
    rec = bytearray(24 * k)
    for d, off in ((0, 0), (1, 8)):
        r = rng.randbytes(nb * k)
        for b in range(nb):
            rec[off + b::24] = r[b::nb]
        if bits % 8:
            top = off + nb - 1
            rec[top::24] = bytes(x & (mask >> (8 * (nb - 1))) for x in rec[top::24])
    # value: 1.0 + small mantissa noise (f64 LE 0x3ff0_0000_00xx_xxxx)
    v = rng.randbytes(2 * k)
    rec[16::24] = v[0::2]
    rec[17::24] = v[1::2]
    rec[22::24] = b"\xf0" * k
    rec[23::24] = b"\x3f" * k
    out.write(rec)
    done += k
PY
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
