//! Real-kernel tests in the full flavour: Debian with systemd, rig installed from its
//! .deb (tests/vm/build-guest.sh builds it; /init installs its files as dpkg would).
//! `RIG_VM=1 cargo test -p rig-tests --test vm_full`.

use rig_tests::vm::{Flavour, Profile, SharedBoot, Verdict};

static FULL: SharedBoot = SharedBoot::new(
    Flavour::Full,
    Profile::Translated,
    &[
        "systemd-rigd",
        "systemd-socket",
        "socket-access",
        "systemd-watchdog",
        "podman-cdi",
    ],
);

/// iommu=pt: sysfs mode's physical addresses reach RAM, and VFIO still maps, so the
/// hardened unit is shown doing both take-over paths. deb-install goes last: it removes
/// rig and purges the package.
static FULL_PT: SharedBoot = SharedBoot::new(
    Flavour::Full,
    Profile::Passthrough,
    &["systemd-hardened", "deb-install"],
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

#[test]
fn a_stopped_rigd_is_restarted_by_the_watchdog_and_readopts_its_device() {
    let Some(out) = FULL.outcome() else { return };

    out.assert_passed("systemd-watchdog");
}

#[test]
fn podman_runs_a_cdi_container_that_leases_edu_and_its_kill_gives_it_back() {
    let Some(out) = FULL.outcome() else { return };

    out.assert_passed("podman-cdi");
}

#[test]
fn the_hardened_unit_takes_leases_and_gives_back_in_vfio_and_sysfs_mode() {
    let Some(out) = FULL_PT.outcome() else { return };

    out.assert_passed("systemd-hardened");
}

#[test]
fn the_deb_installs_serves_group_rig_and_purges_without_a_trace() {
    let Some(out) = FULL_PT.outcome() else { return };

    out.assert_passed("deb-install");
}

#[test]
fn the_old_package_name_moves_to_rig_gpu_and_debians_rig_installs_beside_it() {
    let Some(out) = FULL_PT.outcome() else { return };

    let r = out.assert_passed("deb-install");
    // The rename's checks ran (the scenario could pass on its first half alone).
    for what in [
        "no package named rig is left, not even its config files",
        "the edited conffile was kept",
        "rigd restarted on rig-gpu's binary",
        "Debian's rig installs beside rig-gpu",
        "purging Debian's rig left rig-gpu serving",
    ] {
        assert!(
            r.checks.iter().any(|c| c.ok && c.what == what),
            "deb-install never checked {what:?}"
        );
    }
}

#[test]
fn the_cached_root_image_is_not_written_by_a_boot() {
    let Some(out) = FULL.outcome() else { return };

    // QEMU opens the image with snapshot=on; qemu.cmd is written just before QEMU starts.
    let image = rig_tests::vm::cache_dir().join("full/root.ext4");
    let image_mtime = std::fs::metadata(&image)
        .and_then(|m| m.modified())
        .expect("root image");
    let boot_start = std::fs::metadata(out.dir.join("qemu.cmd"))
        .and_then(|m| m.modified())
        .expect("qemu.cmd");
    assert!(
        image_mtime < boot_start,
        "{} changed during the boot",
        image.display()
    );
}
