# rig-vm: kind=takeover timeout=900
# The take-over benchmark (docs/BENCHMARKS.md, "Take-over"): one cycle = detach bochs-display
# (00:03.0) from bochs-drm to vfio-pci, then give it back, by three tools in the same boot:
#   rig          rigctl detach B --mode vfio; rigctl attach B   (rigd already running)
#   driverctl    driverctl --nosave set-override B vfio-pci; driverctl --nosave unset-override B
#   devbind      dpdk-devbind.py -b vfio-pci B; dpdk-devbind.py -b bochs-drm B
# Full flavour only (Debian's driverctl; dpdk-devbind.py from Debian's dpdk .deb). The tools
# alternate in one loop, N timed cycles each after one warm-up cycle each. Each half is
# the wall time of whole processes (bash's $EPOCHREALTIME: no fork to read the clock).
# After each half, untimed: sysfs confirms the driver, and udev settles, so the events of
# one half are not billed to the next. A benchmark, not a timed test: the checks say only
# that every cycle ran and landed where it should.
# Files: cycles.tsv (cycle tool detach_us attach_us), summary.txt (medians, p90, ratios),
# floors.tsv (what the parts of a cycle cost alone), <tool>.log (the tools' own output;
# rig.log has rigctl's "[  0.12s] step" lines), rig-steps/ (rig's steps to the µs, from
# 10 more cycles with --json), dpdk-devbind.diff.
N=40
B=0000:00:03.0

check "bash, driverctl, python3 and dpdk-devbind.py are in the image (full flavour)" \
  sh -c 'command -v bash && command -v driverctl && command -v python3 && command -v dpdk-devbind.py' > /dev/null
check "$B starts on bochs-drm" [ "$(drv_of $B)" = bochs-drm ]
# Loaded now, so no tool pays for module loading inside the loop.
check "modprobe vfio-pci vfio_iommu_type1" modprobe -a vfio-pci vfio_iommu_type1
check "rigd starts" start_rigd_take

# Debian's dpdk-devbind.py (22.11) manages only the classes DPDK drives (network, crypto,
# DMA engines, ...), so it answers "Unknown device" for a display function, and it checks
# that a driver is loaded by the driver's own name, which for bochs-drm (module bochs) it
# is not. Two one-line changes let it do the same rebind; what it does per call (lspci
# -Dvmmnnk once per device kind, then the sysfs writes) is unchanged.
DEVBIND=/tmp/dpdk-devbind.py
sed -e "s/^misc_devices = \[/misc_devices = [{'Class': '03', 'Vendor': '1234', 'Device': '1111', 'SVendor': None, 'SDevice': None}, /" \
    -e "s/module_is_loaded(driver.replace('-', '_'))/module_is_loaded({'bochs-drm': 'bochs'}.get(driver, driver).replace('-', '_'))/" \
    "$(command -v dpdk-devbind.py)" > $DEVBIND
chmod +x $DEVBIND
diff -u "$(command -v dpdk-devbind.py)" $DEVBIND > "$FILES/dpdk-devbind.diff"
check "dpdk-devbind.py: exactly the two lines changed" [ "$(grep -c '^+[^+]' "$FILES/dpdk-devbind.diff")" = 2 ]
cp /usr/local/share/dpdk-devbind.version "$FILES/" 2> /dev/null

bash -s "$N" "$B" "$DEVBIND" "$FILES" "$RIG_SOCK" > "$FILES/loop.txt" 2>&1 <<'BASH'
N=$1 B=$2 DEVBIND=$3 FILES=$4 SOCK=$5
D=/sys/bus/pci/devices/$B
detach_rig() { rigctl --socket "$SOCK" detach "$B" --mode vfio; }
attach_rig() { rigctl --socket "$SOCK" attach "$B"; }
detach_driverctl() { driverctl --nosave set-override "$B" vfio-pci; }
attach_driverctl() { driverctl --nosave unset-override "$B"; }
detach_devbind() { "$DEVBIND" -b vfio-pci "$B"; }
attach_devbind() { "$DEVBIND" -b bochs-drm "$B"; }
# Only builtins: where the device is bound, and its override is clear.
on() { [ -e "/sys/bus/pci/drivers/$1/$B" ]; }
clear_override() { local o; read -r o < "$D/driver_override"; [ "$o" = "(null)" ]; }
# Puts the device back on bochs-drm by hand after a failed half.
rescue() {
  [ -e "$D/driver" ] && echo "$B" > "$D/driver/unbind"
  echo > "$D/driver_override"; echo "$B" > /sys/bus/pci/drivers_probe
}

# cycle TOOL I: one timed cycle; prints "I TOOL detach_us attach_us" or says what failed.
cycle() {
  local tool=$1 i=$2 t0 t1 t2 t3
  echo "== cycle $i detach" >> "$FILES/$tool.log"
  t0=${EPOCHREALTIME/./}
  "detach_$tool" >> "$FILES/$tool.log" 2>&1
  t1=${EPOCHREALTIME/./}
  on vfio-pci || { echo "FAIL $tool cycle $i: not on vfio-pci after detach"; rescue; return 1; }
  udevadm settle --timeout=30
  echo "== cycle $i attach" >> "$FILES/$tool.log"
  t2=${EPOCHREALTIME/./}
  "attach_$tool" >> "$FILES/$tool.log" 2>&1
  t3=${EPOCHREALTIME/./}
  on bochs-drm || { echo "FAIL $tool cycle $i: not on bochs-drm after attach"; rescue; return 1; }
  clear_override || { echo "FAIL $tool cycle $i: driver_override left set"; rescue; return 1; }
  udevadm settle --timeout=30
  [ "$i" = 0 ] || echo "$i $tool $((t1 - t0)) $((t3 - t2))" >> "$FILES/cycles.tsv"
}

echo "cycle tool detach_us attach_us" > "$FILES/cycles.tsv"
start=${EPOCHREALTIME/./}  # microseconds, read without a fork
for i in $(seq 0 "$N"); do  # cycle 0 is the warm-up: page cache, first exec of each tool
  for tool in rig driverctl devbind; do
    cycle "$tool" "$i" || exit 1
  done
done
echo "loop: $(( (${EPOCHREALTIME/./} - start) / 1000000 )) s for $N cycles of 3 tools plus a warm-up"

# The parts of a cycle alone, alternating, 10 each (µs): a fork+exec, a modprobe of a
# loaded module (driverctl's set-override runs one; rigd skips loaded modules), rigctl's
# process alone (--version: no runtime, no connection) and with one RPC, bash and python3
# starting, and the kernel's own rebind done from bash builtins.
floor() {
  local what=$1 t0 t1; shift
  t0=${EPOCHREALTIME/./}; "$@" > /dev/null 2>&1; t1=${EPOCHREALTIME/./}
  echo "$what $((t1 - t0))" >> "$FILES/floors.tsv"
}
sysfs_detach() {
  echo "$B" > "$D/driver/unbind"; echo vfio-pci > "$D/driver_override"
  echo "$B" > /sys/bus/pci/drivers_probe
}
sysfs_attach() {
  echo "$B" > "$D/driver/unbind"; echo > "$D/driver_override"
  echo "$B" > /sys/bus/pci/drivers_probe
}
# rig again with --json, whose steps carry rigd's clock to the microsecond (the plain
# output rounds to 10 ms): rig-steps/I-detach.json, I-attach.json.
rig_json() {
  local half=$1 i=$2 t0 t1; shift 2
  t0=${EPOCHREALTIME/./}
  rigctl --socket "$SOCK" "$half" "$B" "$@" --json > "$FILES/rig-steps/$i-$half.json" 2>&1
  t1=${EPOCHREALTIME/./}
  echo "rig-json-$half $((t1 - t0))" >> "$FILES/floors.tsv"
}
mkdir -p "$FILES/rig-steps"
echo "what us" > "$FILES/floors.tsv"
for i in $(seq 1 10); do
  rig_json detach "$i" --mode vfio
  on vfio-pci || { echo "FAIL rig --json: not on vfio-pci"; rescue; exit 1; }
  udevadm settle --timeout=30
  rig_json attach "$i"
  on bochs-drm || { echo "FAIL rig --json: not on bochs-drm"; rescue; exit 1; }
  udevadm settle --timeout=30
  floor exec-true /bin/true
  floor modprobe-loaded modprobe vfio-pci
  floor rigctl-version-flag rigctl --version
  floor rigctl-status rigctl --socket "$SOCK" status
  floor bash-c-true bash -c true
  floor python3-c-pass python3 -c pass
  floor lspci-Dvmmnnk lspci -Dvmmnnk
  floor sysfs-detach sysfs_detach
  on vfio-pci || { echo "FAIL floor: not on vfio-pci"; rescue; exit 1; }
  udevadm settle --timeout=30
  floor sysfs-attach sysfs_attach
  on bochs-drm || { echo "FAIL floor: not on bochs-drm"; rescue; exit 1; }
  udevadm settle --timeout=30
done
# rigd's own steps, timed inside python3 (its start not counted): a journal record as
# take/journal.rs writes it (the file read, the record written in place into the other
# slot, one fdatasync) on the same disk, the same without the fdatasync, the record as the
# journal wrote it before (temp file, fsync, rename, directory fsync), and the
# preflight's walk of /proc/*/fd (stat of every fd; python, so an upper bound for rigd's).
python3 - <<'PY' >> "$FILES/floors.tsv"
import os, sys, time
def timed(what, f):
    for _ in range(10):
        t = time.perf_counter(); f(); print(what, round((time.perf_counter() - t) * 1e6))
D = "/var/lib/rig-bench"
os.makedirs(D, exist_ok=True)
with open(f"{D}/bench.journal", "wb") as f:  # two 4 KiB slots, made once and synced
    f.write(bytes(8192)); os.fsync(f.fileno())
slot = [0]
def record(sync):
    fd = os.open(f"{D}/bench.journal", os.O_RDWR)
    os.read(fd, 8192)
    slot[0] ^= 1
    os.pwrite(fd, b"x" * 1200, 4096 * slot[0])
    if sync: os.fdatasync(fd)
    os.close(fd)
def record_renamed():
    with open(f"{D}/bench.json.tmp", "wb") as f:
        f.write(b"x" * 1200); os.fsync(f.fileno())
    os.rename(f"{D}/bench.json.tmp", f"{D}/bench.json")
    d = os.open(D, os.O_RDONLY); os.fsync(d); os.close(d)
fds = []
def walk():
    fds.clear()
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try: names = os.listdir(f"/proc/{p}/fd")
        except OSError: continue
        for n in names:
            try: os.stat(f"/proc/{p}/fd/{n}"); fds.append(p)
            except OSError: pass
timed("journal-record", lambda: record(True))
timed("journal-record-nofsync", lambda: record(False))
timed("journal-record-renamed", record_renamed)
for f in ("bench.journal", "bench.json"): os.remove(f"{D}/{f}")
timed("proc-fd-walk-python", walk)
print(f"processes {len(set(fds))} with {len(fds)} open fds", file=sys.stderr)
PY
BASH
rc=$?
cat "$FILES/loop.txt"
check "the loop ran every cycle and every sysfs confirmation held" [ "$rc" = 0 ]
for tool in rig driverctl devbind; do
  check "$N timed cycles of $tool" [ "$(grep -c " $tool " "$FILES/cycles.tsv")" = "$N" ]
done
check "$B is back on bochs-drm" [ "$(drv_of $B)" = bochs-drm ]
rigctl --socket "$RIG_SOCK" status > "$FILES/status-end.txt" 2>&1
check "rigd holds nothing at the end" grep -q "holds no devices" "$FILES/status-end.txt"
stop_rigd

# Medians and p90 (nearest rank) in ms, and rig's ratios to each tool (by median and p90).
awk '
  NR == 1 { next }
  { n[$2]++; d[$2, n[$2]] = $3 / 1000; a[$2, n[$2]] = $4 / 1000; c[$2, n[$2]] = ($3 + $4) / 1000 }
  function sort(v, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t } }
  function med(v, k) { return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
  function p90(v, k,   r) { r = int(0.9 * k); if (r < 0.9 * k) r++; return v[r] }
  END {
    split("rig driverctl devbind", tools, " ")
    for (t = 1; t <= 3; t++) {
      tool = tools[t]; k = n[tool]
      split("", x); for (i = 1; i <= k; i++) x[i] = d[tool, i]; sort(x, k)
      printf "%s.detach.median_ms=%.1f\n%s.detach.p90_ms=%.1f\n", tool, med(x, k), tool, p90(x, k)
      split("", x); for (i = 1; i <= k; i++) x[i] = a[tool, i]; sort(x, k)
      printf "%s.attach.median_ms=%.1f\n%s.attach.p90_ms=%.1f\n", tool, med(x, k), tool, p90(x, k)
      split("", x); for (i = 1; i <= k; i++) x[i] = c[tool, i]; sort(x, k)
      m[tool] = med(x, k); p[tool] = p90(x, k)
      printf "%s.cycle.median_ms=%.1f\n%s.cycle.p90_ms=%.1f\n%s.n=%d\n", tool, m[tool], tool, p[tool], tool, k
    }
    printf "ratio.rig_driverctl.median=%.2f\nratio.rig_driverctl.p90=%.2f\n", m["rig"] / m["driverctl"], p["rig"] / p["driverctl"]
    printf "ratio.rig_devbind.median=%.2f\nratio.rig_devbind.p90=%.2f\n", m["rig"] / m["devbind"], p["rig"] / p["devbind"]
  }' "$FILES/cycles.tsv" > "$FILES/summary.txt"
# The parts' medians, in ms.
awk 'NR > 1 && $2 ~ /^[0-9]+$/ { n[$1]++; v[$1, n[$1]] = $2 / 1000 }
  END {
    for (w in n) {
      k = n[w]; for (i = 1; i <= k; i++) x[i] = v[w, i]
      for (i = 2; i <= k; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
      printf "floor.%s.median_ms=%.1f\n", w, k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
    }
  }' "$FILES/floors.tsv" | sort >> "$FILES/summary.txt"
cat "$FILES/summary.txt"
check "summary.txt has rig's ratios" grep -q '^ratio.rig_devbind.median=' "$FILES/summary.txt"
