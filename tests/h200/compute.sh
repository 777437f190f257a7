#!/bin/sh
# Kernels, copies and GPU memory through rig on the H200 (device machine; docs/compute.md,
# "On the H200"), run as root from the repository root: rigd serves the GPU through its
# driver; rig-compute-probe, dropped to uid 65534, loads the fixture cubin into GPU
# memory lent to its session, launches every fixture kernel and checks each result,
# copies in every direction, and ends with a deliberate out-of-bounds store in a
# session of its own (one Xid 31). CUDA's anchor runs the same cubin in the same call,
# so the figures compare side by side. Then 64 clients, each a process of its own uid,
# launch and check their own results at once for 10 s, then 15 (one per free CPU), and
# CUDA's processes the same (`swarm`; SWARM="64 15" sets the counts), and a client killed
# with SIGKILL in the middle of a 10-second kernel is reclaimed and followed by a new
# client whose kernels must be right (`kill`). `python`: the rig wheel (.dev/*.whl)
# installed for the image's python3 and its H200 tests (tests/h200/python) run as uid
# 65534, CuPy beside them for the figures. `ipc`: events shared between sessions
# (tests/h200/python/shared_events.py): an importer of uid 65534 waits on the GPU and on
# the host for an exporter's records, uid 65533 is refused the token, and the exporter's
# SIGKILL ends the waits typed. `tinygrad`: tinygrad 0.13.0 on rig's device
# (rig_gpu/tinygrad.py) as uid 65534, its figures beside tinygrad on CUDA, and tinygrad's
# own tests (TG_TESTS) on both. `host`: the machine (CPU, clock source, each CPU's
# load over a second), then the launch figures alone, rig's and CUDA's, on each CPU of
# HOST_CPUS (default all but 0), HOST_ROUNDS times (default 1), and what stores through
# BAR1 cost by pattern (the probe's `stores`): the host time per launch as the CPU and
# its neighbours' load move it (only when named). rigd stops at the end, which frees
# everything it made; what the RM holds before and after is printed.
#
#     tests/h200/compute.sh .dev [CUBIN]   # .dev holds static rigd, rigctl, rig-compute-probe
#     RINGS=gpu tests/h200/compute.sh .dev  # the probe's rings and arena in GPU memory
#     SKIP_CUDA=1 ...                       # rig only
#     PHASES="swarm kill" ...               # some of: probe cuda swarm kill python ipc tinygrad host
#                                           # (default all; host, deps, waits and coop only when named)
#     COPY_ENGINES="2, 3" ...               # rigd's [channels] copy_engines (default "auto";
#                                           # empty: copy channels in the session's GR0 group)
#     PHASES=deps DEPS_ROUNDS=3 ...          # waits between channels on the GPU, rig and
#                                           # CUDA in turn (tests/h200/deps)
#     PHASES=waits WAITS_ROUNDS=2 ...        # waits that spin, yield or sleep, rig's
#                                           # policies and CUDA's schedule flags
#     PHASES=coop ...                        # coop.cu's warp-synchronous, CUB and
#                                           # cooperative kernels, CUDA then rig
#     TG_TESTS="test/test_tiny.py ..." ...  # tinygrad's own tests to run in phase tinygrad
#     TG_BACKENDS="RIG CUDA" ...            # and the devices they run on (both by default)
#     TG_SCRIPT=path/to.py ...              # a script of yours run as the bench is
#     TG_PYTEST_K="expr" TG_SKIP_BENCH=1 ... # only the tests pytest -k selects; no figures
#     TG_SKIP_OWN=1 ...                     # not rig's own tinygrad tests (tests/h200/tinygrad)
#     RIG_WAIT_POLICY=yield ...             # rig_gpu.tinygrad's waits (docs/tinygrad.md)
#     PHASES=host HOST_CPUS="3 7" HOST_ROUNDS=3 HOST_PROBES="new=.dev/rig-compute-probe old=/tmp/old-probe" ...
#                                           # two probe builds' host time, turn about
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

# [channels] copy_engines: COPY_ENGINES when set (empty: the GR0 group), else rigd's
# default, "auto" (the RM's async copy engines).
if [ -n "${COPY_ENGINES+set}" ]; then CE_TOML="[$COPY_ENGINES]"; else CE_TOML='"auto"'; fi
# Host leases hold the probe's 256 MiB staging buffer, pushbuffers and semaphores; GPU
# memory holds everything else (the defaults: 64 GiB per uid, 128 GiB per GPU).
cat > "$RUN/rigd.toml" <<EOF
[server]
socket = "$RUN/rigd.sock"
group = "nogroup"
[paths]
# A static rigd has no NSS modules: read the group file itself.
group_file = "/etc/group"
state_dir = "$RUN/state"
[dma]
pool_bytes = $((2048 << 20))
reserve_hugepages = true
[dma.quota]
per_uid_bytes = $((1024 << 20))
per_device_bytes = $((1024 << 20))
[channels]
serve = ["$GPU"]
per_session = 4
gpu_rings_group = "nogroup"
copy_engines = $CE_TOML
EOF
want() { case " ${PHASES:-all} " in *" all "* | *" $1 "*) return 0 ;; esac; return 1; }
# Phases that `all` leaves out: only when named.
asked() { case " ${PHASES:-} " in *" $1 "*) return 0 ;; esac; return 1; }
ctl() { "$BIN/rigctl" --socket "$RUN/rigd.sock" "$@"; }
rss_kb() { awk '/VmRSS/ { print $2 }' "/proc/$RIGD/status"; }
# What rigd's books still hold: channels, and GPU memory lent (bytes).
held() {
  echo "$(ctl channels --json | grep -c '"channel"') channels, $(ctl dma --json | tr ',' '\n' | awk -F: '/"lent_bytes"/ { s += $2 } END { print s + 0 }') B GPU memory lent"
}
# CUDA's anchor, compiled once (nvcc is on the device machine).
cuda_anchor() {
  [ -x /tmp/cuda_compute_anchor ] ||
    nvcc -O2 -o /tmp/cuda_compute_anchor tests/h200/cuda_compute_anchor.c -lcuda 2> "$RUN/nvcc.log"
}
# Clients' launch + completion medians (field 4) and p99s (field 6) from `PREFIX
# swarm_launch_sync_us` lines of FILES: the spread, the median of medians, the worst p99.
spread() { # prefix files...
  p=$1
  shift
  lines=$(cat "$@" | grep "^$p swarm_launch_sync_us")
  meds=$(echo "$lines" | awk '{ print $4 }' | sort -n)
  n=$(echo "$meds" | grep -c .)
  echo "$n clients reported; launch + completion, per client's median: $(echo "$meds" | head -n1) .. $(echo "$meds" | tail -n1) us, median of medians $(echo "$meds" | sed -n "$(((n + 1) / 2))p") us; worst p99 $(echo "$lines" | awk '{ print $6 }' | sort -n | tail -n1) us"
}
# The swarm's start line: each client, once open, makes ready.PID in $SW and waits for
# $SW/go, which go_when_ready makes once N are ready (or after 120 s, failing), so that
# every client's timed 10 s overlap whole: 64 CUDA contexts take seconds to open one
# after another, and a window each from its own start counts launches made while
# others were still opening.
ready_dir() {
  SW=$RUN/swarm-start
  rm -rf "$SW" && mkdir -m 1777 "$SW"
}
go_when_ready() { # n
  t=0
  while [ "$(ls "$SW" | grep -c '^ready\.')" -lt "$1" ]; do
    t=$((t + 1))
    [ $t -gt 1200 ] && { touch "$SW/go"; say "swarm: only $(ls "$SW" | grep -c '^ready\.') of $1 ready in 120 s"; return 1; }
    sleep 0.1
  done
  touch "$SW/go"
  say "swarm: $1 ready after $((t / 10)).$((t % 10)) s; go"
}
# How the clients' timed windows lined up, from `PREFIX window pid P start_us S end_us E`
# lines of FILES: the spread of their starts and of their ends (CLOCK_MONOTONIC).
windows() { # prefix files...
  p=$1
  shift
  cat "$@" | grep "^$p window" | awk '{ s = $(NF - 2); e = $NF; if (n == 0 || s < s0) s0 = s; if (s > s1) s1 = s; if (n == 0 || e < e0) e0 = e; if (e > e1) e1 = e; n++ }
    END { printf "%d windows: starts within %.1f ms, ends within %.1f ms\n", n, (s1 - s0) / 1000, (e1 - e0) / 1000 }'
}
# The image's python3 with WHEELS (rig's, and tinygrad's for its phase) installed in
# /tmp/rig-site, a home for uid 65534, and $as_nobody: a command and its arguments, run
# as that uid.
python_site() { # wheels...
  rm -rf /tmp/rig-site /tmp/rig-py-home && mkdir -p /tmp/rig-py-home &&
    chown $NOBODY:$NOBODY /tmp/rig-py-home &&
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/rig-site "$@" &&
    printf '%s\n' 'import os, sys' 'os.setgroups([]); os.setgid(65534); os.setuid(65534)' \
      'os.execvp(sys.argv[1], sys.argv[1:])' > /tmp/rig-site/as-nobody.py &&
    chmod -R a+rX /tmp/rig-site
}
as_nobody="python3 /tmp/rig-site/as-nobody.py"
# Call only in a subshell (`&`): it execs, so that `$!` is the probe itself.
client() { # uid cpu args...
  uid=$1 cpu=$2
  shift 2
  exec env RIG_PROBE_UID="$uid" RIG_PROBE_GID=$NOBODY taskset -c "$cpu" \
    "${PROBE:-$BIN/rig-compute-probe}" "$@"
}
[ -n "${RINGS:-}" ] && export RIG_PROBE_RINGS="$RINGS"

pgrep -x rigd > /dev/null && { say "a rigd is running already"; exit 1; }
say "before: GPU $GPU, $(smi), nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
# RIGD_FLAGS= runs rigd at its service default (info), as the figures should.
"$BIN/rigd" --config "$RUN/rigd.toml" ${RIGD_FLAGS--v} > "$RUN/rigd.log" 2>&1 &
RIGD=$!
i=0
while [ ! -S "$RUN/rigd.sock.fd" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$RUN/rigd.sock.fd" ] || { say "rigd did not start"; cat "$RUN/rigd.log"; exit 1; }
sleep 1
say "rigd $RIGD up after $((i * 100)) ms"

FAIL=0
if want probe; then
  say "rig-compute-probe (uid $NOBODY), cubin $(basename "$CUBIN")"
  taskset -c 2 sh -c "RIG_PROBE_UID=$NOBODY $BIN/rig-compute-probe $RUN/rigd.sock $GPU $CUBIN" || FAIL=1
  say "rigctl dma after the probe"
  ctl dma 2>&1 | head -20
fi

if asked host; then
  say "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
  lscpu -e=CPU,CORE,SOCKET,NODE | tr -s ' ' | paste -sd ';'
  dmesg | grep -m1 -i "hypervisor detected"
  # How BAR mappings are cached (PAT), where debugfs shows it.
  grep -h -i -E "write-combining|uncached" /sys/kernel/debug/x86/pat_memtype_list 2> /dev/null | sort | uniq -c | sort -rn | head -6
  # Each CPU's busy share over one second, from /proc/stat (user..steal, of all).
  busy() { grep '^cpu[0-9]' /proc/stat | awk '{ b = $2 + $3 + $4 + $7 + $8 + $9; print $1, b, b + $5 + $6 }'; }
  busy > "$RUN/stat0"; sleep 1; busy > "$RUN/stat1"
  echo "busy: $(join "$RUN/stat0" "$RUN/stat1" | awk '{ d = $5 - $3; printf "%s %.0f%% ", $1, d ? 100 * ($4 - $2) / d : 0 }')"
  cuda_anchor || { cat "$RUN/nvcc.log"; FAIL=1; }
  for round in $(seq 1 "${HOST_ROUNDS:-1}"); do
    for cpu in ${HOST_CPUS:-$(seq 1 $(($(nproc) - 1)))}; do
      # HOST_PROBES="new=PATH old=PATH": probe builds compared turn about on each CPU.
      for p in ${HOST_PROBES:-probe=$BIN/rig-compute-probe}; do
        (PROBE=${p#*=} client $NOBODY "$cpu" host "$RUN/rigd.sock" "$GPU" "$CUBIN") 2>&1 | grep -E '^rig (empty|batch|clock)|rig-compute-probe' | sed "s/^/cpu $cpu round $round ${p%%=*} /" || FAIL=1
      done
      (client $NOBODY "$cpu" stores "$RUN/rigd.sock" "$GPU" "$CUBIN") 2>&1 | grep -E '^rig stores|rig-compute-probe' | sed "s/^/cpu $cpu round $round /" || FAIL=1
      [ -x /tmp/cuda_compute_anchor ] && [ -z "${SKIP_CUDA:-}" ] &&
        taskset -c "$cpu" /tmp/cuda_compute_anchor "$CUBIN" host | sed "s/^/cpu $cpu round $round /"
    done
  done
fi

if want python; then
  WHEEL=$(ls "$BIN"/rig_gpu-*.whl 2> /dev/null | head -n1)
  if [ -z "$WHEEL" ]; then
    say "python: no rig wheel in $BIN"
    FAIL=1
  else
    python_site "$WHEEL" || FAIL=1
    say "python: $(basename "$WHEEL") under $(python3 --version), its H200 tests as uid $NOBODY"
    RIG_SOCKET=$RUN/rigd.sock RIG_GPU=$GPU RIG_CUBIN=$CUBIN HOME=/tmp/rig-py-home \
      PYTHONPATH=/tmp/rig-site PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
      taskset -c 2 $as_nobody python3 -m pytest -q -s -p no:cacheprovider tests/h200/python || FAIL=1
    say "python: after the tests: $(held)"
  fi
fi

if want ipc; then
  # Events shared between sessions: forked parties of uid 65534 (exporter, importer)
  # and 65533 (refused), the exporter SIGKILLed with a record in flight.
  WHEEL=$(ls "$BIN"/rig_gpu-*.whl 2> /dev/null | head -n1)
  if [ -z "$WHEEL" ]; then
    say "ipc: no rig wheel in $BIN"
    FAIL=1
  else
    [ -d /tmp/rig-site ] || python_site "$WHEEL" || FAIL=1
    say "ipc: events shared between sessions (uids $NOBODY and 65533)"
    RIG_SOCKET=$RUN/rigd.sock RIG_GPU=$GPU RIG_CUBIN=$CUBIN HOME=/tmp/rig-py-home \
      PYTHONPATH=/tmp/rig-site PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
      taskset -c 2-3 timeout 180 python3 tests/h200/python/shared_events.py || FAIL=1
    say "ipc: after: $(held)"
    dmesg | grep -i xid | tail -3
  fi
fi

if want tinygrad; then
  # .dev/tinygrad holds tinygrad's wheel and, under src/, its tests at the same tag
  # (tests/h200/tinygrad/stage.sh makes both). rig and tinygrad are installed for the
  # image's python3; tinygrad's own tests run on RIG as uid 65534 and on CUDA (tinygrad
  # over libcuda), at once, in pytest-xdist workers of their own.
  TG=$BIN/tinygrad
  WHEEL=$(ls "$BIN"/rig_gpu-*.whl 2> /dev/null | head -n1)
  rm -rf /tmp/rig-tg && mkdir -p /tmp/rig-tg && chown $NOBODY:$NOBODY /tmp/rig-tg
  python_site "$WHEEL" "$TG"/tinygrad-*.whl && chmod -R a+rX "$TG" &&
    chown -R $NOBODY:$NOBODY "$TG/src" || FAIL=1
  export RIG_SOCKET=$RUN/rigd.sock RIG_GPU=$GPU HOME=/tmp/rig-py-home PYTHONPATH=/tmp/rig-site \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
  say "tinygrad: $(PYTHONPATH=/tmp/rig-site python3 -c 'import tinygrad, importlib.metadata as m; print("tinygrad", m.version("tinygrad"))') on rig, uid $NOBODY"
  [ -n "${TG_SKIP_OWN:-}" ] ||
    $as_nobody taskset -c 2-5 python3 -m pytest -q -p no:cacheprovider tests/h200/tinygrad/test_tinygrad_h200.py || FAIL=1
  say "tinygrad: figures, RIG beside CUDA in one process"
  [ -n "${TG_SKIP_BENCH:-}" ] || TG_SRC=$TG/src TG_BENCH_ONLY=${TG_BENCH_ONLY:-} \
    $as_nobody taskset -c 2-5 python3 tests/h200/tinygrad/bench.py || FAIL=1
  # A script of your own in the same setting (uid, CPUs, the tests' tree), after the figures.
  [ -z "${TG_SCRIPT:-}" ] || TG_SRC=$TG/src $as_nobody taskset -c 2-5 python3 "$TG_SCRIPT" || FAIL=1
  say "tinygrad: after the figures: $(held)"
  if [ -n "${TG_TESTS:-}" ]; then
    say "tinygrad's own tests ($TG_TESTS) on ${TG_BACKENDS:-RIG CUDA} at once, ${TG_WORKERS:-6} workers each"
    TG_PIDS=
    for b in ${TG_BACKENDS:-RIG CUDA}; do
      (cd "$TG/src" && for f in $TG_TESTS; do
        DEV=$b PYTEST_PLUGINS=rig_gpu.tinygrad timeout "${TG_TIMEOUT:-240}" \
          $as_nobody python3 -m pytest -q -p no:cacheprovider -n "${TG_WORKERS:-6}" \
          -o cache_dir=/tmp/rig-tg/.pytest --junitxml="/tmp/rig-tg/$b-$(echo "$f" | sed 's#/#__#g').xml" \
          ${TG_PYTEST_K:+-k} ${TG_PYTEST_K:+"$TG_PYTEST_K"} \
          "$f" > "/tmp/rig-tg/$b-$(basename "$f").log" 2>&1
        echo "$b $f: exit $? $(tail -n1 "/tmp/rig-tg/$b-$(basename "$f").log")"
      done) &
      TG_PIDS="$TG_PIDS $!"
    done
    wait $TG_PIDS # not a bare wait: rigd is a child too
    python3 tests/h200/tinygrad/summarize.py /tmp/rig-tg
    say "tinygrad: after its tests: $(held)"
  fi
fi

if want swarm; then
for N in ${SWARM:-64 15}; do
  rm -f "$RUN"/swarm-*.out "$RUN"/cuda-swarm-*.out
  say "swarm: $N clients (uids 60000..), launching and checking their own results for 10 s"
  before="$(smi) | rigd $(rss_kb) kB | $(held)"
  PIDS=
  k=0
  ready_dir
  while [ $k -lt "$N" ]; do
    SWARM_DIR=$SW client $((60000 + k)) $((1 + k % 15)) swarm 10 "$RUN/rigd.sock" "$GPU" "$CUBIN" > "$RUN/swarm-$k.out" 2>&1 &
    PIDS="$PIDS $!"
    k=$((k + 1))
  done
  go_when_ready "$N" || FAIL=1
  peak=0
  for t in 1 2 3 4 5 6 7 8 9 10 11 12; do
    sleep 1
    r=$(rss_kb)
    [ "$r" -gt "$peak" ] && peak=$r
  done
  bad=0
  k=0
  for p in $PIDS; do
    wait "$p" || { bad=$((bad + 1)); say "swarm client $k failed:"; tail -3 "$RUN/swarm-$k.out"; }
    k=$((k + 1))
  done
  [ $bad = 0 ] || FAIL=1
  say "swarm: $(spread rig "$RUN"/swarm-*.out)"
  say "swarm: $(windows swarm "$RUN"/swarm-*.out)"
  say "swarm: $(cat "$RUN"/swarm-*.out | awk '/^swarm pid/ { l += $5; s += $7 } /^check .* ok/ { ok++ } END { print l " launches and " s " saxpys, " ok " checks passed" }')"
  sleep 1
  say "swarm: before $before"
  say "swarm: rigd peak RSS during it $peak kB"
  say "swarm: after  $(smi) | rigd $(rss_kb) kB | $(held)"
  case "$(held)" in "0 channels, 0 B GPU memory lent") ;; *) say "swarm: not all reclaimed"; FAIL=1 ;; esac
  if [ -z "${SKIP_CUDA:-}" ] && cuda_anchor; then
    say "swarm: CUDA, $N processes on the same CPUs, the same 10 s"
    PIDS=
    k=0
    ready_dir
    while [ $k -lt "$N" ]; do
      SWARM_DIR=$SW taskset -c $((1 + k % 15)) /tmp/cuda_compute_anchor "$CUBIN" swarm 10 > "$RUN/cuda-swarm-$k.out" 2>&1 &
      PIDS="$PIDS $!"
      k=$((k + 1))
    done
    go_when_ready "$N" || FAIL=1
    for p in $PIDS; do wait "$p" || FAIL=1; done
    say "swarm: CUDA: $(spread anchor "$RUN"/cuda-swarm-*.out)"
    say "swarm: CUDA: $(windows "anchor swarm" "$RUN"/cuda-swarm-*.out)"
    say "swarm: CUDA: $(cat "$RUN"/cuda-swarm-*.out | awk '/^anchor swarm pid/ { l += $6; w += $8 } END { print l " launches, " w " wrong values" }')"
  fi
done
fi

if want kill; then
  say "kill: SIGKILL in the middle of a 10-second kernel, then a new client"
  before="$(smi) | $(held)"
  client 60100 3 spin "$RUN/rigd.sock" "$GPU" "$CUBIN" > "$RUN/spin.out" 2>&1 &
  SPIN=$!
  j=0
  while ! grep -q spinning "$RUN/spin.out" && [ $j -lt 300 ]; do sleep 0.1; j=$((j + 1)); done
  cat "$RUN/spin.out"
  say "kill: while it spins: $(smi) | $(held)"
  sleep 1
  t0=$(date +%s%N)
  kill -9 $SPIN
  wait $SPIN 2> /dev/null
  j=0
  while [ "$(held)" != "0 channels, 0 B GPU memory lent" ] && [ $j -lt 3000 ]; do sleep 0.01; j=$((j + 1)); done
  say "kill: reclaimed in $((($(date +%s%N) - t0) / 1000000)) ms: $(held)"
  [ "$(held)" = "0 channels, 0 B GPU memory lent" ] || FAIL=1
  t0=$(date +%s%N)
  (client 60101 4 swarm 2 "$RUN/rigd.sock" "$GPU" "$CUBIN") > "$RUN/after-kill.out" 2>&1 || { FAIL=1; say "kill: the new client failed"; }
  cat "$RUN/after-kill.out"
  say "kill: the new client ran in $((($(date +%s%N) - t0) / 1000000)) ms"
  say "kill: before $before"
  say "kill: after  $(smi) | $(held)"
fi

# rig-compute-probe's ROLE and CUDA's tests/h200/deps/ANCHOR.c, both on deps.cu's
# cubin, in turn on CPU 2 for ROUNDS rounds, each line prefixed with its round.
rig_beside_cuda() { # ROLE ANCHOR ROUNDS
  if nvcc -cubin -arch=sm_90 -O2 -o "$RUN/deps.cubin" tests/h200/deps/deps.cu 2> "$RUN/nvcc-$1.log" &&
    nvcc -O2 -o "/tmp/$2" "tests/h200/deps/$2.c" -lcuda 2>> "$RUN/nvcc-$1.log"; then
    chmod 644 "$RUN/deps.cubin"
    for round in $(seq 1 "$3"); do
      (client $NOBODY 2 "$1" "$RUN/rigd.sock" "$GPU" "$RUN/deps.cubin") > "$RUN/$1-rig.out" 2>&1 || FAIL=1
      sed "s/^/round $round /" "$RUN/$1-rig.out"
      taskset -c 2 "/tmp/$2" "$RUN/deps.cubin" > "$RUN/$1-cuda.out" 2>&1 || FAIL=1
      sed "s/^/round $round /" "$RUN/$1-cuda.out"
    done
  else
    cat "$RUN/nvcc-$1.log"
    FAIL=1
  fi
}

if asked deps; then
  say "deps: waits between channels on the GPU (tests/h200/deps), rig (uid $NOBODY) and CUDA in turn on CPU 2"
  rig_beside_cuda deps cuda_deps "${DEPS_ROUNDS:-3}"
fi

if asked waits; then
  say "waits: spin, yield, block and spin-then-block around kernels of 20 us to 10 ms, rig (uid $NOBODY) and CUDA's schedule flags in turn on CPU 2"
  rig_beside_cuda waits cuda_waits "${WAITS_ROUNDS:-2}"
  grep -h "non-stall" "$RUN/rigd.log" | sed 's/\x1b\[[0-9;]*m//g' | cut -c28- | sort | uniq -c
fi

if asked coop; then
  COOP=client/cubin/tests/data/coop.sm_90.cubin
  say "coop: warp shuffles, cooperative groups, CUB and grid syncs ($COOP), CUDA then rig (uid $NOBODY) on CPU 2"
  # The committed cubin against this machine's nvcc's build of coop.cu.
  CCCL=$(dirname "$(command -v nvcc)")/../include/cccl
  if nvcc -cubin -arch=sm_90 -O2 -I"$CCCL" -o "$RUN/coop.cubin" client/cubin/tests/data/coop.cu 2> "$RUN/nvcc-coop.log"; then
    cmp -s "$RUN/coop.cubin" "$COOP" && say "coop: this nvcc builds the committed cubin byte for byte" ||
      say "coop: this nvcc's cubin differs from the committed one ($(nvcc --version | tail -1))"
  else
    cat "$RUN/nvcc-coop.log"
  fi
  cp "$COOP" "$RUN/coop.sm_90.cubin" && chmod 644 "$RUN/coop.sm_90.cubin"
  if nvcc -O2 -o /tmp/cuda_coop tests/h200/coop/cuda_coop.c -lcuda 2>> "$RUN/nvcc-coop.log"; then
    taskset -c 2 /tmp/cuda_coop "$RUN/coop.sm_90.cubin" > "$RUN/coop-cuda.out" 2>&1 || FAIL=1
    cat "$RUN/coop-cuda.out"
    # rig launches no cooperative grid larger than CUDA's occupancy allows.
    per_sm=$(awk '/^anchor occupancy grid_sum block 256 dynamic 0 / { print $NF; exit }' "$RUN/coop-cuda.out")
    (RIG_COOP_CUBIN="$RUN/coop.sm_90.cubin" RIG_COOP_CUDA_PER_SM="${per_sm:-1}" \
      client $NOBODY 2 coop "$RUN/rigd.sock" "$GPU" "$CUBIN") > "$RUN/coop-rig.out" 2>&1 || FAIL=1
    cat "$RUN/coop-rig.out"
  else
    cat "$RUN/nvcc-coop.log"; FAIL=1
  fi
fi

if want cuda && [ -z "${SKIP_CUDA:-}" ]; then
  say "CUDA in the same run, same cubin"
  if cuda_anchor; then
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
