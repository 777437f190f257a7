# rig-vm: kind=inspect timeout=30
# The boot profile took effect: translated and passthrough have DMAR with the right
# default domain, none has no IOMMU and so no IOMMU groups.
PROFILE=$(arg rig.profile)
dmesg > "$FILES/dmesg.txt"
case $PROFILE in
  translated)
    check "DMAR enabled" grep -q "DMAR: IOMMU enabled" "$FILES/dmesg.txt"
    check "default domain is translated" grep -q "Default domain type: Translated" "$FILES/dmesg.txt"
    check "edu has an IOMMU group" [ -e /sys/bus/pci/devices/0000:00:06.0/iommu_group ];;
  passthrough)
    check "DMAR enabled" grep -q "DMAR: IOMMU enabled" "$FILES/dmesg.txt"
    check "default domain is passthrough" grep -q "Default domain type: Passthrough" "$FILES/dmesg.txt"
    check "edu has an IOMMU group" [ -e /sys/bus/pci/devices/0000:00:06.0/iommu_group ];;
  none)
    check "no DMAR" sh -c "! grep -q 'DMAR: IOMMU enabled' $FILES/dmesg.txt"
    check "no IOMMU groups" [ -z "$(ls /sys/kernel/iommu_groups 2>/dev/null)" ];;
  *) check "known profile '$PROFILE'" false;;
esac
check "bochs-display is driven by bochs-drm" [ "$(drv_of 0000:00:03.0)" = bochs-drm ]
check "VGA is driven by bochs-drm" [ "$(drv_of 0000:00:02.0)" = bochs-drm ]
check "virtio-gpu-pci is driven by virtio-pci" [ "$(drv_of 0000:00:04.0)" = virtio-pci ]
check "nvme is driven by nvme" [ "$(drv_of 0000:00:05.0)" = nvme ]
check "nvme offers FLR" grep -qw flr /sys/bus/pci/devices/0000:00:05.0/reset_method
