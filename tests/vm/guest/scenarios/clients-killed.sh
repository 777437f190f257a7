# rig-vm: kind=takeover timeout=900
# "Clients killed by the thousand" (docs/RELIABILITY.md), in the disposable machine: rigd holds
# the NVMe controller (00:05.0), edu 00:06.0 and edu 01:00.0 in vfio mode (8 MiB
# pools, a [lease] rule for 01:00.0, as lease-random-kill's rigd), and
# rig-kill-clients (rig_tests::kill_clients, the campaign the fake-kernel test runs)
# starts clients as alice (group rig) and SIGKILLs each at a seeded random instant:
# a DMA session leasing 1 to 3 blocks of edu 00:06.0's pool (two in four), a lent
# queue of the controller kept full of reads (one in four), edu 01:00.0 leased whole
# with BAR0 mapped and bus mastering on (one in four). It times each reclaim (the
# kill until Dma.Status, Queues.Status and Status show nothing of the pid), and reads
# rigd's VmRSS, RssAnon, fds and threads (/proc/<rigd pid>) and the RPCs' sessions,
# leased blocks, lent queues and lease holders after its warm-up and after the
# campaign. Its verdict leaves the reclaim goal (p99 <= 100 ms) unjudged: under TCG a
# whole-device lease's reclaim (a VFIO reset of an emulated device) is far slower.
# Then every device goes back to its driver.
# Kernel command line: rig.client_kills=N (default 100), rig.seed=S (default: clock).
# Prints the campaign's lines and its `RESULT cycles= … verdict=` line.
N=0000:00:05.0 E=0000:00:06.0 L=0000:01:00.0 RIG="rigctl --socket $RIG_SOCK"
CYCLES=$(arg rig.client_kills) SEED=$(arg rig.seed)
CYCLES=${CYCLES:-100} SEED=${SEED:-$(date +%s)}
echo "clients-killed: $CYCLES cycles, rig.seed=$SEED"
setup_lease_rigd 8388608 $L
# rigd at info, rigd's own debug lines kept (sessions opened and ended): -v's h2
# frame lines, two per RPC, would cost the single vCPU more than the reclaims timed.
export RUST_LOG=info,rigd=debug
check "rigd starts" run_lease_rigd
unset RUST_LOG
for d in $N $E $L; do $RIG detach $d --mode vfio > /dev/null 2>&1; done
$RIG status > "$FILES/status-before.txt" 2>&1
for d in $N $E $L; do check "$d held in vfio mode" grep -q "^$d  held" "$FILES/status-before.txt"; done
ALICE=$(awk -F: '$1 == "alice" {print $3}' /etc/passwd)
t0=$(cut -d' ' -f1 /proc/uptime)
rig-kill-clients --socket "$RIG_SOCK" --rigd-pid "$RIGD_PID" --cycles "$CYCLES" --seed "$SEED" \
  --dma $E --queue $N --lease $L --as "$ALICE:$RIG_GID" > "$FILES/campaign.txt" 2>&1
rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
cat "$FILES/campaign.txt"
echo "clients-killed: the campaign took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s of guest time"
R=$(grep '^RESULT ' "$FILES/campaign.txt")
check "$CYCLES clients killed (seed $SEED): the campaign ran to its verdict" [ -n "$R" ]
check "no client exited on its own with an error" sh -c "echo '$R' | grep -q ' client_errors=0 '"
check "every kill reclaimed within 5 s" sh -c "echo '$R' | grep -q ' not_reclaimed=0 '"
check "rigd's fds, sessions, blocks, queues and lease holders back to their baseline, threads and RSS within their slack (seed $SEED)" [ $rc = 0 ]
$RIG status > "$FILES/status-after.txt" 2>&1
$RIG dma --json > "$FILES/dma-after.json" 2>&1
$RIG queues > "$FILES/queues-after.txt" 2>&1
for d in $N $E $L; do grep -q "^$d  held" "$FILES/status-after.txt" && $RIG attach $d > /dev/null 2>&1; done
stop_rigd
check "nvme back on its driver" [ "$(drv_of $N)" = nvme ]
quiet() { [ "$(drv_of "$1")" = none ] && no_bus_master "$1"; }
check "edu $E driverless and not mastering" quiet $E
check "edu $L driverless and not mastering" quiet $L
dmesg | grep -c 'DMAR: \[DMA' | sed 's/^/DMAR fault lines: /'
echo 0 > /proc/sys/vm/nr_hugepages
tail -30 "$FILES/rigd.log"
