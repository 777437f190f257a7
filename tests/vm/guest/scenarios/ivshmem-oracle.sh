# rig-vm: kind=takeover timeout=60
# The guest writes a line into ivshmem's BAR2 through VFIO; the host then reads the same
# bytes from the file behind the memory backend (the host test checks it: an oracle that
# does not trust the guest's own reading).
check "modprobe vfio-pci" modprobe vfio-pci
check "modprobe vfio_iommu_type1" modprobe vfio_iommu_type1
SHM=$(bdf_of 1af4 1110)
check "ivshmem-plain is present" [ -n "$SHM" ]
check "$SHM bound to vfio-pci" to_vfio "$SHM"
TEXT="rig-vm ivshmem oracle $(arg rig.guest)"
edu-vfio bar-write "$SHM" 2 "$TEXT"
echo "$TEXT" > "$FILES/written.txt"
from_vfio "$SHM"
