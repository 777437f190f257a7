# rig-vm: kind=takeover timeout=120
# Issue 6 with iommu=pt and sysfs mode: rig holds edu (00:06.0) driverless, a client
# leases a buffer from its pool and gets its physical address; edu's DMA engine, driven
# by that address, reads the client's bytes and writes them back 4 KiB further on, and
# the client reads them there.
E=0000:00:06.0
RIG="rigctl --socket $RIG_SOCK"
echo 8 > /proc/sys/vm/nr_hugepages
check "8 hugepages reserved" [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 8 ]
mkdir -p /etc/rig /var/lib/rig
cat > /etc/rig/rigd-dma.toml <<TOML
[server]
socket = "$RIG_SOCK"
[paths]
state_dir = "/var/lib/rig"
[take]
allow_sysfs_mode = true
[dma]
pool_bytes = 4194304
TOML
rm -f "$RIG_SOCK"
rigd --config /etc/rig/rigd-dma.toml > "$FILES/rigd.log" 2>&1 &
RIGD_PID=$!
i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
$RIG detach $E --mode sysfs > "$FILES/detach.txt" 2>&1
check "edu held in sysfs mode (driverless)" [ "$(drv_of $E)" = none ]
$RIG dma > "$FILES/dma.txt" 2>&1
check "rigd made edu's pool" grep -q "$E" "$FILES/dma.txt"

rm -f /tmp/probe.in; mkfifo /tmp/probe.in
# Made before the probe starts: its redirections open only once the FIFO has a writer.
: > /tmp/probe.out
rig-dma-probe "$RIG_SOCK" $E 8192 < /tmp/probe.in > /tmp/probe.out 2> "$FILES/probe.err" &
PROBE=$!
exec 3> /tmp/probe.in
lines() { wc -l < /tmp/probe.out; }
wait_lines() { i=0; while [ "$(lines)" -lt "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; }
wait_lines 1
ADDR=$(sed -n '1s/.*device=\(0x[0-9a-f]*\).*/\1/p' /tmp/probe.out)
check "the client's buffer has a physical address ($ADDR)" [ -n "$ADDR" ]
PAT=""; i=0
while [ $i -lt 256 ]; do PAT="$PAT$(printf %02x $(((i * 7 + 3) & 255)))"; i=$((i + 1)); done
echo "write 0 $PAT" >&3
wait_lines 2
check "the client wrote its pattern" [ "$(sed -n 2p /tmp/probe.out)" = ok ]
# Never point the device at an address rig did not give (0 would be physical page 0).
[ -n "$ADDR" ] && edu-vfio phys-dma $E "$ADDR" | tee "$FILES/edu.txt"
echo "read 4096 256" >&3
wait_lines 3
check "the client reads edu's copy of its bytes at +0x1000" [ "$(sed -n 3p /tmp/probe.out)" = "$PAT" ]
echo quit >&3
exec 3>&-
wait $PROBE
cp /tmp/probe.out "$FILES/probe.out"
$RIG attach $E > "$FILES/attach.txt" 2>&1
check "edu given back" [ $? = 0 ]
kill $RIGD_PID; wait $RIGD_PID 2>/dev/null
echo 0 > /proc/sys/vm/nr_hugepages
cat "$FILES"/*.txt
