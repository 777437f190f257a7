# rig-vm: kind=takeover timeout=200
# A whole-device lease (docs/lease.md) in sysfs mode (iommu=pt: no translation, physical
# addresses): rigd holds edu behind its root port (01:00.0, bus reset) driverless, and
# alice (group rig) leases it whole: she gets its resource0 file, maps BAR0 through it
# and drives edu's DMA by the physical address of her session's memory, bus mastering
# turned on by rigd (she cannot write config). A holder killed with -9 mid-DMA is
# taken back: bus mastering off, reset, and its blocks, quarantined when its session
# released them, are lent again because the reset came first. A holder that keeps a
# copy of resource0 past its lease is found by path and named.
L=0000:01:00.0
RIG="rigctl --socket $RIG_SOCK"
C="rig-lease-client $RIG_SOCK"
setup_lease_rigd 4194304 $L "allow_sysfs_mode = true"
rm -f "$RIG_SOCK"
rigd --config /etc/rig/rigd-lease.toml -v >> "$FILES/rigd.log" 2>&1 &
RIGD_PID=$!
i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
check "rigd listens for group rig" [ -S "$RIG_SOCK" ]
log() { tr -d '\033' < "$FILES/rigd.log" | sed 's/\[[0-9;]*m//g'; }
lines() {
  while read -r line; do
    case "$line" in
      "ok "*) check "$2: ${line#ok }" true ;;
      "FAIL "*) check "$2: ${line#FAIL }" false ;;
    esac
  done < "$1"
}
$RIG detach $L --mode sysfs > "$FILES/detach.txt" 2>&1
cat "$FILES/detach.txt"
check "edu held in sysfs mode (driverless)" [ "$(drv_of $L)" = none ]

as_user alice $C $L dma 5 > "$FILES/first.txt" 2>&1
echo "exit $?" >> "$FILES/first.txt"; cat "$FILES/first.txt"; lines "$FILES/first.txt" sysfs-lease
check "alice's sysfs-mode lease exits 0" grep -qx 'exit 0' "$FILES/first.txt"
check "after the sysfs-mode give-back bus mastering is off" no_bus_master $L

as_user alice $C $L hang > "$FILES/hang.txt" 2>&1 &
HANG=$!
i=0; while ! grep -q '^dma running' "$FILES/hang.txt" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
cat "$FILES/hang.txt"
HPID=$(sed -n 's/^dma running pid \([0-9]*\):.*/\1/p' "$FILES/hang.txt")
check "a sysfs-mode holder has edu's DMA running" [ -n "$HPID" ]
check "bus mastering is on while it is leased" bus_master $L
[ -n "$HPID" ] && kill -9 $HPID
wait $HANG 2> /dev/null
ended() { log | grep -q "lease ended.*pid=$HPID"; }
i=0; while ! ended && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
check "rigd took the sysfs-mode device back after the holder's kill -9" ended
check "bus mastering is off after the sysfs-mode reclaim" no_bus_master $L
sleep 0.3
$RIG dma --json > "$FILES/dma.json" 2>&1
cat "$FILES/dma.json"
check "the killed holder's blocks are not left quarantined: the device was reset first" \
  sh -c "grep -A12 '\"name\": \"$L\"' $FILES/dma.json | grep -q '\"quarantined_blocks\": 0'"

as_user alice $C $L keep > "$FILES/keep.txt" 2>&1
cat "$FILES/keep.txt"
KPID=$(sed -n 's/^ok kept a copy of the lent fd, pid \([0-9]*\)/\1/p' "$FILES/keep.txt")
check "a holder that keeps a resource file is refused, naming its pid" \
  grep -q "^refused Device: .*$L is still held by pid $KPID (.*) after its lease ended" "$FILES/keep.txt"
$RIG attach $L > "$FILES/attach.txt" 2>&1
check "edu given back" [ "$(drv_of $L)" = none ]
stop_rigd
echo 0 > /proc/sys/vm/nr_hugepages
log | grep -E 'lease|reclaim' | tail -10
