#!/usr/bin/env bash
# Fetches Debian's NVIDIA and AMD GPU firmware packages and unpacks them under DEST,
# so that DEST/lib/firmware/{nvidia,amdgpu}/... exists for rig-firmware's real-file tests.
#
# Usage: fetch-debian-firmware.sh DEST
#
# - Idempotent and cached: when DEST already holds every package unpacked (a stamp file
#   names them with their versions), it does nothing.
# - The system's apt configuration is left untouched: the sources list, the package lists
#   and apt's cache live in a private directory under DEST, passed with -o options.
# - Nothing is installed; packages are unpacked with dpkg-deb -x.
# - Needs: apt-get, dpkg-deb, and network access to a Debian mirror.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
DEST=$1
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)

MIRROR=${RIG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# package/suite: the GSP firmware of driver 535 comes from bookworm; the rest from
# bookworm-backports (linux-firmware 20250410).
PACKAGES=(
    firmware-nvidia-gsp/bookworm
    firmware-nvidia-graphics/bookworm-backports
    firmware-amd-graphics/bookworm-backports
)
STAMP=$DEST/.rig-firmware-fetched

if [[ -f $STAMP ]] && [[ -d $DEST/lib/firmware/nvidia ]] && [[ -d $DEST/lib/firmware/amdgpu ]]; then
    echo "fetch-debian-firmware: $DEST already holds:"
    sed 's/^/  /' "$STAMP"
    exit 0
fi

APTDIR=$DEST/.apt
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/sources.list.d" "$APTDIR/debs"
SIGNED=""
if [[ -r $KEYRING ]]; then
    SIGNED="[signed-by=$KEYRING]"
fi
cat > "$APTDIR/sources.list" <<LIST
deb $SIGNED $MIRROR bookworm non-free-firmware
deb $SIGNED $MIRROR bookworm-backports non-free-firmware
LIST

APT_OPTS=(
    -o "Dir::Etc::SourceList=$APTDIR/sources.list"
    -o "Dir::Etc::SourceParts=$APTDIR/sources.list.d"
    -o "Dir::State::Lists=$APTDIR/lists"
    -o "Dir::Cache=$APTDIR/cache"
    -o "Dir::Cache::pkgcache=$APTDIR/cache/pkgcache.bin"
    -o "Dir::Cache::srcpkgcache=$APTDIR/cache/srcpkgcache.bin"
    -o "Debug::NoLocking=1"
    -o "APT::Get::List-Cleanup=0"
)
# The private directories belong to whoever runs this; apt's download sandbox user (_apt)
# could not write there.
if [[ $EUID -eq 0 ]]; then
    APT_OPTS+=(-o "APT::Sandbox::User=root")
fi

echo "fetch-debian-firmware: updating a private package list under $APTDIR"
apt-get "${APT_OPTS[@]}" -q update

cd "$APTDIR/debs"
rm -f ./*.deb
echo "fetch-debian-firmware: downloading ${PACKAGES[*]}"
apt-get "${APT_OPTS[@]}" -q download "${PACKAGES[@]}"

tmp=$(mktemp "$DEST/.stamp.XXXXXX")
for deb in ./*.deb; do
    echo "fetch-debian-firmware: unpacking $deb"
    dpkg-deb -x "$deb" "$DEST"
    printf '%s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" >> "$tmp"
done
mv "$tmp" "$STAMP"
rm -f ./*.deb
echo "fetch-debian-firmware: done; export RIG_FIRMWARE_ROOT=$DEST/lib/firmware"
