# rig-vm: kind=takeover timeout=600
# "rigd killed at random" (docs/RELIABILITY.md) during DMA leases, queue work and whole-device
# leases (take-random-kill does the take-over work). rigd holds the NVMe controller
# (00:05.0), edu 00:06.0 and edu 01:00.0 in vfio mode; per kill clients start one
# operation, chosen by a seeded generator with the delay, and after the delay (0 to 1500 ms: past the clients' setup under TCG)
# rigd gets SIGKILL:
#   0 a DMA session on edu 00:06.0's pool holding a buffer while edu's DMA engine,
#     programmed through rigd, writes into it by IOVA (rig-dma-probe + rigctl mmio);
#   1 a lent NVMe queue with I/O in flight (rig-queue-client run, depth 32);
#   2 a lent NVMe queue whose holder never reaps (rig-queue-client hold 32);
#   3 a whole-device lease of edu 01:00.0 with bus mastering on and edu's DMA running
#     (rig-lease-client hang);
#   4 a whole-device lease's full cycle: DMA, MSI, give-back (rig-lease-client dma).
# rigd runs from one kill to the next (the restart after a kill is the next one's
# start). After the kill: every client that talks to rigd ends within 10 s with an error line
# or its own success (a client still running then is a hang); clients that wait by
# design (hold, hang, the probe) are killed: their rigd is gone. Then rigd starts
# again; checked: it answers status; no device is driverless with bus mastering on;
# each is held or back on its driver (nvme; edu driverless, not mastering); `rigctl
# dma --json` shows no session and no leased block (the dead rigd's pool memory is
# neither kept by a stale owner nor counted); a next client of what the killed one
# used works: I/O through a lent queue checks out (the queue ids are free again and
# the controller answers), or a whole-device lease's DMA does. Resizes: no device QEMU emulates offers
# Resizable BAR (docs/vm.md), so none is tried here.
# Kernel command line: rig.lease_kills=N (default 10), rig.seed=S (default: the clock).
# Prints one line per kill and `RESULT kills= recoveries= violations= seed=`.
N=0000:00:05.0
E=0000:00:06.0
L=0000:01:00.0
RIG="rigctl --socket $RIG_SOCK"
KILLS=$(sed -n 's/.*rig\.lease_kills=\([0-9]*\).*/\1/p' /proc/cmdline); KILLS=${KILLS:-10}
SEED=$(sed -n 's/.*rig\.seed=\([0-9]*\).*/\1/p' /proc/cmdline); SEED=${SEED:-$(date +%s)}
echo "lease-random-kill: $KILLS kills, rig.seed=$SEED"
awk -v s="$SEED" -v n="$KILLS" 'BEGIN { srand(s + 1); for (i = 0; i < n; i++) printf "%d %d\n", int(rand() * 5), int(rand() * 1500) }' > "$FILES/plan"
setup_lease_rigd 8388608 $L "unbind_timeout_s = 5"
start() { run_lease_rigd; }
# One status read per round of checks: each rigctl run costs ~0.1 s under TCG.
snap() { $RIG status > /tmp/lrk-status 2>&1; }
held() { grep -q "^$1  held" /tmp/lrk-status; }
mastering_driverless() { [ "$(drv_of "$1")" = none ] && bus_master "$1"; }
settled() { # settled BDF DRIVER: held, or on DRIVER (none: driverless and quiet)
  held "$1" && return 0
  [ "$(drv_of "$1")" = "$2" ] || return 1
  [ "$2" != none ] || no_bus_master "$1"
}
take_all() { snap; for d in $N $E $L; do held $d || $RIG detach $d --mode vfio > /dev/null 2>&1; done; snap; }
# edu 00:06.0's DMA engine writing edu's buffer into ADDR, over and over, through rigd.
edu_loop() {
  $RIG master $E on > /dev/null 2>&1 || return 1
  while :; do
    $RIG mmio write $E bar0:0x80 0x40000 --width 64 && $RIG mmio write $E bar0:0x88 "$1" --width 64 &&
      $RIG mmio write $E bar0:0x90 256 --width 64 && $RIG mmio write $E bar0:0x98 3 --width 64 || return 1
  done > /dev/null 2>&1
}
# The scenario's clients (comm is cut at 15 characters), killed and waited for.
clients() { grep -lE '^rig-(queue-clien|lease-clien|dma-probe)$' /proc/[0-9]*/comm 2> /dev/null | cut -d/ -f3; }
kill_clients() {
  for p in $(clients); do kill -9 "$p" 2> /dev/null; done
  i=0; while [ -n "$(clients)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
}
gone_within() { # gone_within SECONDS PID
  i=0; while kill -0 "$2" 2> /dev/null && [ $i -lt $(($1 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
  ! kill -0 "$2" 2> /dev/null
}

check "rigd starts" start
take_all
for d in $N $E $L; do check "$d held in vfio mode" held $d; done

# rigd runs from one kill to the next: the restart after a kill is the next one's start.
kills=0 recoveries=0 violations=0 n=0
while read -r op delay; do
  n=$((n + 1)); base=$(((n % 200) * 64))
  TALKS= WAITS= EDU=
  case $op in
    0) what="DMA session on $E with edu's DMA running"
       rm -f /tmp/probe.in; mkfifo /tmp/probe.in; : > /tmp/probe.out
       rig-dma-probe "$RIG_SOCK" $E 8192 < /tmp/probe.in > /tmp/probe.out 2>&1 &
       WAITS=$!; exec 3> /tmp/probe.in
       ( i=0; while ! grep -q device=0x /tmp/probe.out && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
         edu_loop "$(sed -n '1s/.*device=\(0x[0-9a-f]*\).*/\1/p' /tmp/probe.out)" ) &
       EDU=$! ;;
    1) what="lent queue, I/O in flight"
       as_user alice rig-queue-client "$RIG_SOCK" $N run 32 400 $base > "$FILES/client-$n.txt" 2>&1 &
       TALKS=$! ;;
    2) what="lent queue, holder never reaps"
       as_user alice rig-queue-client "$RIG_SOCK" $N hold 32 > "$FILES/client-$n.txt" 2>&1 &
       WAITS=$! ;;
    3) what="$L leased whole, mastering, DMA running"
       as_user alice rig-lease-client "$RIG_SOCK" $L hang > "$FILES/client-$n.txt" 2>&1 &
       WAITS=$! ;;
    4) what="$L leased whole: DMA, MSI, give-back"
       as_user alice rig-lease-client "$RIG_SOCK" $L dma $n > "$FILES/client-$n.txt" 2>&1 &
       TALKS=$! ;;
  esac
  sleep "$(awk -v d="$delay" 'BEGIN { printf "%.3f", d / 1000 }')"
  kill -9 "$RIGD_PID" 2> /dev/null && kills=$((kills + 1))
  wait "$RIGD_PID" 2> /dev/null
  at="master $E=$(bus_master $E && echo on || echo off) $L=$(bus_master $L && echo on || echo off)"
  ok=true
  if [ -n "$TALKS" ]; then
    if gone_within 10 "$TALKS"; then
      wait "$TALKS"; rc=$?
      [ $rc = 0 ] || grep -q '^FAIL ' "$FILES/client-$n.txt" ||
        { echo "kill $n ($what after $delay ms): client exit $rc with no error line"; ok=false; }
    else
      echo "kill $n ($what after $delay ms): the client hangs 10 s after rigd died"; ok=false
      kill -9 "$TALKS" 2> /dev/null
    fi
  fi
  [ -n "$EDU" ] && { kill "$EDU" 2> /dev/null; wait "$EDU" 2> /dev/null; }
  # Holders that wait by design: their rigd is gone. By their own pids (under su,
  # $! is su's), and waited for until gone.
  if [ -n "$WAITS" ]; then
    kill_clients; wait "$WAITS" 2> /dev/null
    [ $op = 0 ] && exec 3>&-
  fi
  if ! start; then echo "kill $n ($what after $delay ms): rigd did not come back"; ok=false; fi
  snap; cp /tmp/lrk-status "$FILES/status-$n.txt"
  $RIG dma --json > "$FILES/dma-$n.json" 2>&1
  for d in $N $E $L; do
    if mastering_driverless $d; then echo "kill $n ($what after $delay ms): $d driverless with bus mastering on"; ok=false; fi
  done
  settled $N nvme || { echo "kill $n ($what after $delay ms): $N neither held nor on nvme ($(drv_of $N))"; ok=false; }
  settled $E none || { echo "kill $n ($what after $delay ms): $E neither held nor driverless and quiet"; ok=false; }
  settled $L none || { echo "kill $n ($what after $delay ms): $L neither held nor driverless and quiet"; ok=false; }
  if grep -q '"leased_blocks": [1-9]' "$FILES/dma-$n.json" || grep -q '"session"' "$FILES/dma-$n.json"; then
    echo "kill $n ($what after $delay ms): rigctl dma shows leased blocks or a session of the dead rigd's clients"; ok=false
  fi
  take_all
  # The next client of what the killed one used: its queue ids free again and the
  # controller answering, or the device leased and its DMA checking out.
  case $op in
    1|2) if held $N; then
           as_user alice rig-queue-client "$RIG_SOCK" $N run 8 16 $((base + 32)) > "$FILES/next-$n.txt" 2>&1 ||
             { echo "kill $n ($what after $delay ms): the next queue client failed: $(grep FAIL "$FILES/next-$n.txt")"; ok=false; }
         fi ;;
    3|4) if held $L; then
           as_user alice rig-lease-client "$RIG_SOCK" $L dma $((n + 100)) > "$FILES/next-$n.txt" 2>&1 ||
             { echo "kill $n ($what after $delay ms): the next whole-device lease failed: $(grep FAIL "$FILES/next-$n.txt")"; ok=false; }
         fi ;;
  esac
  if $ok; then recoveries=$((recoveries + 1)); else violations=$((violations + 1)); fi
  echo "kill $n: $what, after $delay ms; at the kill $at; after restart driver $N=$(drv_of $N) $E=$(drv_of $E) $L=$(drv_of $L); $(grep -c '  held' "$FILES/status-$n.txt") held; uptime $(cut -d' ' -f1 /proc/uptime) s"
done < "$FILES/plan"
echo "RESULT kills=$kills recoveries=$recoveries violations=$violations seed=$SEED"
check "$KILLS random kills of rigd during leases and queues (seed $SEED): every one followed by a recovery" [ "$recoveries" = "$KILLS" ]
check "no violations in $KILLS kills during leases and queues (seed $SEED)" [ "$violations" = 0 ]
snap
for d in $N $E $L; do held $d && $RIG attach $d > /dev/null 2>&1; done
stop_rigd
check "nvme back on its driver" [ "$(drv_of $N)" = nvme ]
check "both edus driverless and quiet" sh -c "[ \"\$(readlink /sys/bus/pci/devices/$E/driver | wc -c)\" = 0 ] && [ \"\$(readlink /sys/bus/pci/devices/$L/driver | wc -c)\" = 0 ]"
dmesg | grep -c 'DMAR: \[DMA' | sed 's/^/DMAR fault lines: /'
echo 0 > /proc/sys/vm/nr_hugepages
tail -30 "$FILES/rigd.log"
