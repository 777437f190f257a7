//! rigd's NVMe stage on a real kernel and QEMU's NVMe controller (fast flavour,
//! translated IOMMU): rigd's nvme stage drives the controller held through VFIO, and
//! an I/O queue pair in a pool lease moves 4 KiB patterns both ways across ring wraps
//! at depths 1 and 32, rung by a BAR0 store, a shadow tail plus a BAR0 store, a shadow
//! tail plus a fixed-value VFIO ioeventfd kick, and a forwarded kick.
//! `RIG_VM=1 cargo test -p rig-tests --test vm_queue`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static QUEUE: SharedBoot = SharedBoot::new(Flavour::Fast, Profile::Translated, &["nvme-queue"]);

fn check_passed(what: &str) {
    let Some(out) = QUEUE.outcome() else { return };
    let s = out.assert_passed("nvme-queue");
    assert!(
        s.checks.iter().any(|c| c.ok && c.what.contains(what)),
        "nvme-queue: no passing check containing {what:?}; serial log: {}",
        out.serial_log().display()
    );
}

#[test]
fn rigds_nvme_stage_resets_enables_and_identifies_the_controller() {
    check_passed("controller reset, enabled, identified");
}

#[test]
fn patterns_round_trip_through_a_queue_rung_by_bar0_stores_at_depths_1_and_32() {
    check_passed("mmio depth 1: 2000 writes then reads, compared");
    check_passed("mmio depth 32: 2000 writes then reads, compared");
}

#[test]
fn doorbell_buffer_config_is_accepted_and_shadow_tails_drive_the_queue() {
    check_passed("Doorbell Buffer Config accepted");
    check_passed("shadow-mmio depth 1");
    check_passed("shadow-mmio depth 32");
}

#[test]
fn a_fixed_value_ioeventfd_kick_with_a_shadow_tail_drives_the_queue() {
    check_passed("ioeventfd depth 1: 2000 writes then reads, compared");
    check_passed("ioeventfd depth 32: 2000 writes then reads, compared");
}

#[test]
fn a_forwarded_kick_drives_the_queue() {
    check_passed("forwarded depth 1");
    check_passed("forwarded depth 32");
}

#[test]
fn no_dmar_fault_and_the_nvme_driver_gets_a_working_controller_back() {
    check_passed("no DMAR fault while the queues ran");
    check_passed("the nvme driver reads its disk again");
}
