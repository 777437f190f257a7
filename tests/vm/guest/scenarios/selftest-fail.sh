# rig-vm: kind=inspect timeout=30
# Tier self-test: one check passes, one fails, so the boot's verdict must be "fail".
check "a check that passes" true
check "a check that fails on purpose" false
