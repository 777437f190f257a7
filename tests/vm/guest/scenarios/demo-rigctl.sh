# rig-vm: kind=takeover timeout=150
# The README's demo: systemd starts rigd from the repo's unit, then rigctl shows the
# emulated devices and the stand-in GPU (bochs-display at 00:03.0), as a user would,
# takes that GPU from bochs-drm to vfio-pci and gives it back.
add_users
systemctl daemon-reload
show() { echo; echo "\$ $*"; "$@"; }
show systemctl start rigd
check "rigd is active" [ "$(systemctl is-active rigd)" = active ]
show systemctl status rigd --no-pager --lines=3
show rigctl version
show rigctl list
check "rigctl list" [ $? = 0 ]
show rigctl show 0000:00:03.0
check "rigctl show 0000:00:03.0 (bochs-display)" [ $? = 0 ]
echo; echo "\$ su alice -c 'rigctl version'    # alice is in group rig, not root"
as_user alice rigctl version
check "alice (group rig) reaches rigd" [ $? = 0 ]
echo; echo "\$ su bob -c 'rigctl version'      # bob is not in group rig"
as_user bob rigctl version
check "bob is refused" [ $? != 0 ]
show rigctl detach 0000:00:03.0 --mode vfio
check "rigctl detach 0000:00:03.0 (to vfio-pci)" [ "$(drv_of 0000:00:03.0)" = vfio-pci ]
show rigctl status
show rigctl attach 0000:00:03.0
check "rigctl attach 0000:00:03.0 (back to bochs-drm)" [ "$(drv_of 0000:00:03.0)" = bochs-drm ]
systemctl stop rigd.socket rigd.service
