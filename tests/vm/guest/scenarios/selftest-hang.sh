# rig-vm: kind=inspect timeout=600
# Tier self-test: the guest hangs; the host's time limit must end the boot ("timeout").
check "about to hang" true
sleep 600
