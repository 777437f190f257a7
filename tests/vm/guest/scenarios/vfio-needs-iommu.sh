# rig-vm: kind=takeover timeout=30
# Without an IOMMU, Debian's kernel has no VFIO no-IOMMU mode: vfio-pci refuses the device.
# rig must report that, not hang; this pins down the kernel's side of it.
check "modprobe vfio-pci" modprobe vfio-pci
EDU=0000:00:06.0
to_vfio "$EDU"
check "vfio-pci does not take edu without an IOMMU" [ "$(drv_of $EDU)" != vfio-pci ]
check "no /dev/vfio group nodes" [ -z "$(ls /dev/vfio 2>/dev/null | grep -v '^vfio$')" ]
from_vfio "$EDU"
