//! Whole-device leases (docs/lease.md) on a real kernel (fast flavour, translated
//! IOMMU): an unprivileged client maps edu's BAR through the VFIO device fd rigd lent
//! it and drives edu's DMA itself; killed mid-DMA, the device comes back clean (bus
//! mastering off, reset, reopened) and a second lease's DMA checks out; everyone else
//! is refused while it is leased; a crash of rigd mid-reclaim is finished at its next
//! start. A second boot (iommu=pt) does the same in sysfs mode, by physical address. In
//! the first boot, unbind-stuck (docs/RELIABILITY.md, "Unbind that never returns"): a
//! process that keeps only a mapping of the lent BAR keeps vfio-pci's remove waiting,
//! and rigd's give-back times out without wedging, is shown stuck, starts no second
//! worker and finishes once it lets go; one that keeps only a mapping is found at the
//! lease's end and named. lease-outlived: a holder that outlives rigd is named at the
//! next start, keeps the device refused with its name, and its exit lets the recovery
//! finish by itself.
//! `RIG_VM=1 cargo test -p rig-tests --test vm_device_lease`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static LEASE: SharedBoot = SharedBoot::new(
    Flavour::Fast,
    Profile::Translated,
    &["device-lease", "unbind-stuck", "lease-outlived"],
);
/// Sysfs mode needs untranslated DMA: physical addresses reach memory only with iommu=pt.
static SYSFS: SharedBoot =
    SharedBoot::new(Flavour::Fast, Profile::Passthrough, &["device-lease-sysfs"]);

fn check_passed(what: &str) {
    passed_in("device-lease", what);
}

fn passed_in(scenario: &str, what: &str) {
    let Some(out) = LEASE.outcome() else { return };
    let s = out.assert_passed(scenario);
    assert!(
        s.checks.iter().any(|c| c.ok && c.what.contains(what)),
        "{scenario}: no passing check containing {what:?}; serial log: {}",
        out.serial_log().display()
    );
}

#[test]
fn an_unprivileged_holder_drives_edus_dma_through_the_lent_device_fd() {
    check_passed("first-lease: edu answers through the lent BAR0 map");
    check_passed("first-lease: bus mastering on through the lent config region");
    check_passed("first-lease: edu copied 2048 bytes RAM -> edu -> RAM by device address");
    check_passed("first-lease: edu's completion MSI reached this client's eventfd");
    check_passed("alice's first lease drives edu's DMA and exits 0");
    check_passed("after her give-back bus mastering is off");
}

#[test]
fn the_detach_makes_its_dma_pool_without_a_warning() {
    check_passed("the detach warns of nothing: its DMA pool was made");
}

#[test]
fn a_holder_killed_mid_dma_leaves_the_device_clean_and_a_second_lease_works() {
    check_passed("a holder has edu's DMA running");
    check_passed("rigd took the device back after the holder's kill -9");
    check_passed("the reclaim tore down the MSI the holder had set up");
    check_passed("bus mastering is off after the reclaim");
    check_passed("the reclaim reset the device through VFIO and reopened it");
    check_passed("a second lease after the kill works and its DMA checks out");
    check_passed("no DMAR fault");
}

#[test]
fn while_leased_everyone_else_is_refused_naming_the_holder() {
    check_passed("a second lease is refused, naming the holder");
    check_passed("rigd refuses an admin's register read, naming the holder");
    check_passed("rigd refuses a reset");
    check_passed("rigd refuses a give-back while leased");
    check_passed("rigctl status shows the holder");
    check_passed("rigctl status --json gives the holder's uid and pid");
    check_passed("rigctl status shows no holder after the reclaim");
}

#[test]
fn a_device_no_rule_names_is_refused() {
    check_passed("no rule names it");
}

#[test]
fn a_crash_of_rigd_mid_reclaim_is_finished_at_its_next_start() {
    check_passed("rigd died at reclaiming:reset");
    check_passed("the journal says reclaiming:reset");
    check_passed("bus mastering was already off when rigd died");
    check_passed("its start took the device back from the lease and holds it");
    check_passed("a lease after the recovery works and its DMA checks out");
}

#[test]
fn a_holder_that_keeps_a_copy_of_the_fd_keeps_the_device_out_of_use() {
    check_passed("a give-back while the holder keeps a copy is refused, naming its pid");
    check_passed("the device stays out of use: rigd refuses a register read");
    check_passed("once the holder is gone an admin gives it back");
}

#[test]
fn with_pool_clear_a_leases_end_makes_the_pool_afresh_and_the_next_lease_works() {
    check_passed("a lease's end with pool = clear made the pool afresh");
    check_passed("the device has its pool again");
    check_passed("the next lease's DMA works in the new pool");
}

#[test]
fn an_unbind_kept_waiting_by_a_mapping_times_out_is_shown_stuck_and_finishes_once_let_go() {
    for what in [
        "the child (",
        "rigd answers status while the give-back waits in the kernel",
        "the give-back fails (exit",
        "its line names the device, the driver and the step",
        "the kernel: vfio-pci's remove waits for the device's user",
        "rigctl status shows the stuck unbind",
        "a second give-back fails at once",
        "no second worker",
        "rigd takes and gives back another device meanwhile",
        "the stuck unbind returns once the holder is gone",
        "an admin's give-back now finishes",
        "driverless, its driver_override cleared",
        "taken again, a lease's DMA checks out",
    ] {
        passed_in("unbind-stuck", what);
    }
}

#[test]
fn a_child_that_kept_only_a_mapping_is_found_at_the_leases_end_and_no_unbind_is_stranded() {
    for what in [
        "found: alice's child (",
        "found: the lease's end finds the child by its mapping and names it",
        "found: an admin's give-back is refused at once",
        "found: no unbind was started",
        "found: once the child exited the give-back finishes",
        "the scan misses a child that holds another device's fd",
        "is given back once it exited",
    ] {
        passed_in("unbind-stuck", what);
    }
}

#[test]
fn a_holder_that_outlives_rigd_is_named_refused_with_its_name_and_its_exit_finishes_recovery() {
    for what in [
        "the holder outlives rigd",
        "Linux 6.12: the holder's fd is anon_inode:[vfio-device] and its fdinfo names no device",
        "status names the holder: pid, comm, uid, from its lease before rigd restarted",
        "rigd's log names it too",
        "bus mastering is off while it waits",
        "set again, bus mastering is turned off by rigd's watch",
        "a detach fails at once",
        "a give-back fails at once naming the holder, and starts no unbind",
        "once the holder is killed rigd finishes the recovery by itself",
        "status says how it was settled",
        "the device is on vfio-pci and not mastering",
        "a new lease's DMA checks out",
    ] {
        passed_in("lease-outlived", what);
    }
}

fn sysfs_passed(what: &str) {
    let Some(out) = SYSFS.outcome() else { return };
    let s = out.assert_passed("device-lease-sysfs");
    assert!(
        s.checks.iter().any(|c| c.ok && c.what.contains(what)),
        "device-lease-sysfs: no passing check containing {what:?}; serial log: {}",
        out.serial_log().display()
    );
}

#[test]
fn a_sysfs_mode_holder_drives_edu_by_physical_address_and_its_kill_is_reclaimed() {
    sysfs_passed("sysfs-lease: edu copied 2048 bytes RAM -> edu -> RAM by device address");
    sysfs_passed("after the sysfs-mode give-back bus mastering is off");
    sysfs_passed("rigd took the sysfs-mode device back after the holder's kill -9");
    sysfs_passed("bus mastering is off after the sysfs-mode reclaim");
    sysfs_passed("the killed holder's blocks are not left quarantined");
    sysfs_passed("a holder that keeps a resource file is refused, naming its pid");
}
