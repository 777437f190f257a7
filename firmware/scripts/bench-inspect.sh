#!/usr/bin/env bash
# Whole-process comparison, pinned to one CPU: `rigctl firmware inspect FILE` (table and
# --json) against `readelf -S -W FILE` (binutils) on the same file.
#
# Usage: firmware/scripts/bench-inspect.sh RIGCTL [FILE]
#   RIGCTL  path to the rigctl binary (e.g. target/release/rigctl)
#   FILE    default: $RIG_FIRMWARE_ROOT/nvidia/535.261.03/gsp_ga10x.bin
# Env:     RUNS (default 30), CPU (default 1).
#
# Uses hyperfine (Debian package "hyperfine") when installed, else a loop reporting medians.
# Note: inspect hashes every section (SHA-256 of the whole file), readelf reads the headers.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 RIGCTL [FILE]" >&2
    exit 2
fi
RIGCTL=$1
FILE=${2:-${RIG_FIRMWARE_ROOT:?set RIG_FIRMWARE_ROOT or give FILE}/nvidia/535.261.03/gsp_ga10x.bin}
RUNS=${RUNS:-30}
CPU=${CPU:-1}
[[ -x $RIGCTL ]] || { echo "$RIGCTL is not executable" >&2; exit 2; }
[[ -r $FILE ]] || { echo "$FILE is not readable" >&2; exit 2; }

CMDS=(
    "$RIGCTL firmware inspect $FILE"
    "$RIGCTL firmware inspect --json $FILE"
)
# readelf only reads ELF files (the GSP-RM and FMC images).
if [[ $(head -c 4 "$FILE" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]]; then
    CMDS+=("readelf -S -W $FILE")
fi
# Warm the page cache so every command reads the same cached file.
cat "$FILE" >/dev/null

if command -v hyperfine >/dev/null; then
    md=$(mktemp)
    json=$(mktemp)
    taskset -c "$CPU" hyperfine -N --warmup 3 --runs "$RUNS" --style none \
        --export-markdown "$md" --export-json "$json" "${CMDS[@]}" >/dev/null
    cat "$md"
    if command -v python3 >/dev/null; then
        echo
        python3 - "$json" <<'PY'
import json, sys
print("| command | median [ms] |")
print("|:---|---:|")
for r in json.load(open(sys.argv[1]))["results"]:
    print(f"| `{r['command']}` | {r['median'] * 1e3:.2f} |")
PY
    fi
    rm -f "$md" "$json"
    exit 0
fi

echo "hyperfine not found: medians of $RUNS runs"
echo "| command | median |"
echo "|---|---|"
for cmd in "${CMDS[@]}"; do
    times=()
    for _ in $(seq "$RUNS"); do
        start=$(date +%s%N)
        # shellcheck disable=SC2086 # the command is word-split on purpose
        taskset -c "$CPU" $cmd >/dev/null
        end=$(date +%s%N)
        times+=($(( (end - start) / 1000 )))
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "| \`$cmd\` | $(awk -v m="$median" 'BEGIN { printf "%.2f ms", m / 1000 }') |"
done
