# rig-vm: kind=inspect timeout=30
# The guard says yes in the guest booted by boot.sh, and no for a root that lacks this
# boot's marker (what a host looks like to it).
check "rig-vm-guard accepts this guest" rig-vm-guard
FAKE=/tmp/fake-root
mkdir -p $FAKE/sys/class/dmi/id $FAKE/proc $FAKE/run/rig-vm
cp /sys/class/dmi/id/sys_vendor $FAKE/sys/class/dmi/id/
cp /proc/cmdline $FAKE/proc/
echo 0000000000000000 > $FAKE/run/rig-vm/guest
check "rig-vm-guard refuses a root with another boot's marker" sh -c "! rig-vm-guard $FAKE"
sed 's/rig.guest=[0-9a-f]*//' /proc/cmdline > $FAKE/proc/cmdline
cp /run/rig-vm/guest $FAKE/run/rig-vm/guest
check "rig-vm-guard refuses a root without rig.guest= on its command line" sh -c "! rig-vm-guard $FAKE"
