#!/usr/bin/env bash
# Issue 23's harness: in-memory assembly from arrays already in memory,
# ours (the public `coo_assembler.assemble(v, (r, c), shape)`, defaults)
# against scipy's `coo_array(...).tocsr()` on contiguous int32 arrays and
# Eigen's `setFromTriplets` (triplet vector included), interleaved, each in
# a fresh process after loading the arrays; first-call and third-call times
# and peak RSS above the loaded inputs. On `fe` also ours on int64 and
# uint64 index arrays (the same values, converted before the clock starts).
# Then the small calls (warm, medians; ours, scipy, Eigen) and this
# machine's floors.
#
#   benches/inmem/run.sh                       # fe, rand, el; 3 rounds
#   ROUNDS=5 INPUTS=fe benches/inmem/run.sh
#   INMEM_DATA=DIR benches/inmem/run.sh        # where arrays, venv and binaries live
#   SKIP_BUILD=1 ...                           # use the package already in DIR/venv
#   INDEXES="int64 uint64"                     # the extra index types on fe ("" for none)
#
# Inputs (made once, kept in $INMEM_DATA, outside the repository):
#   fe    5e7 3D Q1 Poisson contributions in element order (benches/e2e.rs)
#   rand  5e7 uniform coordinates in 2^24 x 2^24
#   el    1e7 3D Q1 elasticity contributions (576 per element)
# Needs python3 with venv, g++, network access to PyPI, and (for Eigen)
# Debian's libeigen3-dev, installed with apt-get when missing and root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/benches/inmem
DATA=${INMEM_DATA:-$ROOT/target/inmem}
ROUNDS=${ROUNDS:-3}
INPUTS=${INPUTS:-fe rand el}
INDEXES=${INDEXES-int64 uint64}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
mkdir -p "$DATA/bin"
OUT=$DATA/results-$(date +%Y%m%d-%H%M%S).jsonl

# Python with numpy, scipy and this checkout's package.
if [ ! -x "$DATA/venv/bin/python" ]; then
    python3 -m venv "$DATA/venv"
    "$DATA/venv/bin/pip" install -q numpy scipy maturin
fi
PY=$DATA/venv/bin/python
if [ -z "${SKIP_BUILD:-}" ]; then
    "$DATA/venv/bin/pip" install -q --force-reinstall --no-deps "$ROOT/python"
fi

# The C++ peers.
if [ ! -d /usr/include/eigen3 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq libeigen3-dev >/dev/null
    else
        echo "Eigen is missing: apt-get install libeigen3-dev" >&2
        exit 1
    fi
fi
g++ -O3 -march=native -I/usr/include/eigen3 "$HERE/eigen_case.cpp" -o "$DATA/bin/eigen_case"
g++ -O3 -march=native -pthread "$HERE/floors.cpp" -o "$DATA/bin/floors"

# The inputs.
for inp in $INPUTS; do
    if [ "$inp" = fe ] && [ ! -f "$DATA/fe_v.npy" ] && [ ! -f "$DATA/fe.bin" ]; then
        (cd "$ROOT" && E2E_GEN_ONLY=1 E2E_N=5e7 E2E_KEEP="$DATA" cargo bench --bench e2e)
    fi
    "$PY" "$HERE/gen.py" "$DATA" "$inp"
done

{
    echo "# $(date -Is) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# commit $(git -C "$ROOT" rev-parse --short HEAD)"
} | tee "$OUT"

tag() { # input, round: add both to the JSON line a case prints
    sed -e "s/^{/{\"input\": \"$1\", \"round\": $2, /"
}
for r in $(seq 1 "$ROUNDS"); do
    for inp in $INPUTS; do
        # Alternate the order from round to round.
        extra=""
        if [ "$inp" = fe ]; then
            for ix in $INDEXES; do extra="$extra ours:$ix"; done
        fi
        if [ $((r % 2)) = 1 ]; then order="ours scipy eigen$extra"; else order="$extra eigen scipy ours"; fi
        for tool in $order; do
            case $tool in
            eigen) "$DATA/bin/eigen_case" "$DATA/$inp" 3 ;;
            *:*) "$PY" "$HERE/py_case.py" --tool "${tool%%:*}" --index "${tool#*:}" --data "$DATA/$inp" ;;
            *) "$PY" "$HERE/py_case.py" --tool "$tool" --data "$DATA/$inp" ;;
            esac | tag "$inp" "$r"
        done | tee -a "$OUT"
    done
done
(cd "$DATA" && "$PY" "$HERE/small.py" --eigen "$DATA/bin/eigen_case") | tee -a "$OUT"
if [ -f "$DATA/fe_v.npy" ]; then
    "$DATA/bin/floors" "$DATA/fe" 3 | sed 's/^/# /' | tee -a "$OUT"
fi
echo "# load at end $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT"
"$PY" "$HERE/summarize.py" "$OUT"
echo "results: $OUT"
