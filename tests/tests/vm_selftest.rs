//! The tier checks itself: a failed check, a kernel panic and a hang are each reported as
//! such, never as a pass, and the guard works inside the guest.
//! `RIG_VM=1 cargo test -p rig-tests --test vm_selftest`.

use std::time::Duration;

use rig_tests::vm::{self, Flavour, Machine, Profile, SharedBoot, Verdict};

static GUARD_AND_FAIL: SharedBoot = SharedBoot::new(
    Flavour::Fast,
    Profile::Translated,
    &["guard-in-guest", "selftest-fail"],
);

#[test]
fn guard_accepts_the_guest_and_refuses_a_foreign_root() {
    let Some(out) = GUARD_AND_FAIL.outcome() else {
        return;
    };

    let r = out.assert_passed("guard-in-guest");
    assert_eq!(r.checks.len(), 3, "{:?}", r.checks);
}

#[test]
fn a_failed_check_fails_the_boot() {
    let Some(out) = GUARD_AND_FAIL.outcome() else {
        return;
    };

    let r = out.scenario("selftest-fail").expect("selftest-fail ran");
    assert!(!r.passed());
    assert_eq!(r.failures().count(), 1);
    assert_eq!(out.verdict, Verdict::Fail);
    assert_eq!(out.failed, 1);
}

#[test]
fn a_guest_kernel_panic_is_no_verdict_and_keeps_the_serial_log() {
    if !vm::gate() {
        return;
    }

    let out = Machine::new(Flavour::Fast, Profile::NoIommu)
        .scenarios(&["selftest-panic"])
        .boot()
        .expect("boots");

    assert_eq!(out.verdict, Verdict::NoVerdict);
    let log = std::fs::read_to_string(out.serial_log()).expect("serial log kept");
    assert!(
        log.contains("Kernel panic"),
        "no panic in {}",
        out.serial_log().display()
    );
}

#[test]
fn a_hung_guest_is_stopped_at_the_time_limit() {
    if !vm::gate() {
        return;
    }

    let out = Machine::new(Flavour::Fast, Profile::NoIommu)
        .scenarios(&["selftest-hang"])
        .timeout(Duration::from_secs(30))
        .boot()
        .expect("boots");

    assert_eq!(out.verdict, Verdict::Timeout);
    assert!(out.seconds < 60.0, "took {} s", out.seconds);
    let log = std::fs::read_to_string(out.serial_log()).expect("serial log kept");
    assert!(
        log.contains("CHECK ok: about to hang"),
        "{}",
        out.serial_log().display()
    );
}
