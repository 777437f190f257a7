#!/usr/bin/env bash
# Runs every fuzz target of rig-firmware for SECONDS each and prints executions per
# second. Needs a nightly toolchain (cargo +nightly); without one it says so and exits
# 77 ("skipped" in scripts/test). ../../scripts/fuzz.sh does the work (cargo-fuzz's
# flags, without cargo-fuzz).
#
# Usage: firmware/scripts/fuzz.sh [--build|--run] SECONDS
# Env:   RIG_FIRMWARE_ROOT  seeds the corpora with small real files as well as the fixtures.
#        FUZZ_TARGETS       space-separated subset of targets (default: all).
set -euo pipefail

PHASE=
case ${1:-} in --build|--run) PHASE=$1; shift;; esac
if [[ $# -ne 1 ]] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [--build|--run] SECONDS" >&2
    exit 2
fi
SECONDS_EACH=$1
HERE=$(cd "$(dirname "$0")/.." && pwd)   # firmware/
FUZZ=$HERE/fuzz

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain (cargo +nightly); skipped the fuzz targets"
    exit 77
fi

export FUZZ_TARGETS=${FUZZ_TARGETS:-"elf gsp fmc tlv falcon amd firmware"}
if [[ $PHASE != --build ]]; then
    # Seeds: fixtures always, small real files when RIG_FIRMWARE_ROOT is set. The example
    # builds in the workspace's target directory (CARGO_TARGET_DIR if set), selected
    # with --workspace so that it resolves the features of the test command's build and
    # reuses it.
    (cd "$HERE" && cargo build -q --locked --workspace --example fuzz_seeds)
    "${CARGO_TARGET_DIR:-$HERE/../target}/debug/examples/fuzz_seeds" "$FUZZ/corpus" ${RIG_FIRMWARE_ROOT:+"$RIG_FIRMWARE_ROOT"}
fi
exec "$HERE/../scripts/fuzz.sh" $PHASE "$FUZZ" "$SECONDS_EACH"
