#!/usr/bin/env bash
# Every lockfile of rig (the workspace's, the fuzz crates', this check's own) against
# the RustSec advisory database that cargo-audit and cargo-deny read, in a snapshot
# vendored in tests/audit/advisories, so the test command checks offline and gets the
# same answer every run (tests/audit/src/main.rs says what fails; docs/RELIABILITY.md,
# "Advisories", how to read and refresh it).
#
#     scripts/advisories.sh check             # build tests/audit and run it (test command)
#     scripts/advisories.sh refresh DB_DIR    # remake the snapshot from a checkout of
#                                             # github.com/rustsec/advisory-db at DB_DIR
#
# The snapshot holds the advisories of exactly the crates the lockfiles name (COVERED
# lists them, with or without advisories), the database's commit and date (SNAPSHOT).
# A crate added later is not covered: the check fails until the snapshot is refreshed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"

SNAP=tests/audit/advisories
LOCKS=(Cargo.lock firmware/fuzz/Cargo.lock daemon/fuzz/Cargo.lock client/cubin/fuzz/Cargo.lock
    tests/audit/Cargo.lock)

case "${1:-}" in
check)
    cargo build --release --locked --quiet --manifest-path tests/audit/Cargo.toml \
        --target-dir "${CARGO_TARGET_DIR:-target}/audit"
    audit="${CARGO_TARGET_DIR:-target}/audit/release/rig-audit"
    # First a lockfile that must fail, so a check that can no longer fail is seen.
    if bad=$("$audit" --db "$SNAP" --manifest Cargo.toml tests/audit/known-bad.lock); then
        echo "advisories: tests/audit/known-bad.lock passed: the check cannot fail" >&2
        exit 1
    fi
    grep -q "FAILED RUSTSEC-2024-0332 h2 0.3.20" <<< "$bad" || {
        printf 'advisories: the patched h2 of known-bad.lock was not checked:\n%s\n' "$bad" >&2
        exit 1
    }
    "$audit" --db "$SNAP" --policy tests/audit/audit.toml --manifest Cargo.toml "${LOCKS[@]}"
    ;;
refresh)
    db=${2:?"usage: $0 refresh ADVISORY_DB_CHECKOUT"}
    [ -d "$db/crates" ] || { echo "advisories: $db has no crates/: not an advisory-db checkout" >&2; exit 1; }
    rm -rf "$SNAP/crates" && mkdir -p "$SNAP/crates"
    python3 - "${LOCKS[@]}" > "$SNAP/COVERED" <<'PY'
import sys, tomllib
names = set()
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        names.update(p["name"] for p in tomllib.load(f).get("package", []))
print("# Crates this snapshot was made for (scripts/advisories.sh refresh).")
print("\n".join(sorted(names)))
PY
    while read -r name; do
        case "$name" in '#'* | '') continue ;; esac
        [ -d "$db/crates/$name" ] && cp -r "$db/crates/$name" "$SNAP/crates/"
    done < "$SNAP/COVERED"
    echo "advisory-db $(git -C "$db" log -1 --format='%h of %cs' 2> /dev/null || echo '(not a git checkout)')" > "$SNAP/SNAPSHOT"
    echo "advisories: $(grep -vc '^#' "$SNAP/COVERED") crates covered, $(find "$SNAP/crates" -name '*.md' | wc -l) advisories, from $(cat "$SNAP/SNAPSHOT")"
    ;;
*)
    echo "usage: $0 check | refresh ADVISORY_DB_CHECKOUT" >&2
    exit 2
    ;;
esac
