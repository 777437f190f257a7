//! Campaign: clients killed by the thousand (docs/RELIABILITY.md), over the fake
//! kernel. rigd's service runs in this process (a fake edu leased whole through fake
//! VFIO, and a vfio-mode DMA pool behind a fake IOMMU); the campaign
//! (`rig_tests::kill_clients`) execs this same binary as each client, which connects,
//! opens a DMA session and leases memory or the whole device, and SIGKILLs it after a
//! random delay. After each kill it times how long rigd takes to end the client's
//! session and free what it held (the reclaim time); after the campaign rigd's RSS,
//! open fds, threads, pool use, IOMMU mappings and sessions (read from /proc/self and
//! the status RPCs) must be back to their baseline. The disposable machine's run of the
//! same campaign is rig-kill-clients (scenario clients-killed).
//!
//! `cargo test -p rig-tests --test clients_killed` runs 1,000 cycles (CI);
//! `RIG_KILL_CYCLES=10000 RIG_KILL_SEED=N` runs the full campaign or replays one. The
//! seed is printed first; the verdict last (docs/RELIABILITY.md).
//!
//! A harness-less test: the binary is both the campaign (no arguments needed) and the
//! client it starts (`RIG_KILL_CHILD` set).

use std::{path::PathBuf, sync::Arc, time::Duration};

use rig_tests::kill_clients::{
    self, BLOCK, Delays, Launcher, Limits, Observer, Plan, Process, Rpcs, Usage, Work,
};
use rigd::{
    dma::{FakeIommu, PoolMode},
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{self, FakeDevice, FakeSysfs, Serving},
    vfio::FakeVfio,
};

/// The device leased whole (on its own host-mode pool).
const DEV: &str = "0000:01:00.0";
/// The vfio-mode pool sessions lease DMA memory from.
const DMA_POOL: &str = "0000:02:00.0";
/// The latest a kill lands, against the warm-up clients' median time to holding
/// (about 15 ms for this debug binary to start, connect, open and lease on an idle
/// host; several times that when builds share the cores): past it, so that kills
/// fall in every phase.
const LATEST_KILL_PERCENT: u32 = 150;

/// A number from the environment, if set.
fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number")),
    )
}

fn main() {
    kill_clients::run_if_child();
    // `cargo test -- --list` and filters: this binary has one test, the campaign.
    if std::env::args().any(|a| a == "--list") {
        println!("campaign: test");
        return;
    }
    let cycles = env_number("RIG_KILL_CYCLES").unwrap_or(1000);
    let seed = env_number("RIG_KILL_SEED").unwrap_or_else(|| {
        u64::from(std::process::id()) << 32
            ^ u64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("after the epoch")
                    .subsec_nanos(),
            )
    });
    println!("clients_killed: {cycles} cycles, RIG_KILL_SEED={seed}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(Server::over_fakes());
    let plan = Plan {
        cycles,
        seed,
        works: vec![
            (Work::Dma, DMA_POOL.into(), 2),
            (Work::Lease, DEV.into(), 1),
        ],
        warmup: 20,
        delays: Delays::Calibrated {
            percent: LATEST_KILL_PERCENT,
        },
        poll: Duration::from_micros(100),
        settle: Duration::from_millis(200),
        limits: Limits {
            goal: Duration::from_millis(100),
            judge_goal: true,
            give_up: Duration::from_secs(5),
            rss_slack_kib: 4096,
            thread_slack: 4,
        },
        progress_every: 1000,
    };
    let launcher = Launcher {
        exe: std::env::current_exe().expect("this binary"),
        socket: server.socket.clone(),
        run_as: None,
    };
    let observer = FakeObserver {
        rigd: Process::new(
            i32::try_from(std::process::id()).expect("a pid"),
            Rpcs::connect(&server.socket).expect("connect to the fake rigd"),
        ),
        server: &server,
    };
    let verdict = kill_clients::run(&plan, &launcher, &observer);
    drop(observer);
    rt.block_on(server.serving.stop(Duration::from_secs(5)))
        .expect("server stops")
        .expect("server task");
    println!("{verdict}\n{}", verdict.result_line());
    if !verdict.passed() {
        eprintln!("clients_killed: FAILED (replay with RIG_KILL_SEED={seed})");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------
// rigd over the fake kernel.

/// rigd's service on a socket of this test's, and the fakes under it.
struct Server {
    serving: Serving,
    socket: PathBuf,
    rig: Arc<Rig>,
    iommu: Arc<FakeIommu>,
    kernel: Arc<FakeKernel>,
    vfio: Arc<FakeVfio>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// The fake edu held in vfio mode with its host-mode pool, the vfio-mode pool,
    /// and the service on `rigd.sock`.
    async fn over_fakes() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeSysfs::new(&dir.path().join("sys")).expect("fake sysfs");
        fake.add(&FakeDevice::edu(DEV, 9)).expect("edu");
        let mut config = testing::config_in(dir.path(), &fake);
        config.dma.quota.per_uid_bytes = 64 * BLOCK;
        config.dma.quota.per_device_bytes = 64 * BLOCK;
        config.lease.allow = vec![testing::lease_rule_for_own_uid(DEV)];
        let (rig, kernel, vfio) = testing::fake_rig(&config, &fake, &["vfio-pci"]);
        testing::take_vfio(&rig, DEV);
        testing::pinned_pool(&rig, DEV, PoolMode::Host, 4);
        let iommu = Arc::new(FakeIommu::typical());
        testing::pinned_pool(&rig, DMA_POOL, PoolMode::Vfio(iommu.clone()), 8);
        let socket = dir.path().join("rigd.sock");
        let serving = Serving::start(Arc::clone(&rig), &socket, None);
        Self {
            serving,
            socket,
            rig,
            iommu,
            kernel,
            vfio,
            _dir: dir,
        }
    }

    /// Entries in the fakes' call logs (kept for tests' asserts, never trimmed): they
    /// live in this process and grow its RSS with every lease and reclaim.
    fn fake_log_entries(&self) -> usize {
        self.kernel.calls.lock().expect("fake log").len()
            + self.vfio.calls().len()
            + self.iommu.calls().len()
    }

    /// Whether rigd still holds anything for `pid`: a session, or the device's lease.
    fn holds_for(&self, pid: i32) -> bool {
        let bdf = DEV.parse().expect("address");
        self.rig
            .dma()
            .status(None)
            .clients
            .iter()
            .any(|c| c.pid == pid)
            || self.rig.lease_holder(bdf).is_some_and(|h| h.pid == pid)
    }
}

// ---------------------------------------------------------------------------------
// The campaign's view of this rigd.

/// rigd is this process: /proc/<this pid> and the status RPCs, as in the guest, and
/// beside them the fake IOMMU's mappings (judged) and the fakes' call logs (shown).
/// Whether a pid is still held is asked of the `Rig` directly: a poll every 100 µs
/// would be two RPCs each.
struct FakeObserver<'a> {
    rigd: Process,
    server: &'a Server,
}

impl Observer for FakeObserver<'_> {
    fn holds_for(&self, pid: i32) -> bool {
        self.server.holds_for(pid)
    }

    fn usage(&self) -> Usage {
        let mut u = self.rigd.usage();
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        u.extra
            .push(("iommu_mappings", n(self.server.iommu.mapped().len())));
        u.shown
            .push(("fake_log_entries", n(self.server.fake_log_entries())));
        u
    }
}
