# rig-vm: kind=inspect timeout=120
# Full flavour: socket activation. rigd.socket listens; the first rigctl starts rigd.service
# through LISTEN_FDS.
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
systemctl stop rigd.socket rigd.service
