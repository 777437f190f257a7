#!/bin/sh
# Channels lent on the H200 (device machine; docs/h200.md, "Channels lent to
# unprivileged clients on the H200"), run as root from the repository root:
# rigd serves the GPU through its driver; unprivileged clients (uid 65534, by
# rig-channel-probe's own setuid) open channels, copy, release, fault, die by kill -9,
# and 64 of them run at once; CUDA's anchors run in the same call for the ratios.
#
#     tests/h200/served.sh .dev    # .dev holds static rigd, rigctl, rig-channel-probe
#     PHASES="many" tests/h200/served.sh .dev   # only some: basic gpu cuda open kill many
#     COPY_ENGINES="2,3,4,5,6,7,8,9" ...           # copy channels on async copy engines
#     RINGS=gpu ...   # every phase's channels with rings in GPU memory (phase gpu: basic so)
#
# Uses the GPU only through its driver (rigd's RM calls, CUDA). The two Xid 31 MMU
# faults it causes are deliberate: one release each into an address the client's GPU
# address space does not map. Stops rigd at the end (which frees everything it made)
# and prints what the RM holds afterwards.
set -u
BIN=$(cd "${1:-.dev}" && pwd)
RUN=/tmp/rig-h200
NOBODY=65534
rm -rf "$RUN"
mkdir -p "$RUN/state"
chmod 755 "$RUN"
GPU=$(ls /sys/bus/pci/drivers/nvidia | grep -m1 '^0000:')
say() { printf '== %s\n' "$*"; }
want() { case " ${PHASES:-all} " in *" all "* | *" $1 "*) return 0 ;; esac; return 1; }
probe() { RIG_PROBE_UID=$NOBODY exec "$BIN/rig-channel-probe" "$1" "$RUN/rigd.sock" "$GPU" ${2:-}; }
# Whatever happens: no probe left running, rigd stopped (it gives back what it made,
# hugepages included).
cleanup() {
  pkill -9 -x rig-channel-pro 2>/dev/null
  [ -n "${RIGD:-}" ] && kill -TERM "$RIGD" 2>/dev/null && wait "$RIGD" 2>/dev/null
}
trap cleanup EXIT
rss() { grep -E '^(VmRSS|RssAnon|RssFile|RssShmem|HugetlbPages)' "/proc/$RIGD/status" | tr -s ' \t' ' ' | tr '\n' ' '; echo; }
channels() { "$BIN/rigctl" --socket "$RUN/rigd.sock" channels --json; }
count_channels() { channels | grep -c '"channel"'; }

# [channels] copy_engines: COPY_ENGINES when set (empty: the GR0 group), else rigd's
# default, "auto" (the RM's async copy engines).
if [ -n "${COPY_ENGINES+set}" ]; then CE_TOML="[$COPY_ENGINES]"; else CE_TOML='"auto"'; fi
cat > "$RUN/rigd.toml" <<EOF
[server]
socket = "$RUN/rigd.sock"
group = "nogroup"
[paths]
# A static rigd has no NSS modules: read the group file itself.
group_file = "/etc/group"
state_dir = "$RUN/state"
[dma]
pool_bytes = $((1536 << 20))
reserve_hugepages = true
[dma.quota]
per_uid_bytes = $((1536 << 20))
per_device_bytes = $((1536 << 20))
[channels]
serve = ["$GPU"]
per_session = 4
copy_engines = $CE_TOML
# The probes run with gid nogroup: they may have rings in GPU memory.
gpu_rings_group = "nogroup"
EOF
[ -n "${RINGS:-}" ] && export RIG_PROBE_RINGS="$RINGS"

pgrep -x rigd > /dev/null && { say "a rigd is running already"; exit 1; }
say "before: GPU $GPU, $(nvidia-smi --query-gpu=memory.used --format=csv,noheader) used, nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
"$BIN/rigd" --config "$RUN/rigd.toml" -v > "$RUN/rigd.log" 2>&1 &
RIGD=$!
i=0
while [ ! -S "$RUN/rigd.sock.fd" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$RUN/rigd.sock.fd" ] || { say "rigd did not start"; cat "$RUN/rigd.log"; exit 1; }
sleep 1
say "rigd $RIGD up after $((i * 100)) ms; socket $(stat -c '%a %U:%G' "$RUN/rigd.sock")"
grep -E "serving|WARN|ERROR" "$RUN/rigd.log" | head -5
say "rigd idle: $(rss)"

FAIL=0
if want basic; then
say "basic (uid $NOBODY): copy and compute channels, 256 MiB copies, round trips, a million releases"
taskset -c 2 sh -c "RIG_PROBE_UID=$NOBODY $BIN/rig-channel-probe basic $RUN/rigd.sock $GPU" || FAIL=1
fi

if want gpu; then
say "basic (uid $NOBODY) with rings, USERD and pushbuffers in GPU memory"
taskset -c 2 sh -c "RIG_PROBE_RINGS=gpu RIG_PROBE_UID=$NOBODY $BIN/rig-channel-probe basic $RUN/rigd.sock $GPU" || FAIL=1
fi

if want cuda; then
say "CUDA in the same run"
if nvcc -O2 -o /tmp/cuda_anchor tests/h200/cuda_anchor.c -lcuda 2> "$RUN/nvcc.log"; then
  taskset -c 2 /tmp/cuda_anchor 10000 || FAIL=1
else
  cat "$RUN/nvcc.log"; FAIL=1
fi
fi

if want open; then
say "open: session + compute channel + first release, 20 times"
taskset -c 2 sh -c "RIG_PROBE_UID=$NOBODY $BIN/rig-channel-probe open $RUN/rigd.sock $GPU 20" || FAIL=1
fi

if want kill; then
say "kill -9 mid-stream, 20 times, while another client keeps releasing"
RIG_PROBE_UID=$NOBODY "$BIN/rig-channel-probe" steady "$RUN/rigd.sock" "$GPU" 30 > "$RUN/keeper.out" 2>&1 &
KEEPER=$!
sleep 0.5
: > "$RUN/reclaim.ms"
n=0
while [ $n -lt 20 ]; do
  RIG_PROBE_UID=$NOBODY "$BIN/rig-channel-probe" spin "$RUN/rigd.sock" "$GPU" > "$RUN/spin.out" 2>&1 &
  SPIN=$!
  j=0
  while ! grep -q ready "$RUN/spin.out" && [ $j -lt 200 ]; do sleep 0.01; j=$((j + 1)); done
  sleep 0.2
  before=$(count_channels)
  t0=$(date +%s%N)
  kill -9 $SPIN
  w=0
  while [ "$(count_channels)" -ge "$before" ] && [ $w -lt 500 ]; do w=$((w + 1)); done
  [ $w -lt 500 ] || { say "kill -9 of $SPIN: its channel was not reclaimed"; FAIL=1; break; }
  t1=$(date +%s%N)
  wait $SPIN 2>/dev/null
  echo $(( (t1 - t0) / 1000 )) >> "$RUN/reclaim.ms"
  n=$((n + 1))
done
sort -n "$RUN/reclaim.ms" | awk '{a[NR]=$1} END {printf "reclaim_after_kill n=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f (polling rigctl channels)\n", NR, a[int(NR*0.5+0.5)]/1000, a[int(NR*0.99+0.5)]/1000, a[NR]/1000}'
say "fault: one client's bad release while the keeper still runs"
(probe fault) || FAIL=1
wait $KEEPER || FAIL=1
cat "$RUN/keeper.out"
say "after kills and fault: $(count_channels) channels; rigd $(rss)"
fi

if want many; then
# N clients at once (64, then as many as there are spare CPUs), each its own uid
# (60000 + k; gid nogroup for the socket): one uid may have only 16 sessions opened
# and not yet claimed (dma::pools::MAX_PENDING).
for N in ${MANY:-64 14}; do
say "$N clients, one channel each, 10 s"
k=0
PIDS=
rm -f "$RUN"/c*.out
while [ $k -lt $N ]; do
  RIG_PROBE_UID=$((60000 + k)) RIG_PROBE_GID=$NOBODY "$BIN/rig-channel-probe" steady "$RUN/rigd.sock" "$GPU" 10 > "$RUN/c$k.out" 2>&1 &
  PIDS="$PIDS $!"
  k=$((k + 1))
done
sleep 8
say "with $N clients: $(count_channels) channels; rigd $(rss)"
for p in $PIDS; do wait "$p"; done
bad=0
for f in "$RUN"/c*.out; do grep -q '^steady' "$f" || { bad=$((bad + 1)); cat "$f"; }; done
say "$N clients: $bad failed"
[ $bad -eq 0 ] || FAIL=1
cat "$RUN"/c*.out | awk -v n=$N '/^steady/ {for (i=1;i<=NF;i++) {split($i,kv,"="); v[kv[1]]=kv[2]} c++; r+=v["releases"]; if (v["p99_us"]>m) m=v["p99_us"]; s+=v["p50_us"]; k+=v["rekicks"]} END {printf "%d clients: releases=%d mean_p50_us=%.2f worst_p99_us=%.2f rekicks=%d\n", n, r, s/c, m, k}'
sleep 0.5
say "after $N clients: $(count_channels) channels"
done
fi

kill -TERM $RIGD
wait $RIGD
say "rigd stopped (rc $?); its log's warnings and errors:"
RIGD=
sed 's/\x1b\[[0-9;]*m//g' "$RUN/rigd.log" | grep -E " (WARN|ERROR) " | cut -c28- | sed 's/channel=[0-9]*/channel=N/; s/session=[0-9]*/session=N/; s/pid=[0-9]*/pid=N/' | sort | uniq -c | sort -rn | head -12
say "after: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader) used, nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
dmesg | grep -E "Xid" | tail -4
# The machine boots with no hugepages reserved; rigd gives back what it added, and an
# earlier run killed before it could leave some: back to 0.
[ "${KEEP_HUGEPAGES:-0}" = 1 ] || echo 0 > /proc/sys/vm/nr_hugepages
exit $FAIL
