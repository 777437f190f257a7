//! Real-kernel tests in the fast flavour (busybox initramfs) under a translated IOMMU: one
//! boot runs every scenario here. `RIG_VM=1 cargo test -p rig-tests --test vm_fast`.

use rig_tests::vm::{Flavour, Profile, SharedBoot, Verdict, parity};

static FAST: SharedBoot = SharedBoot::new(
    Flavour::Fast,
    Profile::Translated,
    &[
        "iommu-mode",
        "inspect-parity",
        "socket-access",
        "edu-dma-vfio",
        "ivshmem-oracle",
    ],
);

#[test]
fn boot_ends_with_a_verdict_not_a_hang_or_crash() {
    let Some(out) = FAST.outcome() else { return };

    assert!(
        matches!(out.verdict, Verdict::Pass | Verdict::Fail),
        "verdict {:?}, QEMU exit {}; serial log: {}",
        out.verdict,
        out.qemu_rc,
        out.serial_log().display()
    );
}

#[test]
fn translated_profile_has_dmar_and_the_standard_devices_are_bound() {
    let Some(out) = FAST.outcome() else { return };

    out.assert_passed("iommu-mode");
    let bochs = out.device(0x1234, 0x1111).expect("a bochs device");
    assert_eq!(bochs.driver.as_deref(), Some("bochs-drm"));
    let edu_rp = out
        .devices
        .iter()
        .find(|d| d.bdf == "0000:01:00.0")
        .expect("edu behind the root port");
    assert!(
        edu_rp.reset_methods.iter().any(|m| m == "bus"),
        "{edu_rp:?}"
    );
}

#[test]
fn inspect_parity_captures_lspci_and_rigctl_for_every_function() {
    let Some(out) = FAST.outcome() else { return };

    out.assert_passed("inspect-parity");
    let inputs = parity::inputs(out);
    assert_eq!(inputs.len(), out.devices.len());
    for input in &inputs {
        assert!(input.lspci_vvv.starts_with(&input.bdf), "{}", input.bdf);
        assert!(
            input.lspci_xxxx.contains("\n00: "),
            "{}: no config dump",
            input.bdf
        );
        let json: serde_json::Value =
            serde_json::from_str(&input.rigctl_json).expect("rigctl show --json is JSON");
        assert!(
            json["config_hex"].is_string(),
            "{}: no config_hex",
            input.bdf
        );
    }
}

#[test]
fn group_member_reaches_rigd_and_outsider_is_refused() {
    let Some(out) = FAST.outcome() else { return };

    out.assert_passed("socket-access");
}

#[test]
fn edu_dma_through_vfio_moves_bytes_and_unmap_blocks_the_device() {
    let Some(out) = FAST.outcome() else { return };

    let r = out.assert_passed("edu-dma-vfio");
    for what in [
        "bytes that went RAM -> edu -> RAM match",
        "after unmap the IOMMU blocks the device's write",
        "0000:01:00.0: DMAR fault logged for the blocked write",
        "VFIO_DEVICE_RESET",
    ] {
        assert!(
            r.checks.iter().any(|c| c.ok && c.what == what),
            "missing check: {what}"
        );
    }
}

#[test]
fn host_reads_what_the_guest_wrote_to_ivshmem() {
    let Some(out) = FAST.outcome() else { return };

    out.assert_passed("ivshmem-oracle");
    let shm = std::fs::read(out.dir.join("ivshmem.bin")).expect("ivshmem backing file");
    let expected = format!("rig-vm ivshmem oracle {}\0", out.nonce);
    assert!(
        shm.starts_with(expected.as_bytes()),
        "ivshmem holds {:?}",
        &shm[..64.min(shm.len())]
    );
}

#[test]
fn every_guest_device_matches_lspci() {
    use rig_tests::parity::{self as compare, Mismatch, Source};
    let Some(out) = FAST.outcome() else { return };

    out.assert_passed("inspect-parity");
    let mut mismatches: Vec<Mismatch> = Vec::new();
    let inputs = parity::inputs(out);
    for input in &inputs {
        let value: serde_json::Value =
            serde_json::from_str(&input.rigctl_json).expect("rigctl show --json is JSON");
        let hex = value["config_hex"].as_str().unwrap_or_default().to_owned();
        let device: rig_client::Device =
            serde_json::from_value(value).expect("rigctl show --json is a Device");
        mismatches.extend(compare::compare_all(
            &compare::parse_lspci(&input.lspci_vvv),
            std::slice::from_ref(&device),
            Source::Live,
        ));
        match compare::parse_hex_dumps(&input.lspci_xxxx).first() {
            Some((_, bytes)) => mismatches.extend(compare::compare_config(&input.bdf, bytes, &hex)),
            None => panic!("{}: no lspci -xxxx dump", input.bdf),
        }
    }

    let lines: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    assert!(
        lines.is_empty(),
        "{} of {} guest functions differ from lspci:\n  {}",
        mismatches.len(),
        inputs.len(),
        lines.join("\n  ")
    );
}
