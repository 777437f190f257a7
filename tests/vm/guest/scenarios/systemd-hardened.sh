# rig-vm: kind=takeover timeout=300
# The hardened unit (docs/systemd.md; full flavour, iommu=pt so that sysfs mode's physical
# addresses reach RAM): rigd runs under the hardened rigd.service exactly as the .deb
# ships it (init unpacked the .deb; no drop-in, no override), and does the whole job
# there: take edu in vfio mode, alice (group rig) leases it and drives its DMA, give it
# back; the same in sysfs mode (config space, enable, resource0, pagemap's physical
# addresses); and a holder of the stand-in GPU's DRM node, another user's process, is
# still found through /proc. Also: the unit's exposure by systemd-analyze here, rigd's
# bounding set, and what its mount namespace leaves writable; one scrape of the metrics
# socket (`rigctl metrics`) whose figures follow what was done, and the audit lines in
# `journalctl -o json` with the outcome rigctl showed.
L=0000:01:00.0
GPU=0000:00:03.0
C="rig-lease-client $RIG_SOCK"
unit() { systemctl show -p "$1" --value rigd; }
lines() { # lines FILE WHO: one check per ok/FAIL line of a client's output
  while read -r line; do
    case "$line" in
      "ok "*) check "$2: ${line#ok }" true ;;
      "FAIL "*) check "$2: ${line#FAIL }" false ;;
    esac
  done < "$1"
}
add_users
echo 16 > /proc/sys/vm/nr_hugepages
check "rigd.service is the .deb's (/lib/systemd/system, no drop-ins)" \
  sh -c "[ \"\$(systemctl show -p FragmentPath --value rigd)\" = /lib/systemd/system/rigd.service ] && [ -z \"\$(systemctl show -p DropInPaths --value rigd)\" ]"
systemd-analyze security rigd.service > "$FILES/security.txt" 2>&1
X=$(sed -n 's/.*Overall exposure level for rigd.service: \([0-9.]*\).*/\1/p' "$FILES/security.txt")
check "systemd-analyze security rigd.service in the guest: ${X:-none} <= 2.5" awk "BEGIN { exit !(\"${X:-99}\" + 0 <= 2.5) }"
check "modules-load.d loaded vfio-pci at boot" [ -d /sys/module/vfio_pci ]
check "and vfio_iommu_type1" [ -d /sys/module/vfio_iommu_type1 ]

cat > /etc/rig/rigd.toml <<TOML
[take]
allow_sysfs_mode = true
[dma]
pool_bytes = 4194304
[[lease.allow]]
devices = ["$L"]
groups = ["rig"]
[metrics]
listen = "unix:/run/rig/metrics.sock"
TOML
check "systemctl start rigd" timeout 60 systemctl start rigd
check "rigd answers" timeout 30 rigctl version
P=$(unit MainPID)
cp /proc/$P/status "$FILES/rigd-status.txt"; cp /proc/$P/mountinfo "$FILES/rigd-mountinfo.txt"
# CAP_CHOWN (0), CAP_DAC_READ_SEARCH (2), CAP_IPC_LOCK (14), CAP_SYS_PTRACE (19),
# CAP_SYS_ADMIN (21).
check "rigd's bounding set is the five named capabilities" grep -q '^CapBnd:[[:space:]]*0000000000284005$' "$FILES/rigd-status.txt"
check "rigd runs under a seccomp filter" grep -q '^Seccomp:[[:space:]]*2$' "$FILES/rigd-status.txt"
mnt() { awk -v m="$1" '$5 == m { split($6, o, ","); print o[1] }' "$FILES/rigd-mountinfo.txt" | tail -n1; }
check "rigd sees /sys read-only ($(mnt /sys))" [ "$(mnt /sys)" = ro ]
check "and /sys/bus/pci writable ($(mnt /sys/bus/pci))" [ "$(mnt /sys/bus/pci)" = rw ]
check "and /sys/devices writable ($(mnt /sys/devices))" [ "$(mnt /sys/devices)" = rw ]
check "and /proc/sys read-only ($(mnt /proc/sys))" [ "$(mnt /proc/sys)" = ro ]
check "and / (so /usr and /etc) read-only ($(mnt /))" [ "$(mnt /)" = ro ]
check "and /var/lib/rig writable ($(mnt /var/lib/rig))" [ "$(mnt /var/lib/rig)" = rw ]
check "rigd has no network but loopback" [ "$(tail -n +3 /proc/$P/net/dev | wc -l)" = 1 ]

# Another user's holder of the GPU's DRM node: found through /proc/PID/fd, which needs
# CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH.
CARD=$(ls /sys/bus/pci/devices/$GPU/drm 2> /dev/null | grep '^card' | head -n1)
check "the stand-in GPU has a DRM node (${CARD:-none})" [ -n "$CARD" ]
chmod 0666 /dev/dri/$CARD
as_user alice sh -c "exec sleep 60 < /dev/dri/$CARD" &
HOLDER=$!
sleep 0.5
timeout 30 rigctl detach $GPU --mode vfio > "$FILES/detach-gpu.txt" 2>&1
GPU_RC=$?
cat "$FILES/detach-gpu.txt"
check "that refusal exits 6, busy: held by another (docs/rigctl.md): ${GPU_RC}" [ "$GPU_RC" = 6 ]
HPID=$(sed -n "s/.* pid \([0-9]*\) (sleep) holds \/dev\/dri\/$CARD.*/\1/p" "$FILES/detach-gpu.txt")
check "a detach is refused, naming the holder of /dev/dri/$CARD (pid ${HPID:-none})" [ -n "$HPID" ]
check "the holder it names is alice's (uid 1000)" sh -c "awk '/^Uid:/ { exit \$2 != 1000 }' /proc/$HPID/status"
check "the GPU kept its driver" [ "$(drv_of $GPU)" = bochs-drm ]
[ -n "$HPID" ] && kill $HPID
wait $HOLDER 2> /dev/null

# vfio mode: take, a lease with DMA by IOVA, give back.
rigctl detach $L --mode vfio > "$FILES/detach-vfio.txt" 2>&1
cat "$FILES/detach-vfio.txt"
check "vfio: edu held on vfio-pci" [ "$(drv_of $L)" = vfio-pci ]
as_user alice $C $L dma 3 > "$FILES/lease-vfio.txt" 2>&1
echo "exit $?" >> "$FILES/lease-vfio.txt"; cat "$FILES/lease-vfio.txt"; lines "$FILES/lease-vfio.txt" vfio-lease
check "vfio: alice's lease drove edu's DMA and exited 0" grep -qx 'exit 0' "$FILES/lease-vfio.txt"
check "vfio: give back" sh -c "rigctl attach $L > $FILES/attach-vfio.txt 2>&1"
check "vfio: edu is driverless again" [ "$(drv_of $L)" = none ]
check "vfio: bus mastering off" no_bus_master $L

# sysfs mode: take, a lease with DMA by physical address, give back.
rigctl detach $L --mode sysfs > "$FILES/detach-sysfs.txt" 2>&1
cat "$FILES/detach-sysfs.txt"
check "sysfs: edu held" sh -c "rigctl status 2>&1 | grep -q $L"
rigctl metrics > "$FILES/metrics.txt" 2> "$FILES/metrics.err"
check "rigctl metrics scrapes unix:/run/rig/metrics.sock ($(head -c 200 "$FILES/metrics.err"))" [ -s "$FILES/metrics.txt" ]
check "metrics: rig_up 1" grep -qx 'rig_up 1' "$FILES/metrics.txt"
check "metrics: rig_device_held names edu, held in sysfs mode" grep -q "^rig_device_held{device=\"$L\",mode=\"sysfs\",.*} 1$" "$FILES/metrics.txt"
N=$(awk '/^rig_rpc_requests_total\{method="Rig.Detach"/ { n += $NF } END { print n + 0 }' "$FILES/metrics.txt")
check "metrics: Rig.Detach counted $N times, >= the 3 this scenario called" [ "$N" -ge 3 ]
N=$(awk '/^rig_takeover_step_seconds_count\{method="Rig.Detach"/ { n += $NF } END { print n + 0 }' "$FILES/metrics.txt")
check "metrics: detach steps timed ($N)" [ "$N" -ge 2 ]
as_user alice $C $L dma 3 > "$FILES/lease-sysfs.txt" 2>&1
echo "exit $?" >> "$FILES/lease-sysfs.txt"; cat "$FILES/lease-sysfs.txt"; lines "$FILES/lease-sysfs.txt" sysfs-lease
check "sysfs: alice's lease drove edu's DMA and exited 0" grep -qx 'exit 0' "$FILES/lease-sysfs.txt"
check "sysfs: give back (--json)" sh -c "rigctl attach $L --json > $FILES/attach-sysfs.json 2>&1"
cat "$FILES/attach-sysfs.json"
check "sysfs: rigctl says outcome ok" grep -q '"outcome": "ok"' "$FILES/attach-sysfs.json"
check "sysfs: bus mastering off" no_bus_master $L
check "sysfs: rigd holds nothing" sh -c "! rigctl status 2>&1 | grep -q $L"

# Audit lines, as a program reads them: one JSON object per line.
journalctl -b -o json --no-pager SYSLOG_IDENTIFIER=rigd > "$FILES/audit.json" 2>&1
audit() { # ACTION DEVICE OUTCOME: a line of root's rigctl with every structured field
  grep "\"RIG_ACTION\":\"$1\"" "$FILES/audit.json" | grep "\"RIG_DEVICE\":\"$2\"" |
    grep "\"RIG_OUTCOME\":\"$3\"" | grep '"RIG_UID":"0"' | grep '"RIG_PID":"[1-9][0-9]*"' |
    grep '"RIG_COMM":"rigctl"' | grep -q '"RIG_DURATION_US":"[0-9]*"'
}
check "audit: edu's take, journal JSON with uid, pid, comm, device, action, outcome ok, duration" audit Rig.Detach $L ok
check "audit: edu's give-back, outcome ok as rigctl --json said" audit Rig.Attach $L ok
check "audit: the refused take of the GPU, outcome failed (reason REFUSED)" sh -c "grep '\"RIG_DEVICE\":\"$GPU\"' $FILES/audit.json | grep '\"RIG_OUTCOME\":\"failed\"' | grep -q '\"RIG_REASON\":\"REFUSED\"'"
journalctl -u rigd -b --no-pager > "$FILES/rigd-journal.txt" 2>&1
check "rigd logged no EPERM from the system-call filter" sh -c "! grep -qi 'operation not permitted' $FILES/rigd-journal.txt"
systemctl stop rigd.service rigd.socket
echo 0 > /proc/sys/vm/nr_hugepages
grep -i 'overall\|✗' "$FILES/security.txt" | tail -n 20
