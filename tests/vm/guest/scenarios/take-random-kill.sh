# rig-vm: kind=takeover timeout=420
# "rigd killed at random" (docs/RELIABILITY.md): SIGKILLs of rigd at seeded random instants (not
# only after journal records, as take-crash does) while it detaches (vfio and sysfs
# mode), gives back, resets, or holds a driverless device with bus mastering on; each
# followed by a restart. After every restart, asserted from sysfs: no device rig
# touched is driverless with bus mastering on (config COMMAND bit 2), each is held by
# the new rigd or back on its original driver (bochs-drm; edu driverless), and the new
# rigd starts (its journal decodes and recovery finishes) and answers status.
# (Its counter is n: lib.sh's start_rigd_take loops on i.)
# Prints one RESULT line: kills, recoveries (all settled), violations, the seed.
# Kernel command line: rig.kills=N (default 10), rig.seed=S (default: from the clock).
# Not covered here: DMA leases, queues and resizes (no pool in this scenario), and
# IOVA mappings (the guest offers no view of the IOMMU's page tables).
RIG="rigctl --socket $RIG_SOCK"
B=0000:00:03.0   # bochs-display, bound to bochs-drm
E=0000:01:00.0   # edu, no driver
KILLS=$(sed -n 's/.*rig\.kills=\([0-9]*\).*/\1/p' /proc/cmdline); KILLS=${KILLS:-10}
SEED=$(sed -n 's/.*rig\.seed=\([0-9]*\).*/\1/p' /proc/cmdline); SEED=${SEED:-$(date +%s)}
echo "take-random-kill: $KILLS kills, rig.seed=$SEED"
# One line per kill: the operation (0-4) and the delay in ms before the SIGKILL.
awk -v s="$SEED" -v n="$KILLS" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%d %d\n", int(rand() * 5), int(rand() * 800) }' > "$FILES/plan"

held() { $RIG status 2>/dev/null | grep -q "^$1  held"; }
# Settled: on its original driver (with bus mastering off if driverless), or held.
settled_b() { [ "$(drv_of $B)" = bochs-drm ] || held $B; }
settled_e() { held $E || { [ "$(drv_of $E)" = none ] && no_bus_master $E; }; }
# Driverless with bus mastering on: the one thing that must never be.
mastering_driverless() { [ "$(drv_of "$1")" = none ] && bus_master "$1"; }

kills=0 recoveries=0 violations=0 n=0
while read -r op delay; do
  n=$((n + 1))
  RIGD_ENV= start_rigd_take || { echo "rigd did not start before kill $n"; violations=$((violations + 1)); continue; }
  case $op in
    0) what="detach $B (vfio)";  $RIG detach $B > /dev/null 2>&1 & ;;
    1) what="detach $B (sysfs)"; $RIG detach $B --mode sysfs > /dev/null 2>&1 & ;;
    2) what="attach $B";  $RIG detach $B > /dev/null 2>&1; $RIG attach $B > /dev/null 2>&1 & ;;
    3) what="reset $B";   $RIG detach $B > /dev/null 2>&1; $RIG reset $B > /dev/null 2>&1 & ;;
    4) what="edu held in sysfs mode, bus mastering on"
       { $RIG detach $E --mode sysfs && $RIG master $E on; } > /dev/null 2>&1 & ;;
  esac
  OP=$!
  sleep "$(awk -v d="$delay" 'BEGIN { printf "%.3f", d / 1000 }')"
  kill -9 "$RIGD_PID" 2>/dev/null && kills=$((kills + 1))
  wait "$RIGD_PID" 2>/dev/null; wait "$OP" 2>/dev/null
  before="driver $B=$(drv_of $B) $E=$(drv_of $E)"
  ok=true
  if ! RIGD_ENV= start_rigd_take || ! $RIG status > "$FILES/status-$n.txt" 2>&1; then
    echo "kill $n ($what after $delay ms): rigd did not come back"; ok=false
  fi
  for d in $B $E; do
    if mastering_driverless $d; then echo "kill $n ($what after $delay ms): $d driverless with bus mastering on"; ok=false; fi
  done
  settled_b || { echo "kill $n ($what after $delay ms): $B neither held nor on bochs-drm ($(drv_of $B))"; ok=false; }
  settled_e || { echo "kill $n ($what after $delay ms): $E neither held nor driverless and quiet"; ok=false; }
  if $ok; then recoveries=$((recoveries + 1)); else violations=$((violations + 1)); fi
  echo "kill $n: $what, after $delay ms; at the kill $before; after restart driver $B=$(drv_of $B) $E=$(drv_of $E); $(grep -c held "$FILES/status-$n.txt") held"
  # Back to the start: whatever the new rigd holds goes home.
  held $B && $RIG attach $B > /dev/null 2>&1
  held $E && $RIG attach $E > /dev/null 2>&1
  if [ "$(drv_of $B)" != bochs-drm ]; then echo "kill $n: $B not back on bochs-drm after give-back"; violations=$((violations + 1)); fi
  stop_rigd
done < "$FILES/plan"
echo "RESULT kills=$kills recoveries=$recoveries violations=$violations seed=$SEED"
check "$KILLS random kills of rigd (seed $SEED): every one followed by a recovery" [ "$recoveries" = "$KILLS" ]
check "no violations in $KILLS random kills (seed $SEED)" [ "$violations" = 0 ]
tail -30 "$FILES/rigd.log"
