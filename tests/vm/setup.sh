#!/bin/bash
# Installs what the disposable machine needs and unpacks its guest kernel. Idempotent.
#
# Prefers bookworm-backports (QEMU 10, Linux 6.12: docs/hardware/qemu-tier.md is about 6.12)
# and falls back to bookworm (QEMU 7.2, Linux 6.1), saying so. Backports is reached through
# a private apt source list under the cache: /etc/apt is never changed, and packages already
# installed are not upgraded (--no-upgrade). The kernel .deb is
# unpacked under the cache: the host's /boot is never touched.
#
# RIG_VM_SUITE=bookworm skips backports (to check the fallback); packages already installed
# from backports stay, since nothing is ever downgraded.
#
# Writes $RIG_VM_CACHE/tools.env (QEMU, KVER, KDIR, VMLINUZ, ...), read by the other scripts.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root setup.sh

PKGS=(qemu-system-x86 busybox-static debootstrap cpio kmod pciutils libc6-dev xz-utils)
APT_DIR=$RIG_VM_CACHE/apt
KROOT=$RIG_VM_CACHE/kernel
mkdir -p "$APT_DIR" "$KROOT"

installed() { dpkg-query -W -f='${Status}\n' "$@" 2>/dev/null | grep -vc '^install ok installed$' | grep -qx 0; }

# Fast path: everything already here from an earlier run.
if [ -f "$TOOLS_ENV" ] && installed "${PKGS[@]}"; then
  . "$TOOLS_ENV"
  if [ -f "$VMLINUZ" ] && [ -x "$QEMU" ]; then
    say "setup: cached (QEMU $QEMU_VERSION, Linux $KVER from $KERNEL_SUITE)"
    exit 0
  fi
fi

# The Debian mirror this machine already uses; backports lives beside bookworm on it.
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=$(awk '$1=="deb" && $0 ~ /bookworm/ {for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
{
  [ -f /etc/apt/sources.list ] && cat /etc/apt/sources.list
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR bookworm-backports main"
} > "$APT_DIR/sources.list"
APT=(apt-get -q -o "Dir::Etc::sourcelist=$APT_DIR/sources.list" -o DPkg::Lock::Timeout=600
     -o Acquire::Retries=3)
export DEBIAN_FRONTEND=noninteractive

t=$(date +%s.%N)
"${APT[@]}" update -qq
say "apt update: $(since "$t") s"

SUITE=${RIG_VM_SUITE:-bookworm-backports}
t=$(date +%s.%N)
if [ "$SUITE" = bookworm-backports ] &&
  "${APT[@]}" install -y -qq --no-install-recommends --no-upgrade -t bookworm-backports "${PKGS[@]}" >/dev/null; then
  :
else
  [ "$SUITE" = bookworm-backports ] && say "warning: bookworm-backports install failed; falling back to bookworm (QEMU 7.2)"
  "${APT[@]}" install -y -qq --no-install-recommends --no-upgrade "${PKGS[@]}" >/dev/null
fi
QEMU=$(command -v qemu-system-x86_64)
QEMU_VERSION=$("$QEMU" --version | awk 'NR==1{print $4}')
# Where the installed QEMU came from, by its Debian version (backports ones say ~bpo).
case $(dpkg-query -W -f='${Version}' qemu-system-x86) in *bpo*) QEMU_SUITE=bookworm-backports;; *) QEMU_SUITE=bookworm;; esac
say "apt install: $(since "$t") s (QEMU $QEMU_VERSION from $QEMU_SUITE)"

# Guest kernel: the image package that linux-image-amd64 names in the chosen suite.
kernel_pkg() {
  apt-cache -o "Dir::Etc::sourcelist=$APT_DIR/sources.list" show "linux-image-amd64/$1" 2>/dev/null |
    awk -F'[ ,(]+' '/^Depends:/ && !k {for(i=2;i<=NF;i++) if ($i ~ /^linux-image-[0-9]/) {k = $i; break}} END {print k}'
}
t=$(date +%s.%N)
KERNEL_SUITE=$SUITE
KPKG=$(kernel_pkg "$SUITE")
if [ -z "$KPKG" ]; then
  [ "$SUITE" = bookworm-backports ] && say "warning: no kernel in bookworm-backports; falling back to bookworm's 6.1"
  KERNEL_SUITE=bookworm
  KPKG=$(kernel_pkg bookworm)
fi
[ -n "$KPKG" ] || die "cannot find a linux-image package"
KDIR=$KROOT/$KPKG
if [ ! -d "$KDIR/lib/modules" ]; then
  rm -rf "$KDIR" "$KROOT/deb"; mkdir -p "$KROOT/deb"
  (cd "$KROOT/deb" && "${APT[@]}" download -qq "$KPKG/$KERNEL_SUITE" 2>/dev/null ||
    "${APT[@]}" download -qq "$KPKG")
  dpkg-deb -x "$KROOT"/deb/"${KPKG}"_*.deb "$KDIR.tmp"
  mv "$KDIR.tmp" "$KDIR"
  rm -rf "$KROOT/deb"
fi
KVER=$(ls "$KDIR/lib/modules")
[ -f "$KDIR/lib/modules/$KVER/modules.dep" ] || depmod -b "$KDIR" "$KVER"
VMLINUZ=$KDIR/boot/vmlinuz-$KVER
say "kernel $KVER ($KERNEL_SUITE): $(since "$t") s"

cat > "$TOOLS_ENV.tmp" <<ENV
QEMU=$QEMU
QEMU_VERSION=$QEMU_VERSION
QEMU_SUITE=$QEMU_SUITE
KERNEL_SUITE=$KERNEL_SUITE
KVER=$KVER
KDIR=$KDIR
VMLINUZ=$VMLINUZ
MIRROR=$MIRROR
ENV
mv "$TOOLS_ENV.tmp" "$TOOLS_ENV"
say "setup: done (QEMU $QEMU_VERSION, Linux $KVER)"
