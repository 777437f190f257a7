//! Vfio mode against the fake kernel and the fake VFIO (`vfio::FakeVfio`): detach,
//! attach, resize, reset and recovery's re-adoption, and a failure at each VFIO step.

use super::{
    tests::{GPU, World, bdf, calls, driver, gpu, world},
    *,
};
use crate::{
    sys::{mmio::Width, sysfs::SysfsCall},
    vfio::{VfioCall, VfioStep},
};

fn held_vfio(w: &World) -> Taken {
    w.taker
        .detach(bdf(GPU), &DetachOptions::default(), &mut |_| {})
        .expect("vfio detach")
}

fn opens(w: &World) -> usize {
    w.vfio
        .calls()
        .iter()
        .filter(|c| matches!(c, VfioCall::OpenDevice { .. }))
        .count()
}

#[test]
fn vfio_detach_opens_container_group_device_in_order_and_maps_the_bars_through_regions() {
    let w = world(&[gpu()]);

    let t = held_vfio(&w);

    assert_eq!(driver(&w, GPU).as_deref(), Some("vfio-pci"));
    assert_eq!(t.mode(), Mode::Vfio);
    let group = || "5".to_owned();
    let calls = w.vfio.calls();
    assert_eq!(
        calls[..6],
        [
            VfioCall::OpenContainer,
            VfioCall::OpenGroup { group: group() },
            VfioCall::GroupStatus { group: group() },
            VfioCall::SetContainer { group: group() },
            VfioCall::SetIommu,
            VfioCall::OpenDevice { bdf: bdf(GPU) },
        ]
    );
    let regions: Vec<u32> = calls[6..]
        .iter()
        .filter_map(|c| match c {
            VfioCall::RegionInfo { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(regions, [0, 1, 2, 3, 4, 5], "BAR regions read in order");
    let bars: Vec<(u8, u64)> = t.hold.bars().iter().map(|b| (b.index, b.size)).collect();
    assert_eq!(bars, [(0, 16 << 20), (2, 256 << 20)]);
    // The maps reach the region's memory: a write reads back.
    t.write_bar(0, 0x10, Width::W32, 0xdead_beef)
        .expect("write");
    assert_eq!(
        t.read_bar(0, 0x10, Width::W32, 1).expect("read"),
        [0xdead_beef]
    );
    let (records, _) = w.taker.journal.load();
    assert_eq!(
        (records[0].mode, &records[0].phase),
        (Mode::Vfio, &Phase::Held)
    );
    assert_eq!(w.vfio.open_devices(), [bdf(GPU)]);
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn vfio_detach_refuses_a_non_viable_group_and_gives_the_device_back() {
    let w = world(&[gpu()]);
    w.vfio.script.lock().expect("script").viable = Some(false);

    let e = w
        .taker
        .detach(bdf(GPU), &DetachOptions::default(), &mut |_| {})
        .expect_err("not viable");

    assert!(
        matches!(&e, TakeError::NotViable { bdf: b, group } if *b == bdf(GPU) && group == "5"),
        "{e}"
    );
    assert!(
        !w.vfio.calls().iter().any(|c| matches!(
            c,
            VfioCall::SetContainer { .. } | VfioCall::OpenDevice { .. }
        )),
        "nothing attached or opened: {:?}",
        w.vfio.calls()
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert!(w.taker.journal.load().0.is_empty());
}

#[test]
fn a_failure_at_each_vfio_step_gives_the_device_back_and_closes_what_was_opened() {
    let steps = [
        (VfioStep::OpenContainer, "open /dev/vfio/vfio"),
        (VfioStep::OpenGroup, "open the VFIO group"),
        (VfioStep::GroupStatus, "read the VFIO group status"),
        (VfioStep::SetContainer, "attach the group to a container"),
        (VfioStep::SetIommu, "select the type1v2 IOMMU"),
        (VfioStep::OpenDevice, "open the VFIO device"),
        (VfioStep::RegionInfo, "read a VFIO region"),
    ];
    for (step, name) in steps {
        let w = world(&[gpu()]);
        w.vfio.fail(step, libc::EIO);

        let e = w
            .taker
            .detach(bdf(GPU), &DetachOptions::default(), &mut |_| {})
            .expect_err("scripted failure");

        match &e {
            TakeError::Vfio { bdf: b, source } => {
                assert_eq!((*b, source.step()), (bdf(GPU), name), "{step:?}");
            }
            other => panic!("{step:?}: {other}"),
        }
        assert_eq!(
            e.to_string(),
            format!("Failed to {name} for {GPU}"),
            "{step:?}"
        );
        assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"), "{step:?}");
        let over = w
            .taker
            .sysfs
            .root()
            .read_attr(bdf(GPU), "driver_override")
            .expect("read");
        assert_eq!(over.as_deref(), Some("(null)"), "{step:?}");
        assert!(w.taker.journal.load().0.is_empty(), "{step:?}");
        assert!(w.vfio.open_devices().is_empty(), "{step:?}");
        // Whatever was opened before the failure is closed again.
        let calls = w.vfio.calls();
        let count = |c: &VfioCall| calls.iter().filter(|x| *x == c).count();
        let container_opened = usize::from(step != VfioStep::OpenContainer);
        let group_opened = usize::from(container_opened == 1 && step != VfioStep::OpenGroup);
        assert_eq!(
            count(&VfioCall::CloseContainer),
            container_opened,
            "{step:?}: {calls:?}"
        );
        assert_eq!(
            count(&VfioCall::CloseGroup { group: "5".into() }),
            group_opened,
            "{step:?}: {calls:?}"
        );
    }
}

#[test]
fn the_fake_kernel_will_not_unbind_vfio_pci_while_the_device_fd_is_open() {
    let w = world(&[gpu()]);
    let t = held_vfio(&w);

    let e = w.kernel.unbind(bdf(GPU), "vfio-pci").expect_err("fd open");

    assert_eq!(e.raw_os_error(), Some(libc::EBUSY));
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn vfio_attach_closes_the_device_before_unbinding_vfio_pci_and_rebinds_the_driver() {
    let w = world(&[gpu()]);
    let t = held_vfio(&w);

    let report = w.taker.attach(t, &mut |_| {}).expect("attach");

    // The fake kernel refuses to unbind vfio-pci from an open device (test above): the
    // unbind succeeded, so the device was closed first.
    assert!(
        calls(&w).contains(&SysfsCall::Unbind {
            bdf: bdf(GPU),
            driver: "vfio-pci".into()
        }),
        "{:?}",
        calls(&w)
    );
    let v = w.vfio.calls();
    let close = v
        .iter()
        .position(|c| *c == VfioCall::CloseDevice { bdf: bdf(GPU) })
        .expect("device closed");
    let reset = v
        .iter()
        .position(|c| *c == VfioCall::Reset { bdf: bdf(GPU) })
        .expect("reset through VFIO");
    assert!(reset < close, "reset while open, then close: {v:?}");
    assert_eq!(report.reset.as_deref(), Some("vfio"));
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert!(w.vfio.open_devices().is_empty());
    assert!(w.taker.journal.load().0.is_empty());
}

#[test]
fn resize_held_in_vfio_mode_lets_vfio_pci_go_and_maps_the_new_size() {
    let w = world(&[gpu()]);
    let mut t = held_vfio(&w);

    let r = w
        .taker
        .resize_held(&mut t, Some(2), BarSize::Bytes(1 << 30), &mut |_| {})
        .expect("resize");

    assert_eq!((r.bar, r.before, r.after), (2, 256 << 20, 1 << 30));
    assert_eq!(t.mode(), Mode::Vfio);
    assert_eq!(driver(&w, GPU).as_deref(), Some("vfio-pci"));
    let bar2 = t.hold.bars().iter().find(|b| b.index == 2).expect("BAR2");
    assert_eq!(bar2.size, 1 << 30);
    assert_eq!(opens(&w), 2, "closed for the resize, opened after");
    assert_eq!(w.vfio.open_devices(), [bdf(GPU)]);
    let c = calls(&w);
    let unbind = c
        .iter()
        .position(|x| matches!(x, SysfsCall::Unbind { driver, .. } if driver == "vfio-pci"))
        .expect("vfio-pci unbound");
    let resize = c
        .iter()
        .position(|x| matches!(x, SysfsCall::Resize { .. }))
        .expect("resized");
    assert!(unbind < resize, "{c:?}");
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn reset_held_in_vfio_mode_uses_vfio_device_reset_and_reports_its_failure() {
    let w = world(&[gpu()]);
    let t = held_vfio(&w);

    let r = w
        .taker
        .reset_held(&t, ResetMethod::Auto, &mut |_| {})
        .expect("reset");
    assert_eq!(r.method, "vfio");
    w.vfio.fail(VfioStep::Reset, libc::EIO);
    let e = w
        .taker
        .reset_held(&t, ResetMethod::Auto, &mut |_| {})
        .expect_err("scripted EIO");

    assert!(
        matches!(&e, TakeError::Reset(reset::ResetError::Failed { method, .. }) if method == "vfio"),
        "{e}"
    );
    let (records, _) = w.taker.journal.load();
    assert_eq!(
        records[0].phase,
        Phase::Held,
        "held again after the failure"
    );
    w.vfio.script.lock().expect("script").fail.clear();
    w.taker.attach(t, &mut |_| {}).expect("attach");
}

#[test]
fn after_a_crash_a_vfio_mode_device_is_readopted_with_its_vfio_objects_and_bars() {
    let w = world(&[gpu()]);
    let t = held_vfio(&w);
    // rigd dies: its flock and fds go with it; vfio-pci stays bound.
    drop(t);
    assert!(w.vfio.open_devices().is_empty());

    let (held, outcomes) = recover(&w.taker);

    assert!(
        matches!(
            outcomes.as_slice(),
            [Recovered::Readopted {
                bdf: b,
                mode: Mode::Vfio
            }] if *b == bdf(GPU)
        ),
        "{outcomes:?}"
    );
    let t = held.into_iter().next().expect("held again");
    assert_eq!(t.mode(), Mode::Vfio);
    assert!(t.hold.vfio().is_some());
    let bars: Vec<u8> = t.hold.bars().iter().map(|b| b.index).collect();
    assert_eq!(bars, [0, 2]);
    assert_eq!(opens(&w), 2);
    assert_eq!(w.vfio.open_devices(), [bdf(GPU)]);
    w.taker.attach(t, &mut |_| {}).expect("attach");
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
}

#[test]
fn after_a_crash_a_vfio_device_that_cannot_be_reopened_is_rolled_back() {
    let w = world(&[gpu()]);
    drop(held_vfio(&w));
    w.vfio.fail(VfioStep::OpenDevice, libc::EBUSY);

    let (held, outcomes) = recover(&w.taker);

    assert!(held.is_empty());
    assert!(
        matches!(
            outcomes.as_slice(),
            [Recovered::RolledBack {
                bdf: b,
                from: Phase::Held,
                report,
                readopt: Some(TakeError::Vfio { .. }),
            }] if *b == bdf(GPU) && report.driver.as_deref() == Some("nvidia")
        ),
        "the reason it was not re-adopted is kept: {outcomes:?}"
    );
    assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"));
    assert!(w.taker.journal.load().0.is_empty());
}
