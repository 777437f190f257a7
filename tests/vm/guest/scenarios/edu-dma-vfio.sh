# rig-vm: kind=takeover timeout=90
# Scenario 3: edu's DMA engine driven through VFIO under the translated IOMMU; the bytes
# check out, and after unmapping, the IOMMU blocks the device (a DMAR fault in dmesg).
# Runs on both edus: 00:06.0 (root bus, 64-bit dma_mask) and 01:00.0 (behind a root port,
# so VFIO_DEVICE_RESET does a bus reset). The take-over issue replaces edu-vfio with rig.
check "modprobe vfio-pci" modprobe vfio-pci
check "modprobe vfio_iommu_type1" modprobe vfio_iommu_type1
set -- $(bdf_of 1234 11e8)
check "two edu devices are present" [ $# = 2 ]
for edu in "$@"; do
  echo "--- edu $edu (reset: $(cat /sys/bus/pci/devices/$edu/reset_method 2>/dev/null || echo none))"
  check "$edu bound to vfio-pci" to_vfio "$edu"
  edu-vfio dma "$edu" | tee "$FILES/edu-vfio-$edu.txt"
  # 0000:01:00.0 -> [01:00.0] as the DMAR fault line spells it.
  check "$edu: DMAR fault logged for the blocked write" \
    dmesg_wait "DMAR: \[DMA Write.*\[${edu#0000:}\] fault addr 0x220000"
  dmesg > "$FILES/dmesg-$edu.txt"
  from_vfio "$edu"
done
check "edu behind the root port offers a bus reset" grep -qw bus /sys/bus/pci/devices/0000:01:00.0/reset_method
