# Helpers for scenarios, sourced into each one (POSIX sh: busybox ash and Debian dash).
# A scenario reports through check lines, which the runner counts:
#   CHECK ok: <what>     CHECK FAIL: <what>
# $FILES is the scenario's folder for artefacts; it comes back to the host.

arg() { for a in $(cat /proc/cmdline); do case $a in "$1"=*) echo "${a#*=}";; esac; done; }

# check DESCRIPTION CMD ARGS...: runs CMD, one check line from its exit status.
check() {
  what=$1; shift
  if "$@"; then echo "CHECK ok: $what"; else echo "CHECK FAIL: $what (rc=$?)"; fi
}

# BDFs of the functions with this vendor:device (hex, no 0x), in bus order.
bdf_of() {
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x$1:0x$2" ] && echo "${d##*/}"
  done
}
drv_of() {
  if [ -e "/sys/bus/pci/devices/$1/driver" ]; then basename "$(readlink "/sys/bus/pci/devices/$1/driver")"; else echo none; fi
}

# One line per PCI function: bdf vendor device class driver iommu_group reset_method
list_devices() {
  for d in /sys/bus/pci/devices/*; do
    b=${d##*/}
    g=none; [ -e "$d/iommu_group" ] && g=$(basename "$(readlink "$d/iommu_group")")
    r=none; [ -f "$d/reset_method" ] && r=$(tr ' ' ',' < "$d/reset_method")
    echo "$b $(cat "$d/vendor") $(cat "$d/device") $(cat "$d/class") $(drv_of "$b") $g $r"
  done
}

# Hands a function to vfio-pci and back; take-over scenarios only (the runner guards them).
to_vfio() {
  d=/sys/bus/pci/devices/$1
  [ -e "$d/driver" ] && echo "$1" > "$d/driver/unbind"
  echo vfio-pci > "$d/driver_override"; echo "$1" > /sys/bus/pci/drivers_probe
  [ "$(drv_of "$1")" = vfio-pci ]
}
from_vfio() {
  d=/sys/bus/pci/devices/$1
  [ -e "$d/driver" ] && echo "$1" > "$d/driver/unbind"
  echo > "$d/driver_override"; echo "$1" > /sys/bus/pci/drivers_probe
}

# The test users: alice is in group rig, bob is not. Works with busybox and Debian tools,
# and with a rig group that systemd-sysusers made from systemd/rig.sysusers.conf.
# Sets RIG_GID to the group's id.
add_users() {
  grep -q '^rig:' /etc/group || echo "rig:x:900:" >> /etc/group
  if ! grep '^rig:' /etc/group | cut -d: -f4 | tr ',' '\n' | grep -qx alice; then
    sed -i '/^rig:/{s/:$/:alice/;t;s/$/,alice/}' /etc/group
  fi
  grep -q '^alice:' /etc/group || echo "alice:x:1000:" >> /etc/group
  grep -q '^bob:' /etc/group || echo "bob:x:1001:" >> /etc/group
  grep -q '^alice:' /etc/passwd || echo "alice:x:1000:1000:alice:/tmp:/bin/sh" >> /etc/passwd
  grep -q '^bob:' /etc/passwd || echo "bob:x:1001:1001:bob:/tmp:/bin/sh" >> /etc/passwd
  if [ -f /etc/shadow ]; then
    for u in alice bob; do grep -q "^$u:" /etc/shadow || echo "$u:*:19000:0:99999:7:::" >> /etc/shadow; done
  fi
  RIG_GID=$(awk -F: '$1 == "rig" {print $3}' /etc/group)
}
# as_user USER CMD ARGS...: runs CMD as USER with USER's groups, without PAM or a password.
as_user() {
  u=$1; shift
  if setpriv --help 2>&1 | grep -q -- --reuid; then
    setpriv --reuid="$u" --regid="$u" --init-groups -- "$@"
  else
    su -s /bin/sh "$u" -c "$(printf '%s ' "$@")"
  fi
}

# Starts rigd in the background with a config; waits up to 20 s for its socket.
RIG_SOCK=/run/rig/rigd.sock
start_rigd() {
  mkdir -p /etc/rig
  cat > /etc/rig/rigd.toml <<TOML
[server]
socket = "$RIG_SOCK"
group = "rig"
TOML
  rigd --config /etc/rig/rigd.toml > "$FILES/rigd.log" 2>&1 &
  RIGD_PID=$!
  i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  [ -S "$RIG_SOCK" ]
}
stop_rigd() { [ -n "${RIGD_PID:-}" ] && kill "$RIGD_PID" 2> /dev/null; wait "$RIGD_PID" 2> /dev/null; true; }

# dmesg_wait PATTERN: waits up to 3 s for a kernel log line (faults are reported from an
# interrupt, a little after the access).
dmesg_wait() {
  i=0; while [ $i -lt 30 ]; do dmesg | grep -q "$1" && return 0; sleep 0.1; i=$((i + 1)); done
  return 1
}

# Take-over scenarios: rigd with sysfs mode allowed and its journal in /var/lib/rig.
# Extra environment for rigd (e.g. RIG_CRASH_AT=held) goes in $RIGD_ENV, extra config
# sections in $RIGD_TOML.
start_rigd_take() {
  mkdir -p /etc/rig /var/lib/rig
  cat > /etc/rig/rigd-take.toml <<TOML
[server]
socket = "$RIG_SOCK"
[paths]
state_dir = "/var/lib/rig"
[take]
allow_sysfs_mode = true
unbind_timeout_s = 5
${RIGD_TOML:-}
TOML
  rm -f "$RIG_SOCK"
  env $RIGD_ENV rigd --config /etc/rig/rigd-take.toml >> "$FILES/rigd.log" 2>&1 &
  RIGD_PID=$!
  i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  [ -S "$RIG_SOCK" ]
}
# Lending scenarios: rigd serving group rig, its journal in /var/lib/rig, a 16 MiB
# pool per device it takes, a verbose log appended to $FILES/rigd.log.
start_rigd_lend() {
  mkdir -p /etc/rig /var/lib/rig
  cat > /etc/rig/rigd-lend.toml <<TOML
[server]
socket = "$RIG_SOCK"
group = "rig"
[paths]
state_dir = "/var/lib/rig"
[dma]
pool_bytes = 16777216
TOML
  rm -f "$RIG_SOCK"
  rigd --config /etc/rig/rigd-lend.toml -v >> "$FILES/rigd.log" 2>&1 &
  RIGD_PID=$!
  i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  [ -S "$RIG_SOCK" ]
}
# Whole-device lease scenarios: VFIO loaded, 16 hugepages, alice and bob, and a rigd config
# (/etc/rig/rigd-lease.toml) for group rig with a DMA pool of POOL bytes per held
# device, state in /var/lib/rig, TAKE as the [take] section's lines, and a [lease]
# rule letting group rig lease DEVICE. setup_lease_rigd POOL DEVICE [TAKE]; then
# run_lease_rigd (appends to $FILES/rigd.log; waits up to 30 s for status to answer).
setup_lease_rigd() {
  check "modprobe vfio-pci" modprobe vfio-pci
  check "modprobe vfio_iommu_type1" modprobe vfio_iommu_type1
  echo 16 > /proc/sys/vm/nr_hugepages
  add_users
  mkdir -p /etc/rig /var/lib/rig
  cat > /etc/rig/rigd-lease.toml <<TOML
[server]
socket = "$RIG_SOCK"
group = "rig"
[paths]
state_dir = "/var/lib/rig"
[take]
${3:-}
[dma]
pool_bytes = $1
[[lease.allow]]
devices = ["$2"]
groups = ["rig"]
TOML
}
run_lease_rigd() {
  rm -f "$RIG_SOCK"
  rigd --config /etc/rig/rigd-lease.toml -v >> "$FILES/rigd.log" 2>&1 &
  RIGD_PID=$!
  i=0; while [ ! -S "$RIG_SOCK" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  [ -S "$RIG_SOCK" ] && rigctl --socket "$RIG_SOCK" status > /dev/null 2>&1
}
# DMA scenarios: 8 hugepages, and rigd makes a 4 MiB pool for each device it takes.
start_rigd_dma() {
  echo 8 > /proc/sys/vm/nr_hugepages
  RIGD_TOML="[dma]
pool_bytes = 4194304" start_rigd_take
}
stop_rigd_dma() { stop_rigd; echo 0 > /proc/sys/vm/nr_hugepages; }

# A DMA client in a process of its own (rig-dma-probe), fed through a FIFO.
# probe_start DEVICE BYTES: starts it, sets $PROBE_ADDR (its buffer's device address).
# probe CMD...: sends one command, sets $PROBE_REPLY to its answer. probe_quit: ends it.
probe_start() {
  rm -f /tmp/probe.in; mkfifo /tmp/probe.in
  # Made before the probe starts: its redirections open only once the FIFO has a writer.
  : > /tmp/probe.out
  rig-dma-probe "$RIG_SOCK" "$1" "$2" < /tmp/probe.in > /tmp/probe.out 2> "$FILES/probe.err" &
  PROBE=$!
  exec 3> /tmp/probe.in
  PROBE_LINES=1
  probe_wait
  PROBE_ADDR=$(sed -n '1s/.*device=\(0x[0-9a-f]*\).*/\1/p' /tmp/probe.out)
}
probe_wait() {
  i=0
  while [ "$(wc -l < /tmp/probe.out)" -lt $PROBE_LINES ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
}
probe() {
  echo "$*" >&3
  PROBE_LINES=$((PROBE_LINES + 1))
  probe_wait
  PROBE_REPLY=$(sed -n "${PROBE_LINES}p" /tmp/probe.out)
}
probe_quit() { echo quit >&3; exec 3>&-; wait $PROBE; cp /tmp/probe.out "$FILES/probe.out"; }
# pattern MUL ADD: 256 bytes in hex, byte i being (i * MUL + ADD) & 255.
pattern() {
  p=""; i=0
  while [ $i -lt 256 ]; do p="$p$(printf %02x $(((i * $1 + $2) & 255)))"; i=$((i + 1)); done
  echo "$p"
}

# Bit 2 (bus master) of a function's command register, read from config space.
bus_master() { [ $(( $(od -An -tu1 -j4 -N1 "/sys/bus/pci/devices/$1/config") & 4 )) != 0 ]; }
no_bus_master() { ! bus_master "$1"; }
