# rig-vm: kind=takeover timeout=240
# The watchdog (docs/systemd.md; full flavour): the repo's systemd/rigd.service has
# WatchdogSec=, and rigd pings it only while healthy. rigd holds the stand-in GPU
# (bochs-display, 00:03.0) in vfio mode; then it is stopped with SIGSTOP (its runtime and
# its watchdog thread frozen, as a wedged daemon's would be). Its pings stop, systemd
# kills it at the watchdog's timeout and starts it again (Restart=on-failure), and the new
# rigd re-adopts the GPU from its journal. The unit is the repository's, with one
# drop-in for this scenario: WatchdogSec=10s instead of its 30 s, so that the two waits
# below (the kill, then a period with pings) take 25 s of the boot instead of 70; rigd
# takes its ping interval from WATCHDOG_USEC, whatever the unit says.
GPU=0000:00:03.0
unit() { systemctl show -p "$1" --value rigd; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds, polling every 0.5 s
  n=$(($1 * 2)); shift
  while ! "$@"; do n=$((n - 1)); [ $n -gt 0 ] || return 1; sleep 0.5; done
}
systemctl daemon-reload
check "the unit has a watchdog (WatchdogUSec=$(unit WatchdogUSec))" [ "$(unit WatchdogUSec)" != 0 ]
mkdir -p /run/systemd/system/rigd.service.d
printf '[Service]\nWatchdogSec=10s\n' > /run/systemd/system/rigd.service.d/watchdog-test.conf
systemctl daemon-reload
check "systemctl start rigd" timeout 60 systemctl start rigd
check "the drop-in's watchdog is in force (WatchdogUSec=$(unit WatchdogUSec))" [ "$(unit WatchdogUSec)" = 10s ]
check "STATUS= says what rigd serves: $(unit StatusText)" \
  sh -c "systemctl show -p StatusText --value rigd | grep -q '^Serving: 0 devices held'"
check "rigctl detach $GPU (to vfio-pci)" sh -c "rigctl detach $GPU --mode vfio > $FILES/detach.txt 2>&1"
check "$GPU is on vfio-pci" [ "$(drv_of $GPU)" = vfio-pci ]
check "STATUS= follows: 1 device held" wait_for 10 sh -c \
  "systemctl show -p StatusText --value rigd | grep -q '^Serving: 1 device held'"
old=$(unit MainPID); restarts=$(unit NRestarts)
echo "rigd is pid $old, restarted $restarts times; SIGSTOP"
kill -STOP "$old"
t0=$(cut -d' ' -f1 /proc/uptime)
restarted() { p=$(unit MainPID); [ "$p" != 0 ] && [ "$p" != "$old" ] && [ "$(systemctl is-active rigd)" = active ]; }
# TIMEOUT: WatchdogSec (10 s) after the last ping, then the kill, RestartSec=1s and a
# start with recovery; 150 s covers the one-CPU translated guest.
check "systemd restarted the stopped rigd" wait_for 150 restarted
t1=$(cut -d' ' -f1 /proc/uptime)
echo "restarted as pid $(unit MainPID) $(awk "BEGIN { print $t1 - $t0 }") s after the SIGSTOP"
check "NRestarts went up (was $restarts, now $(unit NRestarts))" [ "$(unit NRestarts)" -gt "$restarts" ]
journalctl -u rigd -b --no-pager > "$FILES/rigd-journal.txt" 2>&1
check "the journal says the watchdog fired" grep -qi "watchdog timeout" "$FILES/rigd-journal.txt"
check "the old rigd is gone" sh -c "! kill -0 $old 2> /dev/null"
check "the new rigd re-adopted $GPU from its journal" grep -q "$GPU: re-adopted (vfio mode)" "$FILES/rigd-journal.txt"
check "rigctl status shows $GPU held" sh -c "rigctl status > $FILES/status.txt 2>&1 && grep -q $GPU $FILES/status.txt"
check "$GPU is still on vfio-pci" [ "$(drv_of $GPU)" = vfio-pci ]
# Longer than WatchdogSec: a rigd that did not ping would be killed again by now.
check "the new rigd pings: the same pid 12 s later" sh -c "sleep 12; [ \"\$(systemctl show -p MainPID --value rigd)\" = $(unit MainPID) ]"
check "rigctl attach $GPU (back to bochs-drm)" sh -c "rigctl attach $GPU > $FILES/attach.txt 2>&1"
check "$GPU is back on bochs-drm" [ "$(drv_of $GPU)" = bochs-drm ]
systemctl stop rigd.socket rigd.service
rm -r /run/systemd/system/rigd.service.d
systemctl daemon-reload
cat "$FILES/status.txt"
