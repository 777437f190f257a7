//! Campaign: clients killed by the thousand (issue 14). rigd's service runs in this
//! process over the fake kernel (a fake edu leased whole through fake VFIO, and a
//! vfio-mode DMA pool behind a fake IOMMU); each cycle execs this same binary as a
//! client process that connects, opens a DMA session and leases memory or the whole
//! device, and SIGKILLs it after a random delay. After each kill it times how long rigd
//! takes to end the client's session and free what it held (the reclaim time); after
//! the campaign rigd's RSS, open fds, threads, pool use, IOMMU mappings and sessions
//! (read from /proc/self and the status RPCs) must be back to their baseline.
//!
//! `cargo test -p rig-client --test clients_killed` runs 1,000 cycles (CI);
//! `RIG_KILL_CYCLES=10000 RIG_KILL_SEED=N` runs the full campaign or replays one. The
//! seed is printed first; the verdict last (docs/RELIABILITY.md).
//!
//! A harness-less test: the binary is both the campaign (no arguments needed) and the
//! client it starts (`RIG_KILL_CHILD` set).

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};
use rig_client::{Client, dma::Session};
use rigd::{
    config::{Config, LeaseRule},
    dma::{Backing, FakeIommu, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    take::{DetachOptions, Mode},
    testing::{FakeDevice, FakeSysfs, Serving},
    vfio::FakeVfio,
};

/// The device leased whole (on its own host-mode pool).
const DEV: &str = "0000:01:00.0";
/// The vfio-mode pool sessions lease DMA memory from.
const DMA_POOL: &str = "0000:02:00.0";
const BLOCK: u64 = 2 << 20;
/// The latest a kill lands: past the slowest client's "holding" (about 15 ms for this
/// debug binary to start, connect, open and lease), so that kills fall in every phase.
const MAX_DELAY_US: u64 = 25_000;
/// Reclaim's goal (issue 14), and how long a reclaim may take before it is a failure.
const GOAL: Duration = Duration::from_millis(100);
const GIVE_UP: Duration = Duration::from_secs(5);

fn main() {
    if std::env::var_os("RIG_KILL_CHILD").is_some() {
        child();
        return;
    }
    // `cargo test -- --list` and filters: this binary has one test, the campaign.
    if std::env::args().any(|a| a == "--list") {
        println!("campaign: test");
        return;
    }
    let cycles = env_u64("RIG_KILL_CYCLES").unwrap_or(1000);
    let seed = env_u64("RIG_KILL_SEED").unwrap_or_else(|| {
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
    let server = rt.block_on(Server::start());
    let verdict = campaign(&rt, &server, cycles, seed);
    rt.block_on(server.stop());
    println!("{verdict}");
    if !verdict.passed() {
        eprintln!("clients_killed: FAILED (replay with RIG_KILL_SEED={seed})");
        std::process::exit(1);
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

/// splitmix64: a seeded generator small enough to state here, so a seed replays the
/// same delays and choices on any machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---------------------------------------------------------------------------------
// The client process.

/// What a client does before it is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// A session on the vfio-mode pool; leases of 1 to 3 blocks, written through.
    Dma,
    /// A session on DEV's pool; the whole device leased, BAR0 mapped and written.
    Lease,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Self::Dma => "dma",
            Self::Lease => "lease",
        }
    }
}

/// The client: connects, does its work, writes one byte to stdout at each phase
/// (c: connected, s: session, l: leased, h: holding) and waits to be killed.
fn child() {
    let socket = PathBuf::from(std::env::var_os("RIG_KILL_SOCKET").expect("socket"));
    let work = match std::env::var("RIG_KILL_CHILD").as_deref() {
        Ok("lease") => Work::Lease,
        _ => Work::Dma,
    };
    let blocks: u64 = env_u64("RIG_KILL_BLOCKS").unwrap_or(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let phase = |c: u8| {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&[c]);
        let _ = out.flush();
    };
    let r: Result<(), String> = rt.block_on(async {
        let mut client = Client::connect(&socket).await.map_err(|e| e.to_string())?;
        client.version().await.map_err(|e| e.to_string())?;
        phase(b'c');
        match work {
            Work::Dma => {
                let s = Session::open(&socket, DMA_POOL)
                    .await
                    .map_err(|e| e.to_string())?;
                phase(b's');
                let lease = s.lease(blocks * BLOCK).await.map_err(|e| e.to_string())?;
                s.write_lease(lease.id, 0, b"killed")
                    .map_err(|e| e.to_string())?;
                let buf = s.alloc(4096, 4096).await.map_err(|e| e.to_string())?;
                buf.write(0, b"soon").map_err(|e| e.to_string())?;
                phase(b'l');
                phase(b'h');
                std::future::pending::<()>().await;
            }
            Work::Lease => {
                let s = Session::open(&socket, DEV)
                    .await
                    .map_err(|e| e.to_string())?;
                phase(b's');
                let lease = s.lease_device(DEV).await.map_err(|e| e.to_string())?;
                phase(b'l');
                let bar = lease.map_bar(0).map_err(|e| e.to_string())?;
                bar.write_u32(0x80, 0x1234_5678)
                    .map_err(|e| e.to_string())?;
                lease.set_bus_master(true).map_err(|e| e.to_string())?;
                phase(b'h');
                std::future::pending::<()>().await;
            }
        }
        Ok(())
    });
    if let Err(e) = r {
        eprintln!("client: {e}");
        std::process::exit(3);
    }
}

// ---------------------------------------------------------------------------------
// rigd over the fake kernel.

struct Server {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    rig: Arc<Rig>,
    iommu: Arc<FakeIommu>,
    kernel: Arc<FakeKernel>,
    vfio: Arc<FakeVfio>,
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
        config.dma.quota.per_uid_bytes = 64 * BLOCK;
        config.dma.quota.per_device_bytes = 64 * BLOCK;
        config.lease.allow = vec![LeaseRule {
            devices: vec![DEV.into()],
            uids: vec![nix::unistd::getuid().as_raw()],
            groups: Vec::new(),
        }];
        let kernel = Arc::new(FakeKernel::new(fake.root(), &["vfio-pci"]));
        let vfio = Arc::new(FakeVfio::new(&kernel));
        let (rig, _) = Rig::with_kernel(&config, kernel.clone(), vfio.clone());
        let rig = Arc::new(rig);
        let opts = DetachOptions {
            mode: Mode::Vfio,
            ..DetachOptions::default()
        };
        rig.detach(DEV, opts, &mut |_| {}).expect("detach");
        let host = PoolSpec {
            mode: PoolMode::Host,
            blocks: 4,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig.dma().create(DEV, host).expect("pool");
        assert!(pool.wait_pinned(Duration::from_secs(10)));
        let iommu = Arc::new(FakeIommu::typical());
        let dma = PoolSpec {
            mode: PoolMode::Vfio(iommu.clone()),
            blocks: 8,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig.dma().create(DMA_POOL, dma).expect("pool");
        assert!(pool.wait_pinned(Duration::from_secs(10)));
        let socket = dir.path().join("rigd.sock");
        let serving = Serving::start(Arc::clone(&rig), &socket, None);
        Self {
            _dir: dir,
            socket,
            rig,
            iommu,
            kernel,
            vfio,
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
// The campaign.

/// rigd's use of what a killed client could leak.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Usage {
    rss_kib: u64,
    fds: usize,
    threads: u64,
    sessions: usize,
    leased_blocks: u32,
    iommu_mappings: usize,
    lease_holder: bool,
    fake_log_entries: usize,
}

fn proc_status(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

fn usage(rt: &tokio::runtime::Runtime, server: &Server) -> Usage {
    // The process's own counts first: the status calls below open connections of
    // their own, which rigd closes a moment after they return.
    let rss_kib = proc_status("VmRSS:");
    let fds = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count();
    let threads = proc_status("Threads:");
    // Sessions, pools and the lease holder as an operator sees them: the status RPCs.
    let (dma, status) = rt.block_on(async {
        let dma = rig_client::dma::status(&server.socket)
            .await
            .expect("Dma.Status");
        let mut c = Client::connect(&server.socket).await.expect("connect");
        let status = c.status().await.expect("Status");
        (dma, status)
    });
    Usage {
        rss_kib,
        fds,
        threads,
        sessions: dma.clients.len(),
        leased_blocks: dma.pools.iter().map(|p| p.leased_blocks).sum(),
        iommu_mappings: server.iommu.mapped().len(),
        lease_holder: status.devices.iter().any(|d| d.lease.is_some()),
        fake_log_entries: server.fake_log_entries(),
    }
}

struct Verdict {
    cycles: u64,
    by_phase: [u64; 5],
    by_work: [u64; 2],
    client_errors: Vec<String>,
    reclaims: Vec<Duration>,
    /// The same, of the whole-device lease clients only.
    lease_reclaims: Vec<Duration>,
    stuck: Vec<String>,
    baseline: Usage,
    after: Usage,
    took: Duration,
}

/// How much RSS may grow over the campaign: the allocator keeps freed pages, and
/// tonic's per-connection buffers reach their high-water mark, but 10,000 leaked
/// sessions would be far more than this.
const RSS_SLACK_KIB: u64 = 4096;
/// tokio's blocking pool keeps an idle thread for 10 s, so the count at any instant
/// moves by the few that the last cycles' reclaims started; leaked threads would be
/// one per cycle.
const THREAD_SLACK: u64 = 4;

impl Verdict {
    fn passed(&self) -> bool {
        let b = &self.baseline;
        let a = &self.after;
        self.client_errors.is_empty()
            && self.stuck.is_empty()
            && a.fds <= b.fds
            && a.threads <= b.threads + THREAD_SLACK
            && a.sessions == 0
            && a.leased_blocks == 0
            && a.iommu_mappings == b.iommu_mappings
            && !a.lease_holder
            && a.rss_kib <= b.rss_kib + RSS_SLACK_KIB
            && self.p(0.99) <= GOAL
    }

    fn p(&self, q: f64) -> Duration {
        percentile(&self.reclaims, q)
    }
}

fn percentile(v: &[Duration], q: f64) -> Duration {
    {
        let mut v = v.to_vec();
        v.sort();
        if v.is_empty() {
            return Duration::ZERO;
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index into at most a few thousand reclaim times"
        )]
        let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        v[i]
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [none, c, s, l, h] = self.by_phase;
        writeln!(
            f,
            "kills: {} in {:.1} s ({} dma, {} lease); killed before connecting {none}, \
             connected {c}, session open {s}, leased {l}, holding {h}",
            self.cycles,
            self.took.as_secs_f64(),
            self.by_work[0],
            self.by_work[1]
        )?;
        writeln!(
            f,
            "reclaim (kill to rigd's session end, {} with something held): p50 {:.2} ms, \
             p99 {:.2} ms, max {:.2} ms (goal p99 <= {} ms)",
            self.reclaims.len(),
            self.p(0.5).as_secs_f64() * 1e3,
            self.p(0.99).as_secs_f64() * 1e3,
            self.p(1.0).as_secs_f64() * 1e3,
            GOAL.as_millis()
        )?;
        let l = &self.lease_reclaims;
        writeln!(
            f,
            "  of which whole-device leases ({}): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            l.len(),
            percentile(l, 0.5).as_secs_f64() * 1e3,
            percentile(l, 0.99).as_secs_f64() * 1e3,
            percentile(l, 1.0).as_secs_f64() * 1e3
        )?;
        let (b, a) = (&self.baseline, &self.after);
        writeln!(
            f,
            "rigd before -> after: RSS {} -> {} KiB, fds {} -> {}, threads {} -> {}, \
             sessions {} -> {}, leased blocks {} -> {}, IOMMU mappings {} -> {}, \
             lease holder {} -> {}; the fakes' call logs (in this process's RSS) {} -> {} \
             entries",
            b.rss_kib,
            a.rss_kib,
            b.fds,
            a.fds,
            b.threads,
            a.threads,
            b.sessions,
            a.sessions,
            b.leased_blocks,
            a.leased_blocks,
            b.iommu_mappings,
            a.iommu_mappings,
            b.lease_holder,
            a.lease_holder,
            b.fake_log_entries,
            a.fake_log_entries
        )?;
        for e in self.client_errors.iter().take(5) {
            writeln!(f, "client error: {e}")?;
        }
        for e in self.stuck.iter().take(5) {
            writeln!(f, "not reclaimed: {e}")?;
        }
        write!(
            f,
            "violations: {} client errors, {} not reclaimed; verdict: {}",
            self.client_errors.len(),
            self.stuck.len(),
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}

/// One cycle's outcome.
struct Cycle {
    /// Phases the client reached: 0 none, 1 connected, 2 session, 3 leased, 4 holding.
    phase: usize,
    reclaim: Option<Duration>,
    error: Option<String>,
}

fn one_cycle(server: &Server, exe: &Path, work: Work, blocks: u64, delay: Duration) -> Cycle {
    let mut child = Command::new(exe)
        .env("RIG_KILL_CHILD", work.name())
        .env("RIG_KILL_SOCKET", &server.socket)
        .env("RIG_KILL_BLOCKS", blocks.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a client");
    std::thread::sleep(delay);
    let pid = i32::try_from(child.id()).expect("a pid");
    let _ = signal::kill(Pid::from_raw(pid), signal::Signal::SIGKILL);
    let killed = Instant::now();
    let status = child.wait().expect("reap the client");
    let mut out = Vec::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let phase = out.len().min(4);
    let error = status
        .code()
        .is_some()
        .then(|| format!("{} client exited {status}: {}", work.name(), err.trim()));
    // Reclaim: from the kill until rigd holds nothing for the pid. A client killed
    // before its first request reached rigd has nothing to reclaim.
    let held = server.holds_for(pid);
    let mut reclaim = None;
    if held {
        loop {
            if !server.holds_for(pid) {
                reclaim = Some(killed.elapsed());
                break;
            }
            if killed.elapsed() > GIVE_UP {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    } else if phase >= 2 {
        // Already gone by the first look: reclaimed within that look.
        reclaim = Some(killed.elapsed());
    }
    let error = error.or_else(|| {
        (held && reclaim.is_none()).then(|| {
            format!(
                "{} client (pid {pid}, phase {phase}) still held {} s after its kill",
                work.name(),
                GIVE_UP.as_secs()
            )
        })
    });
    Cycle {
        phase,
        reclaim,
        error,
    }
}

fn campaign(rt: &tokio::runtime::Runtime, server: &Server, cycles: u64, seed: u64) -> Verdict {
    let exe = std::env::current_exe().expect("this binary");
    let mut rng = Rng(seed);
    // Warm-up: tokio's blocking threads, tonic's buffers and the allocator's arenas
    // reach their working size before the baseline is read.
    for _ in 0..20 {
        let _ = one_cycle(server, &exe, Work::Dma, 1, Duration::from_millis(30));
        let _ = one_cycle(server, &exe, Work::Lease, 1, Duration::from_millis(30));
    }
    let baseline = settled_usage(rt, server);
    let start = Instant::now();
    let mut v = Verdict {
        cycles,
        by_phase: [0; 5],
        by_work: [0; 2],
        client_errors: Vec::new(),
        reclaims: Vec::new(),
        lease_reclaims: Vec::new(),
        stuck: Vec::new(),
        baseline: baseline.clone(),
        after: baseline,
        took: Duration::ZERO,
    };
    for i in 0..cycles {
        let work = if rng.below(3) == 0 {
            Work::Lease
        } else {
            Work::Dma
        };
        let blocks = 1 + rng.below(3);
        let delay = Duration::from_micros(rng.below(MAX_DELAY_US));
        let c = one_cycle(server, &exe, work, blocks, delay);
        v.by_phase[c.phase] += 1;
        v.by_work[usize::from(work == Work::Lease)] += 1;
        if let Some(r) = c.reclaim {
            v.reclaims.push(r);
            if work == Work::Lease {
                v.lease_reclaims.push(r);
            }
        }
        if let Some(e) = c.error {
            let line = format!("cycle {i}: {e}");
            if e.contains("still held") {
                v.stuck.push(line);
            } else {
                v.client_errors.push(line);
            }
        }
        if (i + 1) % 1000 == 0 {
            println!("clients_killed: {} cycles done", i + 1);
        }
    }
    v.took = start.elapsed();
    v.after = settled_usage(rt, server);
    v
}

/// Usage once rigd has had a moment to finish what the last kill started.
fn settled_usage(rt: &tokio::runtime::Runtime, server: &Server) -> Usage {
    std::thread::sleep(Duration::from_millis(200));
    usage(rt, server)
}
