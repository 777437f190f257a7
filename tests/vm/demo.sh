#!/bin/bash
# The README's demo: build everything, boot the full guest (Debian + systemd, in QEMU,
# emulated IOMMU and PCI devices), `systemctl start rigd` from the repo's unit files, run
# rigctl against the emulated devices, print what it said, power off.
# Needs root (apt, debootstrap). Cached parts are reused; see docs/vm.md for timings.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root demo.sh
cd "$REPO_DIR"
"$VM_DIR/setup.sh"
"$VM_DIR/build-guest.sh"
"$VM_DIR/build-fast.sh"
"$VM_DIR/build-full.sh"
OUT=$RIG_VM_CACHE/runs/demo-$(date +%Y%m%d-%H%M%S)
set +e
"$VM_DIR/boot.sh" --flavour full --profile translated --out "$OUT" demo-rigctl > /dev/null
rc=$?
set -e
echo
echo "==== inside the disposable machine (Debian, systemd, Linux $(. "$TOOLS_ENV"; echo "$KVER"), QEMU with intel-iommu)"
grep -v '^CHECK ' "$OUT/results/demo-rigctl/log" 2> /dev/null || echo "(no output came back: see $OUT/serial.log)"
echo
echo "==== $(sed -n 's/^verdict=//p' "$OUT/verdict" 2> /dev/null): $(sed -n 's/^result=//p' "$OUT/verdict" 2> /dev/null) checks, boot $(sed -n 's/^seconds=//p' "$OUT/verdict" 2> /dev/null) s; run folder $OUT"
echo "==== total $(since "$T0") s"
exit $rc
