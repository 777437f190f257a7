#!/bin/sh
# The peer topology (docs/h200.md, "Peer topology through the RM") on the one-GPU
# device kind (nvidia-h200), run as root from
# the repository root: rigd's RM queries (`rigctl topo`, and the raw answers from
# `rig-nvrm-probe /dev topo`: P2P caps of the GPU with itself, i.e. loopback, and its
# NVLink status) beside `nvidia-smi topo -m`, `topo -p2p rwnap` and `nvlink -s` / `-c`.
#
#     tests/h200/topo-one.sh BIN OUT    # BIN: rigd, rigctl, rig-nvrm-probe (static);
#                                       # OUT gets topo-one.tgz of every file below
#
# Read only: rigd lists sysfs and asks the RM (a root client; per GPU its /dev/nvidiaN
# opened, a device and subdevice made and freed); nothing is served, nothing written.
# What the RM holds before and after, and the kernel log's Xids, are printed.
set -u
BIN=$(cd "$1" && pwd)
DEST=$2
RUN=$(mktemp -d)
OUT=$RUN/topo-one
mkdir -p "$OUT" "$DEST"
say() { printf '== %s\n' "$*"; }
nvidia-smi --query-gpu=pci.bus_id,memory.used,persistence_mode --format=csv,noheader > "$OUT/before.txt" 2>&1
printf '[paths]\nstate_dir = "%s"\n' "$RUN/state" > "$RUN/rigd.toml"
"$BIN/rigd" --config "$RUN/rigd.toml" --socket "$RUN/rigd.sock" -v > "$RUN/rigd.log" 2>&1 &
RIGD=$!
i=0
while [ ! -S "$RUN/rigd.sock" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
ctl() { "$BIN/rigctl" --socket "$RUN/rigd.sock" "$@"; }
T0=$(date +%s%N)
ctl topo > "$OUT/rigctl-topo.txt" 2>&1
T1=$(date +%s%N)
ctl topo --json > "$OUT/rigctl-topo.json" 2>&1
echo "rigctl topo: $(((T1 - T0) / 1000000)) ms (rigctl's start, sysfs, the RM calls)" > "$OUT/timing.txt"
for k in 1 2 3 4 5; do
  a=$(date +%s%N); ctl topo --json > /dev/null 2>&1; b=$(date +%s%N)
  echo "rigctl topo --json run $k: $(((b - a) / 1000000)) ms" >> "$OUT/timing.txt"
done
kill -TERM $RIGD; wait $RIGD
cp "$RUN/rigd.log" "$OUT/rigd.log"
"$BIN/rig-nvrm-probe" /dev topo > "$OUT/rm-topo-raw.txt" 2>&1
echo "probe rc $?" >> "$OUT/rm-topo-raw.txt"
nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
nvidia-smi topo -p2p rwnap > "$OUT/nvidia-smi-p2p-rwnap.txt" 2>&1
for c in r w n a p; do echo "-- topo -p2p $c"; nvidia-smi topo -p2p $c; done > "$OUT/nvidia-smi-p2p-each.txt" 2>&1
nvidia-smi nvlink -s > "$OUT/nvidia-smi-nvlink-s.txt" 2>&1
nvidia-smi nvlink -c > "$OUT/nvidia-smi-nvlink-c.txt" 2>&1
nvidia-smi nvlink --status -i 0 > "$OUT/nvidia-smi-nvlink-status-i0.txt" 2>&1
nvidia-smi -q | sed -n '/Fabric/,/^$/p;/Persistence/p;/Bus Id/p' > "$OUT/nvidia-smi-q-fabric.txt" 2>&1
nvidia-smi --query-gpu=pci.bus_id,memory.used --format=csv,noheader > "$OUT/after.txt" 2>&1
dmesg 2>/dev/null | grep -E "NVRM|Xid" | tail -20 > "$OUT/dmesg-nvrm.txt"
{ uname -r; cat /proc/driver/nvidia/version 2>/dev/null; } > "$OUT/meta.txt"
for f in rigctl-topo.txt rm-topo-raw.txt nvidia-smi-topo.txt nvidia-smi-p2p-rwnap.txt nvidia-smi-nvlink-s.txt nvidia-smi-nvlink-c.txt timing.txt before.txt after.txt dmesg-nvrm.txt; do
  say "$f"; cat "$OUT/$f"
done
tar -czf "$DEST/topo-one.tgz" -C "$RUN" topo-one
rm -rf "$RUN"
