//! Whole-device leases at the take level, against the fake kernel and fake VFIO: the
//! journaled reclaim, its order (bus mastering off before anything else, the reset
//! after the interrupts, the device reopened last), and recovery of a reclaim that a
//! crash interrupted.

use super::{
    tests::{GPU, World, bdf, calls, driver, gpu, world},
    *,
};
use crate::{
    sys::sysfs::SysfsCall,
    vfio::{EventFd, IrqIndex, VfioCall},
};

fn held(w: &World, mode: Mode) -> Taken {
    let opts = DetachOptions {
        mode,
        ..DetachOptions::default()
    };
    w.taker
        .detach(bdf(GPU), &opts, &mut |_| {})
        .expect("detach")
}

fn command(w: &World) -> u16 {
    let (c, _) = w.taker.sysfs.root().read_config(bdf(GPU)).expect("config");
    u16::from_le_bytes([c[4], c[5]])
}

fn phase(w: &World) -> Phase {
    w.taker.journal.load().0[0].phase
}

/// What the holder does with the device fd it was lent: bus mastering on through
/// config, MSI-X vectors on eventfds of its own.
fn holder_programs(w: &World, t: &Taken) -> Vec<EventFd> {
    w.taker.set_bus_master(bdf(GPU), true).expect("master on");
    let fds: Vec<EventFd> = (0..4)
        .map(|_| EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"))
        .collect();
    let refs: Vec<&EventFd> = fds.iter().collect();
    let v = t.hold.vfio().expect("vfio");
    v.device.enable_irq(IrqIndex::Msix, &refs).expect("msix");
    fds
}

#[test]
fn lend_journals_leased_and_a_reclaim_journals_each_step_then_held() {
    let w = world(&[gpu()]);
    let mut t = held(&w, Mode::Vfio);

    w.taker.lend(&t).expect("lend");
    assert_eq!(phase(&w), Phase::Leased);
    let mut steps = Vec::new();
    let report = w
        .taker
        .reclaim(&mut t, None, &mut |s| steps.push(s.to_owned()))
        .expect("reclaim");
    assert_eq!(phase(&w), Phase::Reclaiming(ReclaimStep::Pool));
    w.taker.settle(&t).expect("settle");

    assert_eq!(phase(&w), Phase::Held);
    assert_eq!(report.reset.as_deref(), Some("vfio"));
    assert!(report.reopened);
    assert_eq!(steps[0], "stop bus mastering");
    assert_eq!(
        steps.last().map(String::as_str),
        Some("close and reopen the VFIO device")
    );
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn a_reclaim_clears_bus_mastering_before_the_reset() {
    let w = world(&[gpu()]);
    // No VFIO_DEVICE_RESET: the reset goes through sysfs, so the fake kernel's one log
    // holds both the config write and the reset, in order.
    w.vfio.script.lock().expect("script").device_flags =
        vfio_bindings::bindings::vfio::VFIO_DEVICE_FLAGS_PCI;
    let mut t = held(&w, Mode::Vfio);
    w.taker.lend(&t).expect("lend");
    let _fds = holder_programs(&w, &t);
    let before = calls(&w).len();

    let report = w.taker.reclaim(&mut t, None, &mut |_| {}).expect("reclaim");

    let after = &calls(&w)[before..];
    let master_off = after
        .iter()
        .position(
            |c| matches!(c, SysfsCall::WriteConfig { offset: 4, bytes, .. } if bytes[0] & 0x4 == 0),
        )
        .expect("bus mastering cleared");
    let reset = after
        .iter()
        .position(|c| matches!(c, SysfsCall::Reset { .. }))
        .expect("reset");
    assert!(master_off < reset, "{after:?}");
    assert_eq!(master_off, 0, "the first thing done: {after:?}");
    assert_eq!(command(&w) & 0x4, 0);
    assert_eq!(report.reset.as_deref(), Some("kernel default"));
    w.taker.settle(&t).expect("settle");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn a_reclaim_tears_down_the_holders_interrupts_before_the_reset_and_reopens_last() {
    let w = world(&[gpu()]);
    let mut t = held(&w, Mode::Vfio);
    w.taker.lend(&t).expect("lend");
    let _fds = holder_programs(&w, &t);
    assert_eq!(w.vfio.irq_vectors(bdf(GPU), IrqIndex::Msix), 4);
    let before = w.vfio.calls().len();

    let report = w.taker.reclaim(&mut t, None, &mut |_| {}).expect("reclaim");

    let after = &w.vfio.calls()[before..];
    let at = |want: &dyn Fn(&VfioCall) -> bool| after.iter().position(want).expect("call");
    let msix_off = at(&|c| {
        matches!(
            c,
            VfioCall::DisableIrq {
                index: IrqIndex::Msix,
                ..
            }
        )
    });
    let reset = at(&|c| matches!(c, VfioCall::Reset { .. }));
    let closed = at(&|c| matches!(c, VfioCall::CloseDevice { .. }));
    let opened = at(&|c| matches!(c, VfioCall::OpenDevice { .. }));
    assert!(
        msix_off < reset && reset < closed && closed < opened,
        "{after:?}"
    );
    assert_eq!(w.vfio.irq_vectors(bdf(GPU), IrqIndex::Msix), 0);
    assert!(report.irqs.contains(&IrqIndex::Msix));
    assert_eq!(
        w.vfio.open_devices(),
        [bdf(GPU)],
        "rigd holds the device again"
    );
    let bars: Vec<u8> = t.hold.bars().iter().map(|b| b.index).collect();
    assert_eq!(bars, [0, 2], "BARs mapped again through the new fd");
    w.taker.settle(&t).expect("settle");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn a_sysfs_mode_lease_turns_bus_mastering_on_and_its_reclaim_off() {
    let w = world(&[gpu()]);
    let mut t = held(&w, Mode::Sysfs);
    w.taker.stop_bus_master(bdf(GPU)).expect("master off");

    w.taker.lend(&t).expect("lend");
    assert_eq!(
        command(&w) & 0x4,
        0x4,
        "the holder cannot write config itself"
    );
    let report = w.taker.reclaim(&mut t, None, &mut |_| {}).expect("reclaim");

    assert_eq!(command(&w) & 0x4, 0);
    assert!(!report.reopened);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(report.reset.as_deref(), Some("kernel default"));
    w.taker.settle(&t).expect("settle");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn a_reclaim_that_cannot_clear_bus_mastering_stops_there() {
    let w = world(&[gpu()]);
    let mut t = held(&w, Mode::Vfio);
    w.taker.lend(&t).expect("lend");
    let config = w
        .dir
        .path()
        .join("sys/bus/pci/devices")
        .join(GPU)
        .join("config");
    // The fake kernel writes config through the file: make it unwritable.
    let keep = std::fs::read(&config).expect("config");
    std::fs::remove_file(&config).expect("remove");
    std::fs::create_dir(&config).expect("a directory in its place");

    let e = w
        .taker
        .reclaim(&mut t, None, &mut |_| {})
        .expect_err("config unwritable");

    std::fs::remove_dir(&config).expect("rmdir");
    std::fs::write(&config, keep).expect("restore");
    assert!(
        matches!(e, TakeError::Read { .. } | TakeError::Step { .. }),
        "{e}"
    );
    assert_eq!(
        phase(&w),
        Phase::Reclaiming(ReclaimStep::Stop),
        "the record stays at the step"
    );
    assert!(
        !w.vfio
            .calls()
            .iter()
            .any(|c| matches!(c, VfioCall::Reset { .. })),
        "no reset while the device may still master the bus"
    );
    drop(t);
}

#[test]
fn after_a_crash_mid_reclaim_the_next_start_reclaims_from_the_first_step_and_holds_it() {
    for step in [
        ReclaimStep::Stop,
        ReclaimStep::Irqs,
        ReclaimStep::Reset,
        ReclaimStep::Reopen,
        ReclaimStep::Pool,
    ] {
        let w = world(&[gpu()]);
        let t = held(&w, Mode::Vfio);
        w.taker.lend(&t).expect("lend");
        w.taker
            .set_bus_master(bdf(GPU), true)
            .expect("the holder's DMA");
        // rigd dies with the record at `step`: its fds and flock go with it.
        let rec = w.taker.record_of(&t, Phase::Reclaiming(step));
        w.taker.journal.write(&rec).expect("record");
        drop(t);

        let (held, outcomes) = recover(&w.taker);

        assert!(
            matches!(
                outcomes.as_slice(),
                [Recovered::Reclaimed { bdf: b, mode: Mode::Vfio, from: Phase::Reclaiming(s), report }]
                    if *b == bdf(GPU) && *s == step && report.reset.as_deref() == Some("vfio")
            ),
            "{step}: {outcomes:?}"
        );
        assert_eq!(command(&w) & 0x4, 0, "{step}");
        assert_eq!(phase(&w), Phase::Held, "{step}");
        let t = held.into_iter().next().expect("held again");
        assert!(t.hold.vfio().is_some(), "{step}");
        w.taker.attach(t, &mut |_| {}).expect("attach");
    }
}

#[test]
fn after_a_crash_while_leased_a_device_the_holder_keeps_open_is_left_with_its_record() {
    let w = world(&[gpu()]);
    let t = held(&w, Mode::Vfio);
    w.taker.lend(&t).expect("lend");
    drop(t);
    // The holder outlived rigd and keeps the group busy.
    w.vfio.fail(crate::vfio::VfioStep::OpenGroup, libc::EBUSY);

    let (held, outcomes) = recover(&w.taker);

    assert!(held.is_empty());
    assert!(
        matches!(
            outcomes.as_slice(),
            [Recovered::Waiting {
                from: Phase::Leased,
                mode: Mode::Vfio,
                ..
            }]
        ),
        "{outcomes:?}"
    );
    assert_eq!(phase(&w), Phase::Leased, "kept until the holder exits");
    assert_eq!(
        w.taker
            .sysfs
            .root()
            .link_name(bdf(GPU), "driver")
            .as_deref(),
        Some("vfio-pci"),
        "not rolled back: unbinding would wait on the holder forever"
    );
}

/// A process that plays the lessee who outlived rigd: it holds a copy of the lent
/// device file (the fake's memfd) on its stdin.
fn outliving_holder(t: &Taken) -> std::process::Child {
    let lent = t
        .hold
        .vfio()
        .expect("vfio")
        .device
        .file()
        .try_clone()
        .expect("copy");
    std::process::Command::new("sleep")
        .arg("60")
        .stdin(lent)
        .spawn()
        .expect("sleep")
}

#[test]
fn a_holder_that_outlived_rigd_is_named_by_its_copy_and_the_device_settles_once_it_exits() {
    let mut w = world(&[gpu()]);
    // The real /proc: the holder is a real process, found through pidfd_getfd and the
    // config header read through its copy (the fake knows its memfds).
    w.taker.places.proc_root = "/proc".into();
    let t = held(&w, Mode::Vfio);
    w.taker.lend(&t).expect("lend");
    let mut child = outliving_holder(&t);
    let pid = i32::try_from(child.id()).expect("pid");
    // rigd dies; the holder's file keeps the group busy.
    drop(t);
    w.vfio.fail(crate::vfio::VfioStep::OpenGroup, libc::EBUSY);
    w.taker
        .set_bus_master(bdf(GPU), true)
        .expect("the holder's DMA");

    let (held_now, outcomes) = recover(&w.taker);
    let (again, still) = w.taker.recover_again(bdf(GPU));

    assert!(held_now.is_empty() && again.is_none());
    let [
        Recovered::Waiting {
            from: Phase::Leased,
            holders,
            ..
        },
    ] = outcomes.as_slice()
    else {
        panic!("{outcomes:?}");
    };
    let me = holders
        .iter()
        .find(|h| h.pid == pid)
        .expect("the holder named");
    assert_eq!(me.comm, "sleep");
    assert_eq!(me.uid, nix::unistd::getuid().as_raw());
    assert!(matches!(still, Recovered::Waiting { .. }), "{still:?}");
    assert_eq!(command(&w) & 0x4, 0, "bus mastering off while it waits");
    assert_eq!(phase(&w), Phase::Leased, "the record kept");
    assert_eq!(
        driver(&w, GPU).as_deref(),
        Some("vfio-pci"),
        "no unbind tried"
    );

    child.kill().expect("kill");
    child.wait().expect("reap");
    w.vfio.script.lock().expect("script").fail.clear();
    let (t, outcome) = w.taker.recover_again(bdf(GPU));

    assert!(
        matches!(
            outcome,
            Recovered::Reclaimed {
                from: Phase::Leased,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(phase(&w), Phase::Held);
    w.taker
        .attach(t.expect("held"), &mut |_| {})
        .expect("attach");
}

#[test]
fn a_give_back_whose_group_a_holder_keeps_waits_instead_of_unbinding() {
    let w = world(&[gpu()]);
    let t = held(&w, Mode::Vfio);
    // rigd died giving it back, before the unbind; a holder keeps the group.
    let rec = w
        .taker
        .record_of(&t, Phase::Attaching(AttachStep::Unbind(bdf(GPU))));
    w.taker.journal.write(&rec).expect("record");
    drop(t);
    w.vfio.fail(crate::vfio::VfioStep::OpenGroup, libc::EBUSY);

    let (_, outcomes) = recover(&w.taker);

    assert!(
        matches!(
            outcomes.as_slice(),
            [Recovered::Waiting {
                from: Phase::Attaching(_),
                ..
            }]
        ),
        "{outcomes:?}"
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("vfio-pci"), "not unbound");
    w.vfio.script.lock().expect("script").fail.clear();
    let (t, outcome) = w.taker.recover_again(bdf(GPU));
    assert!(t.is_none());
    assert!(
        matches!(outcome, Recovered::RolledBack { .. }),
        "given back as the record says: {outcome:?}"
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
}
