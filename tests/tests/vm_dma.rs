//! Issue 6's device-address half on a real kernel, as far as it goes: with `iommu=pt`
//! and sysfs mode, edu's DMA engine moves a client's bytes by the physical address rig
//! gave the client. `RIG_VM=1 cargo test -p rig-tests --test vm_dma`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static DMA: SharedBoot = SharedBoot::new(Flavour::Fast, Profile::Passthrough, &["dma-phys"]);

#[test]
fn edu_dma_by_physical_address_moves_a_clients_bytes_both_ways() {
    let Some(out) = DMA.outcome() else { return };
    let s = out.assert_passed("dma-phys");
    for what in [
        "physical address",
        "edu DMA from the client's buffer",
        "edu DMA into the client's buffer",
        "reads edu's copy of its bytes",
    ] {
        assert!(
            s.checks.iter().any(|c| c.ok && c.what.contains(what)),
            "no passing check containing {what:?}; serial log: {}",
            out.serial_log().display()
        );
    }
}
