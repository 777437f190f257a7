# rig-vm: kind=takeover timeout=180
# Issue 6 under the translated IOMMU and vfio mode: rig holds edu (00:06.0, 64-bit DMA
# mask) through VFIO, a client process leases a buffer from its pool and gets an IOVA;
# edu's DMA engine, programmed through rigd (`rigctl mmio`, `rigctl master`), reads the
# client's bytes by that IOVA and writes them back 4 KiB further on, where the client
# finds them. After the client frees the buffer, rigd has unmapped it: the IOMMU blocks
# edu's write and read there (DMAR faults in the guest's kernel log).
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
[dma]
pool_bytes = 4194304
TOML
rm -f "$RIG_SOCK"
rigd --config /etc/rig/rigd-dma.toml > "$FILES/rigd.log" 2>&1 &
RIGD_PID=$!
i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
$RIG detach $E --mode vfio > "$FILES/detach.txt" 2>&1
check "edu held in vfio mode (bound to vfio-pci)" [ "$(drv_of $E)" = vfio-pci ]
$RIG dma > "$FILES/dma.txt" 2>&1
check "rigd made edu's pool" grep -q "$E" "$FILES/dma.txt"
check "edu answers through rigd's BAR map (identification 0x..ed)" \
  sh -c "$RIG mmio read $E bar0:0 | grep -q 'ed\$'"
check "rigd refuses a misaligned register access" \
  sh -c "! $RIG mmio read $E bar0:0x82 2> $FILES/misaligned.txt"

rm -f /tmp/probe.in; mkfifo /tmp/probe.in
# Made before the probe starts: its redirections open only once the FIFO has a writer.
: > /tmp/probe.out
rig-dma-probe "$RIG_SOCK" $E 8192 < /tmp/probe.in > /tmp/probe.out 2> "$FILES/probe.err" &
PROBE=$!
exec 3> /tmp/probe.in
lines() { wc -l < /tmp/probe.out; }
wait_lines() { i=0; while [ "$(lines)" -lt "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; }
wait_lines 1
IOVA=$(sed -n '1s/.*device=\(0x[0-9a-f]*\).*/\1/p' /tmp/probe.out)
check "the client's buffer has an IOVA ($IOVA)" [ -n "$IOVA" ]
PAT=""; i=0
while [ $i -lt 256 ]; do PAT="$PAT$(printf %02x $(((i * 5 + 11) & 255)))"; i=$((i + 1)); done
echo "write 0 $PAT" >&3
wait_lines 2
check "the client wrote its pattern" [ "$(sed -n 2p /tmp/probe.out)" = ok ]

# edu's DMA engine (QEMU hw/misc/edu.c): source 0x80, destination 0x88, count 0x90,
# command 0x98 (bit 0 start, bit 1 set: edu -> RAM); its buffer is at 0x40000. The
# command's start bit clears when the transfer is done.
edu_dma() {
  $RIG mmio write $E bar0:0x80 "$1" --width 64 &&
    $RIG mmio write $E bar0:0x88 "$2" --width 64 &&
    $RIG mmio write $E bar0:0x90 "$3" --width 64 &&
    $RIG mmio write $E bar0:0x98 "$4" --width 64 || return 1
  i=0
  while [ $i -lt 50 ]; do
    [ $(($($RIG mmio read $E bar0:0x98 --width 64 | sed 's/.* = //') & 1)) = 0 ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}
$RIG master $E on > "$FILES/master-on.txt" 2>&1
check "bus mastering on through rigd" bus_master $E
if [ -n "$IOVA" ]; then
  check "edu DMA from the client's buffer by IOVA completes" edu_dma "$IOVA" 0x40000 256 1
  check "edu DMA into the client's buffer + 0x1000 by IOVA completes" \
    edu_dma 0x40000 $((IOVA + 0x1000)) 256 3
fi
echo "read 4096 256" >&3
wait_lines 3
check "the client reads edu's copy of its bytes at +0x1000" [ "$(sed -n 3p /tmp/probe.out)" = "$PAT" ]

echo free >&3
wait_lines 4
check "the client freed its buffer and gave the lease back" [ "$(sed -n 4p /tmp/probe.out)" = ok ]
dmesg > "$FILES/dmesg-before.txt"
# 0000:00:06.0 -> [00:06.0] as the DMAR fault line spells it; the address in hex.
FAULT=$(printf '0x%x' $((IOVA + 0x1000)))
if [ -n "$IOVA" ]; then
  edu_dma 0x40000 $((IOVA + 0x1000)) 256 3
  check "after free the IOMMU blocks edu's write (DMAR fault at $FAULT)" \
    dmesg_wait "DMAR: \[DMA Write.*\[${E#0000:}\] fault addr $FAULT"
  edu_dma "$IOVA" 0x40000 256 1
  check "after free the IOMMU blocks edu's read (DMAR fault at $IOVA)" \
    dmesg_wait "DMAR: \[DMA Read.*\[${E#0000:}\] fault addr $IOVA"
fi
dmesg > "$FILES/dmesg.txt"
echo quit >&3
exec 3>&-
wait $PROBE
cp /tmp/probe.out "$FILES/probe.out"
$RIG dma > "$FILES/dma-after.txt" 2>&1
$RIG attach $E > "$FILES/attach.txt" 2>&1
check "edu given back" [ $? = 0 ]
check "give-back cleared bus mastering" no_bus_master $E
kill $RIGD_PID; wait $RIGD_PID 2>/dev/null
echo 0 > /proc/sys/vm/nr_hugepages
cat "$FILES"/*.txt
