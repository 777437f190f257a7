#!/usr/bin/env bash
# rigd.service's exposure by `systemd-analyze security --offline=true` (systemd >= 250
# has --offline; Debian 12 has 252), which must stay <= 2.5 (docs/systemd.md). Installs
# systemd if the machine has none. Prints the table, then the score; fails above 2.5,
# or when the tool cannot rate the unit.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
LIMIT=${RIG_UNIT_EXPOSURE_MAX:-2.5}
command -v systemd-analyze > /dev/null || apt_install systemd || exit 1
systemd-analyze security --help 2>&1 | grep -q -- --offline ||
    { echo "unit-exposure: this systemd-analyze ($(systemd-analyze --version | head -n1)) has no --offline" >&2; exit 1; }
out=$(systemd-analyze security --offline=true --no-pager "$RIG_ROOT/systemd/rigd.service" 2>&1)
printf '%s\n' "$out" | grep -v '✓'
score=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for rigd.service: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || { echo "unit-exposure: no score from systemd-analyze" >&2; exit 1; }
if awk "BEGIN { exit !($score <= $LIMIT) }"; then
    echo "unit-exposure: rigd.service $score <= $LIMIT"
else
    echo "unit-exposure: rigd.service $score > $LIMIT: FAILED" >&2
    exit 1
fi
# With the metrics TCP drop-in (systemd/rigd-metrics-tcp.conf) appended, as systemd
# merges it: reported, not held to the limit (docs/systemd.md records it).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$RIG_ROOT/systemd/rigd.service" "$RIG_ROOT/systemd/rigd-metrics-tcp.conf" > "$tmp/rigd.service"
tcp=$(systemd-analyze security --offline=true --no-pager "$tmp/rigd.service" 2>&1 |
    sed -n 's/.*Overall exposure level for rigd.service: \([0-9.]*\).*/\1/p')
[ -n "$tcp" ] || { echo "unit-exposure: no score for the metrics TCP drop-in" >&2; exit 1; }
echo "unit-exposure: rigd.service with rigd-metrics-tcp.conf: $tcp"
