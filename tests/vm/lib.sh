# Shared by the tests/vm scripts: cache layout, timing and logging helpers.
# Sourced, never run. Every path the tier writes lives under $RIG_VM_CACHE.

RIG_VM_CACHE=${RIG_VM_CACHE:-/var/cache/rig/vm}
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$VM_DIR/../.." && pwd)
export RIG_VM_CACHE

# The guest's programs (rigd, rigctl, this crate's helpers) and rig's .deb, from the
# workspace's release build (build-guest.sh).
RIG_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_DIR/target}
GUEST_BIN_DIR=${GUEST_BIN_DIR:-$RIG_TARGET_DIR/guest}
GUEST_DEB_DIR=${GUEST_DEB_DIR:-$RIG_TARGET_DIR/deb}
GUEST_BINS=(rigd rigctl rig-vm-guard rig-dma-probe rig-nvme-probe rig-queue-client rig-lease-client rig-kill-clients)

# The kernel and QEMU that setup.sh chose; written by setup.sh.
TOOLS_ENV=$RIG_VM_CACHE/tools.env

# The clock of the outermost script; scripts it runs (and boot.sh under cargo test) share it.
T0=${T0:-$(date +%s.%N)}
export T0
# Prints "[vm   12.3s] message" to stderr, the time counted from T0.
say() { printf '[vm %6.1fs] %s\n' "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Seconds (one decimal) since the epoch timestamp $1.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# Sets VM_CPU to the CPU seconds (user+sys, one decimal) of this shell's finished
# children so far: cutime and cstime of /proc/PID/stat. Not in $(...), whose subshell
# has children of its own.
VM_CLK_TCK=$(getconf CLK_TCK)
cpu_now() {
  local f
  read -r -a f < "/proc/$BASHPID/stat"
  VM_CPU=$(awk -v t=$((f[15] + f[16])) -v hz="$VM_CLK_TCK" 'BEGIN{printf "%.1f", t/hz}')
}

need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root (apt, debootstrap, mknod)"; }

load_tools() {
  [ -f "$TOOLS_ENV" ] || die "$TOOLS_ENV is missing: run tests/vm/setup.sh first"
  # shellcheck source=/dev/null
  . "$TOOLS_ENV"
}

# A short hash of files and strings: the cache key of a recipe.
recipe_hash() {
  { for a in "$@"; do if [ -f "$a" ]; then cat "$a"; else printf '%s\n' "$a"; fi; done; } |
    sha256sum | cut -c1-16
}
