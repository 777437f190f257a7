# rig-vm: kind=takeover timeout=180
# DMA leases (docs/dma.md) under the translated IOMMU and vfio mode: rig holds edu
# (00:06.0, 64-bit DMA mask) through VFIO, a client process leases a buffer from its pool
# and gets an IOVA; edu's DMA engine, programmed through rigd (`rigctl mmio`, `rigctl
# master`), reads the client's bytes by that IOVA and writes them back 4 KiB further on,
# where the client finds them. After the client frees the buffer, rigd has unmapped it:
# the IOMMU blocks edu's write and read there (DMAR faults in the guest's kernel log).
E=0000:00:06.0
RIG="rigctl --socket $RIG_SOCK"
start_rigd_dma
check "8 hugepages reserved" [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 8 ]
$RIG detach $E --mode vfio > "$FILES/detach.txt" 2>&1
check "edu held in vfio mode (bound to vfio-pci)" [ "$(drv_of $E)" = vfio-pci ]
$RIG dma > "$FILES/dma.txt" 2>&1
check "rigd made edu's pool" grep -q "$E" "$FILES/dma.txt"
check "edu answers through rigd's BAR map (identification 0x..ed)" \
  sh -c "$RIG mmio read $E bar0:0 | grep -q 'ed\$'"
check "rigd refuses a misaligned register access" \
  sh -c "! $RIG mmio read $E bar0:0x82 2> $FILES/misaligned.txt"

probe_start $E 8192
IOVA=$PROBE_ADDR
check "the client's buffer has an IOVA ($IOVA)" [ -n "$IOVA" ]
PAT=$(pattern 5 11)
probe write 0 "$PAT"
check "the client wrote its pattern" [ "$PROBE_REPLY" = ok ]

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
probe read 4096 256
check "the client reads edu's copy of its bytes at +0x1000" [ "$PROBE_REPLY" = "$PAT" ]

probe free
check "the client freed its buffer and gave the lease back" [ "$PROBE_REPLY" = ok ]
dmesg > "$FILES/dmesg-before.txt"
if [ -n "$IOVA" ]; then
  # 0000:00:06.0 -> [00:06.0] as the DMAR fault line spells it; the address in hex.
  FAULT=$(printf '0x%x' $((IOVA + 0x1000)))
  edu_dma 0x40000 "$FAULT" 256 3
  check "after free the IOMMU blocks edu's write (DMAR fault at $FAULT)" \
    dmesg_wait "DMAR: \[DMA Write.*\[${E#0000:}\] fault addr $FAULT"
  edu_dma "$IOVA" 0x40000 256 1
  check "after free the IOMMU blocks edu's read (DMAR fault at $IOVA)" \
    dmesg_wait "DMAR: \[DMA Read.*\[${E#0000:}\] fault addr $IOVA"
fi
dmesg > "$FILES/dmesg.txt"
probe_quit
$RIG dma > "$FILES/dma-after.txt" 2>&1
$RIG attach $E > "$FILES/attach.txt" 2>&1
check "edu given back" [ $? = 0 ]
check "give-back cleared bus mastering" no_bus_master $E
stop_rigd_dma
cat "$FILES"/*.txt
