//! What the DMA end-to-end tests share: rigd's service on a temp socket, pools on
//! shmem (anyone) or hugepages (root), and the root-and-hugepages gate. Used by this
//! crate's DMA tests, and included by path by rigctl's tests/dma.rs and rig-tests'
//! tests/dma_host.rs (whose client process, rig-dma-probe, is a rig-tests binary).

#![allow(dead_code, reason = "each test file uses part of this")]

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use rig_client::session::{LeaseId, Session};
use rigd::{
    channels::{ChannelHost, Limits, Served},
    config::Config,
    dma::{
        Backing, PoolMode, PoolSpec,
        hugepages::{Hugepages, Reservation},
    },
    nvrm::{FakeRm, Gpu},
    rig::Rig,
    testing::Serving,
};

/// rigd serving on a socket in a temp dir.
pub struct Server {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub rig: Arc<Rig>,
    serving: Serving,
}

impl Server {
    /// Starts the service with the given `[dma]` quotas (bytes per uid, per device).
    pub async fn start(quota: u64) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::default();
        // The real /sys: the DMA pools read the hugepage counters there. Nothing in
        // these tests lists or touches PCI devices.
        config.paths.state_dir = dir.path().join("state");
        config.paths.pci_ids = dir.path().join("pci.ids");
        config.dma.quota.per_uid_bytes = quota;
        config.dma.quota.per_device_bytes = quota;
        let socket = dir.path().join("rigd.sock");
        let (rig, _no_pci_ids) = Rig::new(&config);
        let rig = Arc::new(rig);
        let serving = Serving::start(Arc::clone(&rig), &socket, None);
        Self {
            dir,
            socket,
            rig,
            serving,
        }
    }

    /// Adds a pool of `blocks` on shmem (no hugepages needed) and waits until full.
    pub fn shmem_pool(&self, name: &str, mode: PoolMode, blocks: u32) {
        self.pool(name, mode, blocks, Backing::Shmem);
    }

    /// Adds a pool and waits until it is pinned.
    pub fn pool(&self, name: &str, mode: PoolMode, blocks: u32, backing: Backing) {
        let spec = PoolSpec {
            mode,
            blocks,
            backing,
            pin_threads: 2,
        };
        let pool = self.rig.dma().create(name, spec).expect("create pool");
        assert!(pool.wait_pinned(Duration::from_secs(20)), "pool pinned");
    }

    /// Serves `rm`'s fake GPU at `bdf` with `limits`, its pool `blocks` of shmem, and
    /// waits until the pool is pinned: what channels, GPU memory and the runtime are
    /// tested against.
    pub fn serve_fake_gpu(
        &self,
        bdf: &str,
        rm: FakeRm,
        limits: Limits,
        blocks: u32,
    ) -> Arc<Served<FakeRm>> {
        let gpu = Arc::new(Served::new(
            Gpu::open(rm, Some(bdf)).expect("fake GPU"),
            limits,
        ));
        let pool = self
            .rig
            .serve_gpu_with(
                Arc::clone(&gpu) as Arc<dyn ChannelHost>,
                PoolSpec {
                    mode: PoolMode::Host,
                    blocks,
                    backing: Backing::Shmem,
                    pin_threads: 2,
                },
            )
            .expect("serve the fake GPU");
        assert!(pool.wait_pinned(Duration::from_secs(30)), "pool pinned");
        gpu
    }

    /// What a GPU would do: writes `bytes` at device address `va` of `s`'s memory in
    /// pool `pool`, through rigd's own view of the lease.
    pub fn gpu_writes(&self, s: &Session, pool: &str, va: u64, bytes: &[u8]) {
        let (lease, off) = lease_of(s, va);
        let pool = self.rig.dma().pool(pool).expect("pool");
        pool.write(rigd::dma::LeaseId(lease.0), off, bytes)
            .expect("write through rigd's view");
    }

    /// Stops the server; it must stop even with DMA sessions open.
    pub async fn stop(self) {
        self.serving
            .stop(Duration::from_secs(5))
            .await
            .expect("server stops within 5 s")
            .expect("server task");
        assert!(!self.socket.exists(), "socket removed at shutdown");
        let side = PathBuf::from(format!("{}.fd", self.socket.display()));
        assert!(!side.exists(), "side socket removed at shutdown");
    }
}

/// Polls `f` every 200 µs until it holds or `limit` passes; returns the time it took.
/// The lease of `s` holding device address `va`, and the offset there.
pub fn lease_of(s: &Session, va: u64) -> (LeaseId, u64) {
    s.leases()
        .into_iter()
        .find_map(|l| {
            let d = l.device_address?.get();
            (d..d + l.bytes).contains(&va).then(|| (l.id, va - d))
        })
        .expect("the address is in one of the session's leases")
}

pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

static HUGEPAGES: Mutex<()> = Mutex::new(());

/// Root, hugetlb and `n` more 2 MiB pages for the duration of a test (serialised
/// within this test binary). Skips (None, with the reason printed) when they cannot
/// be had — unless `CI` is set, where that is a failure.
pub struct HugeTest {
    _reservation: Reservation,
    _serial: MutexGuard<'static, ()>,
}

pub fn hugepages(n: u64) -> Option<HugeTest> {
    let serial = HUGEPAGES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let why = if !nix::unistd::geteuid().is_root() {
        Some("not root: reserving hugepages and reading physical addresses need root".to_owned())
    } else if !Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB").exists() {
        Some("this kernel has no 2 MiB hugetlb pages".to_owned())
    } else {
        match Reservation::add(Hugepages::new(Path::new("/sys")), n) {
            Ok(r) => {
                return Some(HugeTest {
                    _reservation: r,
                    _serial: serial,
                });
            }
            Err(e) => Some(format!("could not reserve {n} hugepages: {e}")),
        }
    };
    let why = why.expect("set on every path that gets here");
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run the hugepage tests: {why}"
    );
    eprintln!("skipped: {why}");
    None
}

/// `HugePages_Free` from /proc/meminfo.
pub fn meminfo_hugepages_free() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    text.lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("HugePages_Free in /proc/meminfo")
}
