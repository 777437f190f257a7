#!/usr/bin/env bash
# Runs every fuzz target of one fuzz crate for SECONDS each and prints executions per
# second; a target that crashes fails the run (its log's tail is printed). Needs a
# nightly toolchain (cargo +nightly: -Zsanitizer and libFuzzer's coverage passes are
# nightly-only); without one it says so and exits 77, which scripts/test reports as
# "skipped". Corpora live in DIR/corpus/<target> (not committed); DIR/seeds/<target>,
# when present, seeds them.
#
# The crates are cargo-fuzz's layout (libfuzzer-sys, a [[bin]] per target), so
# `cargo fuzz run TARGET` works in them by hand; this script builds them itself with the
# flags cargo-fuzz 0.13 passes by default (address sanitizer, libFuzzer's coverage
# counters, comparison tracing, `--cfg fuzzing`), which spares a fresh CI machine
# compiling cargo-fuzz (47 s of its two cores, docs/BENCHMARKS.md "The test command")
# and keeps build and run from disagreeing: a run executes the built binary.
#
# Every fuzz crate builds into one target folder, $RIG_FUZZ_TARGET_DIR (default
# fuzz/ under the workspace's target folder): what the crates share (libFuzzer's C++,
# serde, tokio…) is compiled with the sanitizer once.
#
# cargo-fuzz builds with one codegen unit unless told otherwise, which leaves one of a
# CI machine's two cores idle through the long optimised compile of rigd and its
# dependencies; RIG_FUZZ_CODEGEN_UNITS (default 16) trades a little of the fuzzers'
# speed for that. The fuzz profile is cargo's release one at opt-level 1
# (RIG_FUZZ_OPT_LEVEL) with line tables only (file:line in a crash's backtrace): the
# fuzz build is the test command's largest compile, and 10-second runs find what they
# find by coverage more than by speed. A fuzz crate's own Cargo.toml may lower its
# dependencies' level (daemon/fuzz does, and says why).
#
# Usage: scripts/fuzz.sh [--build|--run] DIR SECONDS   e.g. scripts/fuzz.sh daemon/fuzz 10
#        --build only builds the targets; --run only runs them (built before).
# Env:   FUZZ_TARGETS  space-separated subset of targets (default: every [[bin]] of DIR).
set -euo pipefail

PHASE=all
case ${1:-} in --build) PHASE=build; shift;; --run) PHASE=run; shift;; esac
if [[ $# -ne 2 ]] || ! [[ $2 =~ ^[0-9]+$ ]] || ! [[ -f $1/Cargo.toml ]]; then
    echo "usage: $0 [--build|--run] DIR SECONDS (DIR: a cargo-fuzz crate)" >&2
    exit 2
fi
FUZZ=$(cd "$1" && pwd)
SECONDS_EACH=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${RIG_FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/fuzz}
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
BIN_DIR=$TARGET_DIR/$TRIPLE/release

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain (cargo +nightly); skipped the fuzz targets of $1"
    exit 77
fi
cd "$FUZZ"
TARGETS=${FUZZ_TARGETS:-$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | tail -n +2)}
CORPUS=$FUZZ/corpus
# The fuzz crate is its own workspace, with its own flags: its own target folder; built by
# nightly's rustc, never through scripts/test's clippy-driver.
unset CARGO_TARGET_DIR RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
if [[ $PHASE != run ]]; then
    echo "fuzz: building the targets of $1 (into $TARGET_DIR)"
    # cargo-fuzz 0.13's defaults (src/project.rs, `cargo fuzz build -O`); --target keeps
    # these flags off build scripts and proc macros.
    flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
    flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
    flags+=" -Cllvm-args=-sanitizer-coverage-pc-table"
    flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
    flags+=" -Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Zsanitizer=address"
    flags+=" -Cllvm-args=-sanitizer-coverage-stack-depth"
    flags+=" -Ccodegen-units=${RIG_FUZZ_CODEGEN_UNITS:-16}"
    build_log=$(mktemp)
    if ! RUSTFLAGS="$flags${RUSTFLAGS:+ $RUSTFLAGS}" \
        CARGO_PROFILE_RELEASE_OPT_LEVEL=${RIG_FUZZ_OPT_LEVEL:-1} \
        CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
        cargo +nightly build --release --locked --bins --target "$TRIPLE" \
            --target-dir "$TARGET_DIR" >"$build_log" 2>&1; then
        cat "$build_log" >&2
        exit 1
    fi
    rm -f "$build_log"
fi
[[ $PHASE != build ]] || exit 0

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
    # ASAN_OPTIONS as cargo-fuzz runs its targets.
    if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0} "$BIN_DIR/$t" -max_total_time="$SECONDS_EACH" \
        -max_len=65536 -print_final_stats=1 "$CORPUS/$t" >"$log" 2>&1; then
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
