#!/bin/bash
# Builds what runs inside the guest from the workspace's release build, the one rig's
# .deb is made of: one compilation serves the package users install, the guest's
# programs, and `scripts/test` and `scripts/demo` alike (both use the workspace's target
# folder, so whichever runs second finds it built).
#   1. the binaries the .deb ships and the guest runs, release (cargo's default target:
#      dynamic, glibc; the fast flavour's initramfs carries the libraries,
#      build-fast.sh); not the H200's probes (tests/h200 builds those static), whose
#      optimised compile is a minute of a cold CI machine's two cores; and the
#      workspace's libraries, among them the Python extension module that
#      client/python/pack-wheel.py makes the `rig-client` wheel of;
#   2. rig's .deb from them (packaging/deb/build.sh, as shipped), into $GUEST_DEB_DIR:
#      the full flavour installs it, scripts/deb-lint.sh checks it;
#   3. rigd once more with feature crash-points (only rigd recompiles: the take-crash
#      scenario kills it after a chosen journal record; the shipped rigd has no such
#      code), copied with the other programs into $GUEST_BIN_DIR; then target/release/rigd
#      is put back to the shipped one (cargo keeps both, so that costs nothing).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
# Plain rustc: scripts/test lints inside its debug build (clippy-driver as the workspace's
# rustc), not here.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
RELEASE=$RIG_TARGET_DIR/release
# --workspace with --bin: every package selected, so the same features as every other
# build here; only the named binaries linked.
BIN_ARGS=()
for b in "${GUEST_BINS[@]}" rig-device-plugin; do BIN_ARGS+=(--bin "$b"); done
cargo build --release --locked --workspace --lib "${BIN_ARGS[@]}"
# The .deb again only when what it is made of changed (the binaries, packaging/, systemd/).
deb=$(ls -t "$GUEST_DEB_DIR"/rig-gpu_*.deb 2> /dev/null | head -n1 || true)
if [ -z "$deb" ] || [ -n "$(find "$RELEASE/rigd" "$RELEASE/rigctl" "$RELEASE/rig-device-plugin" \
  packaging systemd -newer "$deb" 2> /dev/null | head -n1)" ]; then
  "$REPO_DIR/packaging/deb/build.sh" --bins "$RELEASE" --out "$GUEST_DEB_DIR" > /dev/null
else
  say "deb: $deb is up to date"
fi
cargo build --release --locked --workspace --bin rigd --features rigd/crash-points
mkdir -p "$GUEST_BIN_DIR"
for b in "${GUEST_BINS[@]}"; do
  [ -x "$RELEASE/$b" ] || die "the release build made no $b"
  # Stripped: every boot's initramfs carries them, and TCG unpacks it slowly.
  install -s -m 0755 "$RELEASE/$b" "$GUEST_BIN_DIR/$b"
done
cargo build --release --locked --workspace --bin rigd
say "guest binaries: ${GUEST_BINS[*]} (rigd with crash-points); .deb: $(ls -t "$GUEST_DEB_DIR"/rig-gpu_*.deb | head -n1)"
