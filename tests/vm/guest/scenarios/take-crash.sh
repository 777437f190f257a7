# rig-vm: kind=takeover timeout=240
# Take-over's crash safety on a real kernel: rigd is killed (SIGKILL, injected right after
# each journal write through RIG_CRASH_AT) at every step of detach and of attach, then
# started again. Each time, asserted from sysfs: no device is left driverless with bus
# mastering on, and bochs-display is either back on bochs-drm or held by the new rigd.
RIG="rigctl --socket $RIG_SOCK"
B=0000:00:03.0

settled() {
  d=$(drv_of $B)
  if [ "$d" = bochs-drm ]; then return 0; fi
  $RIG status 2>/dev/null | grep -q "$B  held" && ! bus_master $B
}

for at in detaching:unbind detaching:driver_override "detaching:bind vfio-pci" held \
          attaching:stop attaching:reset attaching:unbind attaching:probe; do
  echo "--- crash at: $at"
  case $at in
    detaching:*|held)
      RIGD_ENV="RIG_CRASH_AT=$at" start_rigd_take
      $RIG detach $B > /dev/null 2>&1 ;;
    attaching:*)
      RIGD_ENV= start_rigd_take
      $RIG detach $B --mode sysfs > /dev/null 2>&1
      printf '\007' | dd of=/sys/bus/pci/devices/$B/config bs=1 seek=4 conv=notrunc 2>/dev/null
      stop_rigd
      RIGD_ENV="RIG_CRASH_AT=$at" start_rigd_take
      $RIG attach $B > /dev/null 2>&1 ;;
  esac
  sleep 0.3
  if kill -0 "$RIGD_PID" 2>/dev/null; then
    check "rigd died at $at" false
    kill -9 "$RIGD_PID"
  else
    check "rigd died at $at" true
  fi
  wait "$RIGD_PID" 2>/dev/null
  echo "    after the crash: driver=$(drv_of $B) override=$(cat /sys/bus/pci/devices/$B/driver_override)"
  RIGD_ENV= start_rigd_take
  check "after restart ($at): no bus mastering on $B" no_bus_master $B
  check "after restart ($at): $B is back on bochs-drm or held" settled
  $RIG status > "$FILES/status-$(echo $at | tr ': ' '__').txt" 2>&1
  if [ "$(drv_of $B)" != bochs-drm ]; then $RIG attach $B > /dev/null 2>&1; fi
  check "after restart ($at): $B ends on bochs-drm" [ "$(drv_of $B)" = bochs-drm ]
  stop_rigd
done
cat "$FILES"/*.txt "$FILES/rigd.log" | tail -40
