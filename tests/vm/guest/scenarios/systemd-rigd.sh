# rig-vm: kind=inspect timeout=120
# Scenario 4 (full flavour): systemd starts rigd from the repo's systemd/rigd.service
# (Type=notify, so "start" returns only after READY=1) and rigctl reaches it.
check "systemd-sysusers made group rig from the .deb's sysusers.d file" grep -q '^rig:' /etc/group
add_users
check "systemd is PID 1" [ "$(cat /proc/1/comm)" = systemd ]
check "rigd.service is installed" [ -f /lib/systemd/system/rigd.service ]
systemctl daemon-reload
check "systemctl start rigd" timeout 60 systemctl start rigd
check "rigd is active" [ "$(systemctl is-active rigd)" = active ]
SOCK=$(sed -n 's/^ListenStream=//p' /lib/systemd/system/rigd.socket 2>/dev/null | head -n1)
SOCK=${SOCK:-$RIG_SOCK}
check "rigctl list (root)" sh -c "rigctl --socket $SOCK list > $FILES/rigctl-list.txt 2>&1"
check "rigctl list as alice (group rig)" as_user alice rigctl --socket "$SOCK" list
systemctl status rigd --no-pager > "$FILES/rigd-status.txt" 2>&1
journalctl -u rigd -b --no-pager > "$FILES/rigd-journal.txt" 2>&1
check "systemctl stop rigd" timeout 60 systemctl stop rigd
check "rigd is inactive" [ "$(systemctl is-active rigd)" != active ]
cat "$FILES/rigctl-list.txt"
