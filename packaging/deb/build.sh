#!/bin/bash
# Builds rig's .deb, rig-gpu, from the workspace, offline: dpkg-deb, no debian/ tree, no
# network; and beside it the transitional `rig` that moves an install of the old name over.
#
#   packaging/deb/build.sh [--bins DIR] [--out DIR] [--fast]
#
# --bins DIR  take rigd, rigctl and rig-device-plugin from DIR (default: build them,
#             release, into target/release). The disposable machine's test passes the
#             release build it made.
# --out DIR   where rig-gpu_VERSION_ARCH.deb and rig_VERSION_all.deb go (default target/deb).
# --fast      gzip -1 instead of xz (for test boots; the same files).
#
# Ships: /usr/sbin/rigd, /usr/bin/rigctl, /usr/bin/rig-device-plugin and its DaemonSet
# manifest (/usr/share/rig-gpu/k8s/, from packaging/k8s; docs/k8s.md) (the probes are test
# tools, not shipped), the units, sysusers, tmpfiles and
# modules-load files from systemd/, /etc/rig/rigd.toml (a conffile: the defaults,
# commented), man pages and bash/zsh/fish completions generated from the clap
# definitions (`rigctl generate-docs`, daemon/examples/rigd-docs.rs; help2man for
# rig-device-plugin), the maintainer
# scripts beside this file. Version from Cargo.toml's [workspace.package].
#
# The name: Debian has its own `rig` (a random identity generator, 1.11-1.1, with
# /usr/bin/rig, /usr/share/rig/ and /usr/share/doc/rig/), so this package is rig-gpu and
# ships nothing under those paths. Until 0.2.0 it was named rig: rig_VERSION_all.deb
# (control-rig.in) is the empty transitional package of that name which, installed with
# rig-gpu in one apt call, takes the old package away whole (docs/systemd.md,
# "Upgrading from the package named rig"). Prints rig-gpu's path, then the
# transitional's, on stdout.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BINS= OUT=$REPO/target/deb FAST=0
while [ $# -gt 0 ]; do
  case $1 in
    --bins) BINS=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --fast) FAST=1; shift;;
    -h|--help) sed -n '2,18p' "$0"; exit 0;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2;;
  esac
done
cd "$REPO"
say() { echo "deb: $*" >&2; }

# Every tool it runs, checked first, each named with its Debian package.
need() { command -v "$1" > /dev/null || { echo "build.sh: needs $1 (apt install $2)" >&2; exit 1; }; }
need dpkg dpkg
need dpkg-deb dpkg
need dpkg-shlibdeps dpkg-dev
need file file
need help2man help2man

VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$VERSION" ] || { echo "build.sh: no version in Cargo.toml" >&2; exit 1; }
ARCH=$(dpkg --print-architecture)

# Binaries by name, the workspace selected: whichever crate builds them, and the same
# features (so the same compilation) as the test command's release build.
SHIPPED=(rigd rigctl rig-device-plugin)
if [ -z "$BINS" ]; then
  cargo build --release --locked --workspace "${SHIPPED[@]/#/--bin=}" >&2
  BINS=${CARGO_TARGET_DIR:-$REPO/target}/release
fi
for b in "${SHIPPED[@]}"; do
  [ -x "$BINS/$b" ] || { echo "build.sh: no $b in $BINS" >&2; exit 1; }
done

# The pages and completions, from the clap definitions. rigctl's come from the rigctl
# being shipped; rigd's from an example that compiles rigd's main.rs for its Args.
GEN=$(mktemp -d)
R=$(mktemp -d)
T=$(mktemp -d)
trap 'rm -rf "$GEN" "$R" "$T"' EXIT
"$BINS/rigctl" generate-docs "$GEN"
cargo build -q --locked --workspace --example rigd-docs >&2
"${CARGO_TARGET_DIR:-$REPO/target}/debug/examples/rigd-docs" "$GEN" >&2
help2man --no-info --section 1 --version-string "rig-device-plugin $VERSION" \
  --name "the kubelet's device plugin for the devices rigd holds" \
  --output "$GEN/man/rig-device-plugin.1" "$BINS/rig-device-plugin"

umask 022
chmod 0755 "$R"
inst() { install -D -m "$1" "$2" "$R/$3"; }
inst 0755 "$BINS/rigd" usr/sbin/rigd
inst 0755 "$BINS/rigctl" usr/bin/rigctl
inst 0755 "$BINS/rig-device-plugin" usr/bin/rig-device-plugin
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$R/usr/sbin/rigd" "$R/usr/bin/rigctl" \
  "$R/usr/bin/rig-device-plugin"
inst 0644 packaging/k8s/rig-device-plugin.yaml usr/share/rig-gpu/k8s/rig-device-plugin.yaml
# Bookworm's systemd and lintian expect units under /lib (merged /usr makes it one place).
inst 0644 systemd/rigd.service lib/systemd/system/rigd.service
inst 0644 systemd/rigd.socket lib/systemd/system/rigd.socket
inst 0644 systemd/rig.sysusers.conf usr/lib/sysusers.d/rig.conf
inst 0644 systemd/rig.tmpfiles.conf usr/lib/tmpfiles.d/rig.conf
inst 0644 systemd/rig.modules-load.conf usr/lib/modules-load.d/rig.conf
inst 0644 systemd/rigd.toml etc/rig/rigd.toml
for m in "$GEN"/man/*.1; do inst 0644 "$m" "usr/share/man/man1/$(basename "$m")"; done
inst 0644 "$GEN/man/rigd.8" usr/share/man/man8/rigd.8
gzip -9n "$R"/usr/share/man/man*/*
inst 0644 "$GEN/completions/rigctl.bash" usr/share/bash-completion/completions/rigctl
inst 0644 "$GEN/completions/_rigctl" usr/share/zsh/vendor-completions/_rigctl
inst 0644 "$GEN/completions/rigctl.fish" usr/share/fish/vendor_completions.d/rigctl.fish
inst 0644 "$HERE/copyright" usr/share/doc/rig-gpu/copyright
# Not active: the drop-in a metrics TCP port needs (docs/systemd.md).
inst 0644 systemd/rigd-metrics-tcp.conf usr/share/doc/rig-gpu/examples/rigd.service.d/metrics-tcp.conf
DATE=$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2> /dev/null || date +%s)}")
mkdir -p "$R/usr/share/doc/rig-gpu"
cat > "$R/usr/share/doc/rig-gpu/changelog" <<CL
rig-gpu ($VERSION) unstable; urgency=medium

  * Built from the rig workspace (packaging/deb/build.sh); the project's
    history is its git log, its user-visible changes CHANGELOG.md.
  * 0.2.0: the package is rig-gpu (it was rig, the name of Debian's random
    identity generator); install rig_0.2.0_all.deb with it to move over.

 -- rig maintainers <rig@example.invalid>  $DATE
CL
gzip -9n "$R/usr/share/doc/rig-gpu/changelog"

mkdir -p "$R/DEBIAN"
for s in postinst prerm postrm; do install -m 0755 "$HERE/$s" "$R/DEBIAN/$s"; done
(cd "$R" && find etc -type f | sed 's|^|/|' | sort) > "$R/DEBIAN/conffiles"
SIZE=$(du -sk --exclude=DEBIAN "$R" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@SIZE@/$SIZE/" \
  "$HERE/control.in" > "$R/DEBIAN/control"
# rigd and rigctl built static (the guest build) need no libc; dynamic ones do.
if file -L "$R/usr/sbin/rigd" "$R/usr/bin/rigctl" "$R/usr/bin/rig-device-plugin" | grep -q 'dynamically linked'; then
  S=$(mktemp -d); mkdir -p "$S/debian"
  printf 'Source: rig-gpu\n\nPackage: rig-gpu\nArchitecture: any\n' > "$S/debian/control"
  DEPS=$(cd "$S" && dpkg-shlibdeps -O "$R/usr/sbin/rigd" "$R/usr/bin/rigctl" "$R/usr/bin/rig-device-plugin" 2> "$S/err" |
    sed -n 's/^shlibs:Depends=//p') || { echo "build.sh: dpkg-shlibdeps failed:" >&2; cat "$S/err" >&2; exit 1; }
  rm -rf "$S"
  sed -i "s/^Depends: /Depends: $DEPS, /" "$R/DEBIAN/control"
else
  # glibc with crt-static makes static-pie executables: ET_DYN without DT_NEEDED, which
  # lintian takes for libraries. They are programs, and need no libc package.
  mkdir -p "$R/usr/share/lintian/overrides"
  printf 'rig-gpu: shared-library-lacks-prerequisites [%s]\n' usr/bin/rigctl usr/bin/rig-device-plugin usr/sbin/rigd \
    > "$R/usr/share/lintian/overrides/rig-gpu"
  chmod 0644 "$R/usr/share/lintian/overrides/rig-gpu"
fi
(cd "$R" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort | xargs md5sum) > "$R/DEBIAN/md5sums"
chmod 0644 "$R/DEBIAN/md5sums" "$R/DEBIAN/conffiles" "$R/DEBIAN/control"

mkdir -p "$OUT"
DEB=$OUT/rig-gpu_${VERSION}_${ARCH}.deb
Z=(-Zxz); [ "$FAST" = 1 ] && Z=(-Zgzip -z1)
dpkg-deb --root-owner-group "${Z[@]}" --build "$R" "$DEB" > /dev/null
say "$(basename "$DEB"): $(du -h "$DEB" | cut -f1), $(dpkg-deb -c "$DEB" | grep -vc '/$') files"

# The transitional rig: no files (not even /usr/share/doc/rig, which is Debian's rig's),
# Depends on rig-gpu, which Replaces and Breaks rig << 0.2~, so apt unpacks it over the
# old rig first. Left with no file, dpkg drops it when rig-gpu is unpacked ("disappears",
# postrm disappear): nothing named rig stays installed for `apt upgrade` to swap for
# Debian's rig, nor as config files whose purge would run the old postrm (which removes
# /var/lib/rig and /run/rig). Lintian's empty-package and no-copyright tags are the
# point of it; it is not linted.
mkdir -p "$T/DEBIAN"
sed -e "s/@VERSION@/$VERSION/" "$HERE/control-rig.in" > "$T/DEBIAN/control"
chmod 0755 "$T" "$T/DEBIAN"; chmod 0644 "$T/DEBIAN/control"
TRANS=$OUT/rig_${VERSION}_all.deb
dpkg-deb --root-owner-group "${Z[@]}" --build "$T" "$TRANS" > /dev/null
say "$(basename "$TRANS"): transitional, no files"
echo "$DEB"
echo "$TRANS"
