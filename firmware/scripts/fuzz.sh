#!/usr/bin/env bash
# Runs every cargo-fuzz target of rig-firmware for SECONDS each and prints executions per
# second. Needs a nightly toolchain (cargo +nightly); without one it says so and exits 0.
# Installs cargo-fuzz (cargo install cargo-fuzz --locked) when missing.
#
# Usage: firmware/scripts/fuzz.sh SECONDS
# Env:   RIG_FIRMWARE_ROOT  seeds the corpora with small real files as well as the fixtures.
#        FUZZ_TARGETS       space-separated subset of targets (default: all).
set -euo pipefail

if [[ $# -ne 1 ]] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 SECONDS" >&2
    exit 2
fi
SECONDS_EACH=$1
HERE=$(cd "$(dirname "$0")/.." && pwd)   # firmware/
FUZZ=$HERE/fuzz

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain (cargo +nightly); skipping the fuzz targets"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

TARGETS=${FUZZ_TARGETS:-"elf gsp fmc tlv falcon amd firmware"}
CORPUS=$FUZZ/corpus
# Seeds: fixtures always, small real files when RIG_FIRMWARE_ROOT is set. The example builds in
# the workspace's target directory (CARGO_TARGET_DIR if set).
(cd "$HERE" && cargo run -q -p rig-firmware --example fuzz_seeds -- "$CORPUS" ${RIG_FIRMWARE_ROOT:+"$RIG_FIRMWARE_ROOT"})

cd "$FUZZ"
# The fuzz crate is its own workspace: keep its build out of the shared target directory.
unset CARGO_TARGET_DIR
echo "fuzz: building targets"
build_log=$(mktemp)
if ! cargo +nightly fuzz build -O >"$build_log" 2>&1; then
    cat "$build_log" >&2
    exit 1
fi
rm -f "$build_log"

printf '%-10s %12s %10s %8s %8s\n' target execs exec/s seconds corpus
status=0
for t in $TARGETS; do
    log=$(mktemp)
    mkdir -p "$CORPUS/$t"
    if ! cargo +nightly fuzz run -O "$t" "$CORPUS/$t" -- -max_total_time="$SECONDS_EACH" -max_len=65536 \
        -print_final_stats=1 >"$log" 2>&1; then
        echo "fuzz: target $t failed; its log:" >&2
        tail -40 "$log" >&2
        status=1
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    units=$(find "$CORPUS/$t" -type f | wc -l)
    printf '%-10s %12s %10s %8s %8s\n' "$t" "${execs:--}" "${rate:--}" "$SECONDS_EACH" "$units"
    rm -f "$log"
done
exit $status
