#!/bin/bash
# Builds what runs inside the guest, statically (no musl target can be downloaded here,
# so it is glibc with crt-static, which gives a static-pie): rigd, rigctl and the
# guard, into $GUEST_TARGET_DIR/x86_64-unknown-linux-gnu/guest/. A separate target folder
# keeps this off the lock of the host build. The guest's rigd is a test build: feature
# crash-points lets the take-crash scenario kill it after a chosen journal record.
# Then rig's .deb from them, for the full flavour (boot.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
CARGO_TARGET_DIR=$GUEST_TARGET_DIR RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --profile guest --target x86_64-unknown-linux-gnu \
  -p rigd -p rigctl -p rig-tests --bins --features rigd/crash-points
for b in rigd rigctl rig-vm-guard rig-dma-probe rig-nvme-probe rig-queue-client rig-lease-client rig-kill-clients; do
  [ -x "$GUEST_BIN_DIR/$b" ] || die "the guest build made no $b"
done
# The .deb the full flavour installs (boot.sh), from these binaries: gzip, not xz, for
# speed; otherwise what packaging/deb/build.sh ships.
"$REPO_DIR/packaging/deb/build.sh" --bins "$GUEST_BIN_DIR" --out "$GUEST_TARGET_DIR/deb" --fast > /dev/null
say "guest binaries: $(cd "$GUEST_BIN_DIR" && ls -1 rigd rigctl rig-vm-guard rig-dma-probe rig-nvme-probe rig-queue-client rig-lease-client rig-kill-clients | tr '\n' ' ')"
