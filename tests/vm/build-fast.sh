#!/bin/bash
# Builds the base initramfs shared by both flavours: busybox, the kernel modules the tier
# needs (decompressed, with their dependencies, depmod'ed), and lspci with its libraries.
# The per-boot payload (/init, the runner, scenarios, rigd, rigctl) is a second cpio that
# boot.sh appends, so this base is rebuilt only when its recipe changes:
#   $RIG_VM_CACHE/fast/base-<hash>.cpio.gz, with base.cpio.gz pointing at the current one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
load_tools

# Modules loaded explicitly; modprobe --show-depends adds what they need. virtio_pci is
# built in on 6.12 but a module on 6.1 (the fallback kernel).
# ahci and i2c-i801 bind the ICH9 functions that share one IOMMU group (take-cycle).
MODULES=(vfio-pci vfio_iommu_type1 bochs virtio-gpu virtio_pci virtio_blk nvme ext4 crc32c_generic ahci i2c-i801)
LSPCI=$(command -v lspci) || die "lspci missing: run setup.sh"
BUSYBOX=$(command -v busybox) || die "busybox missing: run setup.sh"
# rig's programs are the release build, linked against the host's glibc: besides libc
# (lspci's), they need libgcc_s (unwinding) and libm. The host is Debian 12, as the
# guest is, so these are the guest's own.
RUST_LIBS=()
for l in libgcc_s.so.1 libm.so.6; do
  # awk reads to the end: an early `exit` let ldconfig die of SIGPIPE on its long
  # listing, and pipefail then ended this script without a word (boot.sh: exit 5).
  p=$(/sbin/ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ && !p {p = $NF} END {print p}')
  [ -n "$p" ] || die "no $l on this machine"
  RUST_LIBS+=("$p")
done

HASH=$(recipe_hash "$0" "$KVER" "${MODULES[*]}" "$BUSYBOX" "$(sha256sum "$BUSYBOX" "$LSPCI" "${RUST_LIBS[@]}")")
OUT=$RIG_VM_CACHE/fast
BASE=$OUT/base-$HASH.cpio.gz
if [ -f "$BASE" ]; then
  ln -sfn "$(basename "$BASE")" "$OUT/base.cpio.gz"
  say "fast base: cached ($(basename "$BASE"))"
  exit 0
fi
t=$(date +%s.%N)
mkdir -p "$OUT"
R=$(mktemp -d "$OUT/root.XXXXXX")
trap 'rm -rf "$R"' EXIT
mkdir -p "$R"/{bin,sbin,dev,proc,sys,tmp,run,etc,newroot,usr/bin,usr/share/misc,lib64,lib/x86_64-linux-gnu,lib/modules/"$KVER"}

cp "$BUSYBOX" "$R/bin/busybox"
# Trap: busybox --list names busybox itself; a self-symlink would replace the binary.
for a in $("$R/bin/busybox" --list); do [ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"; done

for m in "${MODULES[@]}"; do
  modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
done | sort -u | while read -r f; do
  rel=${f#"$KDIR"}; dst=$R${rel%.xz}
  mkdir -p "$(dirname "$dst")"
  # Decompressed, so busybox modprobe needs no xz support.
  case $f in *.xz) xz -dc "$f" > "$dst";; *) cp "$f" "$dst";; esac
done
cp "$KDIR/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KVER/"
sed -i 's/\.ko\.xz$/.ko/' "$R/lib/modules/$KVER/modules.order"
depmod -b "$R" "$KVER"

# lspci for the parity scenario, with the shared libraries it links, and rig's.
cp "$LSPCI" "$R/usr/bin/lspci"
for lib in $(ldd "$LSPCI" | awk '/=> \//{print $3} /^\t\/lib64/{print $1}') "${RUST_LIBS[@]}"; do
  case $lib in /lib64/*) cp -L "$lib" "$R/lib64/";; *) cp -L "$lib" "$R/lib/x86_64-linux-gnu/";; esac
done
cp /usr/share/misc/pci.ids "$R/usr/share/misc/pci.ids"

printf 'root:x:0:0:root:/root:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\n' > "$R/etc/group"

(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$BASE.tmp"
mv "$BASE.tmp" "$BASE"
find "$OUT" -maxdepth 1 -name 'base-*.cpio.gz' ! -name "$(basename "$BASE")" -delete
ln -sfn "$(basename "$BASE")" "$OUT/base.cpio.gz"
say "fast base: built in $(since "$t") s ($(du -h "$BASE" | cut -f1))"
