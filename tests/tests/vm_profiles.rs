//! The other boot profiles of the fast flavour: `iommu=pt` and no IOMMU.
//! `RIG_VM=1 cargo test -p rig-tests --test vm_profiles`.

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static PASSTHROUGH: SharedBoot = SharedBoot::new(
    Flavour::Fast,
    Profile::Passthrough,
    &["iommu-mode", "edu-dma-vfio"],
);

static NO_IOMMU: SharedBoot = SharedBoot::new(
    Flavour::Fast,
    Profile::NoIommu,
    &["iommu-mode", "vfio-needs-iommu"],
);

#[test]
fn passthrough_profile_has_a_passthrough_default_domain() {
    let Some(out) = PASSTHROUGH.outcome() else {
        return;
    };

    out.assert_passed("iommu-mode");
}

#[test]
fn vfio_still_translates_and_blocks_under_passthrough() {
    let Some(out) = PASSTHROUGH.outcome() else {
        return;
    };

    out.assert_passed("edu-dma-vfio");
}

#[test]
fn no_iommu_profile_has_no_groups() {
    let Some(out) = NO_IOMMU.outcome() else {
        return;
    };

    out.assert_passed("iommu-mode");
    assert!(out.devices.iter().all(|d| d.iommu_group.is_none()));
}

#[test]
fn without_an_iommu_vfio_pci_refuses_the_device() {
    let Some(out) = NO_IOMMU.outcome() else {
        return;
    };

    out.assert_passed("vfio-needs-iommu");
}
