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

export FUZZ_TARGETS=${FUZZ_TARGETS:-"elf gsp fmc tlv falcon amd firmware"}
# Seeds: fixtures always, small real files when RIG_FIRMWARE_ROOT is set. The example builds in
# the workspace's target directory (CARGO_TARGET_DIR if set).
(cd "$HERE" && cargo run -q -p rig-firmware --example fuzz_seeds -- "$FUZZ/corpus" ${RIG_FIRMWARE_ROOT:+"$RIG_FIRMWARE_ROOT"})
exec "$HERE/../scripts/fuzz.sh" "$FUZZ" "$SECONDS_EACH"
