#!/bin/bash
# The VM tier as the project's test command runs it, from a fresh Debian 12 machine:
#   setup (apt, kernel) → guest binaries (static) and rig's .deb → lintian → images (fast base, full root) →
#   host rigd/rigctl → cargo test -p rig-tests with RIG_VM=1 (each test group boots once).
# Prints the time of each part at the end. Needs root (apt, debootstrap).
# Env: RIG_VM_CACHE (default /var/cache/rig/vm), GUEST_TARGET_DIR (default target-guest),
# RIG_VM_TARGET_DIR (host build of rig-tests; default: cargo's, so the test command
# reuses the workspace build).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root run-tier.sh
cd "$REPO_DIR"

TIMES=()
# Each part's wall time and CPU time (user+sys of all it ran, QEMU included).
part() {
  local name=$1 t c rc=0
  shift
  t=$(date +%s.%N)
  cpu_now; c=$VM_CPU
  say "== $name"
  "$@" || rc=$?
  cpu_now
  TIMES+=("$(printf '%-14s %7.1f s wall %7.1f s cpu' "$name" "$(since "$t")" "$(awk -v a="$c" -v b="$VM_CPU" 'BEGIN{print b-a}')")$([ $rc = 0 ] || echo "  FAILED (exit $rc)")")
  return $rc
}
summary() {
  say "== VM tier timings"
  printf '  %s\n' "${TIMES[@]}" >&2
  cpu_now
  printf '  %-14s %7.1f s wall %7.1f s cpu\n' total "$(since "$T0")" "$VM_CPU" >&2
}
trap summary EXIT

part setup "$VM_DIR/setup.sh"
part guest-build "$VM_DIR/build-guest.sh"
# lintian on the .deb build-guest.sh made (the full flavour installs the same package).
part deb-lint "$REPO_DIR/scripts/deb-lint.sh" "$(ls -t "$GUEST_TARGET_DIR"/deb/rig_*.deb | head -n1)"
part fast-image "$VM_DIR/build-fast.sh"
part full-image "$VM_DIR/build-full.sh"
[ -n "${RIG_VM_TARGET_DIR:-}" ] && export CARGO_TARGET_DIR=$RIG_VM_TARGET_DIR
# tests/parity_host.rs (in rig-tests too) runs the host's rigd and rigctl: tell it where.
part host-build cargo build -p rigd -p rig-client
export RIGD_BIN=${CARGO_TARGET_DIR:-$REPO_DIR/target}/debug/rigd
export RIGCTL_BIN=${CARGO_TARGET_DIR:-$REPO_DIR/target}/debug/rigctl
part vm-tests env RIG_VM=1 cargo test -p rig-tests --no-fail-fast
