//! The queues' isolated mode (docs/queues.md) on a real kernel: an SR-IOV NVMe
//! controller's two virtual functions, each its own IOMMU group, held by rigd in vfio
//! mode with a pool each, and each lending its queues to one client at a time (fast
//! flavour, translated IOMMU).
//! `RIG_VM=1 cargo test -p rig-tests --test vm_sriov`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static SRIOV: SharedBoot = SharedBoot::new(Flavour::Fast, Profile::Translated, &["nvme-sriov"]);

fn check_passed(what: &str) {
    let Some(out) = SRIOV.outcome() else { return };
    let s = out.assert_passed("nvme-sriov");
    assert!(
        s.checks.iter().any(|c| c.ok && c.what.contains(what)),
        "nvme-sriov: no passing check containing {what:?}; serial log: {}",
        out.serial_log().display()
    );
}

#[test]
fn the_primary_gets_two_online_secondary_controllers_each_its_own_iommu_group() {
    check_passed("two VFs enabled");
    check_passed("online 1");
    check_passed("online 2");
    check_passed("each VF is its own IOMMU group");
}

#[test]
fn rigd_holds_each_vf_in_vfio_mode() {
    check_passed("VF1 held in vfio mode");
    check_passed("VF2 held in vfio mode");
}

#[test]
fn a_vf_lends_its_queues_to_one_client_at_a_time() {
    check_passed("a client holds VF1's queue with commands in flight");
    check_passed("a second client on VF1 is refused, naming the holder");
    check_passed("meanwhile a client's queue on VF2 writes and reads back");
}

#[test]
fn a_killed_holder_is_reclaimed_and_the_vf_serves_the_next_client() {
    check_passed("rigd reclaimed the killed client's queue on VF1");
    check_passed("a new client gets VF1's queue 1 again");
    check_passed("and writes and reads back 500 blocks through it");
}

#[test]
fn two_clients_on_two_vfs_run_at_once() {
    check_passed("one per VF, at depth 32: the first exits 0");
    check_passed("one per VF, at depth 32: the second exits 0");
    check_passed("no DMAR fault while VF queues were lent and reclaimed");
}

#[test]
fn a_stray_read_faults_in_the_vfs_own_domain_only() {
    check_passed("faults in VF1's own IOMMU domain");
    check_passed("no fault was charged to VF2 or the PF");
}

#[test]
fn the_vfs_go_back_and_the_pfs_disk_still_works() {
    check_passed("VF1 given back");
    check_passed("VF2 given back");
    check_passed("the VFs are gone");
    check_passed("the PF's disk still reads");
}

#[test]
fn a_client_naming_the_pf_gets_a_free_vf_or_a_refusal_naming_the_busy_ones() {
    check_passed("rigctl show names VF1's physical function");
    check_passed("a client asking for an isolated queue on the PF gets the free VF2");
    check_passed("with both VFs in use an isolated request is refused naming them");
}
