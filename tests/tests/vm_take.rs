//! Take-over on a real kernel: rigd takes and gives back devices in the disposable machine
//! (fast flavour, translated IOMMU). Everything is asserted by the guest scenarios from
//! sysfs, not from rig's own report. `RIG_VM=1 cargo test -p rig-tests --test vm_take`.
//! take-random-kill runs 10 kills here; `RIG_VM_APPEND="rig.kills=100 rig.seed=N"` runs
//! the full campaign (docs/RELIABILITY.md). lease-random-kill does the same during DMA
//! leases, lent queues and whole-device leases: 10 kills here, `rig.lease_kills=100`.
//! clients-killed kills clients instead, rigd living on: 30 here, `rig.client_kills=300`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static TAKE: SharedBoot = SharedBoot::new(
    Flavour::Fast,
    Profile::Translated,
    &[
        "take-cycle",
        "take-crash",
        "take-random-kill",
        "lease-random-kill",
        "clients-killed",
    ],
);

fn check_passed(scenario: &str, what: &str) {
    let Some(out) = TAKE.outcome() else { return };
    let s = out.assert_passed(scenario);
    assert!(
        s.checks.iter().any(|c| c.ok && c.what.contains(what)),
        "{scenario}: no passing check containing {what:?}; serial log: {}",
        out.serial_log().display()
    );
}

#[test]
fn bochs_display_goes_to_vfio_pci_and_back_in_vfio_mode() {
    check_passed("take-cycle", "is bound to vfio-pci");
    check_passed("take-cycle", "is back on bochs-drm");
}

#[test]
fn sysfs_mode_leaves_it_driverless_and_give_back_stops_bus_mastering() {
    check_passed("take-cycle", "has no driver in sysfs mode");
    check_passed("take-cycle", "back on bochs-drm after sysfs mode");
}

#[test]
fn a_second_rigd_meets_the_flock_on_config() {
    check_passed("take-cycle", "it meets the flock");
}

#[test]
fn a_drm_holder_is_refused_by_pid_and_accepted_once_gone() {
    check_passed("take-cycle", "is refused while pid");
    check_passed("take-cycle", "accepted once the holder is gone");
}

#[test]
fn nvme_is_refused_while_mounted_and_resets_by_flr() {
    check_passed("take-cycle", "refused while");
    check_passed("take-cycle", "nvme reset by FLR");
}

#[test]
fn edu_behind_a_root_port_resets_by_bus_reset() {
    check_passed("take-cycle", "edu reset by a bus reset");
}

#[test]
fn a_non_viable_group_is_refused_and_entire_group_takes_and_returns_it() {
    check_passed("take-cycle", "non-viable group is refused");
    check_passed("take-cycle", "SMBus back on i801_smbus");
}

#[test]
fn a_kill_at_every_step_leaves_no_device_mastering_and_each_settles() {
    let Some(out) = TAKE.outcome() else { return };
    let s = out.assert_passed("take-crash");
    for step in [
        "detaching:unbind",
        "detaching:driver_override",
        "detaching:bind vfio-pci",
        "held",
        "attaching:stop",
        "attaching:reset",
        "attaching:unbind",
        "attaching:probe",
    ] {
        for what in [
            format!("rigd died at {step}"),
            format!("after restart ({step}): no bus mastering"),
        ] {
            assert!(
                s.checks.iter().any(|c| c.ok && c.what.starts_with(&what)),
                "missing passing check {what:?}"
            );
        }
    }
}

#[test]
fn random_kills_of_rigd_leave_no_device_mastering_and_each_settles() {
    let Some(out) = TAKE.outcome() else { return };
    let s = out.assert_passed("take-random-kill");
    for what in ["every one followed by a recovery", "no violations in"] {
        assert!(
            s.checks.iter().any(|c| c.ok && c.what.contains(what)),
            "missing passing check {what:?}; serial log: {}",
            out.serial_log().display()
        );
    }
}

#[test]
fn random_kills_of_rigd_during_leases_and_queues_leave_clients_pools_and_queues_clean() {
    let Some(out) = TAKE.outcome() else { return };
    let s = out.assert_passed("lease-random-kill");
    for what in [
        "during leases and queues (seed",
        "no violations in",
        "nvme back on its driver",
        "both edus driverless and quiet",
    ] {
        assert!(
            s.checks.iter().any(|c| c.ok && c.what.contains(what)),
            "missing passing check {what:?}; serial log: {}",
            out.serial_log().display()
        );
    }
}

#[test]
fn clients_killed_at_random_leave_rigd_with_no_session_lease_queue_or_fd_of_theirs() {
    for what in [
        "the campaign ran to its verdict",
        "no client exited on its own with an error",
        "every kill reclaimed within 5 s",
        "back to their baseline",
        "nvme back on its driver",
    ] {
        check_passed("clients-killed", what);
    }
}
