# rig-vm: kind=inspect timeout=240
# The package (docs/systemd.md; full flavour; run it last in its boot): the .deb as an
# operator installs it. What /init unpacked from it is removed first (its files, and the
# folders it made that are left empty), with the rig group, so the package starts on a
# machine that never had rig; a list of every file (and the group and passwd files) is
# taken. Then `apt-get install /rig/rig.deb` (offline: nothing to fetch), rigctl as a
# member of group rig (socket activation starts rigd), `systemctl start rigd`, man pages
# and completions in place, `apt purge rig`, and the same list again, but for group rig, which purge keeps
# (Debian's convention for system groups).
DEB=/rig/rig.deb
add_users
systemctl stop rigd.service rigd.socket 2> /dev/null
# By the package's own entry types: a folder it lists may be a link here (/lib is
# usr/lib), and only its plain files are removed; folders only when left empty.
dpkg-deb -c $DEB | awk '{ print substr($1, 1, 1), $6 }' | sed 's| \./| /|; s|/$||' | sort -k2 -r |
  while read -r t f; do
    case $t in
      -) rm -f "$f" ;;
      d) [ -d "$f" ] && [ ! -L "$f" ] && rmdir "$f" 2> /dev/null ;;
    esac
  done
rm -rf /etc/rig /var/lib/rig /run/rig
groupdel rig 2> /dev/null
systemctl daemon-reload
check "no rig left from the boot" sh -c "! getent group rig && [ ! -e /usr/sbin/rigd ] && [ ! -e /lib/systemd/system/rigd.service ]"
# Every file but the kernel's trees, logs, caches and the package database itself.
snapshot() {
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /var/log \
    -o -path /var/cache -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /rig \) -prune \
    -o -print | sort
  ls -la /run/rig 2>&1 | sed 's/^/run: /'
  sed 's/^/group: /' /etc/group; sed 's/^/passwd: /' /etc/passwd; sed 's/^/gshadow: /' /etc/gshadow
  systemctl list-unit-files 'rig*' --no-legend 2>&1 | sed 's/^/unit: /'
}
snapshot > "$FILES/before.txt"

# Nothing to fetch: the package's one dependency (systemd) is installed, and apt reads
# no lists for a local file.
if DEBIAN_FRONTEND=noninteractive apt-get install -y $DEB > "$FILES/install.txt" 2>&1; then
  HOW=apt
else
  HOW=dpkg; dpkg -i $DEB >> "$FILES/install.txt" 2>&1
fi
cat "$FILES/install.txt"
echo "installed with $HOW"
check "installed with $HOW" [ "$(dpkg-query -W -f='${Status}' rig 2> /dev/null)" = "install ok installed" ]
check "apt installed it offline (not the dpkg fallback)" [ $HOW = apt ]
check "postinst made group rig (systemd-sysusers)" getent group rig
check "postinst made /var/lib/rig 0700 (systemd-tmpfiles)" [ "$(stat -c %a /var/lib/rig)" = 700 ]
check "rigd.socket is enabled" [ "$(systemctl is-enabled rigd.socket)" = enabled ]
check "rigd.socket is listening" [ "$(systemctl is-active rigd.socket)" = active ]
check "rigd is not running yet" [ "$(systemctl is-active rigd.service)" != active ]
check "/etc/rig/rigd.toml is a conffile" sh -c "dpkg-query -W -f='\${Conffiles}' rig | grep -q /etc/rig/rigd.toml"
check "man rigctl and rigd are installed" sh -c "[ -f /usr/share/man/man1/rigctl.1.gz ] && [ -f /usr/share/man/man1/rigctl-detach.1.gz ] && [ -f /usr/share/man/man8/rigd.8.gz ]"
check "bash, zsh and fish completions are installed" sh -c "[ -f /usr/share/bash-completion/completions/rigctl ] && [ -f /usr/share/zsh/vendor-completions/_rigctl ] && [ -f /usr/share/fish/vendor_completions.d/rigctl.fish ]"
# alice joins the group the package made.
gpasswd -a alice rig > /dev/null 2>&1 || sed -i '/^rig:/{s/:$/:alice/;t;s/$/,alice/}' /etc/group
as_user alice timeout 30 /usr/bin/rigctl list > "$FILES/alice-list.txt" 2>&1
check "rigctl list as alice (group rig) starts rigd through the socket" [ $? = 0 ]
check "rigd.service became active" [ "$(systemctl is-active rigd.service)" = active ]
check "systemctl restart rigd" timeout 60 systemctl restart rigd
as_user alice timeout 30 /usr/bin/rigctl list >> "$FILES/alice-list.txt" 2>&1
check "rigctl list as alice again" [ $? = 0 ]
as_user bob timeout 30 /usr/bin/rigctl list > "$FILES/bob-list.txt" 2>&1
check "bob (not in group rig) is refused" [ $? != 0 ]
journalctl -u rigd -b --no-pager > "$FILES/rigd-journal.txt" 2>&1
check "rigd served on systemd's socket" grep -q 'serving.*systemd (rigd)' "$FILES/rigd-journal.txt"

DEBIAN_FRONTEND=noninteractive apt-get purge -y rig > "$FILES/purge.txt" 2>&1 || dpkg --purge rig >> "$FILES/purge.txt" 2>&1
cat "$FILES/purge.txt"
check "rig is purged" sh -c "! dpkg-query -W -f='\${Status}' rig 2> /dev/null | grep -q installed"
check "rigd is stopped" [ "$(systemctl is-active rigd.service)" != active ]
# Debian's convention: a package's system group outlives its purge (a file anywhere may
# still carry its id). Checked, then taken out of the comparison.
check "apt purge kept group rig" getent group rig
groupdel rig
snapshot > "$FILES/after.txt"
diff "$FILES/before.txt" "$FILES/after.txt" > "$FILES/left.diff"
cat "$FILES/left.diff"
check "apt purge left nothing behind ($(grep -c '^[<>]' "$FILES/left.diff") lines differ)" [ ! -s "$FILES/left.diff" ]
wc -l "$FILES/before.txt"
