#!/bin/bash
# Boots the disposable machine once and runs scenarios in it.
#
#   boot.sh [--flavour fast|full] [--profile translated|passthrough|none]
#           [--out DIR] [--timeout SECONDS] [--console] SCENARIO...
#
# SCENARIO names a file tests/vm/guest/scenarios/SCENARIO.sh. The run folder (default
# $RIG_VM_CACHE/runs/<time>-<flavour>-<profile>) gets serial.log, qemu.stderr, verdict,
# ivshmem.bin (what the guest wrote to ivshmem) and results/ (the guest's tar: per
# scenario log, status and files/). It is kept; the last 30 runs are.
#
# Exit status (also "verdict=" in DIR/verdict):
#   0 pass        the guest wrote 0 to isa-debug-exit (QEMU exit 1)
#   1 fail        the guest wrote 1 (QEMU exit 3): some check failed
#   2 timeout     the boot ran past its time limit (hang)
#   3 no-verdict  the guest powered off or panicked without a verdict (QEMU exit 0)
#   4 qemu-abort  QEMU died (e.g. edu's hw_error abort) or would not start
#   5 usage or setup error
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FLAVOUR=fast PROFILE=translated OUT= LIMIT= CONSOLE=0 SCENARIOS=()
while [ $# -gt 0 ]; do
  case $1 in
    --flavour) FLAVOUR=$2; shift 2;;
    --profile) PROFILE=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --timeout) LIMIT=$2; shift 2;;
    --console) CONSOLE=1; shift;;
    -h|--help) sed -n '2,22p' "$0"; exit 0;;
    -*) echo "unknown option $1" >&2; exit 5;;
    *) SCENARIOS+=("$1"); shift;;
  esac
done
case $FLAVOUR in fast|full) ;; *) echo "flavour must be fast or full" >&2; exit 5;; esac
case $PROFILE in translated|passthrough|none) ;; *) echo "profile must be translated, passthrough or none" >&2; exit 5;; esac
[ ${#SCENARIOS[@]} -gt 0 ] || { echo "name at least one scenario" >&2; exit 5; }
for s in "${SCENARIOS[@]}"; do
  [ -f "$VM_DIR/guest/scenarios/$s.sh" ] || { echo "no scenario $s (tests/vm/guest/scenarios/$s.sh)" >&2; exit 5; }
done
load_tools

# The images: base initramfs (seconds when cached) and, for full, the root image.
"$VM_DIR/build-fast.sh" || exit 5
BASE=$RIG_VM_CACHE/fast/base.cpio.gz
if [ "$FLAVOUR" = full ]; then
  "$VM_DIR/build-full.sh" || exit 5
  ROOT_IMG=$RIG_VM_CACHE/full/root.ext4
fi

RUNS=$RIG_VM_CACHE/runs
[ -n "$OUT" ] || OUT=$RUNS/$(date +%Y%m%d-%H%M%S)-$$-$FLAVOUR-$PROFILE
rm -rf "$OUT"; mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# guest_c SRC BIN: builds a static guest program once per source change. Several boots
# run at once (the VM tests, two at a time), so each builds into a file of its own and
# renames it into place: the rename is atomic, and the copies are the same.
guest_c() {
  [ -x "$2" ] && return 0
  mkdir -p "$(dirname "$2")" &&
    gcc -O2 -Wall -static -o "$2.$$.tmp" "$1" && mv -f "$2.$$.tmp" "$2"
}

# edu-vfio, the C stand-in for rig's take-over code.
EDU_SRC=$VM_DIR/guest/edu-vfio.c
EDU_BIN=$RIG_VM_CACHE/guest-bin/edu-vfio-$(recipe_hash "$EDU_SRC")
guest_c "$EDU_SRC" "$EDU_BIN" || exit 5

# nvme-virt, the SR-IOV admin commands the guest has no nvme-cli for.
VIRT_SRC=$VM_DIR/guest/nvme-virt.c
VIRT_BIN=$RIG_VM_CACHE/guest-bin/nvme-virt-$(recipe_hash "$VIRT_SRC")
guest_c "$VIRT_SRC" "$VIRT_BIN" || exit 5

# The payload: a second cpio after the base; its files win over the base's.
P=$OUT/payload
mkdir -p "$P/rig/bin" "$P/rig/scenarios" "$P/rig/systemd"
install -m 0755 "$VM_DIR/guest/init" "$P/init"
install -m 0755 "$VM_DIR/guest/rig-vm-run" "$P/rig/bin/rig-vm-run"
install -m 0755 "$EDU_BIN" "$P/rig/bin/edu-vfio"
install -m 0755 "$VIRT_BIN" "$P/rig/bin/nvme-virt"
install -m 0644 "$VM_DIR/guest/lib.sh" "$P/rig/lib.sh"
install -m 0644 "$VM_DIR"/guest/scenarios/*.sh "$P/rig/scenarios/"
install -m 0644 "$VM_DIR/guest/rig-vm-run.service" "$P/rig/systemd/"
# Full flavour: rig's .deb (build-guest.sh makes it from the guest binaries), unpacked
# for /init to install file by file, and whole, with the transitional rig built beside
# it, for the deb-install scenario. Unit files from RIG_VM_SYSTEMD_DIR, when set,
# override the package's.
if [ "$FLAVOUR" = full ]; then
  DEB=${RIG_VM_DEB:-$(ls -t "$GUEST_DEB_DIR"/rig-gpu_*.deb 2> /dev/null | head -n1)}
  [ -n "$DEB" ] && [ -f "$DEB" ] ||
    { echo "no rig .deb in $GUEST_DEB_DIR: run tests/vm/build-guest.sh (or set RIG_VM_DEB)" >&2; exit 5; }
  TRANS=$(dirname "$DEB")/rig_$(dpkg-deb -f "$DEB" Version)_all.deb
  [ -f "$TRANS" ] || { echo "no $TRANS beside $DEB (packaging/deb/build.sh makes both)" >&2; exit 5; }
  install -m 0644 "$DEB" "$P/rig/rig-gpu.deb"
  install -m 0644 "$TRANS" "$P/rig/rig-transitional.deb"
  dpkg-deb -x "$DEB" "$P/rig/root"
  if [ -n "${RIG_VM_SYSTEMD_DIR:-}" ]; then
    for u in rigd.service rigd.socket; do
      [ -f "$RIG_VM_SYSTEMD_DIR/$u" ] && install -m 0644 "$RIG_VM_SYSTEMD_DIR/$u" "$P/rig/systemd/"
    done
  fi
fi
for b in "${GUEST_BINS[@]}"; do
  if [ -x "$GUEST_BIN_DIR/$b" ]; then
    install -m 0755 "$GUEST_BIN_DIR/$b" "$P/rig/bin/$b"
  else
    say "warning: no guest build of $b in $GUEST_BIN_DIR (scenarios that need it fail)"
  fi
done
printf '%s\n' "${SCENARIOS[@]}" > "$P/rig/plan"
(cd "$P" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/payload.cpio.gz"
cat "$BASE" "$OUT/payload.cpio.gz" > "$OUT/initrd.gz"
rm -rf "$P"

# TIMEOUT: 90 s of boot and shutdown under TCG (60 more for systemd), plus each scenario's own.
if [ -z "$LIMIT" ]; then
  LIMIT=90; [ "$FLAVOUR" = full ] && LIMIT=150
  for s in "${SCENARIOS[@]}"; do
    t=$(sed -n 's/^# rig-vm:.*timeout=\([0-9]*\).*/\1/p' "$VM_DIR/guest/scenarios/$s.sh" | head -n1)
    LIMIT=$((LIMIT + ${t:-120}))
  done
fi

NONCE=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
truncate -s 64M "$OUT/nvme.img" "$OUT/out.img"
# A scenario whose header says "devices=sriov" gets an SR-IOV NVMe controller too, behind
# its own root port (bus 2, so each VF can be its own IOMMU group): 2 VFs, each with up
# to 4 queues (its admin queue and 3 I/O pairs) and 2 interrupts from the flexible pool
# (queues.md "SR-IOV"; QEMU's nvme_check_constraints). Other boots keep today's machine.
SRIOV=()
for s in "${SCENARIOS[@]}"; do
  if grep -q '^# rig-vm:.*devices=sriov' "$VM_DIR/guest/scenarios/$s.sh"; then
    truncate -s 64M "$OUT/sriov.img"
    SRIOV=(-device pcie-root-port,id=rp2,chassis=2,slot=2,addr=09.0
           -device nvme-subsys,id=nvsub,nqn=rig-sriov
           -device nvme,id=nvsr,serial=rig-sriov,subsys=nvsub,bus=rp2,max_ioqpairs=10,msix_qsize=6,sriov_max_vfs=2,sriov_vq_flexible=8,sriov_vi_flexible=4
           -drive file="$OUT/sriov.img",if=none,id=nvsr0,format=raw -device nvme-ns,drive=nvsr0,bus=nvsr,nsid=1)
    break
  fi
done
truncate -s 1M "$OUT/ivshmem.bin"
# no_timer_check: the IO-APIC timer probe times a delay loop; under TCG on a loaded
# host it can miss and panic ("timer doesn't work through Interrupt-remapped IO-APIC",
# seen once here while the host compiled), so skip it.
MACHINE=q35 IOMMU=() CMDLINE="console=ttyS0 panic=-1 no_timer_check"
case $PROFILE in
  translated) MACHINE=q35,kernel-irqchip=split IOMMU=(-device intel-iommu,intremap=on) CMDLINE+=" intel_iommu=on";;
  passthrough) MACHINE=q35,kernel-irqchip=split IOMMU=(-device intel-iommu,intremap=on) CMDLINE+=" intel_iommu=on iommu=pt";;
  none) CMDLINE+=" intel_iommu=off";;
esac
CMDLINE+=" rig.flavour=$FLAVOUR rig.profile=$PROFILE rig.guest=$NONCE"
# Parameters for scenarios that read them (e.g. rig.kills=100 rig.seed=7 for
# take-random-kill).
CMDLINE+="${RIG_VM_APPEND:+ $RIG_VM_APPEND}"
EDU=edu,dma_mask=0xffffffffffffffff
QEMU_ARGS=(
  -accel tcg -cpu max -smp "${RIG_VM_SMP:-1}" -m 2G -machine "$MACHINE" "${IOMMU[@]}"
  -display none -monitor none -serial stdio -no-reboot -nic none -vga none
  -kernel "$VMLINUZ" -initrd "$OUT/initrd.gz" -append "$CMDLINE"
  -device isa-debug-exit,iobase=0xf4,iosize=0x04
  -device VGA,addr=02.0
  -device bochs-display,addr=03.0
  -device virtio-gpu-pci,addr=04.0
  -drive file="$OUT/nvme.img",if=none,id=nvm,format=raw -device nvme,serial=rig-nvme,drive=nvm,addr=05.0,max_ioqpairs=1024
  -device "$EDU",addr=06.0
  -object memory-backend-file,id=shm,mem-path="$OUT/ivshmem.bin",size=1M,share=on
  -device ivshmem-plain,memdev=shm,addr=07.0
  -device pcie-root-port,id=rp1,chassis=1,slot=1,addr=08.0 -device "$EDU",bus=rp1
  -drive file="$OUT/out.img",if=none,id=out,format=raw -device virtio-blk-pci,drive=out,serial=rig-out,addr=10.0
  "${SRIOV[@]}"
)
if [ "$FLAVOUR" = full ]; then
  # snapshot=on: the guest's writes go to a temporary overlay, never into the cached image.
  QEMU_ARGS+=(-drive file="$ROOT_IMG",if=none,id=root,format=raw,snapshot=on
              -device virtio-blk-pci,drive=root,serial=rig-root,addr=11.0)
fi
printf '%q ' "$QEMU" "${QEMU_ARGS[@]}" > "$OUT/qemu.cmd"; echo >> "$OUT/qemu.cmd"

# RIG_VM_SLOTS machines at a time (default 1; run-tier.sh sets one per CPU):
# each TCG guest keeps a core to itself, and more than that would slow them past their
# limits. RIG_VM_SHARED=1 opts out, for a long boot (scripts/soak.sh's hour) that must
# not starve everyone else's: no boot lock (callers skip /tmp/rig-vm.lock too) and QEMU
# at nice 19 (RIG_VM_NICE), so the other boots keep their speed and this one runs on
# what is left.
NICE=()
if [ "${RIG_VM_SHARED:-0}" = 1 ]; then
  NICE=(nice -n "${RIG_VM_NICE:-19}")
  say "RIG_VM_SHARED=1: not taking a boot lock; QEMU runs under ${NICE[*]}"
else
  slots=${RIG_VM_SLOTS:-1}
  slot=0
  while :; do
    exec 9> "$RIG_VM_CACHE/boot.lock.$slot"
    flock -n 9 && break
    slot=$(((slot + 1) % slots))
    [ "$slot" = 0 ] && sleep 0.5
  done
fi
say "boot $FLAVOUR/$PROFILE: ${SCENARIOS[*]} (limit ${LIMIT}s, QEMU $QEMU_VERSION, Linux $KVER)"
t=$(date +%s.%N)
set +e
if [ "$CONSOLE" = 1 ]; then
  timeout --kill-after=10 "$LIMIT" "${NICE[@]}" "$QEMU" "${QEMU_ARGS[@]}" < /dev/null 2> "$OUT/qemu.stderr" |
    tr -d '\r' | tee "$OUT/serial.log"
else
  timeout --kill-after=10 "$LIMIT" "${NICE[@]}" "$QEMU" "${QEMU_ARGS[@]}" < /dev/null 2> "$OUT/qemu.stderr" |
    tr -d '\r' > "$OUT/serial.log"
fi
QRC=${PIPESTATUS[0]}
set -e
SECS=$(since "$t")
[ "${RIG_VM_SHARED:-0}" = 1 ] || exec 9>&-

mkdir -p "$OUT/results"
tar -xf "$OUT/out.img" -C "$OUT/results" 2> /dev/null || true
RESULT=$(sed -n 's/^RESULT: \([0-9]* passed, [0-9]* failed\)$/\1/p' "$OUT/serial.log" | tail -n1)
[ -n "$RESULT" ] || RESULT=$(cat "$OUT/results/result" 2> /dev/null || true)
case $QRC in
  1) VERDICT=pass RC=0;;
  3) VERDICT=fail RC=1;;
  124|137) VERDICT=timeout RC=2;;
  0) VERDICT=no-verdict RC=3;;
  *) VERDICT=qemu-abort RC=4;;
esac
cat > "$OUT/verdict" <<V
verdict=$VERDICT
qemu_rc=$QRC
seconds=$SECS
result=$RESULT
flavour=$FLAVOUR
profile=$PROFILE
scenarios=${SCENARIOS[*]}
qemu=$QEMU_VERSION
kernel=$KVER
nonce=$NONCE
V
rm -f "$OUT/nvme.img" "$OUT/out.img" "$OUT/sriov.img" "$OUT/initrd.gz" "$OUT/payload.cpio.gz"
if [ "$RC" != 0 ]; then
  {
    echo "---- last lines of $OUT/serial.log"
    tail -n 40 "$OUT/serial.log"
    [ -s "$OUT/qemu.stderr" ] && { echo "---- $OUT/qemu.stderr"; tail -n 10 "$OUT/qemu.stderr"; }
    echo "----"
  } >&2
fi
say "boot $FLAVOUR/$PROFILE: $VERDICT (QEMU exit $QRC) in ${SECS}s; ${RESULT:-no result line}; kept in $OUT"
echo "RESULT: ${RESULT:-0 passed, 1 failed}"

# Keep the newest 30 runs.
ls -1dt "$RUNS"/*/ 2> /dev/null | tail -n +31 | xargs -r rm -rf
exit "$RC"
