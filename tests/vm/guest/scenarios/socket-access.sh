# rig-vm: kind=inspect timeout=60
# Scenario 2: rigd's socket is mode 0660, group rig. alice (in group rig, not root) reaches
# rigd through the client library (rigctl); bob (not in the group) is refused.
add_users
check "rigd starts and creates its socket" start_rigd
# The socket exists from bind on, before rigd's chmod; rigd binds its side socket
# (SOCK.fd) after it, so once that exists the mode is final.
i=0; while [ ! -S "$RIG_SOCK.fd" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "socket mode is 0660" [ "$(stat -c %a "$RIG_SOCK")" = 660 ]
check "socket group is rig ($RIG_GID)" [ "$(stat -c %g "$RIG_SOCK")" = "$RIG_GID" ]
check "alice is not root" [ "$(as_user alice id -u)" = 1000 ]
as_user alice rigctl --socket "$RIG_SOCK" list > "$FILES/alice-list.txt" 2>&1
check "alice (group rig) lists devices" [ $? = 0 ]
as_user alice rigctl --socket "$RIG_SOCK" version > "$FILES/alice-version.txt" 2>&1
check "alice (group rig) gets the version" [ $? = 0 ]
as_user bob rigctl --socket "$RIG_SOCK" list > "$FILES/bob-list.txt" 2>&1
check "bob (not in group rig) is refused" [ $? != 0 ]
check "bob is told 'permission denied'" grep -qi "permission denied" "$FILES/bob-list.txt"
cat "$FILES"/*.txt
stop_rigd
