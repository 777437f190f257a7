# rig-vm: kind=takeover timeout=400
# Lent queues (docs/queues.md) under the translated IOMMU: rigd holds the NVMe controller
# (00:05.0) in vfio mode and lends queue pairs to alice, an unprivileged member of group
# rig. Each client's rings and shadow doorbell page are in its own lease; its kick is an
# eventfd rigd registered as a VFIO ioeventfd. Patterns are written and read back through
# lent queues at depths 1 and 32, two clients at once; a client killed with -9 while its
# commands are in flight has its queue deleted and its memory reclaimed while another
# client keeps running; bad requests get typed refusals. Then the nvme driver gets the
# controller back with a working disk.
N=0000:00:05.0
RIG="rigctl --socket $RIG_SOCK"
C="rig-queue-client $RIG_SOCK $N"
check "modprobe vfio-pci" modprobe vfio-pci
check "modprobe vfio_iommu_type1" modprobe vfio_iommu_type1
echo 16 > /proc/sys/vm/nr_hugepages
add_users
check "rigd listens for group rig" start_rigd_lend
$RIG detach $N --mode vfio > "$FILES/detach.txt" 2>&1
check "nvme held in vfio mode" [ "$(drv_of $N)" = vfio-pci ]

lines() { # lines FILE: one check per ok/FAIL/refused line of a client's output
  while read -r line; do
    case "$line" in
      "ok "*) check "$2: ${line#ok }" true ;;
      "FAIL "*) check "$2: ${line#FAIL }" false ;;
    esac
  done < "$1"
}

as_user alice $C bad > "$FILES/bad.txt" 2>&1
cat "$FILES/bad.txt"
check "depth 0 is refused as DepthZero" grep -q '^refused DepthZero' "$FILES/bad.txt"
check "a depth over queue.max_depth is refused as DepthOverLimit" \
  grep -q '^refused DepthOverLimit: .*queue.max_depth' "$FILES/bad.txt"

as_user alice $C run 1 2000 0 > "$FILES/d1.txt" 2>&1
echo "exit $?" >> "$FILES/d1.txt"; cat "$FILES/d1.txt"; lines "$FILES/d1.txt" alice-d1
check "alice's depth-1 client exits 0" grep -qx 'exit 0' "$FILES/d1.txt"
as_user alice $C run 32 2000 2000 > "$FILES/d32.txt" 2>&1
echo "exit $?" >> "$FILES/d32.txt"; cat "$FILES/d32.txt"; lines "$FILES/d32.txt" alice-d32
check "alice's depth-32 client exits 0" grep -qx 'exit 0' "$FILES/d32.txt"

as_user alice $C lat 500 0 > "$FILES/lat.txt" 2>&1
echo "exit $?" >> "$FILES/lat.txt"; cat "$FILES/lat.txt"; lines "$FILES/lat.txt" alice-lat
check "alice's queue completes by its MSI-X interrupt eventfd" grep -qx 'exit 0' "$FILES/lat.txt"

as_user alice $C run 32 1000 4000 > "$FILES/two-a.txt" 2>&1 &
A=$!
as_user alice $C run 8 1000 6000 > "$FILES/two-b.txt" 2>&1 &
B=$!
wait $A; echo "exit $?" >> "$FILES/two-a.txt"
wait $B; echo "exit $?" >> "$FILES/two-b.txt"
cat "$FILES/two-a.txt" "$FILES/two-b.txt"
check "two clients at once: the first exits 0" grep -qx 'exit 0' "$FILES/two-a.txt"
check "two clients at once: the second exits 0" grep -qx 'exit 0' "$FILES/two-b.txt"

# A long client runs while another is killed with its commands in flight. The holder
# comes first, so it has the first doorbell page (ids 512…).
as_user alice $C hold 32 > "$FILES/hold.txt" 2>&1 &
H=$!
i=0; while ! grep -q '^holding' "$FILES/hold.txt" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
as_user alice $C run 32 4000 8000 > "$FILES/steady.txt" 2>&1 &
S=$!
i=0; while ! grep -q '^ok queue' "$FILES/steady.txt" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
cat "$FILES/hold.txt"
check "the doomed client holds a queue with commands in flight" grep -q '^holding queue .* 32 commands in flight' "$FILES/hold.txt"
$RIG queues > "$FILES/queues.txt" 2>&1
$RIG queues --json > "$FILES/queues.json" 2>&1
as_user alice rigctl --socket $RIG_SOCK queues --json > "$FILES/queues-alice.json" 2>&1
cat "$FILES/queues.txt"
check "rigctl queues lists alice's lent queues with their interrupt, live" \
  sh -c "grep -q 'uid 1000' $FILES/queues.txt && grep -q MSI-X $FILES/queues.txt && grep -q live $FILES/queues.txt"
check "rigctl queues --json gives each queue's owner, depth and doorbell" \
  sh -c "grep -q '\"uid\": 1000' $FILES/queues.json && grep -q '\"depth\": 32' $FILES/queues.json && grep -q '\"sq_doorbell\"' $FILES/queues.json"
check "alice sees her own queues" grep -q '"uid": 1000' "$FILES/queues-alice.json"
check "two clients at once have queues in different doorbell pages (512 and 1024)" \
  sh -c "grep -q '\"qid\": 512' $FILES/queues.json && grep -q '\"qid\": 1024' $FILES/queues.json"
# busybox has no pgrep: find the holder by its command line.
HPID=$(for p in /proc/[0-9]*; do
  tr '\0' ' ' < $p/cmdline 2> /dev/null | grep -q '^rig-queue-client .* hold ' && echo ${p#/proc/}
done | head -1)
echo "killing the holder, pid $HPID"
check "the holder's pid is known" [ -n "$HPID" ]
[ -n "$HPID" ] && kill -9 $HPID
wait $H 2> /dev/null
# Clients that closed their queue end with freed=0; only the killed one has one left.
reclaimed() { tr -d '\033' < "$FILES/rigd.log" | sed 's/\[[0-9;]*m//g' | grep -q 'queues reclaimed.*freed=1'; }
i=0; while ! reclaimed && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "rigd reclaimed the killed client's queue" reclaimed
check "no lent queue was left undeleted" sh -c "! grep -q 'was not deleted' $FILES/rigd.log"
wait $S; echo "exit $?" >> "$FILES/steady.txt"; cat "$FILES/steady.txt"
check "the other client kept running and exits 0" grep -qx 'exit 0' "$FILES/steady.txt"
# Stray writes into freed pages: a new client takes what the holder had (the pool gives
# the freed IOVAs out again), fills it with a pattern and checks it a second later.
as_user alice $C canary 32 1000 > "$FILES/canary.txt" 2>&1
echo "exit $?" >> "$FILES/canary.txt"; cat "$FILES/canary.txt"; lines "$FILES/canary.txt" alice-canary
HRINGS=$(sed -n 's/^holding .* rings at \(0x[0-9a-f]*\), reads into \(0x[0-9a-f]*\)$/\1 \2/p' "$FILES/hold.txt")
CRINGS=$(sed -n 's/^canary rings at \(0x[0-9a-f]*\), data at \(0x[0-9a-f]*\)$/\1 \2/p' "$FILES/canary.txt")
echo "holder: $HRINGS canary: $CRINGS"
check "the canary took the killed holder's IOVAs ($HRINGS)" sh -c "[ -n '$HRINGS' ] && [ '$HRINGS' = '$CRINGS' ]"
check "no write reached the killed holder's freed pages" \
  sh -c "grep -q '^ok the rings canary is intact' $FILES/canary.txt && grep -q '^ok the data canary is intact' $FILES/canary.txt"
$RIG dma > "$FILES/dma-after.txt" 2>&1
$RIG queues > "$FILES/queues-after.txt" 2>&1
cat "$FILES/queues-after.txt"
check "after both clients ended, rigctl queues lists none" grep -q 'No lent queues' "$FILES/queues-after.txt"
check "the killed client's session and leases are gone" sh -c "! grep -q \" $HPID \" $FILES/dma-after.txt"
as_user alice $C run 1 100 12000 > "$FILES/after.txt" 2>&1
echo "exit $?" >> "$FILES/after.txt"; cat "$FILES/after.txt"
check "a new client gets a queue after the reclaim" grep -qx 'exit 0' "$FILES/after.txt"
# The controller refuses to create a queue id it still has (Invalid Queue Identifier):
# the killed client's id being created again shows the controller deleted it.
HQID=$(sed -n 's/^holding queue \([0-9]*\) .*/\1/p' "$FILES/hold.txt")
check "the killed client's queue id $HQID is created again: the controller had deleted it" \
  grep -q "^ok queue $HQID of" "$FILES/after.txt"

as_user alice $C flood 20000 > "$FILES/flood.txt" 2>&1
echo "exit $?" >> "$FILES/flood.txt"; cat "$FILES/flood.txt"; lines "$FILES/flood.txt" alice-flood
as_user alice $C run 32 200 13000 > "$FILES/after-flood.txt" 2>&1
echo "exit $?" >> "$FILES/after-flood.txt"
check "after a client flooded its kick, a new queue still works" grep -qx 'exit 0' "$FILES/after-flood.txt"

# A shadow tail past the ring, while another client runs: the controller trusts it
# (docs/hardware/queues.md, "QEMU's NVMe controller"); the queue must still be deleted
# and the other client carry on.
as_user alice $C run 32 1000 15000 > "$FILES/beside.txt" 2>&1 &
B=$!
as_user alice $C overrun > "$FILES/overrun.txt" 2>&1
echo "exit $?" >> "$FILES/overrun.txt"; cat "$FILES/overrun.txt"; lines "$FILES/overrun.txt" alice-overrun
wait $B; echo "exit $?" >> "$FILES/beside.txt"; cat "$FILES/beside.txt"
check "a client beside the overrun one exits 0" grep -qx 'exit 0' "$FILES/beside.txt"
check "no queue was left undeleted after the overrun" sh -c "! grep -q 'was not deleted' $FILES/rigd.log"
as_user alice $C run 8 200 13500 > "$FILES/after-overrun.txt" 2>&1
echo "exit $?" >> "$FILES/after-overrun.txt"
check "after a tail past the ring, a new queue still works" grep -qx 'exit 0' "$FILES/after-overrun.txt"

rig-queue-client $RIG_SOCK 0000:00:06.0 bad > "$FILES/not-held.txt" 2>&1
cat "$FILES/not-held.txt"
check "a device rig does not hold has no session to lend queues from" \
  grep -q '^FAIL open a DMA session on 0000:00:06.0: No DMA pool' "$FILES/not-held.txt"

dmesg > "$FILES/dmesg.txt"
check "no DMAR fault while queues were lent and reclaimed" sh -c "! grep -q 'DMAR: \[DMA' $FILES/dmesg.txt"

# A read into an IOVA outside every lease (and every mapping): the IOMMU faults, the
# command fails, the controller and the next client carry on.
as_user alice $C stray 34342961152 > "$FILES/stray.txt" 2>&1
echo "exit $?" >> "$FILES/stray.txt"; cat "$FILES/stray.txt"; lines "$FILES/stray.txt" alice-stray
check "the IOMMU blocks the stray DMA write (DMAR fault at 0x7ff000000)" \
  dmesg_wait "DMAR: \[DMA Write.*\[00:05.0\] fault addr 0x7ff000000"
as_user alice $C run 8 200 14000 > "$FILES/after-stray.txt" 2>&1
echo "exit $?" >> "$FILES/after-stray.txt"
check "after the stray read, a new queue still works" grep -qx 'exit 0' "$FILES/after-stray.txt"
$RIG attach $N > "$FILES/attach.txt" 2>&1
check "nvme given back" [ $? = 0 ]
check "nvme driver back on $N" [ "$(drv_of $N)" = nvme ]
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
check "the nvme driver reads its disk again" dd if=/dev/nvme0n1 of=/dev/null bs=4096 count=16
stop_rigd
echo 0 > /proc/sys/vm/nr_hugepages
grep -E 'queue|NVMe' "$FILES/rigd.log" | tail -20
