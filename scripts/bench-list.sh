#!/usr/bin/env bash
# Whole-process `rigctl list` (rigd already running) against `lspci -vvv` on the same
# machine, in the same run (docs/BENCHMARKS.md, "Inspection"). The two commands alternate in one loop, N times
# each, pinned to one CPU with `taskset -c $CPU`; prints the median and p90 of each and
# the ratio rigctl/lspci (goal: <= 1). Wall time per command as bash sees it
# ($EPOCHREALTIME around each run), so the fork/exec cost of the shell is in both.
#
# Usage: scripts/bench-list.sh [N]       (default N=300)
# Env:   RIGD, RIGCTL   release binaries (default target/release/{rigd,rigctl})
#        LSPCI          lspci to run (default: lspci on PATH); LSPCI_ARGS extra args,
#                       e.g. "-i /path/pci.ids" where pci.ids is not installed
#        PCI_IDS        pci.ids for rigd (default /usr/share/misc/pci.ids)
#        RIG_SOCKET     use an rigd already listening there instead of starting one
#        CPU            the CPU to pin to (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-300}
CPU=${CPU:-1}
RIGD=${RIGD:-target/release/rigd}
RIGCTL=${RIGCTL:-target/release/rigctl}
LSPCI=${LSPCI:-lspci}
LSPCI_ARGS=${LSPCI_ARGS:-}
PCI_IDS=${PCI_IDS:-/usr/share/misc/pci.ids}

command -v "$LSPCI" >/dev/null || { echo "bench-list: no lspci ($LSPCI)" >&2; exit 1; }
[ -x "$RIGCTL" ] || { echo "bench-list: no rigctl at $RIGCTL (cargo build --release)" >&2; exit 1; }

tmp=$(mktemp -d)
rigd_pid=
cleanup() {
	# Only the rigd this script started, by its pid.
	if [ -n "$rigd_pid" ]; then kill "$rigd_pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "${RIG_SOCKET:-}" ]; then
	[ -x "$RIGD" ] || { echo "bench-list: no rigd at $RIGD" >&2; exit 1; }
	printf '[paths]\npci_ids = "%s"\n' "$PCI_IDS" >"$tmp/rigd.toml"
	RIG_SOCKET=$tmp/rigd.sock
	"$RIGD" --config "$tmp/rigd.toml" --socket "$RIG_SOCKET" >"$tmp/rigd.log" 2>&1 &
	rigd_pid=$!
	for _ in $(seq 100); do
		"$RIGCTL" --socket "$RIG_SOCKET" version >/dev/null 2>&1 && break
		sleep 0.1
	done
fi
"$RIGCTL" --socket "$RIG_SOCKET" list >/dev/null

# The loop runs pinned, so every command it starts inherits the CPU; one warm-up each.
# shellcheck disable=SC2016 # expanded by the inner bash
taskset -c "$CPU" bash -c '
	set -eu
	n=$1 rigctl=$2 sock=$3 lspci=$4 largs=$5 out=$6
	"$rigctl" --socket "$sock" list >/dev/null
	$lspci $largs -vvv >/dev/null 2>&1
	for ((i = 0; i < n; i++)); do
		t0=$EPOCHREALTIME
		"$rigctl" --socket "$sock" list >/dev/null
		t1=$EPOCHREALTIME
		$lspci $largs -vvv >/dev/null 2>&1
		t2=$EPOCHREALTIME
		echo "rigctl ${t0/./} ${t1/./}" >>"$out"
		echo "lspci ${t1/./} ${t2/./}" >>"$out"
	done
' bench "$N" "$RIGCTL" "$RIG_SOCKET" "$LSPCI" "$LSPCI_ARGS" "$tmp/times"

stats() { # name -> "median p90" in ms
	awk -v n="$1" '$1 == n { print ($3 - $2) / 1000 }' "$tmp/times" | sort -g |
		awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]; p = v[int(NR * 0.9 + 0.999)]; printf "%.3f %.3f\n", m, p }'
}
read -r rm rp < <(stats rigctl)
read -r lm lp < <(stats lspci)
devices=$(find /sys/bus/pci/devices -mindepth 1 -maxdepth 1 | wc -l)
echo "bench-list: Linux $(uname -r), $(nproc) CPUs, $devices PCI functions, N=$N each, alternating, taskset -c $CPU"
printf '%-22s %10s %10s\n' command "median ms" "p90 ms"
printf '%-22s %10s %10s\n' "rigctl list" "$rm" "$rp"
printf '%-22s %10s %10s\n' "lspci -vvv" "$lm" "$lp"
awk -v a="$rm" -v b="$lm" -v c="$rp" -v d="$lp" \
	'BEGIN { printf "ratio rigctl/lspci: median %.2f, p90 %.2f\n", a / b, c / d }'
