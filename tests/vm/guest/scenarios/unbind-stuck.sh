# rig-vm: kind=takeover timeout=300
# "Unbind that never returns" (docs/RELIABILITY.md), on a real kernel: vfio-pci's remove
# (vfio_unregister_group_dev, drivers/vfio/vfio_main.c in Linux 6.12) waits, 10 s at a
# time and for as long as it takes, until every open file of the VFIO device is
# released. A mapping of a BAR holds the file (the VMA keeps a reference), so a
# process that mapped BAR0 of a lent device and closed its descriptor keeps vfio-pci
# from letting go.
# First, the mapping found: alice leases edu 01:00.0 whole, hands the lent fd to a
# child that maps BAR0 and closes it (rig-lease-client keep-map), and gives the lease
# back: rigd's holder scan reads every process's maps, finds the child by its
# mapping of the device's BAR0 and refuses, naming it; an admin's give-back is
# refused at once too, naming it, and starts no unbind; once the child is killed the
# give-back finishes.
# Then a holder the scan misses by design (take::holders): a child that maps BAR0 of
# 01:00.0 and keeps the lent fd of edu 00:06.0 (rig-lease-client keep-map-beside, as
# root) is taken to map the device it has a descriptor of, so the give-back is
# accepted, and the unbind of vfio-pci blocks in the kernel. Checked: the request
# fails after take.unbind_timeout_s with one line naming device, driver and step;
# rigd answers and takes another device meanwhile; `rigctl status` shows the stuck
# unbind; a second give-back fails at once and starts no second worker; once the
# child dies the unbind returns and an admin's give-back finishes the job.
L=0000:01:00.0
O=0000:00:06.0
B=0000:00:03.0
RIG="rigctl --socket $RIG_SOCK"
C="rig-lease-client $RIG_SOCK"
setup_lease_rigd 4194304 $L "unbind_timeout_s = 4"
check "rigd started (take.unbind_timeout_s = 4)" run_lease_rigd
now_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
# rigd's threads parked in vfio-pci's remove, by the kernel's wait channel.
in_remove() { cat /proc/$RIGD_PID/task/*/wchan 2> /dev/null | grep -c vfio_unregister_group_dev; }
unbind_workers() { grep -lx rig-unbind /proc/$RIGD_PID/task/*/comm 2> /dev/null | wc -l; }

gone() { i=0; while kill -0 "$1" 2> /dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; ! kill -0 "$1" 2> /dev/null; }

$RIG detach $L --mode vfio > "$FILES/detach.txt" 2>&1
check "edu $L held in vfio mode" [ "$(drv_of $L)" = vfio-pci ]
as_user alice $C $L keep-map > "$FILES/keep-map-found.txt" 2>&1
cat "$FILES/keep-map-found.txt"
KPID=$(sed -n 's/^kept by pid \([0-9]*\)/\1/p' "$FILES/keep-map-found.txt")
check "found: alice's child ($KPID) maps BAR0, with no descriptor of the device" \
  sh -c "grep -q '^ok child pid .* maps BAR0' $FILES/keep-map-found.txt && grep -q vfio-device /proc/$KPID/maps && ! ls -l /proc/$KPID/fd | grep -q vfio-device"
check "found: the lease's end finds the child by its mapping and names it (pid, comm, uid)" \
  grep -q "^refused Device: .*$L is still held by pid $KPID (rig-lease-clien, uid $(id -u alice)) after its lease ended" "$FILES/keep-map-found.txt"
T0=$(now_ms)
timeout 60 $RIG attach $L > "$FILES/attach-kept.txt" 2>&1
RC=$?
T1=$(now_ms)
cat "$FILES/attach-kept.txt"
check "found: an admin's give-back is refused at once (exit $RC, $((T1 - T0)) ms), naming the child" \
  sh -c "[ $RC != 0 ] && [ $RC != 124 ] && [ $((T1 - T0)) -lt 3000 ] && grep -q 'still held by pid $KPID (rig-lease-clien' $FILES/attach-kept.txt"
check "found: no unbind was started (no worker, none in the kernel, still on vfio-pci)" \
  sh -c "[ $(unbind_workers) = 0 ] && [ $(in_remove) = 0 ] && [ $(drv_of $L) = vfio-pci ]"
[ -n "$KPID" ] && kill -9 "$KPID"
check "found: the child is gone" gone "$KPID"
$RIG attach $L > "$FILES/attach-after-kept.txt" 2>&1
RC=$?
cat "$FILES/attach-after-kept.txt"
check "found: once the child exited the give-back finishes (exit $RC)" sh -c "[ $RC = 0 ] && [ $(drv_of $L) = none ]"

# The holder the scan misses: it keeps a descriptor of another VFIO device (00:06.0).
$RIG detach $L --mode vfio > "$FILES/detach.txt" 2>&1
$RIG detach $O --mode vfio >> "$FILES/detach.txt" 2>&1
check "edu $L and $O held in vfio mode" sh -c "[ $(drv_of $L) = vfio-pci ] && [ $(drv_of $O) = vfio-pci ]"
$C $L keep-map-beside $O > "$FILES/keep-map.txt" 2>&1
cat "$FILES/keep-map.txt"
KPID=$(sed -n 's/^kept by pid \([0-9]*\)/\1/p' "$FILES/keep-map.txt")
check "the child maps BAR0 and closed the lent fd" grep -q '^ok child pid .* maps BAR0' "$FILES/keep-map.txt"
check "the lease is given back: the scan misses a child that holds another device's fd" grep -q "^ok gave $L back" "$FILES/keep-map.txt"
check "the child ($KPID) has a mapping of the device and a descriptor of the other only" \
  sh -c "grep -q vfio-device /proc/$KPID/maps && [ \$(ls -l /proc/$KPID/fd | grep -c vfio-device) = 1 ]"

T0=$(now_ms)
$RIG attach $L > "$FILES/attach-1.txt" 2>&1 &
A=$!
sleep 1.5
T1=$(now_ms)
$RIG status > "$FILES/status-during.txt" 2>&1
S=$?
T2=$(now_ms)
check "rigd answers status while the give-back waits in the kernel ($((T2 - T1)) ms)" [ $S = 0 ]
cat /proc/$RIGD_PID/task/*/wchan > "$FILES/wchan-during.txt" 2>&1
wait $A
RC=$?
T3=$(now_ms)
cat "$FILES/attach-1.txt"
echo "measure give-back-timeout $((T3 - T0)) ms (take.unbind_timeout_s = 4)"
check "the give-back fails (exit $RC) after the configured 4 s, not 10 ($((T3 - T0)) ms)" \
  sh -c "[ $RC != 0 ] && [ $((T3 - T0)) -lt 8000 ]"
check "its line names the device, the driver and the step" \
  grep -q "Unbinding $L from vfio-pci did not return within 4 s" "$FILES/attach-1.txt"
dmesg > "$FILES/dmesg-stuck.txt"
check "the kernel: vfio-pci's remove waits for the device's user" \
  grep -q "$L.*blocked until released" "$FILES/dmesg-stuck.txt"
check "one thread of rigd waits in vfio_unregister_group_dev" [ "$(in_remove)" = 1 ]
$RIG status > "$FILES/status-stuck.txt" 2>&1
cat "$FILES/status-stuck.txt"
check "rigctl status shows the stuck unbind" grep -q "$L  unbind from vfio-pci stuck in the kernel" "$FILES/status-stuck.txt"

W1=$(unbind_workers)
T0=$(now_ms)
timeout 60 $RIG attach $L > "$FILES/attach-2.txt" 2>&1
RC=$?
T1=$(now_ms)
cat "$FILES/attach-2.txt"
check "a second give-back fails at once (exit $RC, $((T1 - T0)) ms), naming the stuck unbind" \
  sh -c "[ $RC != 0 ] && [ $RC != 124 ] && [ $((T1 - T0)) -lt 3000 ] && grep -q 'Unbinding $L from vfio-pci has not returned' $FILES/attach-2.txt"
check "no second worker: $W1 unbind thread(s) before, as many after, one in the kernel" \
  sh -c "[ $(unbind_workers) = $W1 ] && [ $(in_remove) = 1 ]"
check "rigd takes and gives back another device meanwhile" \
  sh -c "$RIG detach $B --mode vfio > $FILES/other.txt 2>&1 && $RIG attach $B >> $FILES/other.txt 2>&1 && [ \$(readlink /sys/bus/pci/devices/$B/driver | xargs basename) = bochs-drm ]"

echo "killing the child $KPID: its mapping goes, and with it the device file"
[ -n "$KPID" ] && kill -9 "$KPID"
returned() { ! $RIG status 2> /dev/null | grep -q "$L  unbind from vfio-pci stuck"; }
i=0; while ! returned && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
check "the stuck unbind returns once the holder is gone: status no longer lists it" returned
check "no thread of rigd is left in vfio-pci's remove" [ "$(in_remove)" = 0 ]
check "vfio-pci let go of $L" [ "$(drv_of $L)" = none ]
check "$L does not master the bus" no_bus_master $L
$RIG status > "$FILES/status-returned.txt" 2>&1
cat "$FILES/status-returned.txt"
$RIG attach $O > "$FILES/attach-other.txt" 2>&1
RC=$?
cat "$FILES/attach-other.txt"
check "$O, whose lease's end found the child keeping its fd, is given back once it exited (exit $RC)" \
  sh -c "[ $RC = 0 ] && [ $(drv_of $O) = none ]"
$RIG attach $L > "$FILES/attach-3.txt" 2>&1
RC=$?
cat "$FILES/attach-3.txt"
check "an admin's give-back now finishes (exit $RC)" [ $RC = 0 ]
check "$L driverless, its driver_override cleared" \
  sh -c "[ \"$(drv_of $L)\" = none ] && grep -qx '(null)' /sys/bus/pci/devices/$L/driver_override"
$RIG detach $L --mode vfio > "$FILES/detach-again.txt" 2>&1
as_user alice $C $L dma 7 > "$FILES/after.txt" 2>&1
echo "exit $?" >> "$FILES/after.txt"
cat "$FILES/after.txt"
check "taken again, a lease's DMA checks out" grep -qx 'exit 0' "$FILES/after.txt"
$RIG attach $L > "$FILES/attach-4.txt" 2>&1
check "given back at the end" [ "$(drv_of $L)" = none ]
stop_rigd
echo 0 > /proc/sys/vm/nr_hugepages
tr -d '\033' < "$FILES/rigd.log" | grep -iE 'unbind|stuck|attach' | tail -20
