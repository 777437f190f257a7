#!/usr/bin/env bash
# Runs every cargo-fuzz target of one fuzz crate for SECONDS each and prints executions
# per second; a target that crashes fails the run (its log's tail is printed). Needs a
# nightly toolchain (cargo +nightly); without one it says so and exits 0. Installs
# cargo-fuzz (cargo install cargo-fuzz --locked) when missing. Corpora live in
# DIR/corpus/<target> (not committed); DIR/seeds/<target>, when present, seeds them.
#
# Usage: scripts/fuzz.sh DIR SECONDS        e.g. scripts/fuzz.sh daemon/fuzz 10
# Env:   FUZZ_TARGETS  space-separated subset of targets (default: every [[bin]] of DIR).
set -euo pipefail

if [[ $# -ne 2 ]] || ! [[ $2 =~ ^[0-9]+$ ]] || ! [[ -f $1/Cargo.toml ]]; then
    echo "usage: $0 DIR SECONDS (DIR: a cargo-fuzz crate)" >&2
    exit 2
fi
FUZZ=$(cd "$1" && pwd)
SECONDS_EACH=$2

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain (cargo +nightly); skipping the fuzz targets of $1"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd "$FUZZ"
TARGETS=${FUZZ_TARGETS:-$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | tail -n +2)}
CORPUS=$FUZZ/corpus
# The fuzz crate is its own workspace: keep its build out of the shared target directory.
unset CARGO_TARGET_DIR
echo "fuzz: building the targets of $1"
build_log=$(mktemp)
if ! cargo +nightly fuzz build -O >"$build_log" 2>&1; then
    cat "$build_log" >&2
    exit 1
fi
rm -f "$build_log"

# cov: code edges reached (libFuzzer's coverage counters); ft: features (edge and
# counter combinations), both from the run's last status line.
printf '%-16s %12s %10s %8s %8s %8s %8s\n' target execs exec/s seconds corpus cov ft
status=0
for t in $TARGETS; do
    log=$(mktemp)
    mkdir -p "$CORPUS/$t"
    if [[ -d $FUZZ/seeds/$t ]]; then
        cp -n "$FUZZ/seeds/$t"/* "$CORPUS/$t/" 2>/dev/null || true
    fi
    if ! cargo +nightly fuzz run -O "$t" "$CORPUS/$t" -- -max_total_time="$SECONDS_EACH" -max_len=65536 \
        -print_final_stats=1 >"$log" 2>&1; then
        echo "fuzz: target $t failed; its log:" >&2
        tail -40 "$log" >&2
        status=1
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    units=$(find "$CORPUS/$t" -type f | wc -l)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    printf '%-16s %12s %10s %8s %8s %8s %8s\n' "$t" "${execs:--}" "${rate:--}" "$SECONDS_EACH" "$units" "${cov:--}" "${ft:--}"
    rm -f "$log"
done
exit $status
