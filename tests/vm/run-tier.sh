#!/bin/bash
# The VM tier as the project's test command runs it, from a fresh Debian 12 machine:
#   setup (apt, kernel) → the release build, rig's .deb and the guest's programs
#   (build-guest.sh) → lintian on the .deb → images (fast base, full root) → host
#   rigd/rigctl → the vm_* tests of rig-tests with RIG_VM=1 (each test group boots once).
# Prints the time of each part at the end. Needs root (apt, debootstrap).
# Env: RIG_VM_CACHE (default /var/cache/rig/vm), CARGO_TARGET_DIR (the workspace's
# target folder: the release and host builds, the guest's programs, the .deb).
# Every cargo command selects --workspace: it then resolves the features the test
# command's own build did, and reuses it instead of compiling the tree again.
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
# lintian on the release .deb build-guest.sh made: the package users install, and the
# one the full flavour installs.
part deb-lint "$REPO_DIR/scripts/deb-lint.sh" "$(ls -t "$GUEST_DEB_DIR"/rig-gpu_*.deb | head -n1)"
part fast-image "$VM_DIR/build-fast.sh"
part full-image "$VM_DIR/build-full.sh"
part host-build cargo test --workspace --locked --no-run --test 'vm_*'

# The vm_* test binaries, longest first, on RIG_VM_SLOTS lanes at once (default: one
# per CPU; boot.sh lets that many machines boot together):
# each lane takes the next binary when its last one ends. Each binary's output is
# printed whole when it ends. docs/vm.md, "Two machines at once".
vm_tests() {
  local list logs rc=0 b
  list=$(cargo test --workspace --locked --no-run --test 'vm_*' --message-format=json 2> /dev/null |
    sed -n 's/.*"executable":"\([^"]*\/vm_[a-z_]*-[0-9a-f]*\)".*/\1/p')
  [ -n "$list" ] || { say "no vm_* test binaries"; return 1; }
  logs=$(mktemp -d)
  # Longest first (their last durations here; a new binary goes last).
  list=$(for b in $list; do
    n=$(basename "$b"); n=${n%-*}
    case $n in vm_full) w=9;; vm_take) w=8;; vm_device_lease) w=7;; vm_selftest) w=6;;
      vm_dma) w=5;; vm_profiles) w=4;; vm_sriov) w=3;; vm_lend) w=2;; *) w=1;; esac
    echo "$w $b"; done | sort -rn | cut -d' ' -f2)
  # shellcheck disable=SC2016
  echo "$list" | RIG_VM=1 LOGS=$logs xargs -P "$RIG_VM_SLOTS" -I{} sh -c '
    n=$(basename "$1"); n=${n%-*}
    cd tests && "$1" > "$LOGS/$n.log" 2>&1; rc=$?
    { echo "---- $n (exit $rc)"; cat "$LOGS/$n.log"; } >&2
    [ $rc = 0 ] || touch "$LOGS/$n.failed"' _ {} || rc=1
  if ls "$logs"/*.failed > /dev/null 2>&1; then
    say "vm tests failed: $(cd "$logs" && ls *.failed | sed 's/\.failed$//' | tr '\n' ' ')"
    rc=1
  fi
  rm -rf "$logs"
  return $rc
}
export RIG_VM_SLOTS=${RIG_VM_SLOTS:-$(nproc)}
say "vm tests: $RIG_VM_SLOTS at once"
part vm-tests vm_tests
