//! Real-kernel tests in the full flavour: Debian with systemd, the repo's unit files.
//! `RIG_VM=1 cargo test -p rig-tests --test vm_full`.

use rig_tests::vm::{Flavour, Profile, SharedBoot, Verdict};

static FULL: SharedBoot = SharedBoot::new(
    Flavour::Full,
    Profile::Translated,
    &["systemd-rigd", "systemd-socket", "socket-access"],
);

#[test]
fn full_boot_ends_with_a_verdict_not_a_hang_or_crash() {
    let Some(out) = FULL.outcome() else { return };

    assert!(
        matches!(out.verdict, Verdict::Pass | Verdict::Fail),
        "verdict {:?}, QEMU exit {}; serial log: {}",
        out.verdict,
        out.qemu_rc,
        out.serial_log().display()
    );
}

#[test]
fn systemctl_start_rigd_brings_up_the_daemon() {
    let Some(out) = FULL.outcome() else { return };

    out.assert_passed("systemd-rigd");
}

#[test]
fn rigd_socket_unit_starts_rigd_on_first_connection() {
    let Some(out) = FULL.outcome() else { return };

    out.assert_passed("systemd-socket");
}

#[test]
fn group_member_reaches_rigd_under_debian_tools_too() {
    let Some(out) = FULL.outcome() else { return };

    out.assert_passed("socket-access");
}
