# rig-vm: kind=inspect timeout=120
# Full flavour: socket activation. rigd.socket listens; the first rigctl starts rigd.service
# through LISTEN_FDS. Then rigd run by hand with LISTEN_* that are wrong: a passed fd that
# is not a socket stops it; a LISTEN_PID of another process is ignored.
add_users
check "rigd.socket is installed" [ -f /lib/systemd/system/rigd.socket ]
systemctl daemon-reload
systemctl stop rigd.service 2> /dev/null
check "systemctl start rigd.socket" timeout 30 systemctl start rigd.socket
SOCK=$(sed -n 's/^ListenStream=//p' /lib/systemd/system/rigd.socket | head -n1)
check "the socket exists before rigd runs" [ -S "$SOCK" ]
check "rigctl as alice starts rigd through the socket" as_user alice rigctl --socket "$SOCK" list
check "rigd.service became active" [ "$(systemctl is-active rigd.service)" = active ]
journalctl -u rigd -b --no-pager > "$FILES/rigd-journal.txt" 2>&1
check "rigd says it serves on systemd's socket" grep -q 'serving.*systemd (rigd)' "$FILES/rigd-journal.txt"
systemctl stop rigd.socket rigd.service
# What rigd does with LISTEN_* that are wrong (daemon/src/sys/systemd.rs): exec keeps
# the shell's pid, so LISTEN_PID=$$ names rigd.
sh -c 'exec env LISTEN_PID=$$ LISTEN_FDS=1 rigd --socket /tmp/rigd-alt.sock 3< /etc/hostname' > "$FILES/not-a-socket.txt" 2>&1
check "a passed fd that is not a socket stops rigd (exit $?)" [ $? != 0 ]
cat "$FILES/not-a-socket.txt"
check "and it says so in one line" grep -q 'Passed descriptor 3 (unknown) is not a socket' "$FILES/not-a-socket.txt"
env LISTEN_PID=1 LISTEN_FDS=1 rigd --socket /tmp/rigd-alt.sock > "$FILES/other-pid.txt" 2>&1 &
ALT=$!
i=0; while [ ! -S /tmp/rigd-alt.sock ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
check "LISTEN_PID of another process: rigd binds its own socket" [ -S /tmp/rigd-alt.sock ]
check "and warns that it ignored the variables" grep -q 'ignoring LISTEN_FDS' "$FILES/other-pid.txt"
# rigd ends on SIGTERM (status 143): not the scenario's status.
kill $ALT; wait $ALT 2> /dev/null || true
