# rig-vm: kind=takeover timeout=240
# The README's demo: systemd starts rigd from the repo's unit, then rigctl shows the
# emulated devices and the stand-in GPU (bochs-display at 00:03.0), as a user would,
# takes that GPU from bochs-drm to vfio-pci and gives it back. Then alice (group rig,
# not root) leases DMA memory and drives an NVMe queue rigd lends her, and leases edu
# whole, drives its DMA engine herself through the VFIO fd and gives it back.
add_users
systemctl daemon-reload
show() { echo; echo "\$ $*"; "$@"; }
# The shipped example config with what this 2 GiB machine needs: 8 MiB DMA pools,
# whose hugepages rigd reserves itself, and a lease rule for group rig on edu.
echo; echo "\$ cat >> /etc/rig/rigd.toml"
tee -a /etc/rig/rigd.toml <<'TOML'
[dma]
pool_bytes = 8388608
reserve_hugepages = true

[[lease.allow]]
devices = ["0000:01:00.0"]
groups = ["rig"]
TOML
show systemctl start rigd
check "rigd is active" [ "$(systemctl is-active rigd)" = active ]
show systemctl status rigd --no-pager --lines=3
show rigctl version
show rigctl list
check "rigctl list" [ $? = 0 ]
show rigctl show 0000:00:03.0
check "rigctl show 0000:00:03.0 (bochs-display)" [ $? = 0 ]
echo; echo "\$ su alice -c 'rigctl version'    # alice is in group rig, not root"
as_user alice rigctl version
check "alice (group rig) reaches rigd" [ $? = 0 ]
echo; echo "\$ su bob -c 'rigctl version'      # bob is not in group rig"
as_user bob rigctl version
check "bob is refused" [ $? != 0 ]
show rigctl detach 0000:00:03.0 --mode vfio 2>&1 | tee "$FILES/detach.txt"
check "rigctl detach 0000:00:03.0 (to vfio-pci)" [ "$(drv_of 0000:00:03.0)" = vfio-pci ]
check "the detach warns of nothing (its DMA pool was made)" sh -c "! grep -qi 'warning\|no DMA pool' $FILES/detach.txt"
show rigctl status
show rigctl attach 0000:00:03.0
check "rigctl attach 0000:00:03.0 (back to bochs-drm)" [ "$(drv_of 0000:00:03.0)" = bochs-drm ]

# A lent queue: rigd holds the NVMe controller and lends alice an I/O queue pair
# whose rings are in her own DMA memory; she writes and reads 64 blocks through it.
show rigctl detach 0000:00:05.0 --mode vfio 2>&1 | tee "$FILES/detach-nvme.txt"
check "the NVMe controller held, no warning" sh -c "[ \$(basename \$(readlink /sys/bus/pci/devices/0000:00:05.0/driver)) = vfio-pci ] && ! grep -qi 'warning' $FILES/detach-nvme.txt"
echo; echo "\$ su alice -c 'rig-queue-client /run/rig/rigd.sock 0000:00:05.0 run 8 64 0'"
as_user alice rig-queue-client /run/rig/rigd.sock 0000:00:05.0 run 8 64 0 | tee "$FILES/queue.txt"
check "alice wrote and read back 64 blocks through a lent queue" grep -q '^ok .*read back as written' "$FILES/queue.txt"
show rigctl attach 0000:00:05.0
check "the nvme driver has its controller back" [ "$(drv_of 0000:00:05.0)" = nvme ]

# A whole-device lease: alice gets edu's VFIO device fd, maps its BAR, programs its
# DMA engine herself, and gives it back; rigd turns bus mastering off and resets it.
show rigctl detach 0000:01:00.0 --mode vfio 2>&1 | tee "$FILES/detach-edu.txt"
check "edu held, no warning" sh -c "[ \$(basename \$(readlink /sys/bus/pci/devices/0000:01:00.0/driver)) = vfio-pci ] && ! grep -qi 'warning' $FILES/detach-edu.txt"
echo; echo "\$ su alice -c 'rig-lease-client /run/rig/rigd.sock 0000:01:00.0 dma'"
as_user alice rig-lease-client /run/rig/rigd.sock 0000:01:00.0 dma | tee "$FILES/lease.txt"
check "alice leased edu whole, drove its DMA and gave it back" grep -q '^ok gave 0000:01:00.0 back' "$FILES/lease.txt"
show rigctl status
check "edu is held again, leased to no one" sh -c "rigctl status | grep -q '0000:01:00.0  held' && ! rigctl status | grep -q 'leased whole'"
show rigctl attach 0000:01:00.0
check "edu given back" [ ! -e /sys/bus/pci/devices/0000:01:00.0/driver ]
systemctl stop rigd.socket rigd.service
