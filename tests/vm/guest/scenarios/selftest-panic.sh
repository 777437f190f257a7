# rig-vm: kind=inspect timeout=30
# Tier self-test: the guest kernel panics; the host must report "no verdict", not a pass.
check "about to panic the guest kernel" true
echo c > /proc/sysrq-trigger
