#!/usr/bin/env bash
# Issue 42's harness (benches/mpi/refill_petsc.c): the distributed refill
# against PETSc's MatSetValuesCOO and a fresh distributed assembly, on a 3D
# Q1 Laplace problem split by elements, at 2 and 4 ranks, modes alternated
# round after round, each in fresh processes. Needs Open MPI and PETSc
# (Debian: libopenmpi-dev petsc-dev) and the C library built with MPI.
#
#   benches/mpi/run.sh                   # M=92 (5.0e7 contributions), 3 rounds
#   M=60 ROUNDS=2 RANKS="2" benches/mpi/run.sh
#   MODES="ours fast petsc" benches/mpi/run.sh   # without the (slow) fresh assembly
# Each line is labelled with its mode; "fast" is our refill with
# exact_sums = false (sums in arrival order, what PETSc computes).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
M=${M:-92}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-5}
BUDGET_MIB=${BUDGET_MIB:-1024}
RANKS=${RANKS:-"2 4"}
MODES=${MODES:-"ours fast petsc fresh"}
OUT=${OUT:-$ROOT/target/mpi-bench}
mkdir -p "$OUT"
cd "$ROOT"
cargo build --release -q -p coo-assembler-capi --features mpi
mpicc -O2 -o "$OUT/refill_petsc" benches/mpi/refill_petsc.c -Iinclude \
    $(pkg-config --cflags --libs petsc) -Ltarget/release -Wl,-rpath,"$ROOT/target/release" \
    -lcoo_assembler -lm
LOG=$OUT/run-$(date +%Y%m%d-%H%M%S).jsonl
echo "# $(date -Is) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, M=$M REPS=$REPS budget ${BUDGET_MIB} MiB/rank" | tee "$LOG"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq "$ROUNDS"); do
    for k in $RANKS; do
        for mode in $MODES; do
            # fast: our refill with exact_sums = false (arrival order, as PETSc sums)
            fast=0 run=$mode
            if [ "$mode" = fast ]; then fast=1 run=ours; fi
            FAST_SUMS=$fast mpirun -x FAST_SUMS -n "$k" --oversubscribe \
                "$OUT/refill_petsc" "$run" "$M" "$REPS" "$BUDGET_MIB" |
                sed "s/^{/{\"label\":\"$mode\",/" | tee -a "$LOG"
        done
    done
done
echo "# results in $LOG"
