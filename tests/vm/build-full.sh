#!/bin/bash
# Builds the full flavour's root image: a debootstrap'd Debian bookworm with systemd, udev,
# kmod and pciutils, as a 1 GiB ext4 file (sparse). Also the rebind tools rig is
# benchmarked against (scenario bench-rebind): driverctl, and dpdk-devbind.py alone, taken
# out of Debian's dpdk .deb (the package would bring all of python3 and a boot-time
# dpdk.service), with python3-minimal and iproute2 (it runs `ip -o route`) for it. And
# Debian's container engine for scenario podman-cdi (docs/k8s.md): podman 4.3 with crun,
# conmon, and what debootstrap cannot pick for it (a network stack, netavark, which
# containers-common needs though the scenario runs --network=none; containers-image);
# no Recommends (buildah, slirp4netns, fuse-overlayfs, catatonit). It stays generic:
# no kernel modules
# (the initramfs brings them), no rig files (boot.sh's payload installs them into the
# snapshot at each boot). Cached as $RIG_VM_CACHE/full/root-<hash>.ext4, keyed on this
# script, with root.ext4 pointing at it; rebuilt when missing or when this recipe changes.
# Boots open it with snapshot=on, so no test ever writes into it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root build-full.sh
load_tools

PACKAGES=systemd-sysv,udev,kmod,pciutils,driverctl,python3-minimal,iproute2,podman,crun,conmon,netavark,golang-github-containers-common,golang-github-containers-image
HASH=$(recipe_hash "$0" "$PACKAGES")
OUT=$RIG_VM_CACHE/full
IMG=$OUT/root-$HASH.ext4
mkdir -p "$OUT"
if [ -f "$IMG" ]; then
  ln -sfn "$(basename "$IMG")" "$OUT/root.ext4"
  say "full root: cached ($(basename "$IMG"))"
  exit 0
fi
t=$(date +%s.%N)
R=$(mktemp -d "$OUT/rootfs.XXXXXX")
trap 'rm -rf "$R" "$IMG.tmp"' EXIT
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$R" "$MIRROR" > "$OUT/debootstrap.log" 2>&1 ||
  { tail -n 20 "$OUT/debootstrap.log" >&2; die "debootstrap failed (log: $OUT/debootstrap.log)"; }
say "full root: debootstrap $(since "$t") s"

# dpdk-devbind.py from Debian's dpdk .deb, and the version it came from.
D=$(mktemp -d "$R/tmp/dpdk.XXXXXX")
(cd "$D" && apt-get -q -o APT::Sandbox::User=root download dpdk > /dev/null) || die "apt-get download dpdk failed"
dpkg-deb -x "$D"/dpdk_*.deb "$D/x"
install -m 0755 "$D/x/usr/bin/dpdk-devbind.py" "$R/usr/local/bin/dpdk-devbind.py"
dpkg-deb -f "$D"/dpdk_*.deb Version > "$R/usr/local/share/dpdk-devbind.version"
rm -rf "$D"

echo rig-guest > "$R/etc/hostname"
# The initramfs mounts the root read-write; nothing else to mount.
: > "$R/etc/fstab"
chroot "$R" passwd -q -d root
ln -sf /lib/systemd/system/multi-user.target "$R/etc/systemd/system/default.target"
# Quiet, quick boots: no logins on the console the runner writes to, no timers.
for u in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
         e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service; do
  ln -sf /dev/null "$R/etc/systemd/system/$u"
done
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/*

mkfs.ext4 -q -F -L rig-root -d "$R" "$IMG.tmp" 1G > /dev/null
mv "$IMG.tmp" "$IMG"
find "$OUT" -maxdepth 1 -name 'root-*.ext4' ! -name "$(basename "$IMG")" -delete
ln -sfn "$(basename "$IMG")" "$OUT/root.ext4"
say "full root: built in $(since "$t") s ($(du -h "$IMG" | cut -f1) used of 1 GiB)"
