#!/bin/sh
# Several H200s (docs/h200.md, "Several H200s on one host") on a multi-GPU device kind
# (nvidia-h200-x2, -x4 or -x8), run as root from the
# repository root: one rigd serves every GPU the RM drives; it captures what the
# inspection parity needs, the RM's and nvidia-smi's view of the topology, then runs
# channels on every GPU at once, a kill on one GPU while the others keep releasing, and
# the benchmarks (each GPU alone against all at once, in one run).
#
#     tests/h200/multi.sh .dev OUT        # .dev: static rigd, rigctl, rig-channel-probe,
#                                         # rig-nvrm-probe, and lspci with its lib/ and
#                                         # pci.ids (docs/h200.md)
#     PHASES="inspect bench" tests/h200/multi.sh .dev OUT   # some of: inspect channels kill bench
#
# Back here: `RIG_SAVED_DIR=OUT/inspect cargo test -p rig-tests --test parity_host
# saved_h200_outputs_match_lspci` compares every function with the carried lspci.
#
# Uses the GPUs only through their driver (rigd's RM calls), read-only otherwise: no
# register, config or power writes; every client is killed or ends, rigd is stopped at
# the end (it frees what it made, hugepages included), and what the RM holds afterwards
# is printed. Written before a multi-GPU kind was lent: not yet run on one.
set -u
BIN=$(cd "${1:-.dev}" && pwd)
OUT=${2:-$PWD/multi-out}
RUN=/tmp/rig-multi
NOBODY=65534
rm -rf "$RUN"
mkdir -p "$RUN/state" "$OUT/inspect" "$OUT/bench"
chmod 755 "$RUN"
# The carried lspci and only it finds its libraries in $BIN/lib (nvidia-smi keeps the host's).
lspci() { LD_LIBRARY_PATH=$BIN/lib "$BIN/lspci" -i "$BIN/pci.ids" "$@"; }
GPUS=$(ls /sys/bus/pci/drivers/nvidia | grep '^0000:' | sort)
N=$(echo "$GPUS" | wc -l)
say() { printf '== %s\n' "$*"; }
want() { case " ${PHASES:-all} " in *" all "* | *" $1 "*) return 0 ;; esac; return 1; }
ctl() { "$BIN/rigctl" --socket "$RUN/rigd.sock" "$@"; }
# Client k (from 0) runs as its own uid, pinned to a CPU of its GPU's NUMA node when
# the node has one to spare (`local_cpulist`), else to CPU 2 + k.
cpu_of() {
  list=$(cat "/sys/bus/pci/devices/$2/local_cpulist" 2> /dev/null)
  first=${list%%[-,]*}
  case "$first" in '' | *[!0-9]*) echo $((2 + $1)) ;; *) echo $((first + 2 + $1)) ;; esac
}
# Call only in a subshell (`&`, a pipeline): it execs, so that `$!` is the probe itself
# and a `kill -9 $!` reaches it (the first run on one GPU killed the background
# subshell, and the probes it meant to kill spun on).
probe() { # k gpu role [arg]
  k=$1 gpu=$2
  shift 2
  exec env RIG_PROBE_UID=$((60000 + k)) RIG_PROBE_GID=$NOBODY taskset -c "$(cpu_of "$k" "$gpu")" \
    "$BIN/rig-channel-probe" "$1" "$RUN/rigd.sock" "$gpu" ${2:-}
}
cleanup() {
  pkill -9 -x rig-channel-pro 2> /dev/null
  [ -n "${RIGD:-}" ] && kill -TERM "$RIGD" 2> /dev/null && wait "$RIGD" 2> /dev/null
}
trap cleanup EXIT
count_channels() { ctl channels --json | grep -c '"channel"'; }

cat > "$RUN/rigd.toml" << EOF
[server]
socket = "$RUN/rigd.sock"
group = "nogroup"
[paths]
# A static rigd has no NSS modules: read the group file itself.
group_file = "/etc/group"
state_dir = "$RUN/state"
pci_ids = "$BIN/pci.ids"
[dma]
pool_bytes = $((1536 << 20))
reserve_hugepages = true
[dma.quota]
per_uid_bytes = $((1536 << 20))
per_device_bytes = $((1536 << 20))
[channels]
serve = ["all"]
per_session = 4
EOF

pgrep -x rigd > /dev/null && { say "a rigd is running already"; exit 1; }
say "before: $N GPUs: $(echo $GPUS); nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
nvidia-smi --query-gpu=pci.bus_id,memory.used --format=csv,noheader
"$BIN/rigd" --config "$RUN/rigd.toml" -v > "$RUN/rigd.log" 2>&1 &
RIGD=$!
i=0
while [ ! -S "$RUN/rigd.sock.fd" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$RUN/rigd.sock.fd" ] || { say "rigd did not start"; cat "$RUN/rigd.log"; exit 1; }
say "rigd $RIGD up after $((i * 100)) ms"
FAIL=0

if want inspect; then
  say "inspect: every function, as rigctl and the carried lspci see it"
  R=$OUT/inspect
  ctl list > "$R/rigctl-list.txt"
  ctl list --json > "$R/rigctl-list.json"
  # One JSON array of every function's `show --json -x`, as parity_host reads it.
  first=1
  {
    echo '['
    for d in /sys/bus/pci/devices/*; do
      [ $first = 1 ] || echo ','
      first=0
      ctl show "${d##*/}" --json -x
    done
    echo ']'
  } > "$R/rigctl-show-all.json"
  for g in $GPUS; do ctl show "$g" > "$R/rigctl-show-$g.txt"; done
  lspci -vvv -nn -D > "$R/lspci-vvv.txt"
  lspci -xxxx -D > "$R/lspci-xxxx.txt"
  lspci -tv > "$R/lspci-tree.txt"
  for g in $GPUS; do
    echo "$g numa_node=$(cat /sys/bus/pci/devices/$g/numa_node) local_cpulist=$(cat /sys/bus/pci/devices/$g/local_cpulist)"
  done > "$R/numa.txt"
  nvidia-smi topo -m > "$R/nvidia-smi-topo.txt" 2>&1
  nvidia-smi topo -p2p r > "$R/nvidia-smi-p2p-read.txt" 2>&1
  nvidia-smi topo -p2p rwnap > "$R/nvidia-smi-p2p-rwnap.txt" 2>&1
  nvidia-smi nvlink -s > "$R/nvidia-smi-nvlink.txt" 2>&1
  nvidia-smi nvlink -c > "$R/nvidia-smi-nvlink-caps.txt" 2>&1
  # rig's matrix beside nvidia-smi's: rigd's RM queries (rig::topo), and the raw answers.
  ctl topo > "$R/rigctl-topo.txt" 2>&1
  ctl topo --json > "$R/rigctl-topo.json" 2>&1
  [ -x "$BIN/rig-nvrm-probe" ] && "$BIN/rig-nvrm-probe" /dev topo > "$R/rm-topo-raw.txt" 2>&1
  grep -c '"bdf"' "$R/rigctl-list.json" | sed 's/^/functions in the listing: /'
  cat "$R/numa.txt"
  cat "$R/nvidia-smi-topo.txt"
  cat "$R/rigctl-topo.txt"
  # Each matrix cell, rig's against nvidia-smi's (GPU rows only; nvidia-smi also has NIC
  # columns after the GPUs, and adds CPU/NUMA affinity at the end of each row). Only
  # each file's first block of GPU rows: rigctl's output goes on with "GPU0 = <bdf>"
  # lines and the P2P matrix, whose rows also start with GPUn.
  awk -v n="$N" 'FNR == 1 { f++; rows = 0; over = 0 }
    /^GPU[0-9]/ && $2 != "=" && !over { rows = 1
      for (i = 2; i <= n + 1; i++) if (f == 1) a[$1, i] = $i
        else if (a[$1, i] != $i) { d++; print "differs:", $1, "col", i - 1, "rig", a[$1, i], "nvidia-smi", $i }
      next }
    rows { over = 1 }
    END { print (d ? d : 0) " cells differ between rigctl topo and nvidia-smi topo -m" }' \
    "$R/rigctl-topo.txt" "$R/nvidia-smi-topo.txt" | tee "$R/topo-compare.txt"
fi

if want channels; then
  say "channels: basic on all $N GPUs at once, one client each"
  k=0
  PIDS=
  for g in $GPUS; do
    probe $k "$g" basic > "$RUN/basic-$k.out" 2>&1 &
    PIDS="$PIDS $!"
    k=$((k + 1))
  done
  k=0
  for p in $PIDS; do
    wait "$p" || { say "basic on GPU $k failed"; FAIL=1; }
    sed "s/^/gpu$k /" "$RUN/basic-$k.out" | grep -E "copy |round_trip channel=copy wfi=false|million|rig-channel-probe"
    k=$((k + 1))
  done
fi

if want kill; then
  say "kill: one client on the first GPU killed 10 times while every GPU keeps releasing"
  k=0
  PIDS=
  for g in $GPUS; do
    probe $k "$g" steady 20 > "$RUN/steady-$k.out" 2>&1 &
    PIDS="$PIDS $!"
    k=$((k + 1))
  done
  G0=$(echo "$GPUS" | head -n1)
  sleep 1
  n=0
  while [ $n -lt 10 ]; do
    probe $N "$G0" spin > "$RUN/spin.out" 2>&1 &
    SPIN=$!
    j=0
    while ! grep -q ready "$RUN/spin.out" && [ $j -lt 300 ]; do sleep 0.01; j=$((j + 1)); done
    sleep 0.3
    kill -9 $SPIN
    wait $SPIN 2> /dev/null
    n=$((n + 1))
  done
  k=0
  for p in $PIDS; do
    wait "$p" || { say "steady on GPU $k failed beside the kills"; FAIL=1; }
    sed "s/^/gpu$k /" "$RUN/steady-$k.out"
    k=$((k + 1))
  done
  sleep 0.5
  left=$(count_channels)
  say "after the kills: $left channels (0 expected)"
  [ "$left" = 0 ] || FAIL=1
fi

if want bench; then
  # Empty-submission round trips (steady 5 s) and copy-engine bandwidth (copy 20: 256 MiB
  # host to host, across each GPU's link twice), each GPU alone, then all at once.
  B=$OUT/bench
  : > "$B/alone.txt"
  k=0
  for g in $GPUS; do
    probe $k "$g" steady 5 | sed "s/^/alone gpu$k $g /" >> "$B/alone.txt"
    probe $k "$g" copy 20 | sed "s/^/alone gpu$k $g /" >> "$B/alone.txt"
    k=$((k + 1))
  done
  for what in "steady 5" "copy 20"; do
    k=0
    PIDS=
    for g in $GPUS; do
      probe $k "$g" $what > "$RUN/all-$k.out" 2>&1 &
      PIDS="$PIDS $!"
      k=$((k + 1))
    done
    for p in $PIDS; do wait "$p" || FAIL=1; done
    k=0
    for g in $GPUS; do sed "s/^/all gpu$k $g /" "$RUN/all-$k.out" >> "$B/all.txt"; k=$((k + 1)); done
  done
  say "bench: per GPU, alone against all $N at once"
  cat "$B/alone.txt" "$B/all.txt" | awk '
    { key = $2 " " $3; v = ""
      for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "p50_us" || kv[1] == "median_gb_per_s") v = kv[2] }
      if ($4 == "steady") rt[$1, key] = v; else if ($4 == "copy") bw[$1, key] = v; keys[key] = 1 }
    END { printf "%-22s %12s %12s %8s %12s %12s %8s\n", "gpu", "rtt_alone_us", "rtt_all_us", "ratio", "gbps_alone", "gbps_all", "ratio"
      for (k in keys) printf "%-22s %12s %12s %8.3f %12s %12s %8.3f\n", k, rt["alone", k], rt["all", k], (rt["alone", k] ? rt["all", k] / rt["alone", k] : 0), bw["alone", k], bw["all", k], (bw["alone", k] ? bw["all", k] / bw["alone", k] : 0) }' |
    sort | tee "$B/summary.txt"
fi

kill -TERM $RIGD
wait $RIGD
say "rigd stopped (rc $?); its log's warnings and errors:"
RIGD=
sed 's/\x1b\[[0-9;]*m//g' "$RUN/rigd.log" | grep -E " (WARN|ERROR) " | cut -c28- | sort | uniq -c | sort -rn | head -12
cp "$RUN/rigd.log" "$OUT/rigd.log"
say "after: nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
nvidia-smi --query-gpu=pci.bus_id,memory.used --format=csv,noheader
dmesg | grep -E "Xid" | tail -4
exit $FAIL
