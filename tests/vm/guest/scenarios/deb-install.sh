# rig-vm: kind=inspect timeout=360
# The package (docs/systemd.md; full flavour; run it last in its boot): the .deb as an
# operator installs it. What /init unpacked from it is removed first (its files, and the
# folders it made that are left empty), with the rig group, so the package starts on a
# machine that never had rig; a list of every file (and the group and passwd files) is
# taken. Then `apt-get install /rig/rig-gpu.deb` (offline: nothing to fetch), rigctl as a
# member of group rig (socket activation starts rigd), `systemctl start rigd`, man pages
# and completions in place, `apt purge rig-gpu`, and the same list again, but for group
# rig, which purge keeps (Debian's convention for system groups).
# Then the names (docs/systemd.md, "Upgrading from the package named rig"): an install of
# the package as it was named until 0.2.0 (rig 0.1.0: this .deb repacked under the old
# name and paths, maintainer scripts and all) with an edited conffile and a running rigd
# moves to rig-gpu in one apt call with the transitional rig, and no package named rig is
# left, not even as config files; then a stand-in of Debian's own rig (1.11-1.1, its
# file list) installs beside rig-gpu and is purged, and rig-gpu is untouched; last, the
# list again.
DEB=/rig/rig-gpu.deb
TRANS=/rig/rig-transitional.deb
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
check "installed with $HOW" [ "$(dpkg-query -W -f='${Status}' rig-gpu 2> /dev/null)" = "install ok installed" ]
check "apt installed it offline (not the dpkg fallback)" [ $HOW = apt ]
check "postinst made group rig (systemd-sysusers)" getent group rig
check "postinst made /var/lib/rig 0700 (systemd-tmpfiles)" [ "$(stat -c %a /var/lib/rig)" = 700 ]
check "rigd.socket is enabled" [ "$(systemctl is-enabled rigd.socket)" = enabled ]
check "rigd.socket is listening" [ "$(systemctl is-active rigd.socket)" = active ]
check "rigd is not running yet" [ "$(systemctl is-active rigd.service)" != active ]
check "/etc/rig/rigd.toml is a conffile" sh -c "dpkg-query -W -f='\${Conffiles}' rig-gpu | grep -q /etc/rig/rigd.toml"
check "man rigctl and rigd are installed" sh -c "[ -f /usr/share/man/man1/rigctl.1.gz ] && [ -f /usr/share/man/man1/rigctl-detach.1.gz ] && [ -f /usr/share/man/man8/rigd.8.gz ]"
check "bash, zsh and fish completions are installed" sh -c "[ -f /usr/share/bash-completion/completions/rigctl ] && [ -f /usr/share/zsh/vendor-completions/_rigctl ] && [ -f /usr/share/fish/vendor_completions.d/rigctl.fish ]"
# alice joins the group the package made.
join_rig() { gpasswd -a "$1" rig > /dev/null 2>&1 || sed -i "/^rig:/{s/:\$/:$1/;t;s/\$/,$1/}" /etc/group; }
join_rig alice
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

DEBIAN_FRONTEND=noninteractive apt-get purge -y rig-gpu > "$FILES/purge.txt" 2>&1 || dpkg --purge rig-gpu >> "$FILES/purge.txt" 2>&1
cat "$FILES/purge.txt"
check "rig-gpu is purged" sh -c "! dpkg-query -W -f='\${Status}' rig-gpu 2> /dev/null | grep -q installed"
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

# The old name. rig 0.1.0 as it was: this package under the name rig, its files where
# 0.1.0 had them (/usr/share/doc/rig, /usr/share/rig), no Replaces or Breaks.
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -y "$@"; }
status_of() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2> /dev/null | tr -d ' '; }
O=/tmp/rig-old
rm -rf $O && dpkg-deb -R $DEB $O
sed -i -e 's/^Package: rig-gpu$/Package: rig/' -e 's/^Version: .*/Version: 0.1.0/' -e '/^Replaces:/d' -e '/^Breaks:/d' $O/DEBIAN/control
mv $O/usr/share/doc/rig-gpu $O/usr/share/doc/rig
mv $O/usr/share/rig-gpu $O/usr/share/rig
[ -f $O/usr/share/lintian/overrides/rig-gpu ] && mv $O/usr/share/lintian/overrides/rig-gpu $O/usr/share/lintian/overrides/rig
sed -i -e 's| usr/share/doc/rig-gpu/| usr/share/doc/rig/|; s| usr/share/rig-gpu/| usr/share/rig/|; s| usr/share/lintian/overrides/rig-gpu$| usr/share/lintian/overrides/rig|' $O/DEBIAN/md5sums
dpkg-deb --root-owner-group -Zgzip -z1 -b $O /tmp/rig_0.1.0.deb > /dev/null
apt_get install /tmp/rig_0.1.0.deb > "$FILES/old-install.txt" 2>&1
check "the old rig 0.1.0 installed" [ "$(status_of rig)" = ii ]
join_rig alice
echo '# kept across the rename' >> /etc/rig/rigd.toml
echo kept > /var/lib/rig/rename-marker
as_user alice timeout 30 /usr/bin/rigctl list > /dev/null 2>&1
check "the old package's rigd serves alice" [ "$(systemctl is-active rigd.service)" = active ]
OLDPID=$(systemctl show -p MainPID --value rigd.service)

apt_get install $DEB $TRANS > "$FILES/rename.txt" 2>&1
check "apt moved rig to rig-gpu in one call" [ $? = 0 ]
cat "$FILES/rename.txt"
check "rig-gpu is installed" [ "$(status_of rig-gpu)" = ii ]
# dpkg may keep the name as "not installed" (un); neither installed (ii) nor config
# files (rc) may be left.
echo "rig after the move: '$(status_of rig)'"
check "no package named rig is left, not even its config files" sh -c "case '$(status_of rig)' in ''|un) exit 0;; *) exit 1;; esac"
check "the edited conffile was kept" grep -q '^# kept across the rename' /etc/rig/rigd.toml
check "rig-gpu owns the conffile" sh -c "dpkg-query -W -f='\${Conffiles}' rig-gpu | grep -q /etc/rig/rigd.toml"
check "rigd's state was kept" [ "$(cat /var/lib/rig/rename-marker 2> /dev/null)" = kept ]
check "rigd.socket is still enabled" [ "$(systemctl is-enabled rigd.socket)" = enabled ]
check "rigd restarted on rig-gpu's binary" sh -c "[ \"\$(systemctl show -p MainPID --value rigd.service)\" != $OLDPID ] && [ \"\$(systemctl is-active rigd.service)\" = active ]"
as_user alice timeout 30 /usr/bin/rigctl list > /dev/null 2>&1
check "rigctl list as alice after the rename" [ $? = 0 ]

# Debian's rig beside it: a stand-in with its file list (1.11-1.1: /usr/bin/rig,
# /usr/share/rig/*.idx, /usr/share/doc/rig/, rig.6).
D=/tmp/debian-rig
rm -rf $D && mkdir -p $D/DEBIAN $D/usr/bin $D/usr/share/rig $D/usr/share/doc/rig $D/usr/share/man/man6
printf '#!/bin/sh\necho "Jane Doe"\n' > $D/usr/bin/rig && chmod 755 $D/usr/bin/rig
for f in fnames lnames locdata mnames street; do echo "$f" > $D/usr/share/rig/$f.idx; done
for f in README copyright; do echo "$f" > $D/usr/share/doc/rig/$f; done
for f in usr/share/doc/rig/changelog.Debian usr/share/doc/rig/changelog usr/share/man/man6/rig.6; do echo x | gzip -9n > $D/$f.gz; done
printf 'Package: rig\nVersion: 1.11-1.1\nArchitecture: all\nMaintainer: stand-in <x@example.invalid>\nDescription: random identity generator (stand-in)\n stand-in for the test\n' > $D/DEBIAN/control
dpkg-deb --root-owner-group -Zgzip -z1 -b $D /tmp/debian-rig.deb > /dev/null
apt_get install /tmp/debian-rig.deb > "$FILES/debian-rig.txt" 2>&1
check "Debian's rig installs beside rig-gpu" sh -c "[ \"\$(dpkg-query -W -f='\${Version}' rig)\" = 1.11-1.1 ] && [ $(status_of rig-gpu) = ii ]"
check "Debian's rig runs" [ "$(/usr/bin/rig)" = "Jane Doe" ]
check "no file of one is the other's" sh -c "dpkg -S /usr/sbin/rigd | grep -q '^rig-gpu:' && dpkg -S /usr/share/rig/fnames.idx | grep -q '^rig:'"
apt_get purge rig > "$FILES/debian-rig-purge.txt" 2>&1
as_user alice timeout 30 /usr/bin/rigctl list > /dev/null 2>&1
check "purging Debian's rig left rig-gpu serving" [ $? = 0 ]
check "... and its state" [ -f /var/lib/rig/rename-marker ]

apt_get purge rig-gpu > "$FILES/purge2.txt" 2>&1
check "rig-gpu purged again" sh -c "! dpkg-query -W -f='\${Status}' rig-gpu 2> /dev/null | grep -q installed"
groupdel rig
snapshot > "$FILES/after2.txt"
diff "$FILES/before.txt" "$FILES/after2.txt" > "$FILES/left2.diff"
cat "$FILES/left2.diff"
check "after the rename and Debian's rig, nothing left behind ($(grep -c '^[<>]' "$FILES/left2.diff") lines differ)" [ ! -s "$FILES/left2.diff" ]
