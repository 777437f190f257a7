//! Lent queues (docs/queues.md) on a real kernel: rigd lends NVMe queue pairs to an
//! unprivileged client (fast flavour, translated IOMMU), kicks as VFIO ioeventfds,
//! rings and shadow doorbells in the client's own lease, reclaim on kill -9.
//! `RIG_VM=1 cargo test -p rig-tests --test vm_lend`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static LEND: SharedBoot = SharedBoot::new(Flavour::Fast, Profile::Translated, &["nvme-lend"]);

fn check_passed(what: &str) {
    let Some(out) = LEND.outcome() else { return };
    let s = out.assert_passed("nvme-lend");
    assert!(
        s.checks.iter().any(|c| c.ok && c.what.contains(what)),
        "nvme-lend: no passing check containing {what:?}; serial log: {}",
        out.serial_log().display()
    );
}

#[test]
fn an_unprivileged_client_writes_and_reads_back_through_a_lent_queue_at_depth_1() {
    check_passed("alice-d1: depth 1: every block read back as written");
    check_passed("alice's depth-1 client exits 0");
}

#[test]
fn an_unprivileged_client_writes_and_reads_back_through_a_lent_queue_at_depth_32() {
    check_passed("alice-d32: depth 32: every block read back as written");
}

#[test]
fn two_clients_at_once_get_their_own_queues() {
    check_passed("two clients at once: the first exits 0");
    check_passed("two clients at once: the second exits 0");
    check_passed("have queues in different doorbell pages (512 and 1024)");
}

#[test]
fn a_client_killed_with_commands_in_flight_is_reclaimed_while_another_runs() {
    check_passed("holds a queue with commands in flight");
    check_passed("rigd reclaimed the killed client's queue");
    check_passed("the other client kept running");
    check_passed("a new client gets a queue after the reclaim");
    check_passed("no DMAR fault");
}

#[test]
fn bad_requests_get_typed_refusals() {
    check_passed("depth 0 is refused as DepthZero");
    check_passed("refused as DepthOverLimit");
    check_passed("has no session to lend queues from");
}

#[test]
fn the_nvme_driver_gets_a_working_controller_back() {
    check_passed("nvme driver back on");
    check_passed("the nvme driver reads its disk again");
}

#[test]
fn rigctl_queues_lists_owners_and_state_and_nothing_after_reclaim() {
    check_passed("rigctl queues lists alice's lent queues with their interrupt, live");
    check_passed("rigctl queues --json gives each queue's owner, depth and doorbell");
    check_passed("alice sees her own queues");
    check_passed("after both clients ended, rigctl queues lists none");
}

#[test]
fn a_lent_queue_completes_by_its_msix_interrupt_eventfd() {
    check_passed("alice's queue completes by its MSI-X interrupt eventfd");
}

#[test]
fn the_killed_clients_queue_is_gone_from_the_controller() {
    check_passed("is created again: the controller had deleted it");
}

#[test]
fn a_flooded_kick_and_a_stray_dma_harm_neither_rigd_nor_the_next_client() {
    check_passed("alice-flood: 20000 kicks with nothing to fetch");
    check_passed("after a client flooded its kick, a new queue still works");
    check_passed("alice-stray: a read into 0x7ff000000 completed");
    check_passed("the IOMMU blocks the stray DMA write");
    check_passed("after the stray read, a new queue still works");
}

#[test]
fn nothing_writes_a_killed_clients_freed_pages_once_they_are_lent_again() {
    check_passed("the canary took the killed holder's IOVAs");
    check_passed("no write reached the killed holder's freed pages");
}

#[test]
fn a_shadow_tail_past_the_ring_harms_only_its_own_queue() {
    check_passed("alice-overrun: the overrun queue was given back");
    check_passed("a client beside the overrun one exits 0");
    check_passed("no queue was left undeleted after the overrun");
    check_passed("after a tail past the ring, a new queue still works");
}
