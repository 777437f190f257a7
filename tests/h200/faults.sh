#!/bin/sh
# Copy-engine fills and copies of every size, and faults that stay in their session, on
# the H200 (or H100) device machine, run as root from the repository root
# (docs/RELIABILITY.md, "When a channel faults, and when the GPU is lost"): rigd serves
# the GPU through its driver. While one client of uid 65533 launches and checks its own
# work throughout (rig-compute-probe swarm), rig-fault-probe as uid 65534:
# - fills GPU memory from 1 MiB up to MAX_GIB and copies up to half of it, every word
#   checked by a kernel (tests/h200/check.cu, built here with nvcc), and repeats the
#   sequence that once lost an H100 (an 8 GiB fill, a new runtime, a kernel);
# - causes each fault kind once, each in a session of its own (rig-fault-probe's CASES:
#   MMU faults of a kernel's load and store and of the copy engine's read and write, a
#   trap, a misaligned load, a reserved pushbuffer header, a copy-engine launch with a
#   transfer type no header defines; tests/h200/faulty.cu), each of which rigd must
#   contain;
# - is killed with SIGKILL in the middle of 20 s of queued copies, of a 20 s kernel
#   of 1 ms blocks, and with a compute channel stopped at a GPU wait (a semaphore
#   acquire) for a value nothing releases, last, and rigd's reclaim is timed;
# - (`slice`) runs blocks of 1 s, then 5 s of 1 ms blocks, while a second session of
#   its own launches tiny kernels one after the other: how long the second waited
#   shows that rig's contexts are switched out between blocks, not within one
#   (docs/hardware/nvidia-channels.md, "Compute preemption");
# - (`hog`, only when named) runs a kernel of one 20 s block per SM beside the other
#   session: the RM ends it with Xid 109, rigd contains it and refuses the uid channels
#   (GPU_TIME) for `[channels] switch_timeout_penalty_s`.
# Before and after: the kernel log's Xid lines (109, 119 and 154 fail the run) and the
# GPU's health as `rigctl status` shows it; at the end what rigd's books still hold
# (nothing).
#
#     tests/h200/faults.sh .dev [MAX_GIB]   # .dev: static rigd, rigctl, rig-compute-probe,
#                                           # rig-fault-probe; MAX_GIB from the card's memory
#     PHASES="fills kill" ...               # some of: fills contain kill slice (default all, in that order)
#     CASES="kernel-store copy-read" ...    # the fault cases, in order (default all)
#     KILLS="acquire" ...                   # what is in flight at the kills (default
#                                           # copy kernel acquire)
#     TIMESLICE_US=250 ...                  # rigd's [channels] timeslice_us (default 0)
#     PHASES="hog cuda-hog" ...             # only when named: hog (it ends in Xid 109, which
#                                           # fails the run), CUDA's two processes in its
#                                           # situation, and (cuda-slice) in slice's
#                                           # (tests/h200/cuda_hog.cu)
#
# Uses the GPU only through its driver (rigd's RM calls, the lent channels); each fault
# kind is induced once per run.
set -u
BIN=$(cd "${1:-.dev}" && pwd)
CUBIN=$(realpath client/cubin/tests/data/kernels.sm_90.cubin)
RUN=/tmp/rig-h200-faults
rm -rf "$RUN"
mkdir -p "$RUN/state"
chmod 755 "$RUN"
GPU=$(ls /sys/bus/pci/drivers/nvidia | grep -m1 '^0000:')
say() { printf '== %s\n' "$*"; }
want() { case " ${PHASES:-fills contain kill slice} " in *" $1 "*) return 0 ;; esac; return 1; }
ctl() { "$BIN/rigctl" --socket "$RUN/rigd.sock" "$@"; }
xids() { dmesg 2> /dev/null | grep -E 'NVRM: Xid' ; }
cleanup() {
  pkill -9 -x rig-compute-pro 2> /dev/null
  pkill -9 -x rig-fault-probe 2> /dev/null
  [ -n "${RIGD:-}" ] && kill -TERM "$RIGD" 2> /dev/null && wait "$RIGD" 2> /dev/null
}
trap cleanup EXIT

MIB_TOTAL=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n1)
# The largest power of two that leaves 12 GiB to the RM and the swarm client.
if [ -n "${2:-}" ]; then MAX_GIB=$2; else
  MAX_GIB=1
  while [ $((MAX_GIB * 2 * 1024 + 12 * 1024)) -le "$MIB_TOTAL" ]; do MAX_GIB=$((MAX_GIB * 2)); done
fi
for m in check faulty; do
  nvcc -cubin -arch=sm_90 -O3 -o "$RUN/$m.cubin" "tests/h200/$m.cu" || { say "nvcc failed"; exit 1; }
done
chmod 644 "$RUN"/*.cubin

cat > "$RUN/rigd.toml" << EOF
[server]
socket = "$RUN/rigd.sock"
group = "nogroup"
[paths]
# A static rigd has no NSS modules: read the group file itself.
group_file = "/etc/group"
state_dir = "$RUN/state"
[dma]
pool_bytes = $((1024 << 20))
reserve_hugepages = true
[dma.quota]
per_uid_bytes = $((256 << 20))
per_device_bytes = $((1024 << 20))
[channels]
serve = ["$GPU"]
per_session = 4
timeslice_us = ${TIMESLICE_US:-0}
[gpu_memory]
per_uid_bytes = $(((MAX_GIB + 4) << 30))
per_gpu_bytes = $(((MAX_GIB + 8) << 30))
EOF

XIDS_BEFORE=$(xids | wc -l)
say "before: GPU $GPU ($(nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader)), $XIDS_BEFORE Xid lines in the kernel log, MAX_GIB $MAX_GIB"
"$BIN/rigd" --config "$RUN/rigd.toml" -v > "$RUN/rigd.log" 2>&1 &
RIGD=$!
i=0
while [ ! -S "$RUN/rigd.sock.fd" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$RUN/rigd.sock.fd" ] || { say "rigd did not start"; cat "$RUN/rigd.log"; exit 1; }
sleep 1
say "rigd up; rigctl status:"
ctl status

# The other session: a client of another uid that launches and checks its own work
# for the whole run.
SWARM_S=${SWARM_S:-150}
env RIG_PROBE_UID=65533 RIG_PROBE_GID=65534 taskset -c 3 \
  "$BIN/rig-compute-probe" swarm "$SWARM_S" "$RUN/rigd.sock" "$GPU" "$CUBIN" > "$RUN/other.log" 2>&1 &
OTHER=$!
sleep 2

FAIL=0
probe() { env RIG_PROBE_UID=65534 taskset -c 5 "$BIN/rig-fault-probe" "$@"; }
# Call only in a subshell (`&`): it execs, so that `$!` is the probe itself.
busy() { exec env RIG_PROBE_UID=65534 taskset -c 5 "$BIN/rig-fault-probe" busy "$@"; }
if want fills; then
  say "fills and copies up to $MAX_GIB GiB (uid 65534), the other session running"
  probe fills "$MAX_GIB" "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" || FAIL=1
  say "Xid lines since the start: $(($(xids | wc -l) - XIDS_BEFORE))"
fi
if want contain && [ $FAIL = 0 ]; then
  say "faults in sessions of their own (uid 65534), the other session running"
  # shellcheck disable=SC2086 # CASES is a list of words
  probe contain "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" "$RUN/faulty.cubin" ${CASES:-} || FAIL=1
  sleep 0.5
  say "Xid lines since the start: $(($(xids | wc -l) - XIDS_BEFORE)); rigctl status:"
  ctl status
fi
if want kill && [ $FAIL = 0 ]; then
  for what in ${KILLS:-copy kernel acquire}; do
    say "SIGKILL in the middle of a 20 s $what (uid 65534)"
    busy "$what" "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" > "$RUN/busy.log" 2>&1 &
    BUSY=$!
    i=0
    while ! grep -q "^busy" "$RUN/busy.log" && kill -0 $BUSY 2> /dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    cat "$RUN/busy.log"
    grep -q "^busy" "$RUN/busy.log" || { say "busy $what did not start"; FAIL=1; continue; }
    # Its session ends (`rigctl dma` lists it no more) once rigd has freed its
    # channels, its GPU memory and its leases, in that order.
    session() { ctl dma --json | grep -c "\"pid\": $BUSY\b"; }
    before=$(session)
    t0=$(date +%s%N)
    kill -9 $BUSY
    wait $BUSY 2> /dev/null
    i=0
    while [ "$(session)" -gt 0 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    t1=$(date +%s%N)
    say "killed: its session ($before listed) reclaimed whole $(((t1 - t0) / 1000000)) ms after the SIGKILL, $(session) left; Xid lines since the start: $(($(xids | wc -l) - XIDS_BEFORE))"
  done
  say "a new session after the kills"
  probe contain "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" "$RUN/faulty.cubin" none || FAIL=1
fi
if want hog && [ $FAIL = 0 ]; then
  say "a kernel of one 20 s block per SM beside the other session (uid 65534)"
  probe busy hog "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" || FAIL=1
  say "Xid lines since the start: $(($(xids | wc -l) - XIDS_BEFORE))"
fi
if want slice && [ $FAIL = 0 ]; then
  say "blocks of 1 s, then 5 s of 1 ms blocks, beside a second session's tiny kernels (uid 65534)"
  probe slice 1 "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" || FAIL=1
  probe slice 5 "$RUN/rigd.sock" "$GPU" "$RUN/check.cubin" 1 || FAIL=1
  say "Xid lines since the start: $(($(xids | wc -l) - XIDS_BEFORE))"
fi
# Only when named: CUDA's two processes in the slice phase's two situations.
case " ${PHASES:-} " in *" cuda-slice "*)
  say "CUDA: blocks of 1 s, then 5 s of 1 ms blocks, beside another process's empty launches"
  if nvcc -arch=sm_90 -O2 -o "$RUN/cuda_hog" tests/h200/cuda_hog.cu; then
    for shape in "4 1980000000 132" "8 1980000 $((132 * 16 * 5000))"; do
      # shellcheck disable=SC2086 # seconds of pings, clocks per block, blocks
      set -- $shape
      rm -f "$RUN/cuda_window"
      "$RUN/cuda_hog" pings "$1" "$RUN/cuda_window" > "$RUN/cuda_pings.log" 2>&1 &
      PINGS=$!
      sleep 1.5
      CUDA_HOG_WINDOW="$RUN/cuda_window" "$RUN/cuda_hog" hog "$2" "$3"
      wait $PINGS
      cat "$RUN/cuda_pings.log"
    done
  else
    FAIL=1
  fi
  ;;
esac
# Only when named: CUDA's two processes in the hog's situation (no rigd needed).
case " ${PHASES:-} " in *" cuda-hog "*)
  say "CUDA: a kernel of one 20 s block per SM beside another process's empty launches"
  if nvcc -arch=sm_90 -O2 -o "$RUN/cuda_hog" tests/h200/cuda_hog.cu; then
    "$RUN/cuda_hog" pings 30 > "$RUN/cuda_pings.log" 2>&1 &
    PINGS=$!
    sleep 2
    "$RUN/cuda_hog" hog
    wait $PINGS
    cat "$RUN/cuda_pings.log"
    say "Xid lines since the start: $(($(xids | wc -l) - XIDS_BEFORE))"
  else
    FAIL=1
  fi
  ;;
esac
say "what rigd logged of the faults and reclaims"
grep -E "contained a fault|lends nothing|GPU is lost|reclaim.s RM call|works again|compute preemption|context switches|GR context buffer|preemption buffers|WARN rigd::channels" "$RUN/rigd.log" | cut -c1-330
say "the other session (uid 65533)"
wait "$OTHER"
cat "$RUN/other.log"
grep -q "check swarm_saxpy_own_factor ok" "$RUN/other.log" || { say "the other session FAILED"; FAIL=1; }

say "after: rigctl status"
ctl status
say "rigd holds: $(ctl channels --json | grep -c '"channel"') channels; $(ctl dma --json | tr ',' '\n' | awk -F: '/"lent_bytes"/ { s += $2 } END { print s + 0 }') B GPU memory lent"
say "Xid lines since the start:"
xids | tail -n +$((XIDS_BEFORE + 1))
if xids | tail -n +$((XIDS_BEFORE + 1)) | grep -E -q 'Xid \([^)]*\): (109|119|154),'; then
  say "Xid 109, 119 or 154: the GPU's health was harmed"
  FAIL=1
fi
kill -TERM "$RIGD" && wait "$RIGD"
RIGD=
say "after rigd: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader) in use"
[ $FAIL = 0 ] && say "faults.sh: all checks passed" || say "faults.sh: FAILED"
exit $FAIL
