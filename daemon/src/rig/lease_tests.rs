//! Whole-device leases through `Rig`, over the fake kernel and fake VFIO: who may
//! lease, what the lease refuses to everyone else, what its end does and in which
//! order, recovery of a lease a crash interrupted, and typed refusals of bad input.

use std::{path::Path, sync::Arc};

use rig_sys::scm::PeerCred;

use super::{Rig, RigError, ledger::Kind};
use crate::{
    config::{Config, LeaseRule},
    dma::{Backing, DeviceAddr, PoolMode, PoolSpec, SessionId},
    pci::Bdf,
    sys::{mmio::Width, sysfs::FakeKernel},
    take::{self, DetachOptions, Mode, Phase, TakeError},
    testing::{FakeDevice, FakeSysfs},
    vfio::{FakeVfio, IrqIndex, VfioCall, VfioStep},
};

const DEV: &str = "0000:01:00.0";
const ALICE: PeerCred = PeerCred {
    uid: 1000,
    gid: 1000,
    pid: 4242,
};
const BOB: PeerCred = PeerCred {
    uid: 2000,
    gid: 2000,
    pid: 4343,
};

struct World {
    dir: tempfile::TempDir,
    kernel: FakeKernel,
    vfio: FakeVfio,
    rig: Rig,
}

fn bdf() -> Bdf {
    DEV.parse().expect("address")
}

fn config(dir: &Path) -> Config {
    let mut c = Config::default();
    c.paths.sysfs = dir.join("sys");
    c.paths.pci_ids = dir.join("none");
    c.paths.state_dir = dir.join("state");
    c.paths.proc = dir.join("proc");
    c.paths.dev = dir.join("dev");
    c.paths.group_file = Some(dir.join("group"));
    c.take.allow_sysfs_mode = true;
    c.lease.allow = vec![LeaseRule {
        devices: vec![DEV.into()],
        uids: vec![ALICE.uid],
        groups: vec!["rig".into()],
    }];
    c
}

/// edu behind a root port (bus reset): a DMA engine, no driver.
fn world() -> World {
    world_with(|_| {})
}

/// As [`world`], with the config changed by `f`.
fn world_with(f: impl FnOnce(&mut Config)) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeSysfs::new(&dir.path().join("sys")).expect("fake sysfs");
    fake.add(
        &FakeDevice::new(DEV, 0x1234, 0x11e8, 0x00ff00)
            .with_bar64(0, 0xfe00_0000, 1 << 20, false)
            .with_bytes(0x04, &[0x02, 0x00])
            .in_group(9)
            .with_attr("reset_method", "bus"),
    )
    .expect("edu");
    std::fs::write(dir.path().join("group"), "root:x:0:\nrig:x:977:\n").expect("group file");
    let kernel = FakeKernel::new(fake.root(), &["vfio-pci"]);
    let vfio = FakeVfio::new(&kernel);
    let mut c = config(dir.path());
    f(&mut c);
    let (rig, _) = Rig::with_kernel(&c, Arc::new(kernel.clone()), Arc::new(vfio.clone()));
    World {
        dir,
        kernel,
        vfio,
        rig,
    }
}

fn hold(w: &World, mode: Mode) {
    let opts = DetachOptions {
        mode,
        ..DetachOptions::default()
    };
    w.rig.detach(DEV, opts, &mut |_| {}).expect("detach");
    // The configured pool is hugetlb, which tests lack: a shmem pool of its name.
    let spec = PoolSpec {
        mode: PoolMode::Host,
        blocks: 4,
        backing: Backing::Shmem,
        pin_threads: 1,
    };
    let pool = w.rig.dma().create(DEV, spec).expect("pool");
    assert!(pool.wait_pinned(std::time::Duration::from_secs(10)));
}

fn session(w: &World, name: &str, peer: PeerCred) -> SessionId {
    let t = w.rig.dma().open_session(name, peer).expect("session");
    w.rig.dma().claim(t.id, &t.token, peer).expect("claim");
    t.id
}

fn command(w: &World) -> u16 {
    let (c, _) = w.rig.sysfs().read_config(bdf()).expect("config");
    u16::from_le_bytes([c[4], c[5]])
}

fn phase(w: &World) -> Phase {
    take::Journal::new(&w.dir.path().join("state")).load().0[0].phase
}

fn is_leased_by(e: &RigError, uid: u32) -> bool {
    matches!(e, RigError::Leased { uid: u, .. } if *u == uid)
}

#[test]
fn a_permitted_client_gets_the_device_fd_and_its_regions_in_vfio_mode() {
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);

    let lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");

    assert_eq!(lent.mode, Mode::Vfio);
    assert_eq!(lent.fds.len(), 1, "one VFIO device fd");
    let regions: Vec<(u32, u64)> = lent.regions.iter().map(|r| (r.index, r.size)).collect();
    assert_eq!(regions, [(0, 1 << 20), (7, 4096)], "BAR0 and config");
    assert_eq!(phase(&w), Phase::Leased);
    let holder = w.rig.lease_holder(bdf()).expect("holder");
    assert_eq!((holder.uid, holder.pid, holder.session), (1000, 4242, s));
    let (views, _) = w.rig.status();
    assert_eq!(views[0].lease, Some(holder), "status shows the holder");
    assert_eq!(w.vfio.open_devices(), [bdf()], "rigd keeps its own fd");
}

#[test]
fn while_leased_everyone_else_is_refused_with_the_holder_named() {
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let _lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    let other = session(&w, DEV, ALICE);

    let refusals = [
        w.rig.lease_device(other, ALICE, DEV).map(|_| ()),
        w.rig
            .reset(DEV, take::ResetMethod::Auto, &mut |_| {})
            .map(|_| ()),
        w.rig.attach(DEV, &mut |_| {}).map(|_| ()),
        w.rig.read_bar(DEV, 0, 0, Width::W32, 1).map(|_| ()),
        w.rig.write_bar(DEV, 0, 0x80, Width::W64, 0).map(|_| ()),
        w.rig.set_bus_master(DEV, false).map(|_| ()),
        w.rig
            .resize(DEV, 0, take::BarSize::Max, &mut |_| {})
            .map(|_| ()),
        w.rig.check_memory_lease(other),
    ];

    for r in refusals {
        let e = r.expect_err("refused");
        assert!(is_leased_by(&e, ALICE.uid), "{e}");
        assert!(
            e.to_string().starts_with(&format!(
                "{DEV} is leased whole to uid 1000 (pid 4242, session {})",
                s.0
            )),
            "{e}"
        );
    }
    w.rig
        .check_memory_lease(s)
        .expect("the holder leases memory");
    assert_eq!(phase(&w), Phase::Leased, "nothing ran");
}

#[test]
fn the_holders_end_turns_bus_mastering_off_first_resets_and_frees_the_device() {
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let _lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    // What the holder did with its fd: DMA on, an MSI vector.
    w.rig.taker.set_bus_master(bdf(), true).expect("master");
    let efd = crate::vfio::EventFd::new(libc::EFD_NONBLOCK).expect("eventfd");
    let dev_calls = w.vfio.calls().len();
    let sys_calls = w.kernel.calls.lock().expect("calls").len();
    {
        let slot = super::lock(&w.rig.devices)
            .get(&bdf())
            .cloned()
            .expect("slot");
        let g = super::lock(&slot);
        let v = g.as_ref().and_then(|t| t.hold.vfio()).expect("vfio");
        v.device.enable_irq(IrqIndex::Msi, &[&efd]).expect("msi");
    }

    w.rig.end_session(s);

    assert_eq!(command(&w) & 0x4, 0, "bus mastering off");
    let sys = w.kernel.calls.lock().expect("calls")[sys_calls..].to_vec();
    assert!(
        matches!(sys.first(), Some(crate::sys::sysfs::SysfsCall::WriteConfig { offset: 4, bytes, .. }) if bytes[0] & 0x4 == 0),
        "the first write clears bus mastering: {sys:?}"
    );
    let calls = w.vfio.calls()[dev_calls..].to_vec();
    let at = |f: &dyn Fn(&VfioCall) -> bool| calls.iter().position(f).expect("call");
    let msi = at(&|c| {
        matches!(
            c,
            VfioCall::DisableIrq {
                index: IrqIndex::Msi,
                ..
            }
        )
    });
    let reset = at(&|c| matches!(c, VfioCall::Reset { .. }));
    let reopen = at(&|c| matches!(c, VfioCall::OpenDevice { .. }));
    assert!(msi < reset && reset < reopen, "{calls:?}");
    assert_eq!(w.vfio.irq_vectors(bdf(), IrqIndex::Msi), 0);
    assert_eq!(w.rig.lease_holder(bdf()), None);
    assert_eq!(phase(&w), Phase::Held);
    // Available again: another permitted session leases it.
    let next = session(&w, DEV, ALICE);
    w.rig.lease_device(next, ALICE, DEV).expect("second lease");
}

#[test]
fn a_sessions_end_takes_its_device_back_before_its_memory_leaves_the_iommu() {
    let w = world();
    let opts = DetachOptions {
        mode: Mode::Vfio,
        ..DetachOptions::default()
    };
    w.rig.detach(DEV, opts, &mut |_| {}).expect("detach");
    // The device's own pool, mapping through its VFIO container (on shmem blocks: the
    // configured hugetlb pool is not there in tests).
    let iommu = {
        let slot = super::lock(&w.rig.devices)
            .get(&bdf())
            .cloned()
            .expect("slot");
        let g = super::lock(&slot);
        let v = g.as_ref().and_then(|t| t.hold.vfio()).expect("vfio");
        Arc::new(v.iommu().expect("the container as an IOMMU"))
    };
    let spec = PoolSpec {
        mode: PoolMode::Vfio(iommu),
        blocks: 2,
        backing: Backing::Shmem,
        pin_threads: 1,
    };
    let pool = w.rig.dma().create(DEV, spec).expect("pool");
    assert!(pool.wait_pinned(std::time::Duration::from_secs(10)));
    let s = session(&w, DEV, ALICE);
    let memory = w.rig.dma().lease(s, 2 << 20).expect("memory");
    let _lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    let mark = w.vfio.calls().len();

    let ended = w.rig.end_session(s);

    let calls = w.vfio.calls()[mark..].to_vec();
    let at = |f: &dyn Fn(&VfioCall) -> bool| calls.iter().position(f);
    let reset = at(&|c| matches!(c, VfioCall::Reset { .. })).expect("reset");
    let unmap = at(&|c| {
        matches!(c, VfioCall::UnmapDma { iova, .. } if memory.addr == Some(DeviceAddr::Iova(*iova)))
    })
    .expect("the lease unmapped");
    assert!(
        reset < unmap,
        "the device stops before its memory leaves the IOMMU: {calls:?}"
    );
    assert_eq!(ended.steps, [(Kind::Device, 1), (Kind::Memory, 1)]);
}

#[test]
fn the_holder_gives_the_device_back_and_a_stranger_cannot() {
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let _lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    let stranger = session(&w, DEV, ALICE);

    let e = w
        .rig
        .give_back_device(stranger, DEV)
        .expect_err("not its lease");
    assert!(matches!(e, RigError::NotLeased { .. }), "{e}");
    let report = w.rig.give_back_device(s, DEV).expect("give back");

    assert_eq!(report.reset.as_deref(), Some("vfio"));
    assert!(report.reopened);
    assert_eq!(w.rig.lease_holder(bdf()), None);
    w.rig
        .read_bar(DEV, 0, 0, Width::W32, 1)
        .expect("registers are rigd's again");
}

#[test]
fn a_sysfs_mode_lease_sends_one_resource_file_per_bar_and_masters_the_bus_for_it() {
    let w = world();
    hold(&w, Mode::Sysfs);
    w.rig.set_bus_master(DEV, false).expect("off");
    let s = session(&w, DEV, ALICE);

    let lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");

    assert_eq!(lent.mode, Mode::Sysfs);
    assert_eq!(lent.fds.len(), 1);
    assert_eq!(
        (
            lent.regions[0].index,
            lent.regions[0].offset,
            lent.regions[0].fd
        ),
        (0, 0, 0)
    );
    assert_eq!(command(&w) & 0x4, 0x4);
    w.rig.end_session(s);
    assert_eq!(command(&w) & 0x4, 0);
}

#[test]
fn bad_lease_requests_get_typed_errors() {
    let w = world();
    // Not held: a session on a pool of the device's name, the device not taken.
    let spec = PoolSpec {
        mode: PoolMode::Host,
        blocks: 1,
        backing: Backing::Shmem,
        pin_threads: 1,
    };
    w.rig.dma().create(DEV, spec).expect("pool");
    let s = session(&w, DEV, ALICE);
    let e = w.rig.lease_device(s, ALICE, DEV).expect_err("not held");
    assert!(
        matches!(e, RigError::Take(TakeError::NotHeld { .. })),
        "{e}"
    );
    w.rig.dma().remove(DEV).expect("remove");

    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let e = w
        .rig
        .lease_device(s, ALICE, "0000:01:00.9")
        .expect_err("bad address");
    assert!(matches!(e, RigError::BadAddress(_)), "{e}");
    let e = w
        .rig
        .lease_device(s, ALICE, "0000:02:00.0")
        .expect_err("another device");
    assert!(matches!(e, RigError::BadRequest(_)), "{e}");
    let b = session(&w, DEV, BOB);
    let e = w
        .rig
        .lease_device(b, BOB, DEV)
        .expect_err("no rule names bob");
    assert!(
        matches!(e, RigError::LeaseNotAllowed { uid: 2000, .. }),
        "{e}"
    );
    // Bob holds memory on the pool: the holder's device could reach it.
    let _grant = w.rig.dma().lease(b, 2 << 20).expect("bob's memory");
    let e = w
        .rig
        .lease_device(s, ALICE, DEV)
        .expect_err("others' memory");
    assert!(matches!(e, RigError::LeaseInUse { .. }), "{e}");
    assert_eq!(w.rig.lease_holder(bdf()), None, "a refusal leaves no lease");
    assert_eq!(phase(&w), Phase::Held);
}

#[test]
fn a_member_of_a_named_group_and_root_may_lease() {
    let w = world();
    hold(&w, Mode::Vfio);
    let carol = PeerCred {
        uid: 3000,
        gid: 3000,
        pid: 77,
    };
    let status = w.dir.path().join("proc/77");
    std::fs::create_dir_all(&status).expect("proc");
    std::fs::write(status.join("status"), "Groups:\t100 977\n").expect("status");
    let s = session(&w, DEV, carol);
    w.rig.lease_device(s, carol, DEV).expect("group rig");
    w.rig.end_session(s);
    let root = PeerCred {
        uid: 0,
        gid: 0,
        pid: 1,
    };
    let r = session(&w, DEV, root);
    w.rig.lease_device(r, root, DEV).expect("root");
}

#[test]
fn a_reclaim_that_fails_keeps_the_device_out_of_use_until_an_admin_gives_it_back() {
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let _lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    w.vfio.fail(VfioStep::OpenDevice, libc::EIO);

    w.rig.end_session(s);

    let e = w
        .rig
        .reset(DEV, take::ResetMethod::Auto, &mut |_| {})
        .expect_err("still out of use");
    assert!(e.to_string().contains("and taking it back failed"), "{e}");
    assert_eq!(command(&w) & 0x4, 0, "bus mastering off all the same");
    w.vfio.script.lock().expect("script").fail.clear();
    w.rig
        .attach(DEV, &mut |_| {})
        .expect("an admin gives it back");
    assert_eq!(w.rig.lease_holder(bdf()), None);
}

#[test]
fn after_a_crash_while_leased_the_next_start_reclaims_and_holds_it() {
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    w.rig
        .taker
        .set_bus_master(bdf(), true)
        .expect("the holder's DMA");
    // rigd dies, and so does its holder (its connection was rigd's).
    drop(lent);
    let World {
        dir,
        kernel,
        vfio,
        rig,
    } = w;
    drop(rig);
    assert_eq!(
        take::Journal::new(&dir.path().join("state")).load().0[0].phase,
        Phase::Leased
    );

    let (rig, _) = Rig::with_kernel(
        &config(dir.path()),
        Arc::new(kernel.clone()),
        Arc::new(vfio.clone()),
    );
    let outcomes = rig.recover();

    assert!(
        matches!(&outcomes[..], [take::Recovered::Reclaimed { from: Phase::Leased, report, .. }] if report.reset.as_deref() == Some("vfio")),
        "{outcomes:?}"
    );
    let w = World {
        dir,
        kernel,
        vfio,
        rig,
    };
    assert_eq!(command(&w) & 0x4, 0);
    assert_eq!(phase(&w), Phase::Held);
    assert_eq!(w.rig.lease_holder(bdf()), None);
    let (views, _) = w.rig.status();
    assert_eq!(views[0].state, "held");
}

#[test]
fn a_holder_that_outlives_rigd_is_named_refuses_detach_and_attach_and_its_exit_settles_the_device()
{
    let w = world();
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    // The lessee hands its fd to a process that outlives rigd (a real one, so that
    // the scan finds it in /proc and its exit is seen through a pidfd).
    let fd = lent.fds.into_iter().next().expect("the device fd");
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .stdin(std::fs::File::from(fd))
        .spawn()
        .expect("sleep");
    let pid = i32::try_from(holder.id()).expect("pid");
    let World {
        dir,
        kernel,
        vfio,
        rig,
    } = w;
    drop(rig);
    vfio.fail(VfioStep::OpenGroup, libc::EBUSY);
    let mut c = config(dir.path());
    c.paths.proc = "/proc".into();
    let (rig, _) = Rig::with_kernel(&c, Arc::new(kernel.clone()), Arc::new(vfio.clone()));
    let outcomes = rig.recover();
    let rig = Arc::new(rig);
    rig.watch_outlived();
    let master = || {
        let (c, _) = rig.sysfs().read_config(bdf()).expect("config");
        c[4] & 0x4 != 0
    };
    let wait_until = |f: &dyn Fn() -> bool| {
        let t = std::time::Instant::now();
        while !f() {
            if t.elapsed() > std::time::Duration::from_secs(10) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        true
    };

    assert!(
        matches!(&outcomes[..], [take::Recovered::Waiting { from: Phase::Leased, holders, .. }] if holders.iter().any(|h| h.pid == pid)),
        "{outcomes:?}"
    );
    let refused = |e: RigError| match e {
        RigError::Take(TakeError::HeldAcrossRestart { bdf: b, holders }) => {
            b == bdf() && holders.iter().any(|h| h.pid == pid)
        }
        _ => false,
    };
    let detach = rig.detach(DEV, DetachOptions::default(), &mut |_| {});
    assert!(detach.is_err_and(refused), "a detach names the holder");
    let attach = rig.attach(DEV, &mut |_| {});
    assert!(attach.is_err_and(refused), "a give-back names the holder");
    let line = crate::service::status::outlived_line(bdf(), &rig.outlived()[&bdf()]);
    assert!(
        line.starts_with(&format!("{DEV} still held by pid {pid} (sleep, uid ")),
        "{line}"
    );
    assert!(
        line.contains("from its lease before rigd restarted"),
        "{line}"
    );
    // The holder turns bus mastering on through its fd: the watch turns it off again.
    rig.taker
        .set_bus_master(bdf(), true)
        .expect("the holder's DMA");
    assert!(
        wait_until(&|| !master()),
        "bus mastering cleared again within the watch's tick"
    );

    vfio.script.lock().expect("script").fail.clear();
    holder.kill().expect("kill");
    holder.wait().expect("reap");
    let settled = wait_until(&|| {
        matches!(
            rig.outlived().get(&bdf()),
            Some(super::Outlived::Settled { .. })
        )
    });

    assert!(settled, "{:?}", rig.outlived());
    let (views, _) = rig.status();
    assert_eq!(views.len(), 1, "held again");
    assert_eq!(views[0].state, "held");
    let line = crate::service::status::outlived_line(bdf(), &rig.outlived()[&bdf()]);
    assert!(
        line.contains(&format!("was held by pid {pid} (sleep")),
        "{line}"
    );
    assert!(
        line.contains("taken back from its lease and held"),
        "{line}"
    );
    rig.attach(DEV, &mut |_| {}).expect("given back");
    drop(kernel);
    drop(dir);
}

#[test]
fn a_child_that_kept_only_a_mapping_stops_the_lease_end_and_the_give_back_is_refused_until_it_exits()
 {
    // The real /proc: the child is a real process.
    let w = world_with(|c| c.paths.proc = "/proc".into());
    hold(&w, Mode::Vfio);
    let s = session(&w, DEV, ALICE);
    let lent = w.rig.lease_device(s, ALICE, DEV).expect("lease");
    let bar0 = lent
        .regions
        .iter()
        .find(|r| r.index == 0)
        .copied()
        .expect("BAR0");
    let fd = lent.fds.into_iter().next().expect("the device fd");
    // A child maps BAR0 of the lent file and closes every descriptor (keep-map).
    let code = format!(
        "import mmap,os,time\nm=mmap.mmap(0,{},offset={})\nos.closerange(0,1024)\nwhile True: time.sleep(60)\n",
        bar0.size, bar0.offset
    );
    let Ok(mut child) = std::process::Command::new("python3")
        .args(["-c", &code])
        .stdin(std::fs::File::from(fd))
        .spawn()
    else {
        eprintln!("no python3: skipped");
        return;
    };
    let pid = i32::try_from(child.id()).expect("pid");
    let mapped = || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.contains("rig-fake-vfio-device"))
            && std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| d.count() == 0)
    };
    let t = std::time::Instant::now();
    while !mapped() && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(mapped(), "the child maps BAR0 and holds no descriptor");

    let end = w.rig.give_back_device(s, DEV);
    let attach = w.rig.attach(DEV, &mut |_| {});

    let kept = |e: &RigError| match e {
        RigError::Reclaim { source, .. } => {
            matches!(source.as_ref(), RigError::Take(TakeError::LeaseKept { holders, .. }) if holders.iter().any(|h| h.pid == pid))
        }
        RigError::Take(TakeError::LeaseKept { holders, .. }) => {
            holders.iter().any(|h| h.pid == pid)
        }
        _ => false,
    };
    assert!(
        end.as_ref().is_err_and(kept),
        "the lease end names the child: {end:?}"
    );
    assert!(
        attach.as_ref().is_err_and(kept),
        "the give-back is refused: {attach:?}"
    );
    assert_eq!(
        w.rig.sysfs().link_name(bdf(), "driver").as_deref(),
        Some("vfio-pci"),
        "no unbind was started"
    );
    child.kill().expect("kill");
    child.wait().expect("reap");
    w.rig
        .attach(DEV, &mut |_| {})
        .expect("given back once it exited");
    assert_eq!(w.rig.sysfs().link_name(bdf(), "driver"), None);
}
