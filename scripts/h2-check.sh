#!/usr/bin/env bash
# The h2 the workspace builds is the patched one in third_party/h2 (RIG-PATCH.md), not
# the registry's: `cargo tree` must name the folder as h2's source, and cargo must not
# warn that the [patch] went unused. Should an update move h2 past the patched version,
# cargo only warns and builds the registry's h2: this says so in a second, before the
# grpcio client's test does, minutes later.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"
out=$(cargo tree --locked --workspace --invert h2 --depth 0 --prefix none 2>&1)
want="($RIG_ROOT/third_party/h2)"
if grep -q '^warning:.*[Pp]atch' <<< "$out" || [ "$(grep -c '^h2 v' <<< "$out")" != 1 ] ||
    ! grep -qF "$want" <<< "$out"; then
    echo "h2-check: the build's h2 is not third_party/h2 (third_party/h2/RIG-PATCH.md, \"Watch out\"):" >&2
    printf '%s\n' "$out" >&2
    exit 1
fi
echo "h2-check: $(grep '^h2 v' <<< "$out")"
