//! Whole-device leases end to end through the client library, against rigd's service
//! on a temp socket with a fake kernel and fake VFIO: the descriptors and regions a
//! holder gets, its BAR mapped through them, refusals of everyone else naming the
//! holder, `rigctl status` showing it, give-back, and reclaim when the session goes.

use std::{sync::Arc, time::Duration};

use rig_client::{
    Client,
    lease::{DeviceLease, LeaseError, LeaseErrorKind, LeaseMode, Region},
    session::{Session, SessionErrorKind},
};
use rigd::{
    config::{Config, LeaseRule},
    dma::{Backing, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    take::{DetachOptions, Mode},
    testing::{FakeDevice, FakeSysfs, Serving},
    vfio::FakeVfio,
};

const DEV: &str = "0000:01:00.0";

struct Server {
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    rig: Arc<Rig>,
    serving: Serving,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeSysfs::new(&dir.path().join("sys")).expect("fake sysfs");
        fake.add(
            &FakeDevice::new(DEV, 0x1234, 0x11e8, 0x00ff00)
                .with_bar64(0, 0xfe00_0000, 1 << 20, false)
                .in_group(9)
                .with_attr("reset_method", "bus"),
        )
        .expect("edu");
        let mut config = Config::default();
        config.paths.sysfs = fake.root().to_owned();
        config.paths.pci_ids = dir.path().join("pci.ids");
        config.paths.state_dir = dir.path().join("state");
        config.paths.proc = dir.path().join("proc");
        config.paths.dev = dir.path().join("dev");
        config.lease.allow = vec![LeaseRule {
            devices: vec![DEV.into()],
            uids: vec![nix::unistd::getuid().as_raw()],
            groups: Vec::new(),
        }];
        let kernel = FakeKernel::new(fake.root(), &["vfio-pci"]);
        let vfio = FakeVfio::new(&kernel);
        let (rig, _) = Rig::with_kernel(&config, Arc::new(kernel), Arc::new(vfio));
        let rig = Arc::new(rig);
        let opts = DetachOptions {
            mode: Mode::Vfio,
            ..DetachOptions::default()
        };
        rig.detach(DEV, opts, &mut |_| {}).expect("detach");
        let spec = PoolSpec {
            mode: PoolMode::Host,
            blocks: 4,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig.dma().create(DEV, spec).expect("pool");
        assert!(pool.wait_pinned(Duration::from_secs(10)));
        let socket = dir.path().join("rigd.sock");
        let serving = Serving::start(Arc::clone(&rig), &socket, None);
        Self {
            _dir: dir,
            socket,
            rig,
            serving,
        }
    }

    async fn stop(self) {
        self.serving
            .stop(Duration::from_secs(5))
            .await
            .expect("server stops")
            .expect("server task");
    }

    /// Waits up to 2 s for the device to have no lease holder.
    async fn until_free(&self) -> bool {
        let bdf = DEV.parse().expect("address");
        for _ in 0..200 {
            if self.rig.lease_holder(bdf).is_none() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

#[tokio::test]
async fn a_holder_maps_the_bar_through_its_fd_others_are_refused_and_status_names_it() {
    let server = Server::start().await;
    let holder = Session::open(&server.socket, DEV).await.expect("session");

    let lease = DeviceLease::open(&holder, DEV).await.expect("lease");

    assert_eq!(lease.mode(), LeaseMode::Vfio);
    assert_eq!(lease.device(), DEV);
    let bar0 = lease.region(0).expect("BAR0");
    assert!(bar0.mappable());
    assert_eq!(bar0.size, 1 << 20);
    assert!(lease.region(Region::CONFIG).is_some());
    let bar = lease.map_bar(0).expect("map BAR0 through the lent fd");
    bar.write_u64(0x80, 0x1122_3344_5566_7788).expect("write");
    assert_eq!(bar.read_u64(0x80).expect("read"), 0x1122_3344_5566_7788);
    lease.set_bus_master(true).expect("config through the fd");
    // Memory on the session is the holder's to use.
    let buf = holder.alloc(4096, 4096).await.expect("holder's memory");

    let other = Session::open(&server.socket, DEV)
        .await
        .expect("second session");
    match DeviceLease::open(&other, DEV).await {
        Err(LeaseError::Refused {
            kind: LeaseErrorKind::Leased,
            message,
        }) => {
            assert!(
                message.contains(&format!("{DEV} is leased whole to uid")),
                "{message}"
            );
        }
        r => panic!("{r:?}"),
    }
    let e = other
        .alloc(4096, 4096)
        .await
        .expect_err("no memory beside a lease");
    assert_eq!(e.kind(), Some(SessionErrorKind::Leased), "{e}");
    let mut client = Client::connect(&server.socket).await.expect("connect");
    let e = client
        .read_bar(DEV, rig_client::RegAddr { bar: 0, offset: 0 }, 32, 1)
        .await
        .expect_err("registers are the holder's");
    assert!(e.to_string().contains("is leased whole"), "{e}");
    let status = client.status().await.expect("status");
    let l = status.devices[0].lease.as_ref().expect("holder shown");
    assert_eq!(
        (l.uid, l.pid, l.session),
        (
            nix::unistd::getuid().as_raw(),
            std::process::id() as i32,
            holder.id()
        )
    );

    drop(bar);
    drop(buf);
    let back = lease.give_back(&holder).await.expect("give back");
    assert_eq!(back.reset.as_deref(), Some("vfio"));
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    assert!(
        client.status().await.expect("status").devices[0]
            .lease
            .is_none()
    );
    // The holder's session still holds memory on the pool, which the next holder's
    // device could reach: a lease waits for it to go.
    match DeviceLease::open(&other, DEV).await {
        Err(LeaseError::Refused {
            kind: LeaseErrorKind::InUse,
            ..
        }) => {}
        r => panic!("{r:?}"),
    }
    drop(holder);
    let mut next = None;
    for _ in 0..200 {
        match DeviceLease::open(&other, DEV).await {
            Ok(l) => {
                next = Some(l);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    assert!(
        next.is_some(),
        "free for the next once the holder's memory went"
    );
    drop(next);
    drop(other);
    assert!(
        server.until_free().await,
        "the second holder's end freed it"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_dropped_session_is_reclaimed_and_bad_requests_get_their_kinds() {
    let server = Server::start().await;
    let s = Session::open(&server.socket, DEV).await.expect("session");
    let kind = |r: Result<_, LeaseError>| match r {
        Err(LeaseError::Refused { kind, .. }) => kind,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        kind(DeviceLease::open(&s, "0000:01:00.8").await.map(|_| ())),
        LeaseErrorKind::BadRequest
    );
    assert_eq!(
        kind(DeviceLease::open(&s, "junk").await.map(|_| ())),
        LeaseErrorKind::BadRequest
    );
    let lease = DeviceLease::open(&s, DEV).await.expect("lease");
    let stranger = Session::open(&server.socket, DEV).await.expect("session");
    assert_eq!(
        kind(DeviceLease::open(&stranger, DEV).await.map(|_| ())),
        LeaseErrorKind::Leased
    );

    drop(lease);
    drop(s);

    assert!(
        server.until_free().await,
        "reclaimed within 2 s of the session's end"
    );
    DeviceLease::open(&stranger, DEV)
        .await
        .expect("available again");
    server.stop().await;
}
