# rig-vm: kind=takeover timeout=180
# A whole-device lease holder that outlives rigd (docs/RELIABILITY.md). alice leases edu 01:00.0
# whole and keeps its DMA engine running (rig-lease-client hang); rigd is killed
# with -9 and started again while she still holds the lent VFIO device fd, which
# keeps the device's group open (the new rigd's open of /dev/vfio/N is EBUSY).
# Checked: the new rigd names the holder (pid, comm, uid) in its log and in `rigctl
# status`; bus mastering is off, and when the holder's side sets it again (here root
# writes the command register, as the holder's fd could) rigd turns it off within
# its watch's tick; a detach and a give-back of the device fail at once naming the
# holder (not "bound to vfio-pci by someone else", not a stranded unbind); once the
# holder is killed rigd finishes the recovery by itself (reclaimed and held again,
# the record at held), and a new lease's DMA checks out.
L=0000:01:00.0
RIG="rigctl --socket $RIG_SOCK"
C="rig-lease-client $RIG_SOCK"
setup_lease_rigd 4194304 $L "unbind_timeout_s = 4"
log() { tr -d '\033' < "$FILES/rigd.log" | sed 's/\[[0-9;]*m//g'; }
now_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
wait_for() { # wait_for TENTHS COMMAND...: until it succeeds
  n=$1; shift; i=0
  while ! "$@" && [ $i -lt "$n" ]; do sleep 0.1; i=$((i + 1)); done
  "$@"
}
in_status() { $RIG status > "$FILES/status-now.txt" 2>&1; grep -q "$1" "$FILES/status-now.txt"; }
check "rigd started" run_lease_rigd
$RIG detach $L --mode vfio > "$FILES/detach.txt" 2>&1
check "edu $L held in vfio mode" [ "$(drv_of $L)" = vfio-pci ]

as_user alice $C $L hang > "$FILES/hang.txt" 2>&1 &
wait_for 100 grep -q '^dma running pid' "$FILES/hang.txt"
HPID=$(sed -n 's/^dma running pid \([0-9]*\).*/\1/p' "$FILES/hang.txt")
check "alice's holder ($HPID) has the device leased whole, mastering, its DMA running" \
  sh -c "[ -n '$HPID' ] && kill -0 $HPID"
ls -l /proc/$HPID/fd > "$FILES/holder-fds.txt" 2>&1
for fd in $(ls -l /proc/$HPID/fd 2> /dev/null | awk '/vfio-device/ { print $9 }'); do
  echo "fdinfo $fd:"; cat /proc/$HPID/fdinfo/$fd
done > "$FILES/holder-fdinfo.txt" 2>&1
cat "$FILES/holder-fdinfo.txt"
check "Linux 6.12: the holder's fd is anon_inode:[vfio-device] and its fdinfo names no device" \
  sh -c "grep -q 'anon_inode:\[vfio-device\]' $FILES/holder-fds.txt && ! grep -q vfio-device-syspath $FILES/holder-fdinfo.txt"

kill -9 "$RIGD_PID"; wait "$RIGD_PID" 2> /dev/null
check "the holder outlives rigd" kill -0 "$HPID"
T0=$(now_ms)
check "rigd starts again" run_lease_rigd
$RIG status > "$FILES/status-waiting.txt" 2>&1
cat "$FILES/status-waiting.txt"
check "status names the holder: pid, comm, uid, from its lease before rigd restarted" \
  grep -q "^at start: $L still held by pid $HPID (rig-lease-clien, uid $(id -u alice)) from its lease before rigd restarted" "$FILES/status-waiting.txt"
log > "$FILES/rigd-clean.log"
check "rigd's log names it too" grep -q "still held from a lease before rigd restarted.*pid $HPID" "$FILES/rigd-clean.log"
check "bus mastering is off while it waits" no_bus_master $L
# What the holder's fd can do: set bus mastering in the command register.
printf '\006' | dd of=/sys/bus/pci/devices/$L/config bs=1 seek=4 count=1 conv=notrunc 2> /dev/null
T1=$(now_ms)
wait_for 30 no_bus_master $L
T2=$(now_ms)
check "set again, bus mastering is turned off by rigd's watch ($((T2 - T1)) ms)" no_bus_master $L
log > "$FILES/rigd-clean.log"
check "rigd's log says it cleared it" grep -q "bus mastering was on again" "$FILES/rigd-clean.log"
T3=$(now_ms)
timeout 30 $RIG detach $L --mode vfio > "$FILES/detach-refused.txt" 2>&1
RC=$?
T4=$(now_ms)
cat "$FILES/detach-refused.txt"
check "a detach fails at once (exit $RC, $((T4 - T3)) ms) naming the holder" \
  sh -c "[ $RC != 0 ] && [ $RC != 124 ] && [ $((T4 - T3)) -lt 3000 ] && grep -q 'still held by pid $HPID (rig-lease-clien' $FILES/detach-refused.txt && ! grep -q 'someone else' $FILES/detach-refused.txt"
timeout 30 $RIG attach $L > "$FILES/attach-refused.txt" 2>&1
RC=$?
cat "$FILES/attach-refused.txt"
check "a give-back fails at once naming the holder, and starts no unbind" \
  sh -c "[ $RC != 0 ] && [ $RC != 124 ] && grep -q 'still held by pid $HPID' $FILES/attach-refused.txt && [ $(drv_of $L) = vfio-pci ] && ! $RIG status | grep -q 'unbind from'"

kill -9 "$HPID"
T5=$(now_ms)
wait_for 100 in_status "^$L  held"
T6=$(now_ms)
cat "$FILES/status-now.txt"
echo "measure outlived-settle $((T6 - T5)) ms after the holder's kill"
check "once the holder is killed rigd finishes the recovery by itself ($((T6 - T5)) ms): held again" \
  in_status "^$L  held"
check "status says how it was settled" \
  grep -q "^at start: $L was held by pid $HPID (rig-lease-clien.*settled .* s after the start.*taken back from its lease and held" "$FILES/status-now.txt"
check "the device is on vfio-pci and not mastering" sh -c "[ $(drv_of $L) = vfio-pci ] && ! $(bus_master $L && echo true || echo false)"
as_user alice $C $L dma 11 > "$FILES/after.txt" 2>&1
echo "exit $?" >> "$FILES/after.txt"
cat "$FILES/after.txt"
check "a new lease's DMA checks out" grep -qx 'exit 0' "$FILES/after.txt"
$RIG attach $L > "$FILES/attach-end.txt" 2>&1
check "given back at the end" [ "$(drv_of $L)" = none ]
stop_rigd
echo 0 > /proc/sys/vm/nr_hugepages
log | grep -iE 'still held|outlived|settled|bus mastering was on' | tail -10
echo "guest time: $(( $(now_ms) - T0 )) ms from the restart"
