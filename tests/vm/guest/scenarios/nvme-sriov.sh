# rig-vm: kind=takeover timeout=500 devices=sriov
# The queues' isolated mode (docs/queues.md): an SR-IOV NVMe controller (QEMU's, behind
# its own root port) gets two secondary controllers through its kernel driver (nvme-virt:
# the admin commands nvme-cli's virt-mgmt sends); each VF is its own IOMMU group, rigd
# holds each in vfio mode with a container and DMA pool of its own, and lends each VF's
# queues to one client at a time: a second client is refused while the first holds it,
# gets the other VF meanwhile, and gets the first once the holder is killed and reclaimed.
# A stray read faults in the VF's own IOMMU domain. Then the VFs go back and the PF's disk
# works.
PF=0000:02:00.0
VF1=0000:02:00.1
VF2=0000:02:00.2
RIG="rigctl --socket $RIG_SOCK"
check "modprobe vfio-pci" modprobe vfio-pci
check "modprobe vfio_iommu_type1" modprobe vfio_iommu_type1
echo 32 > /proc/sys/vm/nr_hugepages
add_users
i=0; while [ -z "$(ls /sys/bus/pci/devices/$PF/nvme 2> /dev/null)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
CTRL=$(ls /sys/bus/pci/devices/$PF/nvme | head -1)
check "the nvme driver holds the PF as $CTRL" [ -n "$CTRL" ]
DEV=/dev/$CTRL
[ -c "$DEV" ] || mknod "$DEV" c $(tr ':' ' ' < /sys/bus/pci/devices/$PF/nvme/$CTRL/dev)
cat /sys/bus/pci/devices/$PF/sriov_totalvfs > "$FILES/totalvfs.txt"
nvme-virt $DEV caps | tee "$FILES/caps-before.txt"
check "release the primary's flexible VI" nvme-virt $DEV mgmt 0 1 1 0
check "release the primary's flexible VQ" nvme-virt $DEV mgmt 0 0 1 0
check "reset the primary" nvme-virt $DEV reset
echo 1 > /sys/bus/pci/devices/$PF/reset
nvme-virt $DEV caps | tee "$FILES/caps-after.txt"
echo 0 > /sys/bus/pci/devices/$PF/sriov_drivers_autoprobe
echo 2 > /sys/bus/pci/devices/$PF/sriov_numvfs
check "two VFs enabled" [ "$(cat /sys/bus/pci/devices/$PF/sriov_numvfs)" = 2 ]
nvme-virt $DEV list | tee "$FILES/secondary.txt"
for sc in $(sed -n 's/^scid \([0-9]*\) .*/\1/p' "$FILES/secondary.txt"); do
  check "assign VI to $sc" nvme-virt $DEV mgmt $sc 1 8 2
  check "assign VQ to $sc" nvme-virt $DEV mgmt $sc 0 8 4
  check "online $sc" nvme-virt $DEV mgmt $sc 0 9 0
done
nvme-virt $DEV list | tee "$FILES/secondary-online.txt"
list_devices | tee "$FILES/devices.txt"
G1=$(basename "$(readlink /sys/bus/pci/devices/$VF1/iommu_group)")
G2=$(basename "$(readlink /sys/bus/pci/devices/$VF2/iommu_group)")
GP=$(basename "$(readlink /sys/bus/pci/devices/$PF/iommu_group)")
echo "groups pf $GP vf1 $G1 vf2 $G2"
check "each VF is its own IOMMU group ($G1, $G2, PF $GP)" sh -c "[ $G1 != $G2 ] && [ $G1 != $GP ] && [ $G2 != $GP ]"
ls /sys/kernel/iommu_groups/$G1/devices /sys/kernel/iommu_groups/$G2/devices

check "rigd listens" start_rigd_lend
$RIG list > "$FILES/list.txt" 2>&1; cat "$FILES/list.txt"
$RIG show $VF1 > "$FILES/show-vf1.txt" 2>&1; cat "$FILES/show-vf1.txt"
$RIG detach $VF1 --mode vfio > "$FILES/detach1.txt" 2>&1; cat "$FILES/detach1.txt"
check "VF1 held in vfio mode" [ "$(drv_of $VF1)" = vfio-pci ]
$RIG detach $VF2 --mode vfio > "$FILES/detach2.txt" 2>&1; cat "$FILES/detach2.txt"
check "VF2 held in vfio mode" [ "$(drv_of $VF2)" = vfio-pci ]
C1="rig-queue-client $RIG_SOCK $VF1"
C2="rig-queue-client $RIG_SOCK $VF2"
as_user alice $C1 hold 8 > "$FILES/hold.txt" 2>&1 &
H=$!
i=0; while ! grep -q '^holding' "$FILES/hold.txt" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
cat "$FILES/hold.txt"
check "a client holds VF1's queue with commands in flight" grep -q '^holding queue 1 with 8 commands in flight' "$FILES/hold.txt"
HPID=$(for p in /proc/[0-9]*; do
  tr '\0' ' ' < $p/cmdline 2> /dev/null | grep -q "^rig-queue-client .* $VF1 hold " && echo ${p#/proc/}
done | head -1)
as_user alice $C1 run 1 10 9000 > "$FILES/second.txt" 2>&1
echo "exit $?" >> "$FILES/second.txt"; cat "$FILES/second.txt"
check "a second client on VF1 is refused, naming the holder (pid $HPID)" \
  sh -c "grep -qx 'exit 1' $FILES/second.txt && grep -q 'one client at a time and uid 1000 (pid $HPID) holds them' $FILES/second.txt"
$RIG show $VF1 > "$FILES/show-vf1-held.txt" 2>&1
check "rigctl show names VF1's physical function" grep -q "virtual function of $PF" "$FILES/show-vf1-held.txt"
# The isolated mode by name: the client names the PF and gets the VF no one uses.
as_user alice rig-queue-client $RIG_SOCK $PF isolated 8 500 4000 > "$FILES/vf2.txt" 2>&1
echo "exit $?" >> "$FILES/vf2.txt"; cat "$FILES/vf2.txt"
check "a client asking for an isolated queue on the PF gets the free VF2" grep -q "^ok isolated on $VF2" "$FILES/vf2.txt"
check "meanwhile a client's queue on VF2 writes and reads back 500 blocks" grep -qx 'exit 0' "$FILES/vf2.txt"
$RIG queues > "$FILES/queues.txt" 2>&1; cat "$FILES/queues.txt"
$RIG queues --json > "$FILES/queues.json" 2>&1
check "rigctl queues shows the holder's queue on VF1" grep -q "$VF1" "$FILES/queues.txt"
echo "killing the holder, pid $HPID"
[ -n "$HPID" ] && kill -9 $HPID
wait $H 2> /dev/null
reclaimed() { tr -d '\033' < "$FILES/rigd.log" | sed 's/\[[0-9;]*m//g' | grep -q "queues reclaimed.*$VF1.*freed=1"; }
i=0; while ! reclaimed && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "rigd reclaimed the killed client's queue on VF1" reclaimed
as_user alice $C1 run 8 500 0 > "$FILES/vf1.txt" 2>&1
echo "exit $?" >> "$FILES/vf1.txt"; cat "$FILES/vf1.txt"
check "after the reclaim a new client gets VF1's queue 1 again (the controller deleted it)" \
  grep -q '^ok queue 1 of' "$FILES/vf1.txt"
check "and writes and reads back 500 blocks through it" grep -qx 'exit 0' "$FILES/vf1.txt"
as_user alice $C2 hold 4 > "$FILES/hold2.txt" 2>&1 &
H2=$!
as_user alice $C1 hold 4 > "$FILES/hold1.txt" 2>&1 &
H1=$!
i=0; while ! { grep -q '^holding' "$FILES/hold1.txt" && grep -q '^holding' "$FILES/hold2.txt"; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
as_user alice rig-queue-client $RIG_SOCK $PF isolated 8 10 0 > "$FILES/none-free.txt" 2>&1
echo "exit $?" >> "$FILES/none-free.txt"; cat "$FILES/none-free.txt"
check "with both VFs in use an isolated request is refused naming them" \
  grep -q "No virtual function of $PF is free for an isolated queue: $VF1, $VF2 serve other clients" "$FILES/none-free.txt"
# $H1 and $H2 are as_user's subshells: kill the clients themselves, found by command line.
for p in /proc/[0-9]*; do
  tr '\0' ' ' < $p/cmdline 2> /dev/null | grep -q '^rig-queue-client .* hold 4 ' && kill -9 ${p#/proc/}
done
wait $H1 $H2 2> /dev/null
# Reclaim runs when rigd sees the connections close: wait until it lists no queue.
i=0; until $RIG queues 2>&1 | grep -q 'No lent queues' || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
check "both holders' queues were reclaimed" sh -c "$RIG queues 2>&1 | grep -q 'No lent queues'"
as_user alice $C1 run 32 1000 0 > "$FILES/both-1.txt" 2>&1 &
A=$!
as_user alice $C2 run 32 1000 4000 > "$FILES/both-2.txt" 2>&1 &
B=$!
wait $A; echo "exit $?" >> "$FILES/both-1.txt"
wait $B; echo "exit $?" >> "$FILES/both-2.txt"
cat "$FILES/both-1.txt" "$FILES/both-2.txt"
check "two clients at once, one per VF, at depth 32: the first exits 0" grep -qx 'exit 0' "$FILES/both-1.txt"
check "two clients at once, one per VF, at depth 32: the second exits 0" grep -qx 'exit 0' "$FILES/both-2.txt"
check "no DMAR fault while VF queues were lent and reclaimed" sh -c "! dmesg | grep -q 'DMAR: \[DMA.*\[02:00'"
as_user alice $C1 stray 34342961152 > "$FILES/stray.txt" 2>&1
echo "exit $?" >> "$FILES/stray.txt"; cat "$FILES/stray.txt"
check "a stray read on VF1 faults in VF1's own IOMMU domain (DMAR fault from 02:00.1)" \
  dmesg_wait "DMAR: \[DMA Write.*\[02:00.1\] fault addr 0x7ff000000"
check "no fault was charged to VF2 or the PF" sh -c "! dmesg | grep -q 'DMAR: \[DMA.*\[02:00.[02]\]'"
$RIG dma > "$FILES/dma.txt" 2>&1; cat "$FILES/dma.txt"
$RIG attach $VF1 > "$FILES/attach1.txt" 2>&1
check "VF1 given back" [ $? = 0 ]
$RIG attach $VF2 > "$FILES/attach2.txt" 2>&1
check "VF2 given back" [ $? = 0 ]
stop_rigd
echo 0 > /sys/bus/pci/devices/$PF/sriov_numvfs
check "the VFs are gone" [ ! -e /sys/bus/pci/devices/$VF1 ]
# The PF's namespace is in its NVMe subsystem (nvme-subsys): find its block device there.
NS=
for sub in /sys/class/nvme-subsystem/*; do
  grep -q rig-sriov "$sub/serial" 2> /dev/null || continue
  for n in "$sub"/nvme*n*; do case ${n##*/} in *c*) ;; *) NS=$n;; esac; done
done
check "the PF's namespace is still there ($NS)" [ -n "$NS" ]
[ -n "$NS" ] && BLK=/dev/${NS##*/} && { [ -b "$BLK" ] || mknod "$BLK" b $(tr ':' ' ' < "$NS/dev"); }
check "the PF's disk still reads, through its kernel driver" dd if="$BLK" of=/dev/null bs=4096 count=16
dmesg | tail -40 > "$FILES/dmesg.txt"
echo 0 > /proc/sys/vm/nr_hugepages
