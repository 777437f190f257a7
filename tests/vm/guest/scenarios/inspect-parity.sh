# rig-vm: kind=inspect timeout=120
# Scenario 1: for every PCI function, what lspci says and what rigctl says, brought back
# to the host (files/<bdf>/{lspci-vvv.txt,lspci-xxxx.txt,rigctl-show.json}) where the
# parity comparator reads them (the same invocations as tests/parity_host.rs). Here only
# that each was produced is checked.
add_users
check "rigd starts and creates its socket" start_rigd
check "rigctl list --json" sh -c "rigctl --socket $RIG_SOCK list --json > $FILES/rigctl-list.json"
for d in /sys/bus/pci/devices/*; do
  bdf=${d##*/}; mkdir -p "$FILES/$bdf"
  lspci -vvv -nn -D -s "$bdf" > "$FILES/$bdf/lspci-vvv.txt" 2>&1
  lspci -xxxx -D -s "$bdf" > "$FILES/$bdf/lspci-xxxx.txt" 2>&1
  check "$bdf: lspci -vvv names the device" grep -q "^$bdf " "$FILES/$bdf/lspci-vvv.txt"
  check "$bdf: rigctl show --json -x" sh -c "rigctl --socket $RIG_SOCK show $bdf --json -x > $FILES/$bdf/rigctl-show.json"
  check "$bdf: rigctl's JSON is not empty" [ -s "$FILES/$bdf/rigctl-show.json" ]
done
stop_rigd
