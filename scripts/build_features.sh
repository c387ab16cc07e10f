#!/usr/bin/env bash
# The library's build is shared by every cargo command of a CI run only if
# each command resolves the same features for the library and every crate
# it depends on (a proc macro's or build script's own dependencies
# included). This prints the resolved `crate features` of that closure for
# each command CI and the README run, and fails when two differ.
#   bash scripts/build_features.sh
set -euo pipefail
cd "$(dirname "$0")/.."
closure() {
    # A crate's own tree (normal and build edges), as package ids.
    cargo tree -e normal,build --prefix none -f '{p}' "$@" 2>/dev/null |
        sed 's/ (\*)//; s/ (proc-macro)//' | sort -u
}
features() {
    # `name version|features` for every crate the selection resolves.
    cargo tree "$@" -f '{p}|{f}' --prefix none 2>/dev/null |
        sed 's/ (\*)//; s/ (proc-macro)//' | sort -u
}
status=0
# agree CRATE RUN...: every named run resolves CRATE's closure alike.
agree() {
    local crate=$1; shift
    local closure ref="" refname="" name got
    closure=$(closure -p "$crate")
    for name in "$@"; do
        # shellcheck disable=SC2086
        got=$(features ${RUNS[$name]} | grep -F -f <(echo "$closure" | sed 's/$/|/'))
        if [ -z "$ref" ]; then
            ref=$got; refname=$name
            continue
        fi
        if [ "$got" != "$ref" ]; then
            echo "DIFFER ($crate): \"$name\" against \"$refname\":"
            diff <(echo "$ref") <(echo "$got") | sed 's/^/    /' || true
            status=1
        fi
    done
    echo "$crate: $(echo "$closure" | wc -l) crates checked in $# commands"
}
declare -A RUNS=(
    ["cargo test (default members)"]="-e normal,build,dev"
    ["cargo run -p coo-assembler-examples --example ..."]="-p coo-assembler-examples -e normal,build,dev"
    ["the library alone, tested"]="-p coo-assembler -e normal,build,dev"
    ["MPI tests"]="-p coo-assembler-mpi -p coo-assembler-cli -p coo-assembler-capi -F coo-assembler-cli/mpi,coo-assembler-capi/mpi -e normal,build,dev"
    ["the C library with MPI"]="-p coo-assembler-capi -F coo-assembler-capi/mpi -e normal,build"
    ["the wheel"]="-p coo-assembler-python -F pyo3/extension-module -e normal,build"
    ["the MPI wheel"]="-p coo-assembler-python-mpi -F pyo3/extension-module -e normal,build"
    ["cargo build (default members)"]="-e normal,build"
    ["the C library"]="-p coo-assembler-capi -e normal,build"
)
agree coo-assembler "${!RUNS[@]}"
# Both wheels link the Python extensions' shared crate (python/shared):
# resolved alike, the MPI wheel's build compiles it (and numpy, pyo3) once.
agree coo-assembler-python-shared "the wheel" "the MPI wheel"
[ $status = 0 ] && echo "OK: every command resolves each shared closure alike"
exit $status
