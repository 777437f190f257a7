#!/usr/bin/env bash
# Every lockfile of rig (the workspace's, the fuzz crates', this check's own) against
# the RustSec advisory database that cargo-audit and cargo-deny read, in a snapshot
# vendored in tests/audit/advisories, so the test command checks offline and gets the
# same answer every run; and their packages' licences and versions against
# tests/audit/audit.toml (tests/audit/src/main.rs says what fails; docs/RELIABILITY.md,
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
    cargo test --release --locked --quiet --manifest-path tests/audit/Cargo.toml \
        --target-dir "${CARGO_TARGET_DIR:-target}/audit"
    cargo build --release --locked --quiet --manifest-path tests/audit/Cargo.toml \
        --target-dir "${CARGO_TARGET_DIR:-target}/audit"
    audit="${CARGO_TARGET_DIR:-target}/audit/release/rig-audit"
    # First what must fail, so a check that can no longer fail is seen: a lockfile with
    # a vulnerable h2 (also as a path package, as the workspace's [patch] makes it) in
    # two versions, and a GPL licence.
    licences=$(mktemp)
    trap 'rm -f "$licences"' EXIT
    printf 'copyleft\t1.0.0\tGPL-3.0-only\n' > "$licences"
    if bad=$("$audit" --db "$SNAP" --policy tests/audit/audit.toml --manifest Cargo.toml \
        --licenses "$licences" tests/audit/known-bad.lock); then
        echo "advisories: tests/audit/known-bad.lock passed: the check cannot fail" >&2
        exit 1
    fi
    for want in "FAILED RUSTSEC-2024-0332 h2 0.3.20" "FAILED h2: 2 versions" "FAILED copyleft 1.0.0"; do
        grep -qF "$want" <<< "$bad" || {
            printf 'advisories: known-bad.lock did not fail with "%s":\n%s\n' "$want" "$bad" >&2
            exit 1
        }
    done
    # Each package from outside the repository with its licence, from cargo metadata
    # of every manifest (the patched copies in third_party/ are others' crates too).
    for lock in "${LOCKS[@]}"; do
        cargo metadata --format-version 1 --locked --filter-platform x86_64-unknown-linux-gnu \
            --manifest-path "$(dirname "$lock")/Cargo.toml"
    done | python3 -c '
import json, sys
seen = set()
for line in sys.stdin:
    for p in json.loads(line)["packages"]:
        key = (p["name"], p["version"])
        ours = p["source"] is None and "/third_party/" not in p["manifest_path"]
        if ours or key in seen:
            continue
        seen.add(key)
        print(p["name"], p["version"], p.get("license") or "", sep="\t")
' > "$licences"
    "$audit" --db "$SNAP" --policy tests/audit/audit.toml --manifest Cargo.toml \
        --licenses "$licences" "${LOCKS[@]}"
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
