#!/usr/bin/env bash
# Import loops anywhere in rig: scripts/modcycles.py over the sources of every crate of
# the workspace (libraries and binaries' modules; tests and test-only modules left out)
# and every fuzz crate, and over the Python package. Fails on the first crate or
# package with a loop, after printing every loop found.
#
#   scripts/cycles.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

dirs=$(cargo metadata --no-deps --format-version 1 --offline 2> /dev/null |
    python3 -c 'import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    print(os.path.relpath(os.path.join(os.path.dirname(p["manifest_path"]), "src")))') || {
    echo "cycles: cargo metadata failed" >&2
    exit 2
}
[ -n "$dirs" ] || { echo "cycles: no crates found" >&2; exit 2; }
failed=0
for d in $dirs daemon/fuzz/fuzz_targets firmware/fuzz/fuzz_targets client/python/python/rig_gpu; do
    [ -d "$d" ] || continue
    out=$(python3 scripts/modcycles.py "$d" --skip 'tests$|^testing|_tests$') || {
        failed=1
        printf '%s\n' "$out"
    }
done
[ "$failed" = 0 ] && echo "cycles: no import loop in any crate or the Python package"
exit "$failed"
