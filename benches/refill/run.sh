#!/usr/bin/env bash
# Issue 24's harness: plan once / refill many on 5e7 FE contributions held
# in memory, against the scipy user's np.bincount refill (slots computed
# once, intp) and today's full `coo_assembler.assemble`, interleaved, each
# in a fresh process after loading the arrays (benches/refill/refill_case.py).
# Reports setup (planning) time and memory, first and warm (third) calls,
# and checks the refill is bit for bit `assemble`'s result.
#
#   benches/refill/run.sh                      # 3 rounds
#   ROUNDS=5 INMEM_DATA=DIR benches/refill/run.sh
#
# Uses the arrays, venv and package of benches/inmem/run.sh ($INMEM_DATA,
# default target/inmem): run that once first (it makes them).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${INMEM_DATA:-$ROOT/target/inmem}
ROUNDS=${ROUNDS:-3}
BUDGET=${BUDGET:-2GiB}
PY=$DATA/venv/bin/python
OUT=$DATA/refill-$(date +%Y%m%d-%H%M%S).jsonl
if [ ! -x "$PY" ] || [ ! -f "$DATA/fe_v.npy" ]; then
    echo "no arrays in $DATA: run benches/inmem/run.sh first (INPUTS=fe)" >&2
    exit 1
fi
echo "# $(date -Is) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$DATA"
for round in $(seq 1 "$ROUNDS"); do
    for tool in plan bincount assemble; do
        "$PY" "$ROOT/benches/refill/refill_case.py" --tool "$tool" --data "$DATA/fe" --budget "$BUDGET" \
            | sed "s/^{/{\"round\": $round, /" | tee -a "$OUT"
    done
done
"$PY" - "$OUT" <<'PYEOF'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["tool"], []).append(r)
print("| tool | rounds | setup s (median) | setup peak MiB | plan MiB | first call s | third call s (median, min-max) | third-call CPU s | load |")
print("|---|---|---|---|---|---|---|---|---|")
for tool, rs in by.items():
    third = [r["calls"][-1]["s"] for r in rs]
    first = [r["calls"][0]["s"] for r in rs]
    cpu = [r["calls"][-1]["cpu_s"] for r in rs]
    setup = [r["setup"]["s"] for r in rs if "setup" in r]
    speak = [r["setup"]["peak_mib"] for r in rs if "setup" in r]
    pm = [r["plan_mib"] for r in rs if "plan_mib" in r]
    f = lambda xs: f"{st.median(xs):.3f}" if xs else "-"
    print(f"| {tool} | {len(rs)} | {f(setup)} | {max(speak) if speak else '-'} | {pm[0] if pm else '-'} | {f(first)} | "
          f"{st.median(third):.4f} ({min(third):.4f}-{max(third):.4f}) | {st.median(cpu):.3f} | "
          f"{min(r['load_start'] for r in rs):.1f}-{max(r['load_end'] for r in rs):.1f} |")
ident = [r.get("identical_to_assemble") for r in by.get("plan", [])]
print(f"\nplan refill bit for bit assemble's result: {ident}")
print("\n| round | plan third | bincount third | bincount / plan | assemble third | assemble / plan |")
print("|---|---|---|---|---|---|")
for rd in sorted({r["round"] for r in rows}):
    g = {r["tool"]: r["calls"][-1]["s"] for r in rows if r["round"] == rd}
    print(f"| {rd} | {g['plan']:.4f} | {g['bincount']:.4f} | {g['bincount']/g['plan']:.2f} | {g['assemble']:.4f} | {g['assemble']/g['plan']:.2f} |")
PYEOF
echo "results: $OUT"
