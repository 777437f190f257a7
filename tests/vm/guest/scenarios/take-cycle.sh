# rig-vm: kind=takeover timeout=240
# Take-over on a real kernel: rigd detaches and gives back devices, asserted from sysfs.
# bochs-display (00:03.0, bochs-drm) in vfio and sysfs modes; refused while a process
# holds its DRM node; nvme refused while its disk is mounted, then reset by FLR; edu
# behind a root port reset by a bus reset; the ICH9 group (00:1f.*) refused as not
# viable, and taken whole with --entire-group.
RIG="rigctl --socket $RIG_SOCK"
B=0000:00:03.0
check "rigd starts" start_rigd_take

$RIG detach $B --mode vfio > "$FILES/detach-vfio.txt" 2>&1
check "detach $B (vfio) succeeds" [ $? = 0 ]
check "$B is bound to vfio-pci" [ "$(drv_of $B)" = vfio-pci ]
check "driver_override is vfio-pci" grep -qx vfio-pci /sys/bus/pci/devices/$B/driver_override
check "rigd maps the BAR through the VFIO device" grep -q 'vfio-device' /proc/$RIGD_PID/maps
# A second rigd (own socket and journal) meets the first one's flock on config.
mkdir -p /tmp/rig2
printf '[server]\nsocket = "/tmp/rig2/s"\n[paths]\nstate_dir = "/tmp/rig2/state"\n' > /tmp/rig2/rigd.toml
rigd --config /tmp/rig2/rigd.toml > "$FILES/rigd2.log" 2>&1 &
RIGD2=$!
i=0; while [ ! -S /tmp/rig2/s ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
rigctl --socket /tmp/rig2/s detach $B > "$FILES/detach-second-rigd.txt" 2>&1
check "a second rigd cannot take $B: it meets the flock" grep -q "holds the lock on $B" "$FILES/detach-second-rigd.txt"
kill $RIGD2; wait $RIGD2 2>/dev/null
$RIG status > "$FILES/status-vfio.txt" 2>&1
check "status lists $B in vfio mode, was bochs-drm" grep -q "$B  held  vfio mode, was bochs-drm" "$FILES/status-vfio.txt"
$RIG detach $B --mode vfio > "$FILES/detach-twice.txt" 2>&1
check "a second detach is refused" grep -q "already held" "$FILES/detach-twice.txt"
$RIG reset $B > "$FILES/reset-vfio.txt" 2>&1
echo "reset of $B: $(cat "$FILES/reset-vfio.txt")"
$RIG attach $B > "$FILES/attach-vfio.txt" 2>&1
check "attach $B succeeds" [ $? = 0 ]
check "$B is back on bochs-drm" [ "$(drv_of $B)" = bochs-drm ]
check "driver_override is cleared" grep -qx '(null)' /sys/bus/pci/devices/$B/driver_override

$RIG detach $B --mode sysfs > "$FILES/detach-sysfs.txt" 2>&1
check "detach $B (sysfs) succeeds" [ $? = 0 ]
check "$B has no driver in sysfs mode" [ "$(drv_of $B)" = none ]
check "$B is enabled" grep -qx 1 /sys/bus/pci/devices/$B/enable
check "rigd maps the BAR through resource0" grep -q "$B/resource0" /proc/$RIGD_PID/maps
# An admin turns on DMA through rigd; the give-back must turn it off.
$RIG master $B on > "$FILES/master-sysfs.txt" 2>&1
check "bus mastering is on while held (rigctl master)" bus_master $B
$RIG attach $B > "$FILES/attach-sysfs.txt" 2>&1
check "attach from sysfs mode succeeds" [ $? = 0 ]
check "$B is back on bochs-drm after sysfs mode" [ "$(drv_of $B)" = bochs-drm ]

# A process holding the DRM node: refused with its pid, accepted once it is gone.
CARD=$(ls /sys/bus/pci/devices/$B/drm | grep '^card' | head -1)
sleep 60 < /dev/dri/$CARD &
HOLDER=$!
sleep 0.2
$RIG detach $B > "$FILES/detach-held.txt" 2>&1
check "detach is refused while pid $HOLDER holds /dev/dri/$CARD" grep -q "pid $HOLDER (sleep) holds /dev/dri/$CARD" "$FILES/detach-held.txt"
check "$B stays on bochs-drm" [ "$(drv_of $B)" = bochs-drm ]
kill $HOLDER; wait $HOLDER 2>/dev/null
$RIG detach $B > "$FILES/detach-after-holder.txt" 2>&1
check "detach is accepted once the holder is gone" [ "$(drv_of $B)" = vfio-pci ]
$RIG attach $B > /dev/null 2>&1
check "$B back on bochs-drm" [ "$(drv_of $B)" = bochs-drm ]

# nvme: refused while mounted; after umount, taken, reset by FLR, given back.
N=$(bdf_of 1b36 0010)
# The namespace head (nvme0n1), not a multipath controller path (nvme0c0n1).
DISK=/dev/$(ls /sys/block | grep -E '^nvme[0-9]+n[0-9]+$' | head -1)
mkdir -p /mnt/nv
if mke2fs -q -F "$DISK" > /dev/null 2>&1 && mount -t ext4 "$DISK" /mnt/nv 2>/dev/null; then
  $RIG detach $N > "$FILES/detach-nvme-mounted.txt" 2>&1
  check "nvme detach is refused while $DISK is mounted" grep -q "is mounted on /mnt/nv" "$FILES/detach-nvme-mounted.txt"
  check "nvme stays bound" [ "$(drv_of $N)" = nvme ]
  umount /mnt/nv
else
  check "mkfs and mount of $DISK (for the mounted-disk check)" false
fi
$RIG detach $N > "$FILES/detach-nvme.txt" 2>&1
check "nvme detach after umount" [ "$(drv_of $N)" = vfio-pci ]
$RIG reset $N --method flr > "$FILES/reset-nvme-flr.txt" 2>&1
check "nvme reset by FLR" grep -q "reset by flr" "$FILES/reset-nvme-flr.txt"
$RIG reset $N > "$FILES/reset-nvme-auto.txt" 2>&1
check "nvme reset through VFIO (auto)" grep -q "reset by vfio" "$FILES/reset-nvme-auto.txt"
$RIG attach $N > "$FILES/attach-nvme.txt" 2>&1
check "nvme back on its driver" [ "$(drv_of $N)" = nvme ]

# edu behind the root port: a bus reset.
E=0000:01:00.0
$RIG detach $E > "$FILES/detach-edu.txt" 2>&1
check "edu $E taken (it had no driver)" [ "$(drv_of $E)" = vfio-pci ]
$RIG reset $E --method bus > "$FILES/reset-edu-bus.txt" 2>&1
check "edu reset by a bus reset" grep -q "reset by bus" "$FILES/reset-edu-bus.txt"
$RIG attach $E > "$FILES/attach-edu.txt" 2>&1
check "edu given back driverless" [ "$(drv_of $E)" = none ]

# The ICH9 functions share one IOMMU group: SATA alone is not viable while SMBus is
# bound to its driver.
S=0000:00:1f.2
check "modprobe ahci and i2c-i801 (bind SATA and SMBus)" sh -c 'modprobe ahci && modprobe i2c-i801'
$RIG detach $S > "$FILES/detach-group.txt" 2>&1
check "a non-viable group is refused, naming the members" grep -q "0000:00:1f.3 (i801_smbus)" "$FILES/detach-group.txt"
check "SATA stays on ahci" [ "$(drv_of $S)" = ahci ]
$RIG detach $S --entire-group > "$FILES/detach-entire-group.txt" 2>&1
check "--entire-group takes SATA" [ "$(drv_of $S)" = vfio-pci ]
check "--entire-group takes SMBus too" [ "$(drv_of 0000:00:1f.3)" = vfio-pci ]
$RIG attach $S > "$FILES/attach-group.txt" 2>&1
check "SATA back on ahci" [ "$(drv_of $S)" = ahci ]
check "the driverless LPC bridge stays driverless" [ "$(drv_of 0000:00:1f.0)" = none ]
check "SMBus back on i801_smbus" [ "$(drv_of 0000:00:1f.3)" = i801_smbus ]

$RIG status > "$FILES/status-end.txt" 2>&1
check "rigd holds nothing at the end" grep -q "holds no devices" "$FILES/status-end.txt"
cat "$FILES"/*.txt
stop_rigd
