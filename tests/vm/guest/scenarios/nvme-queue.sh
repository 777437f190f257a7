# rig-vm: kind=takeover timeout=300
# rigd's NVMe stage under the translated IOMMU: the NVMe controller (00:05.0),
# bound to vfio-pci, is driven by rigd's nvme stage (reset, admin queue in a pool
# lease, Identify, Number of Queues, Create/Delete I/O queues, Doorbell Buffer Config)
# and an I/O queue pair in a second lease carries 4 KiB writes of a pattern and reads
# back, across ring wraps at depths 1 and 32, rung four ways: BAR0 store, shadow tail
# and BAR0 store, shadow tail and a VFIO ioeventfd kick of fixed value 0 (what rigd
# lends), shadow tail and a kick forwarded by another thread. rig-nvme-probe is one
# root process (no rigd): the lending over the side socket is not in this slice.
# Afterwards the nvme driver takes the controller back and its disk still works.
N=0000:00:05.0
echo 16 > /proc/sys/vm/nr_hugepages
check "16 hugepages reserved" [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 16 ]
check "modprobe vfio-pci" modprobe vfio-pci
check "modprobe vfio_iommu_type1" modprobe vfio_iommu_type1
check "nvme bound to vfio-pci" to_vfio $N
dmesg > "$FILES/dmesg-before.txt"
rig-nvme-probe $N > "$FILES/probe.txt" 2>&1
echo "probe exit status $?" >> "$FILES/probe.txt"
cat "$FILES/probe.txt"
while read -r line; do
  case "$line" in
    "ok "*) check "probe: ${line#ok }" true ;;
    "FAIL "*) check "probe: ${line#FAIL }" false ;;
  esac
done < "$FILES/probe.txt"
check "the probe exited 0" grep -qx "probe exit status 0" "$FILES/probe.txt"
dmesg > "$FILES/dmesg.txt"
check "no DMAR fault while the queues ran" sh -c "! grep -q 'DMAR: \[DMA' $FILES/dmesg.txt"
from_vfio $N
check "nvme driver back on $N" [ "$(drv_of $N)" = nvme ]
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
check "the nvme driver reads its disk again" dd if=/dev/nvme0n1 of=/dev/null bs=4096 count=16
echo 0 > /proc/sys/vm/nr_hugepages
