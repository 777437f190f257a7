#!/bin/sh
# Kernels, copies and GPU memory through rig on the H200 (device machine; docs/compute.md,
# "On the H200"), run as root from the repository root: rigd serves the GPU through its
# driver; rig-compute-probe, dropped to uid 65534, loads the fixture cubin into GPU
# memory lent to its session, launches every fixture kernel and checks each result,
# copies in every direction, and ends with a deliberate out-of-bounds store in a
# session of its own (one Xid 31). CUDA's anchor runs the same cubin in the same call,
# so the figures compare side by side. rigd stops at the end, which frees everything it
# made; what the RM holds before and after is printed.
#
#     tests/h200/compute.sh .dev [CUBIN]   # .dev holds static rigd, rigctl, rig-compute-probe
#     RINGS=gpu tests/h200/compute.sh .dev  # the probe's rings and arena in GPU memory
#     SKIP_CUDA=1 ...                       # rig only
#
# Uses the GPU only through its driver (rigd's RM calls, the lent channels, CUDA).
set -u
BIN=$(cd "${1:-.dev}" && pwd)
CUBIN=$(realpath "${2:-client/cubin/tests/data/kernels.sm_90.cubin}")
RUN=/tmp/rig-h200-compute
NOBODY=65534
rm -rf "$RUN"
mkdir -p "$RUN/state"
chmod 755 "$RUN"
GPU=$(ls /sys/bus/pci/drivers/nvidia | grep -m1 '^0000:')
say() { printf '== %s\n' "$*"; }
smi() { nvidia-smi --query-gpu=memory.used,clocks.sm,pstate --format=csv,noheader; }
cleanup() {
  pkill -9 -x rig-compute-pro 2>/dev/null
  [ -n "${RIGD:-}" ] && kill -TERM "$RIGD" 2>/dev/null && wait "$RIGD" 2>/dev/null
}
trap cleanup EXIT

# Host leases hold the probe's 256 MiB staging buffer, pushbuffers and semaphores; GPU
# memory holds everything else (the defaults: 64 GiB per uid, 128 GiB per GPU).
cat > "$RUN/rigd.toml" <<EOF
[server]
socket = "$RUN/rigd.sock"
group = "nogroup"
[paths]
state_dir = "$RUN/state"
[dma]
pool_bytes = $((1024 << 20))
reserve_hugepages = true
[dma.quota]
per_uid_bytes = $((1024 << 20))
per_device_bytes = $((1024 << 20))
[channels]
serve = ["$GPU"]
per_session = 4
gpu_rings_group = "nogroup"
EOF
[ -n "${RINGS:-}" ] && export RIG_PROBE_RINGS="$RINGS"

pgrep -x rigd > /dev/null && { say "a rigd is running already"; exit 1; }
say "before: GPU $GPU, $(smi), nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
"$BIN/rigd" --config "$RUN/rigd.toml" -v > "$RUN/rigd.log" 2>&1 &
RIGD=$!
i=0
while [ ! -S "$RUN/rigd.sock.fd" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$RUN/rigd.sock.fd" ] || { say "rigd did not start"; cat "$RUN/rigd.log"; exit 1; }
sleep 1
say "rigd $RIGD up after $((i * 100)) ms"

FAIL=0
say "rig-compute-probe (uid $NOBODY), cubin $(basename "$CUBIN")"
taskset -c 2 sh -c "RIG_PROBE_UID=$NOBODY $BIN/rig-compute-probe $RUN/rigd.sock $GPU $CUBIN" || FAIL=1
say "rigctl dma after the probe"
"$BIN/rigctl" --socket "$RUN/rigd.sock" dma 2>&1 | head -20

if [ -z "${SKIP_CUDA:-}" ]; then
  say "CUDA in the same run, same cubin"
  if nvcc -O2 -o /tmp/cuda_compute_anchor tests/h200/cuda_compute_anchor.c -lcuda 2> "$RUN/nvcc.log"; then
    taskset -c 2 /tmp/cuda_compute_anchor "$CUBIN" 10000 || FAIL=1
  else
    cat "$RUN/nvcc.log"; FAIL=1
  fi
fi

kill -TERM $RIGD
wait $RIGD
say "rigd stopped (rc $?); its log's warnings and errors:"
RIGD=
sed 's/\x1b\[[0-9;]*m//g' "$RUN/rigd.log" | grep -E " (WARN|ERROR) " | cut -c28- | sed 's/channel=[0-9]*/channel=N/; s/session=[0-9]*/session=N/; s/pid=[0-9]*/pid=N/' | sort | uniq -c | sort -rn | head -12
say "after: $(smi), nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
dmesg | grep -E "Xid" | tail -4
[ "${KEEP_HUGEPAGES:-0}" = 1 ] || echo 0 > /proc/sys/vm/nr_hugepages
exit $FAIL
