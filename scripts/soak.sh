#!/usr/bin/env bash
# The soak (docs/RELIABILITY.md, "Soak"; not in CI): boots the disposable machine (fast flavour, translated
# IOMMU) with tests/vm/guest/scenarios/soak.sh, which runs one rigd for SECONDS under
# mixed clients (inspection RPCs, DMA lease churn, clients killed holding leases,
# bochs-display taken and given back) and samples rigd's RSS, fds, threads and pool use
# every 10 s; then scripts/soak-report.py writes the plot (SVG) and the verdict.
#
# Usage: scripts/soak.sh [SECONDS]          default 3600
# Env:   SOAK_OUT        results folder (default /var/cache/rig/soak-<date>-<time>):
#                        soak.csv, soak.svg, report.md, verdict, run/ (boot.sh's folder)
#        SOAK_EVERY      seconds between samples (default 10)
#        SOAK_PAUSE      seconds between a client loop's cycles (default 1; 0 hunts a rare
#                        failure faster, at the cost of a load unlike a soak's)
#        RIG_VM_SHARED=1 a long run that must not hold the machine's one-VM locks
#                        (/tmp/rig-vm.lock, boot.lock) for its hour: QEMU under
#                        nice -n 19 instead (tests/vm/boot.sh, docs/vm.md);
#                        RIG_VM_NICE=N another level (at 19 on a machine whose two
#                        cores run builds, QEMU got 3 s of CPU in its first 4 min)
#        GUEST_BIN_DIR    the guest build (tests/vm/build-guest.sh; default target/guest)
# Exit status: 0 when the verdict is PASS.
# A run cut short keeps its samples in run/serial.log (`SOAK,` lines): the same report
# from them is `scripts/soak.sh --report DIR`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

report() { # report DIR: CSV from the guest's file, else from the console's SOAK lines
  local dir=$1 csv=$1/soak.csv files=$1/run/results/soak/files/soak.csv
  if [[ -s $files ]]; then
    cp "$files" "$csv"
  else
    { echo "t_s,rss_kib,fds,threads,leased_blocks,free_blocks,sessions,inspect,dma,dma_killed,take,errors"
      sed -n 's/^SOAK,//p' "$dir/run/serial.log"; } > "$csv"
  fi
  local rc=0
  python3 "$ROOT/scripts/soak-report.py" "$csv" "$dir/soak.svg" --md "$dir/report.md" \
    --title "rigd soak, $(head -c 10 "$dir/started" 2>/dev/null || date -u +%F), $(cat "$dir/commit" 2>/dev/null || echo '?')" \
    | tee "$dir/verdict" || rc=$?
  echo "soak: $dir/soak.svg, $dir/soak.csv, $dir/report.md"
  return $rc
}

if [[ ${1:-} == --report ]]; then
  report "$2"
  exit
fi
DUR=${1:-3600}
[[ $DUR =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS] | --report DIR" >&2; exit 2; }
OUT=${SOAK_OUT:-/var/cache/rig/soak-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
date -u +%FT%TZ > "$OUT/started"
git -C "$ROOT" rev-parse --short HEAD > "$OUT/commit"
# Boot and shutdown under TCG, and the scenario's setup and drain, on top of SECONDS
# (a niced QEMU on a busy machine boots in minutes rather than seconds).
LIMIT=$((DUR + 1200))
BOOT=(env RIG_VM_APPEND="rig.soak_s=$DUR rig.soak_every=${SOAK_EVERY:-10} rig.soak_pause=${SOAK_PAUSE:-1}"
      "$ROOT/tests/vm/boot.sh" --flavour fast --profile translated --timeout "$LIMIT"
      --out "$OUT/run" soak)
echo "soak: $DUR s into $OUT (limit $LIMIT s)"
rc=0
if [[ ${RIG_VM_SHARED:-0} == 1 ]]; then
  "${BOOT[@]}" || rc=$?
else
  flock /tmp/rig-vm.lock "${BOOT[@]}" || rc=$?
fi
echo "soak: boot.sh exited $rc ($(cat "$OUT/run/verdict" 2>/dev/null | tr '\n' ' '))"
report "$OUT" || rc=1
exit $rc
