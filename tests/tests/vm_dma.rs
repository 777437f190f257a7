//! DMA leases' device-address half (docs/dma.md) on a real kernel: edu's DMA engine
//! moves a client's bytes by the device address rig gave the client, by IOVA under the
//! translated IOMMU (vfio mode; blocked once the client frees the buffer) and by
//! physical address with `iommu=pt` (sysfs mode).
//! `RIG_VM=1 cargo test -p rig-tests --test vm_dma`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static DMA: SharedBoot = SharedBoot::new(Flavour::Fast, Profile::Passthrough, &["dma-phys"]);
static IOVA: SharedBoot = SharedBoot::new(Flavour::Fast, Profile::Translated, &["dma-iova"]);

fn check_passed(boot: &SharedBoot, scenario: &str, checks: &[&str]) {
    let Some(out) = boot.outcome() else { return };
    let s = out.assert_passed(scenario);
    for what in checks {
        assert!(
            s.checks.iter().any(|c| c.ok && c.what.contains(what)),
            "{scenario}: no passing check containing {what:?}; serial log: {}",
            out.serial_log().display()
        );
    }
}

#[test]
fn edu_dma_by_iova_moves_a_clients_bytes_both_ways() {
    check_passed(
        &IOVA,
        "dma-iova",
        &[
            "has an IOVA",
            "edu DMA from the client's buffer by IOVA completes",
            "edu DMA into the client's buffer + 0x1000 by IOVA completes",
            "reads edu's copy of its bytes",
        ],
    );
}

#[test]
fn after_free_the_iommu_blocks_the_device() {
    check_passed(
        &IOVA,
        "dma-iova",
        &[
            "gave the lease back",
            "blocks edu's write (DMAR fault",
            "blocks edu's read (DMAR fault",
            "give-back cleared bus mastering",
        ],
    );
}

#[test]
fn edu_dma_by_physical_address_moves_a_clients_bytes_both_ways() {
    check_passed(
        &DMA,
        "dma-phys",
        &[
            "physical address",
            "edu DMA from the client's buffer",
            "edu DMA into the client's buffer",
            "reads edu's copy of its bytes",
        ],
    );
}
