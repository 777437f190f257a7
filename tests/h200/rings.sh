#!/bin/sh
# Rings on the H200 (docs/BENCHMARKS.md, "RM-served channels with rings in GPU memory"):
# host and GPU rings side by side with CUDA (one rigd), then
# opening, kill -9 reclaim, a fault and 64 and 14 clients, all on GPU rings (a second).
#     tests/h200/rings.sh       # .dev holds static rigd, rigctl, rig-channel-probe
# Full logs go to $OUT; the summary lines to stdout.
L=${OUT:-/tmp}/served
PHASES="basic gpu cuda" sh tests/h200/served.sh .dev > $L-1.log 2>&1
echo "=================== RINGS=gpu" >> $L-1.log
RINGS=gpu PHASES="open kill many" MANY="64 14" sh tests/h200/served.sh .dev > $L-2.log 2>&1
grep -hE "^== (basic|CUDA|open|kill|fault|64|14|after|with)|round_trip|million|^copy|anchor|opened|reclaim|clients:|^steady|WARN|Xid|^open|rigd idle" $L-1.log $L-2.log | grep -v "pci.ids" | cut -c1-240 | head -80
nvidia-smi --query-gpu=memory.used --format=csv,noheader
