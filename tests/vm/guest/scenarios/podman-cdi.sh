# rig-vm: kind=takeover timeout=480
# Containers through CDI (docs/k8s.md; full flavour): a real container engine that speaks
# CDI. Debian's podman 4.3 (crun, conmon; vfs storage: the guest kernel has no overlay
# module; no network) runs containers from an image made here with `podman import` of a
# tarball holding
# rig-lease-client and the libraries it links, nothing else: nothing is pulled. rigd
# runs under the .deb's hardened unit and holds edu (behind its root port, vfio mode);
# `rigctl cdi generate` writes its spec to /var/run/cdi, and `podman run --device
# rig.dev/gpu=BDF` gets the VFIO nodes, the /run/rig mount, RIG_SOCKET/RIG_DEVICE and the
# two hooks from it (docs/k8s.md "CDI specs"). Inside, rig-lease-client leases edu whole
# and runs edu's DMA between its session's memory and the device. Then a container holding
# the lease with DMA in flight is killed with SIGKILL: rigd reclaims and resets edu, the
# poststop hook waits for that and says so, and the next container leases it again. A
# second container asking for the device while it is leased is refused at once: by the
# createRuntime hook, and (a spec without hooks) by rigd's lease itself.
L=0000:01:00.0
K=rig.dev/gpu
IMG=localhost/rig-lease:cdi
PM="podman --log-level=error"
HOOKLOG=$FILES/hooks.log
uptime_s() { cut -d' ' -f1 /proc/uptime; }
journal() { journalctl -u rigd -b --no-pager -o cat | tr -d '\033' | sed 's/\[[0-9;]*m//g'; }
took() { echo "$1 $(uptime_s)" | awk '{printf "%.2f", $2 - $1}'; }
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

# The engine's settings: vfs (no overlay module in this kernel), cgroupfs (no D-Bus
# here), events in a file, nothing of the network.
mkdir -p /etc/containers
cat > /etc/containers/storage.conf <<'CONF'
[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
CONF
cat > /etc/containers/containers.conf <<'CONF'
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
[containers]
log_driver = "k8s-file"
CONF

podman version > "$FILES/podman-version.txt" 2>&1
crun --version > "$FILES/crun-version.txt" 2>&1
conmon --version > "$FILES/conmon-version.txt" 2>&1
dpkg-query -W podman crun conmon netavark golang-github-containers-common > "$FILES/dpkg-versions.txt" 2>&1
cat "$FILES/dpkg-versions.txt"
cat "$FILES/podman-version.txt" "$FILES/crun-version.txt" "$FILES/conmon-version.txt"
PV=$(sed -n 's/^Version: *//p' "$FILES/podman-version.txt" | head -n1)
echo "measure podman-version $PV crun $(sed -n 's/^crun version //p' "$FILES/crun-version.txt")"
check "podman 4.3 is installed (${PV:-none})" sh -c "echo '$PV' | grep -q '^4\.3\.'"

# rigd under the packaged unit, edu held for whole-device leases (root is its admin).
systemctl stop rigd.service 2> /dev/null
cat > /etc/rig/rigd.toml <<'TOML'
[dma]
pool_bytes = 4194304
TOML
check "systemctl start rigd (the .deb's hardened unit)" timeout 60 systemctl start rigd
check "rigd answers" timeout 30 rigctl version
rigctl detach $L --mode vfio > "$FILES/detach.txt" 2>&1
cat "$FILES/detach.txt"
check "edu behind its root port held in vfio mode" [ "$(drv_of $L)" = vfio-pci ]
GROUP=$(basename "$(readlink /sys/bus/pci/devices/$L/iommu_group)")

# The hooks' rigctl, through a wrapper that logs each call, its end and its status, so
# the scenario sees what the engine ran and when.
cat > /usr/local/sbin/rigctl-hook <<HOOK
#!/bin/sh
echo "\$(cut -d' ' -f1 /proc/uptime) start \$*" >> $HOOKLOG
/usr/bin/rigctl "\$@" 2>> $HOOKLOG
rc=\$?
echo "\$(cut -d' ' -f1 /proc/uptime) end rc=\$rc \$*" >> $HOOKLOG
exit \$rc
HOOK
chmod 0755 /usr/local/sbin/rigctl-hook
: > "$HOOKLOG"
rigctl cdi generate --resource $K=id:1234:11e8 --rigctl /usr/local/sbin/rigctl-hook > "$FILES/generate.txt" 2>&1
cat "$FILES/generate.txt"
SPEC=/var/run/cdi/rig-rig.dev_gpu-0000-01-00.0.json
check "rigctl cdi generate wrote $SPEC" [ -f $SPEC ]
cp $SPEC "$FILES/spec.json" 2> /dev/null
check "the spec is CDI 0.5.0" grep -q '"cdiVersion": "0.5.0"' $SPEC
check "the spec names the device's VFIO group node /dev/vfio/$GROUP" grep -q "\"/dev/vfio/$GROUP\"" $SPEC
# The same device without hooks, under another kind, in the engine's other directory:
# shows the lease's own refusal.
rigctl cdi generate --dir /etc/cdi --resource rig.dev/nohook=id:1234:11e8 --rigctl none > "$FILES/generate-nohook.txt" 2>&1

# The image: one program and the C library it links (rig's programs are the release
# build, dynamic: libc, libm, libgcc_s and the loader, at their paths), imported from
# a tarball.
R=$(mktemp -d)
B=$(readlink -f "$(command -v rig-lease-client)")
install -m 0755 "$B" "$R/rig-lease-client"
for lib in $(ldd "$B" | awk '/=> \//{print $3} /^\t\//{print $1}'); do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
tar -C "$R" -cf /tmp/rootfs.tar .
T=$(uptime_s)
$PM import --change 'ENTRYPOINT ["/rig-lease-client"]' /tmp/rootfs.tar $IMG > "$FILES/import.txt" 2>&1
echo "measure podman-import $(took $T) s"
cat "$FILES/import.txt"
check "podman import made $IMG from a local tarball" sh -c "$PM image exists $IMG"

# 1. A container leases edu and runs its DMA; its end gives the device back.
T=$(uptime_s)
timeout 120 $PM run --rm --network=none --device $K=$L $IMG - - dma 5 > "$FILES/dma1.txt" 2>&1
echo "exit $?" >> "$FILES/dma1.txt"
echo "measure podman-run-dma $(took $T) s (podman run to exit: create, hooks, lease, DMA, cleanup; TCG)"
cat "$FILES/dma1.txt"; lines "$FILES/dma1.txt" container
check "the container's lease drove edu's DMA and exited 0" grep -qx 'exit 0' "$FILES/dma1.txt"
check "the CDI env reached it: RIG_DEVICE=$L" grep -q "RIG_DEVICE=$L" "$FILES/dma1.txt"
check "the createRuntime hook ran and let it start" grep -q "end rc=0 .*create-runtime $L" "$HOOKLOG"
check "the poststop hook ran after it and found edu free" grep -q "end rc=0 .*poststop $L" "$HOOKLOG"
check "no bus mastering after the container's end" no_bus_master $L
journal > "$FILES/rigd-journal-1.txt"
check "rigd logged the container's lease end, with a reset" grep -q 'lease ended.*reset=.\{0,1\}vfio' "$FILES/rigd-journal-1.txt"

# 2. A container holds the lease with edu's DMA in flight.
$PM run -d --name hold --network=none --device $K=$L $IMG - - hang > "$FILES/hold-id.txt" 2>&1
i=0; while ! $PM logs hold 2> /dev/null | grep -q '^dma running' && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
$PM logs hold > "$FILES/hold.txt" 2>&1; cat "$FILES/hold.txt"
check "a container holds edu with its DMA running" grep -q '^dma running' "$FILES/hold.txt"
CPID=$($PM inspect --format '{{.State.Pid}}' hold 2> /dev/null)
rigctl status > "$FILES/status-leased.txt" 2>&1
rigctl status --json > "$FILES/status-leased.json" 2>&1
cat "$FILES/status-leased.txt"
check "rigctl status: leased whole to uid 0 (the container's root)" grep -q "leased whole to uid 0" "$FILES/status-leased.txt"
check "the lease's pid is the container's process as the host sees it ($CPID)" \
  sh -c "grep -A6 '\"lease\": {' $FILES/status-leased.json | grep -q '\"pid\": $CPID\b'"

# 3. A second container for the same device: refused at once, not left waiting.
LINES=$(wc -l < "$HOOKLOG")
T=$(uptime_s)
timeout 90 $PM run --rm --network=none --device $K=$L $IMG - - try > "$FILES/second.txt" 2>&1
echo "exit $?" >> "$FILES/second.txt"
echo "measure podman-second-refused $(took $T) s"
tail -n +$((LINES + 1)) "$HOOKLOG" > "$HOOKLOG.second"
cat "$FILES/second.txt"
check "the second container did not start (non-zero exit, no timeout)" sh -c "! grep -qx 'exit 0' $FILES/second.txt && ! grep -qx 'exit 124' $FILES/second.txt"
check "the createRuntime hook refused it, naming the holder" grep -q "$L is leased whole to uid 0 (pid $CPID, session [0-9]*): refusing to start for container" "$HOOKLOG"
check "its program never ran" sh -c "! grep -q '^ok\|^refused' $FILES/second.txt"
check "the refusal is in the journal too (crun drops a hook's stderr)" \
  sh -c "journalctl -t rigctl -b --no-pager -o cat | grep -q 'cdi hook: $L is leased whole to uid 0 (pid $CPID'"
check "a refused container gets no poststop" sh -c "! grep -q 'poststop' $HOOKLOG.second 2> /dev/null"
timeout 90 $PM run --rm --network=none --device rig.dev/nohook=$L $IMG - - try > "$FILES/nohook.txt" 2>&1
echo "exit $?" >> "$FILES/nohook.txt"; cat "$FILES/nohook.txt"
check "without the hook, rigd refuses the second lease, naming the holder" grep -q "^refused Leased: $L is leased whole to uid 0" "$FILES/nohook.txt"
rigctl status > "$FILES/status-still.txt" 2>&1
check "the first container still holds it" grep -q "leased whole to uid 0" "$FILES/status-still.txt"
# A poststop while another container's process holds the lease (a pod's other
# container, a refused start): it says so at once, instead of waiting out its 25 s.
T=$(uptime_s)
echo '{"id": "by-hand"}' | timeout 20 rigctl cdi hook poststop $L > "$FILES/poststop-held.txt" 2>&1
echo "exit $?" >> "$FILES/poststop-held.txt"; cat "$FILES/poststop-held.txt"
check "poststop with a live holder fails at once ($(took $T) s), naming it" \
  grep -q "leased whole to pid $CPID (session [0-9]*), which still runs: not this container's lease (container by-hand)" "$FILES/poststop-held.txt"

# 4. SIGKILL to the holding container: rigd reclaims and resets edu; poststop says so.
cp "$HOOKLOG" "$HOOKLOG.before-kill"
T=$(uptime_s)
$PM kill --signal KILL hold > /dev/null 2>&1
free() { rigctl status > "$FILES/status-poll.txt" 2>&1 && grep -q "$L" "$FILES/status-poll.txt" && ! grep -q 'leased whole' "$FILES/status-poll.txt"; }
i=0; while ! free && [ $i -lt 300 ]; do i=$((i + 1)); done
echo "measure podman-kill-to-free $(took $T) s (podman kill to rigctl status showing edu held and free; TCG)"
check "rigctl status: edu held and free again after the kill" free
journal > "$FILES/rigd-journal.txt"
check "rigd ended the lease of the killed container's process" grep -q "lease ended.*pid=$CPID" "$FILES/rigd-journal.txt"
check "the reclaim reset edu through VFIO and reopened it" sh -c "grep 'lease ended.*pid=$CPID' $FILES/rigd-journal.txt | grep -q 'reset=.\{0,1\}vfio.*reopened=true'"
check "and tore down the MSI the container had set up" sh -c "grep 'lease ended.*pid=$CPID' $FILES/rigd-journal.txt | grep -q 'irqs=\[Msi\]'"
poststopped() { diff "$HOOKLOG.before-kill" "$HOOKLOG" | grep -q "end rc=.*poststop $L"; }
i=0; while ! poststopped && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
echo "measure podman-kill-to-poststop $(took $T) s (podman kill to the poststop hook's end: the engine's cleanup)"
cat "$HOOKLOG"
check "the poststop hook ran for the killed container and saw edu held and free" \
  sh -c "diff $HOOKLOG.before-kill $HOOKLOG | grep -q 'end rc=0 .*poststop $L'"
check "poststop said so, with its time" sh -c "diff $HOOKLOG.before-kill $HOOKLOG | grep -q '$L: held and free again (container [0-9a-f]*)'"
check "no bus mastering after the reclaim" no_bus_master $L
rigctl status > "$FILES/status-after.txt" 2>&1; cat "$FILES/status-after.txt"
check "rigctl status: edu held, no holder" sh -c "grep -q $L $FILES/status-after.txt && ! grep -q 'leased whole' $FILES/status-after.txt"
rigctl dma > "$FILES/dma-after.txt" 2>&1
check "edu's DMA pool is still there" grep -q "$L" "$FILES/dma-after.txt"

# 5. The next container leases it again and its DMA checks out.
timeout 120 $PM run --rm --network=none --device $K=$L $IMG - - dma 9 > "$FILES/dma2.txt" 2>&1
echo "exit $?" >> "$FILES/dma2.txt"; cat "$FILES/dma2.txt"
check "the next container leases edu again and its DMA checks out" grep -qx 'exit 0' "$FILES/dma2.txt"

dmesg > "$FILES/dmesg.txt"
check "no DMAR fault" sh -c "! grep -q 'DMAR: \[DMA' $FILES/dmesg.txt"
$PM rm -f hold > /dev/null 2>&1
rm -f /var/run/cdi/rig-* /etc/cdi/rig-*
rigctl attach $L > "$FILES/attach.txt" 2>&1
check "edu given back" [ "$(drv_of $L)" = none ]
systemctl stop rigd.service rigd.socket
echo 0 > /proc/sys/vm/nr_hugepages
