//! A reload (what SIGHUP does: `Rig::reload`, daemon/tests/reload.rs drives the signal)
//! under a live client: its DMA session and lease survive, and the new quota applies to
//! its next request; a refused config changes nothing.

use std::{sync::Arc, time::Duration};

use rig_client::{
    Client,
    session::{Session, SessionErrorKind},
};
use rigd::{
    config::Config,
    dma::{Backing, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{FakeSysfs, Serving},
};

const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_a_reload_and_the_new_quota_applies_to_its_next_lease() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeSysfs::new(&dir.path().join("sys")).expect("fake sysfs");
    let groups = dir.path().join("group");
    std::fs::write(&groups, "root:x:0:\nrigadm:x:950:\n").expect("group file");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    config.paths.group_file = Some(groups);
    config.audit.journal_socket = dir.path().join("no-journal");
    config.dma.quota.per_uid_bytes = 8 * MIB;
    let socket = dir.path().join("rigd.sock");
    let kernel = FakeKernel::new(fake.root(), &[]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel));
    let rig = Arc::new(rig);
    let pool = rig
        .dma()
        .create(
            "host",
            PoolSpec {
                mode: PoolMode::Host,
                blocks: 4,
                backing: Backing::Shmem,
                pin_threads: 1,
            },
        )
        .expect("pool");
    assert!(pool.wait_pinned(Duration::from_secs(20)), "pool pinned");
    let serving = Serving::start(Arc::clone(&rig), &socket, None);

    let session = Session::open(&socket, "host").await.expect("session");
    let first = session.lease(2 * MIB).await.expect("within 8 MiB");

    // A config whose admin group does not exist is refused whole: the quota stays.
    let mut bad = config.clone();
    bad.dma.quota.per_uid_bytes = 2 * MIB;
    bad.roles.admins = vec!["no-such-group".into()];
    let e = rig.reload(&bad).expect_err("unknown group");
    assert!(
        rigd::service::status::error_line(&e).contains("`no-such-group`"),
        "{e}"
    );
    let second = session.lease(2 * MIB).await.expect("the old quota stays");
    session.release(second.id).await.expect("release");

    // The same quota with groups that resolve: in force for the next lease.
    let mut good = config.clone();
    good.dma.quota.per_uid_bytes = 2 * MIB;
    good.roles.admins = vec!["rigadm".into()];
    let done = rig.reload(&good).expect("reloaded");
    assert!(done.need_restart.is_empty(), "{:?}", done.need_restart);
    let e = session
        .lease(2 * MIB)
        .await
        .expect_err("over the new quota");
    assert_eq!(e.kind(), Some(SessionErrorKind::Quota), "{e}");
    // The session and its first lease are still there.
    let status = Client::connect(&socket)
        .await
        .expect("connect")
        .dma_status()
        .await
        .expect("status");
    assert_eq!(status.quota_per_uid_bytes, 2 * MIB);
    let mine: Vec<_> = status.clients.iter().filter(|c| c.claimed).collect();
    assert_eq!(mine.len(), 1, "{:?}", status.clients);
    assert_eq!(mine[0].bytes, 2 * MIB);
    session
        .release(first.id)
        .await
        .expect("the lease from before the reload");

    // A section that needs a restart is named; the rest still applies.
    let mut later = good.clone();
    later.dma.pool_bytes *= 2;
    later.dma.quota.per_uid_bytes = 4 * MIB;
    let done = rig.reload(&later).expect("reloaded");
    assert_eq!(done.need_restart, ["dma (but quota)"]);
    session
        .lease(4 * MIB)
        .await
        .expect("within the newest quota");

    drop(session);
    let _ = serving.stop(Duration::from_secs(10)).await;
}
