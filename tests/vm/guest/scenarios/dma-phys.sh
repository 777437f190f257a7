# rig-vm: kind=takeover timeout=120
# DMA leases (docs/dma.md) with iommu=pt and sysfs mode: rig holds edu (00:06.0)
# driverless, a client leases a buffer from its pool and gets its physical address; edu's
# DMA engine, driven by that address, reads the client's bytes and writes them back 4 KiB
# further on, and the client reads them there.
E=0000:00:06.0
RIG="rigctl --socket $RIG_SOCK"
start_rigd_dma
check "8 hugepages reserved" [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 8 ]
$RIG detach $E --mode sysfs > "$FILES/detach.txt" 2>&1
check "edu held in sysfs mode (driverless)" [ "$(drv_of $E)" = none ]
$RIG dma > "$FILES/dma.txt" 2>&1
check "rigd made edu's pool" grep -q "$E" "$FILES/dma.txt"

probe_start $E 8192
check "the client's buffer has a physical address ($PROBE_ADDR)" [ -n "$PROBE_ADDR" ]
PAT=$(pattern 7 3)
probe write 0 "$PAT"
check "the client wrote its pattern" [ "$PROBE_REPLY" = ok ]
# Never point the device at an address rig did not give (0 would be physical page 0).
[ -n "$PROBE_ADDR" ] && edu-vfio phys-dma $E "$PROBE_ADDR" | tee "$FILES/edu.txt"
probe read 4096 256
check "the client reads edu's copy of its bytes at +0x1000" [ "$PROBE_REPLY" = "$PAT" ]
probe_quit
$RIG attach $E > "$FILES/attach.txt" 2>&1
check "edu given back" [ $? = 0 ]
stop_rigd_dma
cat "$FILES"/*.txt
