#!/usr/bin/env bash
# Issue 24's harness: plan once / refill many on 5e7 FE contributions held
# in memory, against the scipy user's np.bincount refill (slots computed
# once, intp), today's full `coo_assembler.assemble` and PETSc's
# MatSetValuesCOO (when petsc4py is installed), interleaved, each
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
# PETSc's MatSetValuesCOO, by ctypes through petsc4py (Debian's
# python3-petsc4py, for Debian's python3; PETSC_PY= to skip it).
PETSC_PY=${PETSC_PY-/usr/bin/python3}
if [ -z "${PETSC_DIR:-}" ] && [ ! -d /usr/lib/petsc ]; then
    # Without libpetsc-real-dev there is no /usr/lib/petsc link for
    # petsc4py's .pth: point it at the runtime's own directory.
    PETSC_DIR=$(ls -d /usr/lib/petscdir/petsc*/x86_64-linux-gnu-real 2>/dev/null | head -n 1 || true)
    export PETSC_DIR
fi
TOOLS="plan bincount assemble"
if [ -n "$PETSC_PY" ] && "$PETSC_PY" -c 'import petsc4py, numpy' 2>/dev/null; then
    TOOLS="$TOOLS petsc"
else
    echo "# no petsc4py for ${PETSC_PY:-(none)}: PETSc skipped (apt-get install python3-petsc4py)"
fi
for round in $(seq 1 "$ROUNDS"); do
    for tool in $TOOLS; do
        py=$PY
        [ "$tool" = petsc ] && py=$PETSC_PY
        "$py" "$ROOT/benches/refill/refill_case.py" --tool "$tool" --data "$DATA/fe" --budget "$BUDGET" \
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
peers = [t for t in ("bincount", "assemble", "petsc") if t in by]
print("\n| round | plan third | " + " | ".join(f"{t} third | {t} / plan" for t in peers) + " |")
print("|---|---|" + "---|---|" * len(peers))
for rd in sorted({r["round"] for r in rows}):
    g = {r["tool"]: r["calls"][-1]["s"] for r in rows if r["round"] == rd}
    cells = " | ".join(f"{g[t]:.4f} | {g[t]/g['plan']:.2f}" for t in peers if t in g)
    print(f"| {rd} | {g['plan']:.4f} | {cells} |")
PYEOF
echo "results: $OUT"
