//! The take-over state machine against a fake kernel (`sys::sysfs::FakeKernel`) and a
//! fake VFIO (`vfio::FakeVfio`); vfio mode's own cases are in `vfio_tests`. Real-kernel
//! runs of the same paths are in the disposable machine (tests/vm).

use std::{
    fs,
    os::unix::fs::symlink,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use super::{
    journal::{hex, parse_hex},
    *,
};
use crate::{
    sys::sysfs::{FakeKernel, SysfsCall},
    testing::{FakeDevice, FakeSysfs},
    vfio::{FakeVfio, VfioStep},
};

pub(super) const GPU: &str = "0000:03:00.0";

pub(super) struct World {
    pub(super) dir: tempfile::TempDir,
    pub(super) kernel: FakeKernel,
    pub(super) vfio: FakeVfio,
    pub(super) taker: Taker,
}

pub(super) fn gpu() -> FakeDevice {
    FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
        .with_bar64(0, 0xa000_0000, 16 << 20, false)
        .with_bar64(2, 0x1_0000_0000, 256 << 20, true)
        .with_bytes(0x04, &[0x06, 0x00]) // Mem + BusMaster
        .with_bytes(0x100, &0x0001_0015u32.to_le_bytes())
        // BAR2 supports 256M..256G (codes 8..18), current 256M.
        .with_bytes(
            0x104,
            &((8..=18).map(|n| 1u32 << (n + 4)).sum::<u32>()).to_le_bytes(),
        )
        .with_bytes(0x108, &(2u32 | (1 << 5) | (8 << 8)).to_le_bytes())
        .with_driver("nvidia")
        .in_group(5)
        .with_attr("reset_method", "flr bus")
}

pub(super) fn world(devices: &[FakeDevice]) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeSysfs::new(&dir.path().join("sys")).expect("fake sysfs");
    for d in devices {
        let path = fake.add(d).expect("add");
        if d.bdf.to_string() == GPU {
            fs::write(path.join("resource2_resize"), "0000000000007ff00\n").expect("resize file");
        }
    }
    let kernel = FakeKernel::new(
        fake.root(),
        &["nvidia", "vfio-pci", "snd_hda_intel", "bochs-drm"],
    );
    let vfio = FakeVfio::new(&kernel);
    let taker = Taker {
        sysfs: Arc::new(kernel.clone()),
        journal: Journal::new(&dir.path().join("state")),
        places: Places {
            proc_root: dir.path().join("proc"),
            dev_root: dir.path().join("dev"),
        },
        vfio: Arc::new(vfio.clone()),
        allow_sysfs_mode: true,
        unbind_timeout: DetachOptions::default().timeout,
    };
    World {
        dir,
        kernel,
        vfio,
        taker,
    }
}

pub(super) fn bdf(s: &str) -> Bdf {
    s.parse().expect("valid")
}

fn sysfs_opts() -> DetachOptions {
    DetachOptions {
        mode: Mode::Sysfs,
        ..DetachOptions::default()
    }
}

pub(super) fn driver(w: &World, b: &str) -> Option<String> {
    w.taker.sysfs.root().link_name(bdf(b), "driver")
}

fn command(w: &World, b: &str) -> u16 {
    let (c, _) = w.taker.sysfs.root().read_config(bdf(b)).expect("config");
    u16::from_le_bytes([c[4], c[5]])
}

pub(super) fn calls(w: &World) -> Vec<SysfsCall> {
    w.kernel.calls.lock().expect("calls").clone()
}

#[test]
fn sysfs_take_unbinds_overrides_enables_and_give_back_rebinds_without_bus_master() {
    let w = world(&[gpu()]);
    let mut steps = Vec::new();
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |s| steps.push(s.to_owned()))
        .expect("detach");
    assert_eq!(driver(&w, GPU), None);
    assert_eq!(t.original_driver.as_deref(), Some("nvidia"));
    let over = w
        .taker
        .sysfs
        .root()
        .read_attr(bdf(GPU), "driver_override")
        .expect("read");
    assert_eq!(over.as_deref(), Some(SYSFS_MODE_OVERRIDE));
    let (records, _) = w.taker.journal.load();
    assert_eq!(records[0].phase, Phase::Held);
    assert!(
        steps
            .iter()
            .any(|s| s.contains("unbind 0000:03:00.0 from nvidia")),
        "{steps:?}"
    );

    let report = w.taker.attach(t, &mut |_| {}).expect("attach");
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert_eq!(report.reset.as_deref(), Some("kernel default"));
    assert_eq!(
        command(&w, GPU) & PCI_COMMAND_MASTER,
        0,
        "bus mastering off after give-back"
    );
    assert!(
        w.taker.journal.load().0.is_empty(),
        "journal forgets a device given back"
    );
    let c = calls(&w);
    let pos = |what: &str, p: &dyn Fn(&SysfsCall) -> bool| {
        c.iter()
            .position(p)
            .unwrap_or_else(|| panic!("{what} in {c:?}"))
    };
    let unbind = pos("unbind", &|x| matches!(x, SysfsCall::Unbind { .. }));
    let over = pos("driver_override rig-none", &|x| {
        *x == SysfsCall::DriverOverride {
            bdf: bdf(GPU),
            driver: Some(SYSFS_MODE_OVERRIDE.into()),
        }
    });
    let config = pos(
        "config +0x4",
        &|x| matches!(x, SysfsCall::WriteConfig { bdf: b, offset: 4, .. } if *b == bdf(GPU)),
    );
    let reset = pos("reset", &|x| {
        matches!(x, SysfsCall::Reset { .. } | SysfsCall::ResetMethods { .. })
    });
    let probe = pos("probe", &|x| matches!(x, SysfsCall::Probe { .. }));
    assert!(unbind < over);
    assert!(config < reset, "bus master off before the reset: {c:?}");
    assert!(reset < probe);
}

#[test]
fn sysfs_mode_is_refused_unless_the_config_allows_it() {
    let mut w = world(&[gpu()]);
    w.taker.allow_sysfs_mode = false;
    let e = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect_err("refused");
    assert!(matches!(e, TakeError::SysfsModeNotAllowed), "{e}");
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert!(calls(&w).is_empty());
}

#[test]
fn a_process_holding_the_drm_node_is_listed_and_nothing_is_unbound() {
    let w = world(&[gpu()]);
    // The device's card0 has /dev/null's number; a fake /proc has pid 4242 holding it.
    let card = w.taker.sysfs.root().device_dir(bdf(GPU)).join("drm/card0");
    fs::create_dir_all(&card).expect("drm dir");
    fs::write(card.join("dev"), "1:3\n").expect("dev");
    let fd_dir = w.dir.path().join("proc/4242/fd");
    fs::create_dir_all(&fd_dir).expect("proc");
    symlink("/dev/null", fd_dir.join("3")).expect("fd link");
    fs::write(w.dir.path().join("proc/4242/comm"), "Xorg\n").expect("comm");

    let e = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("pid 4242 (Xorg) holds /dev/dri/card0"),
        "{msg}"
    );
    // --force cannot override a holder: the unbind would hang.
    let forced = DetachOptions {
        force: true,
        ..sysfs_opts()
    };
    w.taker
        .detach(bdf(GPU), &forced, &mut |_| {})
        .expect_err("still refused");
    assert!(calls(&w).is_empty(), "nothing written: {:?}", calls(&w));

    fs::remove_file(fd_dir.join("3")).expect("holder exits");
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("accepted once the holder is gone");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn boot_vga_is_refused_and_force_overrides_it_saying_so() {
    let w = world(&[gpu().with_attr("boot_vga", "1")]);
    let e = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect_err("boot VGA");
    assert!(e.to_string().contains("boot VGA"), "{e}");
    let forced = DetachOptions {
        force: true,
        ..sysfs_opts()
    };
    let mut steps = Vec::new();
    let t = w
        .taker
        .detach(bdf(GPU), &forced, &mut |s| steps.push(s.to_owned()))
        .expect("forced");
    assert_eq!(t.overrode, ["--force: it is the boot VGA device"]);
    assert!(steps.iter().any(|s| s.starts_with("--force")), "{steps:?}");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn a_group_member_bound_to_a_host_driver_blocks_vfio_and_entire_group_takes_it_then_rolls_back() {
    let audio = FakeDevice::new("0000:03:00.1", 0x10de, 0x22ba, 0x040300)
        .with_driver("snd_hda_intel")
        .in_group(5);
    let w = world(&[gpu(), audio]);
    let e = w
        .taker
        .detach(bdf(GPU), &DetachOptions::default(), &mut |_| {})
        .expect_err("not viable");
    assert!(
        e.to_string().contains("0000:03:00.1 (snd_hda_intel)"),
        "{e}"
    );
    assert!(e.to_string().contains("--entire-group"), "{e}");

    // With --entire-group both go to vfio-pci; this machine has no /dev/vfio, so opening
    // the container fails and both must be back with their own drivers afterwards.
    w.vfio.fail(VfioStep::OpenContainer, libc::ENOENT);
    let whole = DetachOptions {
        entire_group: true,
        ..DetachOptions::default()
    };
    let e = w
        .taker
        .detach(bdf(GPU), &whole, &mut |_| {})
        .expect_err("no /dev/vfio here");
    assert!(e.to_string().contains("open /dev/vfio/vfio"), "{e}");
    let c = calls(&w);
    assert!(
        c.contains(&SysfsCall::Unbind {
            bdf: bdf("0000:03:00.1"),
            driver: "snd_hda_intel".into()
        }),
        "{c:?}"
    );
    assert!(
        c.contains(&SysfsCall::DriverOverride {
            bdf: bdf("0000:03:00.1"),
            driver: Some("vfio-pci".into())
        }),
        "{c:?}"
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert_eq!(driver(&w, "0000:03:00.1").as_deref(), Some("snd_hda_intel"));
    assert!(w.taker.journal.load().0.is_empty());
}

#[test]
fn a_hanging_unbind_times_out_without_wedging_the_caller() {
    let w = world(&[gpu()]);
    w.kernel.script.lock().expect("script").unbind_hangs =
        Some(("nvidia".into(), Duration::from_secs(3)));
    let opts = DetachOptions {
        timeout: Duration::from_millis(200),
        ..sysfs_opts()
    };
    let start = Instant::now();
    let e = w
        .taker
        .detach(bdf(GPU), &opts, &mut |_| {})
        .expect_err("timeout");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "returned after {:?}",
        start.elapsed()
    );
    assert!(matches!(e, TakeError::UnbindTimeout { .. }), "{e}");
    assert!(e.to_string().contains("rig keeps serving"), "{e}");
    let (records, _) = w.taker.journal.load();
    assert_eq!(
        records[0].phase,
        Phase::Detaching(DetachStep::Unbind),
        "the journal says where it stopped"
    );
}

#[test]
fn a_second_detach_while_an_unbind_is_stuck_fails_at_once_and_starts_no_second_worker() {
    let w = world(&[gpu()]);
    w.kernel.script.lock().expect("script").unbind_hangs =
        Some(("nvidia".into(), Duration::from_millis(1500)));
    let opts = DetachOptions {
        timeout: Duration::from_millis(100),
        ..sysfs_opts()
    };
    let first = w
        .taker
        .detach(bdf(GPU), &opts, &mut |_| {})
        .expect_err("timeout");
    let listed = w.taker.stuck_unbinds();
    let start = Instant::now();
    let second = w
        .taker
        .detach(bdf(GPU), &opts, &mut |_| {})
        .expect_err("still stuck");
    let refused_in = start.elapsed();
    let unbinds = w
        .kernel
        .calls
        .lock()
        .expect("calls")
        .iter()
        .filter(|c| matches!(c, SysfsCall::Unbind { .. }))
        .count();

    assert!(matches!(first, TakeError::UnbindTimeout { .. }), "{first}");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].bdf, listed[0].driver.as_str()),
        (bdf(GPU), "nvidia")
    );
    assert!(matches!(second, TakeError::UnbindStuck { .. }), "{second}");
    let line = second.to_string();
    assert!(
        line.contains(GPU) && line.contains("nvidia") && line.contains("no second one"),
        "{line}"
    );
    assert!(refused_in < Duration::from_millis(50), "{refused_in:?}");
    assert_eq!(unbinds, 1, "one worker in the kernel, not two");
    std::thread::sleep(Duration::from_millis(1700));
    assert!(w.taker.stuck_unbinds().is_empty(), "gone once it returned");
}

/// Found in the disposable machine (unbind-stuck): a give-back whose unbind of vfio-pci
/// timed out left the worker holding the device lock in the kernel, and the next
/// give-back's reset waited on that lock for as long as the holder lived; the
/// give-back's unbind also waited 10 s whatever `take.unbind_timeout_s` said.
#[test]
fn a_give_back_after_its_unbind_got_stuck_fails_at_once_and_waits_for_no_device_lock() {
    let mut w = world(&[gpu()]);
    let taken = w
        .taker
        .detach(bdf(GPU), &DetachOptions::default(), &mut |_| {})
        .expect("detach");
    w.kernel.script.lock().expect("script").unbind_hangs =
        Some(("vfio-pci".into(), Duration::from_millis(1500)));
    w.taker.unbind_timeout = Duration::from_millis(100);
    let start = Instant::now();
    let first = w.taker.attach(taken, &mut |_| {}).expect_err("timeout");
    let first_in = start.elapsed();
    let resets = |w: &World| {
        w.kernel
            .calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|c| matches!(c, SysfsCall::Reset { .. }))
            .count()
    };
    let resets_before = resets(&w);
    let start = Instant::now();
    let second = w
        .taker
        .attach_journaled(bdf(GPU), &mut |_| {})
        .expect_err("still stuck");
    let second_in = start.elapsed();

    assert!(
        matches!(&first, TakeError::UnbindTimeout { timeout, .. } if *timeout == Duration::from_millis(100)),
        "{first}"
    );
    assert!(
        first_in < Duration::from_millis(1000),
        "the configured timeout: {first_in:?}"
    );
    assert!(matches!(second, TakeError::UnbindStuck { .. }), "{second}");
    assert!(second_in < Duration::from_millis(50), "{second_in:?}");
    assert_eq!(
        resets(&w),
        resets_before,
        "no reset started behind the stuck unbind"
    );
    std::thread::sleep(Duration::from_millis(1600));
    let report = w
        .taker
        .attach_journaled(bdf(GPU), &mut |_| {})
        .expect("once it returned, the give-back finishes");
    assert_eq!(report.driver.as_deref(), Some("nvidia"));
    assert_eq!(w.kernel.root().link_name(bdf(GPU), "driver"), report.driver);
}

#[test]
fn a_failing_vfio_bind_gives_the_device_back_to_its_driver() {
    let w = world(&[gpu()]);
    w.kernel
        .script
        .lock()
        .expect("script")
        .drivers
        .retain(|d| d != "vfio-pci");
    let e = w
        .taker
        .detach(bdf(GPU), &DetachOptions::default(), &mut |_| {})
        .expect_err("vfio-pci missing");
    assert!(
        e.to_string()
            .contains("did not bind to vfio-pci (driver is now none)"),
        "{e}"
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    let over = w
        .taker
        .sysfs
        .root()
        .read_attr(bdf(GPU), "driver_override")
        .expect("read");
    assert_eq!(over.as_deref(), Some("(null)"));
}

#[test]
fn a_missing_original_driver_keeps_the_record_for_the_next_start() {
    let w = world(&[gpu()]);
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    w.kernel
        .script
        .lock()
        .expect("script")
        .drivers
        .retain(|d| d != "nvidia");
    let e = w.taker.attach(t, &mut |_| {}).expect_err("nvidia is gone");
    assert!(e.to_string().contains("did not bind to nvidia"), "{e}");
    let (records, _) = w.taker.journal.load();
    assert!(
        matches!(records[0].phase, Phase::Attaching(_)),
        "{records:?}"
    );
}

#[test]
fn a_driverless_device_is_taken_and_given_back_driverless() {
    let mut d = gpu();
    d.driver = None;
    let w = world(&[d]);
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    assert!(
        !calls(&w)
            .iter()
            .any(|c| matches!(c, SysfsCall::Unbind { .. }))
    );
    let r = w.taker.attach(t, &mut |_| {}).expect("attach");
    assert_eq!(r.driver, None);
    assert_eq!(driver(&w, GPU), None);
}

#[test]
fn a_second_taker_cannot_take_a_held_device() {
    let w = world(&[gpu()]);
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    let e = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect_err("locked");
    assert!(matches!(e, TakeError::Locked { .. }), "{e}");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn resize_to_max_falls_back_on_enospc_and_reports_moves_and_small_bar() {
    let w = world(&[gpu()]);
    {
        let mut s = w.kernel.script.lock().expect("script");
        s.resize_errno.insert(18, libc::ENOSPC); // 256G
        s.resize_errno.insert(17, libc::ENOSPC); // 128G
    }
    let opts = DetachOptions {
        bar_size: BarSize::Max,
        ..sysfs_opts()
    };
    let t = w
        .taker
        .detach(bdf(GPU), &opts, &mut |_| {})
        .expect("detach");
    let r = t.resize.clone().expect("resized");
    assert_eq!((r.bar, r.before, r.after), (2, 256 << 20, 64 << 30));
    assert_eq!(r.no_room, [256 << 30, 128 << 30]);
    assert_eq!(
        r.moved,
        [(0, 0xa000_0000, 0xb000_0000)],
        "the kernel moved BAR0"
    );
    assert_eq!(
        r.small_bar.as_deref(),
        Some("small BAR: BAR2 is 64G of the 256G the device supports")
    );
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn a_resize_refused_for_any_other_reason_keeps_the_size_and_stops() {
    let w = world(&[gpu()]);
    w.kernel
        .script
        .lock()
        .expect("script")
        .resize_errno
        .insert(18, libc::EBUSY);
    let opts = DetachOptions {
        bar_size: BarSize::Max,
        ..sysfs_opts()
    };
    let e = w
        .taker
        .detach(bdf(GPU), &opts, &mut |_| {})
        .expect_err("EBUSY");
    assert!(e.to_string().contains("refused to resize BAR2"), "{e}");
    let resizes = calls(&w)
        .iter()
        .filter(|c| matches!(c, SysfsCall::Resize { .. }))
        .count();
    assert_eq!(resizes, 1, "no smaller size tried after EBUSY");
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"), "given back");
}

#[test]
fn resize_with_a_driver_bound_or_to_an_unsupported_size_is_refused() {
    let w = world(&[gpu()]);
    let e =
        resize::resize(&w.taker, bdf(GPU), Some(2), BarSize::Max, &mut |_| {}).expect_err("bound");
    assert!(e.to_string().contains("bound to nvidia"), "{e}");
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    let e = resize::resize(
        &w.taker,
        bdf(GPU),
        Some(2),
        BarSize::Bytes(3 << 20),
        &mut |_| {},
    )
    .expect_err("3M");
    assert!(e.to_string().contains("cannot be 3145728 bytes"), "{e}");
    let e =
        resize::resize(&w.taker, bdf(GPU), Some(0), BarSize::Max, &mut |_| {}).expect_err("BAR0");
    assert!(
        e.to_string()
            .contains("BAR0 of 0000:03:00.0 is not resizable"),
        "{e}"
    );
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn reset_by_an_unoffered_method_is_refused_and_a_device_without_methods_says_so() {
    let w = world(&[gpu()]);
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    let e = reset::reset(&w.taker, &t, ResetMethod::Pm, &mut |_| {}).expect_err("pm");
    assert!(e.to_string().contains("offers: flr bus"), "{e}");
    let r = reset::reset(&w.taker, &t, ResetMethod::Bus, &mut |_| {}).expect("bus");
    assert_eq!(r.method, "bus");
    let methods = w
        .taker
        .sysfs
        .root()
        .read_attr(bdf(GPU), "reset_method")
        .expect("read");
    assert_eq!(
        methods.as_deref(),
        Some("flr bus"),
        "the method list is put back"
    );
    fs::write(
        w.taker
            .sysfs
            .root()
            .device_dir(bdf(GPU))
            .join("reset_method"),
        "",
    )
    .expect("clear");
    let e = reset::reset(&w.taker, &t, ResetMethod::Auto, &mut |_| {}).expect_err("none");
    assert!(matches!(e, reset::ResetError::NoMethod { .. }), "{e}");
    w.taker
        .attach(t, &mut |_| {})
        .expect("attach without a reset still rebinds");
}

/// Holds `dev` in sysfs mode, turns its bus mastering on (a client's DMA), drops the
/// hold as a killed rigd would, and recovers: the device must be re-adopted with bus
/// mastering off, within a second. Returns it, held again.
fn crash_with_dma_on(w: &World, dev: &str) -> Taken {
    let t = w
        .taker
        .detach(bdf(dev), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    // The client enabled DMA; then rigd died (its flock goes with it), and the pool's
    // memory its DMA was aimed at with it.
    w.kernel.write_config_raw(bdf(dev), 4, &[0x06, 0x00]);
    drop(t);
    let start = Instant::now();
    let (held, outcomes) = recover(&w.taker);
    assert!(start.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(
            outcomes.as_slice(),
            [Recovered::Readopted {
                bdf: b,
                mode: Mode::Sysfs
            }] if *b == bdf(dev)
        ),
        "{outcomes:?}"
    );
    assert_eq!(
        command(w, dev) & PCI_COMMAND_MASTER,
        0,
        "{dev}: bus mastering stopped"
    );
    held.into_iter().next().expect("held again")
}

#[test]
fn after_a_crash_a_held_device_is_readopted_with_bus_mastering_stopped() {
    let w = world(&[gpu()]);
    let t = crash_with_dma_on(&w, GPU);
    w.taker.attach(t, &mut |_| {}).expect("attach");
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
}

#[test]
fn after_a_crash_mid_detach_the_device_goes_back_to_its_driver() {
    let w = world(&[gpu()]);
    // Simulate a crash right after the unbind: record says "driver_override" is next.
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    let mut rec = w
        .taker
        .record_of(&t, Phase::Detaching(DetachStep::DriverOverride));
    rec.phase = Phase::Detaching(DetachStep::DriverOverride);
    w.taker.journal.write(&rec).expect("write");
    drop(t);
    let (held, outcomes) = recover(&w.taker);
    assert!(held.is_empty());
    assert!(
        matches!(
            outcomes.as_slice(),
            [Recovered::RolledBack {
                bdf: b,
                from: Phase::Detaching(DetachStep::DriverOverride),
                report,
                readopt: None,
            }] if *b == bdf(GPU) && report.driver.as_deref() == Some("nvidia")
        ),
        "{outcomes:?}"
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert!(w.taker.journal.load().0.is_empty());
}

#[test]
fn recovery_of_an_empty_journal_does_nothing() {
    let w = world(&[gpu()]);
    let (held, outcomes) = recover(&w.taker);
    assert!(held.is_empty() && outcomes.is_empty());
    assert!(calls(&w).is_empty());
    assert!(w.vfio.calls().is_empty());
    let _ = Path::new("unused");
}

#[test]
fn a_reset_that_reads_a_short_config_refuses_before_touching_the_device() {
    let w = world(&[gpu()]);
    let t = w
        .taker
        .detach(bdf(GPU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    let config = w.taker.sysfs.root().device_dir(bdf(GPU)).join("config");
    fs::File::options()
        .write(true)
        .open(&config)
        .and_then(|f| f.set_len(40))
        .expect("shorten the fake config");
    let before = calls(&w).len();

    let e = reset::reset(&w.taker, &t, ResetMethod::Bus, &mut |_| {}).expect_err("short");

    assert!(
        matches!(
            &e,
            reset::ResetError::Config { source, .. }
                if matches!(**source, TakeError::Read { source: crate::pci::PciError::ShortConfig { len: 40, .. }, .. })
        ),
        "{e:?}"
    );
    assert!(
        !calls(&w)[before..]
            .iter()
            .any(|c| matches!(c, SysfsCall::Reset { .. })),
        "no reset was written: {:?}",
        &calls(&w)[before..]
    );
}

#[test]
fn config_bytes_round_trip_through_hex() {
    let all: Vec<u8> = (0..=255).collect();

    let text = hex(&all);

    assert_eq!(text.len(), 512);
    assert!(
        text.starts_with("000102") && text.ends_with("fdfeff"),
        "{text}"
    );
    assert_eq!(parse_hex(&text), Ok(all));
    assert_eq!(hex(&[]), "");
}

const EDU: &str = "0000:01:00.0";

/// A function no kernel driver claims (QEMU's edu), as sysfs mode holds it.
fn edu() -> FakeDevice {
    FakeDevice::new(EDU, 0x1234, 0x11e8, 0x00ff00)
        .with_bar64(0, 0xfea0_0000, 1 << 20, false)
        .with_bytes(0x04, &[0x02, 0x00]) // Mem
        .in_group(7)
}

fn enable_count(w: &World, b: &str) -> u32 {
    w.kernel
        .enable_count
        .lock()
        .expect("counts")
        .get(&bdf(b))
        .copied()
        .unwrap_or(0)
}

#[test]
fn take_and_give_back_cycles_of_a_driverless_device_leave_its_enable_count_alone() {
    let w = world(&[edu()]);
    for cycle in 0..3 {
        let t = w
            .taker
            .detach(bdf(EDU), &sysfs_opts(), &mut |_| {})
            .expect("detach");
        assert_eq!(
            enable_count(&w, EDU),
            1,
            "cycle {cycle}: enabled while held"
        );
        w.taker.attach(t, &mut |_| {}).expect("attach");
        assert_eq!(
            enable_count(&w, EDU),
            0,
            "cycle {cycle}: given back as disabled as it came"
        );
    }
    let c = calls(&w);
    let enables: Vec<bool> = c
        .iter()
        .filter_map(|x| match x {
            SysfsCall::Enable { on, .. } => Some(*on),
            _ => None,
        })
        .collect();
    assert_eq!(enables, [true, false, true, false, true, false]);
    // A device someone else enabled before rigd took it stays enabled once for them.
    w.kernel
        .enable_count
        .lock()
        .expect("counts")
        .insert(bdf(EDU), 1);
    let t = w
        .taker
        .detach(bdf(EDU), &sysfs_opts(), &mut |_| {})
        .expect("detach");
    w.taker.attach(t, &mut |_| {}).expect("attach");
    assert_eq!(enable_count(&w, EDU), 1);
}

#[test]
fn after_a_crash_a_driverless_device_held_in_sysfs_mode_has_bus_mastering_stopped() {
    // No driver before, none now: still rigd's, and its DMA target is gone.
    let w = world(&[edu()]);
    let t = crash_with_dma_on(&w, EDU);
    w.taker.attach(t, &mut |_| {}).expect("attach");
    assert_eq!(driver(&w, EDU), None);
    assert_eq!(enable_count(&w, EDU), 0);
}
