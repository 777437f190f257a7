#!/usr/bin/env bash
# lintian on rig's .deb (packaging/deb/build.sh), installed by this script if absent.
# Fails on any error or warning lintian reports; overrides live in the package
# (usr/share/lintian/overrides/rig-gpu) with their reasons in build.sh.
#   scripts/deb-lint.sh DEB
set -uo pipefail
. "$(dirname "$0")/lib.sh"
DEB=${1:?usage: deb-lint.sh DEB}
[ -f "$DEB" ] || { echo "deb-lint: no $DEB" >&2; exit 1; }
command -v lintian > /dev/null || apt_install lintian || exit 1
echo "deb-lint: $(lintian --version) on $(basename "$DEB")"
# As root (CI) lintian warns that it should not be; it only reads the package.
lintian --fail-on error,warning --display-info "$DEB"
rc=$?
[ $rc = 0 ] && echo "deb-lint: clean"
exit $rc
