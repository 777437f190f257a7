# rig-vm: kind=takeover timeout=300
# Whole-device leases (docs/lease.md) under the translated IOMMU: rigd holds edu behind its
# root port (01:00.0, bus reset) in vfio mode, and a [lease] rule lets group rig lease
# it whole. alice (group rig, unprivileged) leases it, maps BAR0 through the VFIO
# device fd rigd lent her, turns bus mastering on through its config region and drives
# edu's DMA engine herself, by the IOVA of her session's memory. Then a holder is
# killed with -9 while edu is writing for it: rigd turns bus mastering off, tears its
# interrupts down, resets the device and holds it again, and a second lease's DMA
# checks out. While leased, rigd refuses everyone else, naming the holder. Last, rigd
# is killed in the middle of a reclaim (RIG_CRASH_AT=reclaiming:reset) and its next
# start finishes it.
L=0000:01:00.0
O=0000:00:06.0
RIG="rigctl --socket $RIG_SOCK"
C="rig-lease-client $RIG_SOCK"
setup_lease_rigd 4194304 $L
start_lease_rigd() { # start_lease_rigd [ENV=VALUE]
  rm -f "$RIG_SOCK"
  env $1 rigd --config /etc/rig/rigd-lease.toml -v >> "$FILES/rigd.log" 2>&1 &
  RIGD_PID=$!
  i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  [ -S "$RIG_SOCK" ]
}
log() { tr -d '\033' < "$FILES/rigd.log" | sed 's/\[[0-9;]*m//g'; }
lines() { # lines FILE WHO: one check per ok/FAIL line of a client's output
  while read -r line; do
    case "$line" in
      "ok "*) check "$2: ${line#ok }" true ;;
      "FAIL "*) check "$2: ${line#FAIL }" false ;;
    esac
  done < "$1"
}
holder_pid() { sed -n 's/^dma running pid \([0-9]*\):.*/\1/p' "$FILES/$1.txt"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
hang_start() { # starts a holder that keeps edu's DMA running, waits for it
  as_user alice $C $L hang > "$FILES/$1.txt" 2>&1 &
  HANG=$!
  i=0; while ! grep -q '^dma running' "$FILES/$1.txt" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  cat "$FILES/$1.txt"
}

check "rigd listens for group rig" start_lease_rigd
$RIG detach $L --mode vfio > "$FILES/detach.txt" 2>&1
$RIG detach $O --mode vfio > "$FILES/detach-other.txt" 2>&1
cat "$FILES/detach.txt"
check "edu behind its root port held in vfio mode" [ "$(drv_of $L)" = vfio-pci ]
check "the detach warns of nothing: its DMA pool was made" sh -c "! grep -qi 'warning\|no DMA pool' $FILES/detach.txt"

as_user alice $C $L dma 3 > "$FILES/first.txt" 2>&1
echo "exit $?" >> "$FILES/first.txt"; cat "$FILES/first.txt"; lines "$FILES/first.txt" first-lease
check "alice's first lease drives edu's DMA and exits 0" grep -qx 'exit 0' "$FILES/first.txt"
check "after her give-back bus mastering is off" no_bus_master $L
first_ended() { log | grep -q 'lease ended.*reset=.\{0,1\}vfio'; }
check "rigd logged the first lease's end with a reset" first_ended

as_user alice $C $O try > "$FILES/not-allowed.txt" 2>&1
cat "$FILES/not-allowed.txt"
check "alice may not lease $O: no rule names it" grep -q '^refused NotAllowed: uid 1000 may not lease' "$FILES/not-allowed.txt"

hang_start hang
check "a holder has edu's DMA running" grep -q '^dma running' "$FILES/hang.txt"
check "bus mastering is on while it is leased" bus_master $L
$RIG status > "$FILES/status.txt" 2>&1
$RIG status --json > "$FILES/status.json" 2>&1
cat "$FILES/status.txt"
check "rigctl status shows the holder" grep -q "leased whole to uid 1000" "$FILES/status.txt"
check "rigctl status --json gives the holder's uid and pid" \
  sh -c "grep -A4 '\"lease\": {' $FILES/status.json | grep -q '\"uid\": 1000'"
as_user alice $C $L try > "$FILES/second.txt" 2>&1
cat "$FILES/second.txt"
check "a second lease is refused, naming the holder" grep -q "^refused Leased: $L is leased whole to uid 1000" "$FILES/second.txt"
$RIG mmio read $L bar0:0 > "$FILES/mmio.txt" 2>&1
check "rigd refuses an admin's register read, naming the holder" grep -q "leased whole to uid 1000" "$FILES/mmio.txt"
$RIG reset $L > "$FILES/reset.txt" 2>&1
check "rigd refuses a reset" grep -q "leased whole to uid 1000" "$FILES/reset.txt"
$RIG attach $L > "$FILES/attach-refused.txt" 2>&1
check "rigd refuses a give-back while leased" sh -c "grep -q 'leased whole to uid 1000' $FILES/attach-refused.txt && [ \$(readlink /sys/bus/pci/devices/$L/driver | sed 's,.*/,,') = vfio-pci ]"

HPID=$(holder_pid hang)
check "the holder's pid is known" [ -n "$HPID" ]
echo "killing the holder, pid $HPID, with edu's DMA in flight"
T0=$(uptime_s)
[ -n "$HPID" ] && kill -9 $HPID
ended() { log | grep -q "lease ended.*pid=$HPID"; }
i=0; while ! ended && [ $i -lt 200 ]; do sleep 0.02; i=$((i + 1)); done
T1=$(uptime_s)
wait $HANG 2> /dev/null
echo "measure lease-reclaim-after-kill $(echo "$T0 $T1" | awk '{printf "%.2f", $2 - $1}') s (guest uptime, 20 ms polls; TCG)"
check "rigd took the device back after the holder's kill -9" ended
irqs_down() { log | grep "lease ended.*pid=$HPID" | grep -q 'irqs=\[Msi\]'; }
check "the reclaim tore down the MSI the holder had set up" irqs_down
check "bus mastering is off after the reclaim" no_bus_master $L
reset_reopened() { log | grep "lease ended.*pid=$HPID" | grep -q 'reset=.\{0,1\}vfio.*reopened=true'; }
check "the reclaim reset the device through VFIO and reopened it" reset_reopened
$RIG status > "$FILES/status-after.txt" 2>&1
check "rigctl status shows no holder after the reclaim" sh -c "! grep -q 'leased whole' $FILES/status-after.txt"
as_user alice $C $L dma 9 > "$FILES/again.txt" 2>&1
echo "exit $?" >> "$FILES/again.txt"; cat "$FILES/again.txt"; lines "$FILES/again.txt" second-lease
check "a second lease after the kill works and its DMA checks out" grep -qx 'exit 0' "$FILES/again.txt"

# rigd dies in the middle of a reclaim: the record says reclaiming:reset.
stop_rigd
check "rigd restarts with a crash point at reclaiming:reset" start_lease_rigd RIG_CRASH_AT=reclaiming:reset
hang_start hang-crash
HPID=$(holder_pid hang-crash)
[ -n "$HPID" ] && kill -9 $HPID
wait $HANG 2> /dev/null
i=0; while kill -0 "$RIGD_PID" 2> /dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
check "rigd died at reclaiming:reset" sh -c "! kill -0 $RIGD_PID 2> /dev/null"
wait "$RIGD_PID" 2> /dev/null
cat /var/lib/rig/devices/$L.* > "$FILES/journal-at-crash.bin" 2> /dev/null
check "the journal says reclaiming:reset" grep -aq '"phase":"reclaiming","step":"reset"' "$FILES/journal-at-crash.bin"
check "bus mastering was already off when rigd died" no_bus_master $L
check "rigd starts again" start_lease_rigd
$RIG status > "$FILES/status-recovered.txt" 2>&1
cat "$FILES/status-recovered.txt"
check "its start took the device back from the lease and holds it" \
  grep -q "$L: taken back from its lease and held (vfio mode; was at: reclaiming:reset; reset: vfio)" "$FILES/status-recovered.txt"
as_user alice $C $L dma 17 > "$FILES/after-crash.txt" 2>&1
echo "exit $?" >> "$FILES/after-crash.txt"; cat "$FILES/after-crash.txt"
check "a lease after the recovery works and its DMA checks out" grep -qx 'exit 0' "$FILES/after-crash.txt"

# A holder that keeps a copy of the fd past its lease keeps the device: rigd finds it
# (kcmp of every process's descriptors) and keeps the device out of use.
as_user alice $C $L keep > "$FILES/keep.txt" 2>&1
cat "$FILES/keep.txt"
KPID=$(sed -n 's/^ok kept a copy of the lent fd, pid \([0-9]*\)/\1/p' "$FILES/keep.txt")
check "a give-back while the holder keeps a copy is refused, naming its pid" \
  grep -q "^refused Device: .*$L is still held by pid $KPID (.*) after its lease ended" "$FILES/keep.txt"
check "bus mastering is off all the same" no_bus_master $L
$RIG mmio read $L bar0:0 > "$FILES/mmio-kept.txt" 2>&1
check "the device stays out of use: rigd refuses a register read" grep -q "and taking it back failed" "$FILES/mmio-kept.txt"
$RIG attach $L > "$FILES/attach-kept.txt" 2>&1
check "once the holder is gone an admin gives it back" sh -c "[ \$(readlink /sys/bus/pci/devices/$L/driver 2>/dev/null | wc -c) = 0 ]"

# pool = "clear": the lease's end makes the device's pool afresh (new blocks, new IOVA
# space), and the next lease's DMA works in it.
stop_rigd
sed -i 's/^\[\[lease.allow\]\]/[lease]\npool = "clear"\n[[lease.allow]]/' /etc/rig/rigd-lease.toml
check "rigd starts with lease.pool = clear" start_lease_rigd
$RIG detach $L --mode vfio > "$FILES/detach-clear.txt" 2>&1
as_user alice $C $L dma 21 > "$FILES/clear-1.txt" 2>&1
echo "exit $?" >> "$FILES/clear-1.txt"; cat "$FILES/clear-1.txt"
cleared() { log | grep 'lease ended' | tail -1 | grep -q 'pool=Clear'; }
check "a lease's end with pool = clear made the pool afresh" cleared
$RIG dma > "$FILES/dma-clear.txt" 2>&1
check "the device has its pool again" grep -q "$L" "$FILES/dma-clear.txt"
as_user alice $C $L dma 23 > "$FILES/clear-2.txt" 2>&1
echo "exit $?" >> "$FILES/clear-2.txt"; cat "$FILES/clear-2.txt"
check "the next lease's DMA works in the new pool" grep -qx 'exit 0' "$FILES/clear-2.txt"

dmesg > "$FILES/dmesg.txt"
check "no DMAR fault: nothing wrote after its memory went" sh -c "! grep -q 'DMAR: \[DMA' $FILES/dmesg.txt"
$RIG attach $L > "$FILES/attach.txt" 2>&1
$RIG attach $O > "$FILES/attach-other.txt" 2>&1
check "both edus given back" sh -c "[ \$(readlink /sys/bus/pci/devices/$L/driver 2>/dev/null | wc -c) = 0 ] && [ \$(readlink /sys/bus/pci/devices/$O/driver 2>/dev/null | wc -c) = 0 ]"
stop_rigd
echo 0 > /proc/sys/vm/nr_hugepages
log | grep -E 'lease|reclaim' | tail -20
