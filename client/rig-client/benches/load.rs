//! Load (docs/RELIABILITY.md, "Load"): many concurrent clients against ONE rigd over
//! the fake kernel, rigd in a process of its own so its CPU time, RSS, fds and threads
//! are its alone (read from /proc/<pid>). This binary is both: re-run with
//! `RIG_LOAD_SERVE` set it is the server (rigd's whole service,
//! `rigd::testing::Serving`, over a fake tree: a GPU with its driver, an edu held in
//! vfio mode, a vfio-mode DMA pool behind a fake IOMMU); otherwise it is the clients.
//!
//! Each client is a tokio task with its own connection (its own `rig_client::Client`,
//! so N clients = N connections to rigd, all open at once before the clock starts)
//! that loops for the run's length over a seeded mix of four operations: `ListDevices`,
//! `GetDevice` of the GPU (`show`), `Status`, and DMA lease churn (`OpenSession` and its
//! claim on the side socket, a one-block lease, its release, the session closed).
//! Tasks rather than processes: a thousand client processes on this machine's two cores
//! would measure fork, exec and the scheduler rather than rigd; rigd's side socket
//! checks that the claimer is the opener (one pid for all tasks, which holds), so
//! nothing in rigd's checks needs distinct pids. Lease churn runs at most `CHURNERS`
//! at once (a semaphore; the latency counts from the permit): rigd lets one uid have
//! 16 sessions opened and not yet claimed (`MAX_PENDING`, its guard against a client
//! that opens and never claims), and every client here is one uid; a pool of
//! `POOL_BLOCKS` then never runs dry for want of memory, only of pinning.
//!
//! Two phases in one run against the same rigd: the baseline (the same mix from one
//! client) and the load (N clients); per RPC p50, p99 and max, and their ratio to the
//! baseline; throughput; rigd's CPU seconds, RSS (peak and after), fds and threads
//! (peak and after the clients left). Errors: every failed call, its first lines shown.
//!
//! ```text
//! cargo bench -p rig-client --bench load                    # 1,000 clients × 60 s
//! RIG_LOAD_CLIENTS=200 RIG_LOAD_SECS=20 cargo bench -p rig-client --bench load
//! cargo test -p rig-client --bench load                     # CI: 100 clients × 3 s, twice
//! ```
//!
//! Under `cargo test` (no `--bench`) it runs the short version (100 clients, 3 s, twice)
//! and fails unless errors are 0, rigd's fds, sessions and leased blocks are back at
//! their baseline, and its anonymous RSS (RssAnon: not the pool's shmem) after the
//! second round within `ROUND_SLACK_KIB` of what it was after the first, plus
//! `THREAD_KIB` for each thread the blocking pool grew by and `STACK_KIB` for each
//! thread alive (a leak grows with each round; the allocator's high-water mark and the
//! threads' stacks do not). The first round's growth is reported, not judged: it is the warm-up
//! of tokio's blocking pool (up to ~120 threads that linger 10 s, each with its stack
//! and malloc arena), whose size follows the scheduler: 11.5 MiB in one run here under
//! load, under 8 MiB in others.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use rig_client::{Client, session::Session};
use rigd::{
    config::Config,
    dma::{Backing, FakeIommu, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    take::{DetachOptions, Mode},
    testing::{FakeDevice, FakeSysfs, Serving},
    vfio::FakeVfio,
};

const GPU: &str = "0000:03:00.0";
/// Held in vfio mode (shows in `Status`).
const HELD: &str = "0000:01:00.0";
/// The vfio-mode pool the churn leases from.
const DMA_POOL: &str = "0000:02:00.0";
const BLOCK: u64 = 2 << 20;
const POOL_BLOCKS: u32 = 32;
/// Sessions opening at once: rigd's limit of unclaimed sessions per uid.
const CHURNERS: usize = 16;
/// What a second round of the same load may add to rigd's RSS after the first: the
/// allocator keeps the pages the first round's connections used (a high-water mark),
/// where a leak per call would grow by far more over a round's thousands of calls.
const ROUND_SLACK_KIB: u64 = 4096;
/// What each thread tokio's blocking pool grew by in the second round may add besides:
/// its stack's touched pages, which glibc keeps mapped in its cache of dead threads'
/// stacks after the thread ends (about 65 KiB a thread measured here: +101 threads,
/// +6.5 MiB).
const THREAD_KIB: u64 = 128;
/// What each thread alive after the first round may add besides: its stack touched
/// deeper by the second round's calls. At the pool's cap (512 threads, none new) one run
/// of the test command here grew 7.8 MiB with 516 threads, 15 KiB a thread, on a
/// machine busy with other builds (2026-12-04); a leak per call would grow with the
/// round's calls, not with the threads.
const STACK_KIB: u64 = 32;

const OPS: [&str; 4] = ["list", "show", "status", "dma churn"];

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() {
    if let Some(dir) = std::env::var_os("RIG_LOAD_SERVE") {
        serve(&PathBuf::from(dir));
        return;
    }
    // `cargo test -- --list`: one test, the short run.
    if std::env::args().any(|a| a == "--list") {
        println!("load: test");
        return;
    }
    let bench = std::env::args().any(|a| a == "--bench");
    let (clients, secs, base_secs) = if bench { (1000, 60, 10) } else { (100, 3, 1) };
    let clients = env_u64("RIG_LOAD_CLIENTS").unwrap_or(clients);
    let secs = env_u64("RIG_LOAD_SECS").unwrap_or(secs);
    raise_nofile();
    // Under cargo test the load runs twice: the first round takes rigd's RSS to its
    // high-water mark (the allocator keeps the connections' buffers), the second must
    // not add to it.
    let report = run(clients, secs, base_secs, !bench);
    println!("{report}");
    if !report.passed() {
        eprintln!("load: FAILED");
        std::process::exit(1);
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

/// A thousand connections pass the usual soft limit of 1024 descriptors.
fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

// ---------------------------------------------------------------------------------
// The server process.

/// rigd over the fake kernel, until stdin closes (the parent ended or is done).
fn serve(dir: &Path) {
    if let Some(cpu) = std::env::var("RIG_LOAD_CPU")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        pin(cpu).expect("pin the server");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let fake = FakeSysfs::new(&dir.join("sys")).expect("fake sysfs");
        fake.add(
            &FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
                .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
                .with_driver("nvidia")
                .in_group(7),
        )
        .expect("gpu");
        fake.add(
            &FakeDevice::new(HELD, 0x1234, 0x11e8, 0x00ff00)
                .with_bar64(0, 0xfe00_0000, 1 << 20, false)
                .in_group(9)
                .with_attr("reset_method", "bus"),
        )
        .expect("edu");
        let mut config = Config::default();
        config.paths.sysfs = fake.root().to_owned();
        config.paths.pci_ids = dir.join("pci.ids");
        config.paths.state_dir = dir.join("state");
        config.paths.proc = dir.join("proc");
        config.paths.dev = dir.join("dev");
        config.dma.quota.per_uid_bytes = u64::from(POOL_BLOCKS) * BLOCK;
        config.dma.quota.per_device_bytes = u64::from(POOL_BLOCKS) * BLOCK;
        let kernel = Arc::new(FakeKernel::new(fake.root(), &["nvidia", "vfio-pci"]));
        let vfio = Arc::new(FakeVfio::new(&kernel));
        let (rig, _) = Rig::with_kernel(&config, kernel.clone(), vfio.clone());
        let rig = Arc::new(rig);
        let opts = DetachOptions {
            mode: Mode::Vfio,
            ..DetachOptions::default()
        };
        rig.detach(HELD, opts, &mut |_| {}).expect("detach");
        let iommu = Arc::new(FakeIommu::typical());
        let spec = PoolSpec {
            mode: PoolMode::Vfio(iommu.clone()),
            blocks: POOL_BLOCKS,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig.dma().create(DMA_POOL, spec).expect("pool");
        assert!(pool.wait_pinned(Duration::from_secs(30)), "pool pinned");
        let socket = dir.join("rigd.sock");
        let serving = Serving::start(Arc::clone(&rig), &socket, None);
        println!("ready");
        std::io::stdout().flush().expect("stdout");
        // Until the parent closes stdin.
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
        })
        .await
        .expect("stdin");
        // The fakes log every call for tests' asserts (never trimmed): their size is
        // part of this process's RSS, not rigd's.
        println!(
            "fake-log {}",
            kernel.calls.lock().expect("fake log").len() + vfio.calls().len() + iommu.calls().len()
        );
        serving
            .stop(Duration::from_secs(10))
            .await
            .expect("server stops")
            .expect("server task");
    });
}

/// The server process: started, its socket, its pid.
struct Server {
    child: std::process::Child,
    lines: BufReader<std::process::ChildStdout>,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(pinned: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new(std::env::current_exe().expect("this binary"));
        if pinned {
            cmd.env("RIG_LOAD_CPU", "1");
        }
        let mut child = cmd
            .env("RIG_LOAD_SERVE", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("server process");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        lines.read_line(&mut line).expect("server's first line");
        assert_eq!(line.trim(), "ready", "the server did not start");
        Self {
            socket: dir.path().join("rigd.sock"),
            child,
            lines,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes its stdin, reads its last line (the fakes' log size), waits for it.
    fn stop(mut self) -> usize {
        drop(self.child.stdin.take());
        let mut line = String::new();
        let _ = self.lines.read_line(&mut line);
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "the server exited {status}");
        line.trim()
            .strip_prefix("fake-log ")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------
// rigd's process, from /proc.

#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    rss_kib: u64,
    /// RssAnon: the heap and stacks, without the pool's shmem blocks (a block released
    /// by the churn is replaced at once but freed only at the pinner's next fill, so
    /// shmem moves by 2 MiB steps that say nothing of a leak).
    anon_kib: u64,
    hwm_kib: u64,
    fds: u64,
    threads: u64,
    cpu_s: f64,
}

fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    // utime and stime: fields 14 and 15, after the parenthesised command.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ticks: u64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100);
    #[expect(
        clippy::cast_precision_loss,
        reason = "clock ticks of one process: far below 2^52"
    )]
    let cpu_s = ticks as f64 / hz as f64;
    Usage {
        rss_kib: field("VmRSS:"),
        anon_kib: field("RssAnon:"),
        hwm_kib: field("VmHWM:"),
        fds,
        threads: field("Threads:"),
        cpu_s,
    }
}

// ---------------------------------------------------------------------------------
// The clients.

/// splitmix64, as in the clients-killed campaign: a seed replays the same mix.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// One client's (and, merged, one phase's) latencies per operation, in microseconds.
#[derive(Default)]
struct Tally {
    lat: [Vec<u32>; 4],
    errors: [u64; 4],
    connect_errors: u64,
    first_errors: Vec<String>,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        for (a, b) in self.lat.iter_mut().zip(other.lat) {
            a.extend(b);
        }
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.connect_errors += other.connect_errors;
        for e in other.first_errors {
            if self.first_errors.len() < 10 {
                self.first_errors.push(e);
            }
        }
    }

    fn error(&mut self, op: usize, e: &dyn std::error::Error) {
        self.errors[op] += 1;
        if self.first_errors.len() < 10 {
            self.first_errors
                .push(format!("{}: {}", OPS[op], rig_client::error_line(e)));
        }
    }

    fn total_errors(&self) -> u64 {
        self.errors.iter().sum::<u64>() + self.connect_errors
    }

    fn calls(&self) -> usize {
        let errors = usize::try_from(self.errors.iter().sum::<u64>()).unwrap_or(usize::MAX);
        self.lat.iter().map(Vec::len).sum::<usize>() + errors
    }
}

async fn churn(socket: &Path) -> Result<(), BoxError> {
    let s = Session::open(socket, DMA_POOL).await?;
    let lease = s.lease(BLOCK).await?;
    s.release(lease.id).await?;
    drop(s);
    Ok(())
}

async fn one_client(
    seed: u64,
    socket: PathBuf,
    secs: u64,
    start: Arc<tokio::sync::Barrier>,
    dma: Arc<tokio::sync::Semaphore>,
) -> Tally {
    let mut t = Tally::default();
    let client = Client::connect(&socket).await;
    // Every client connected (or failed to) before anyone's clock starts.
    start.wait().await;
    let mut client = match client {
        Ok(c) => c,
        Err(e) => {
            t.connect_errors += 1;
            t.first_errors
                .push(format!("connect: {}", rig_client::error_line(&e)));
            return t;
        }
    };
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        let op = usize::try_from(rng.next() % 4).unwrap_or(0);
        let permit = if op == 3 {
            Some(dma.acquire().await.expect("semaphore"))
        } else {
            None
        };
        let t0 = Instant::now();
        let r: Result<(), BoxError> = match op {
            0 => client
                .list_devices(false)
                .await
                .map(drop)
                .map_err(Into::into),
            1 => client.device(GPU).await.map(drop).map_err(Into::into),
            2 => client.status().await.map(drop).map_err(Into::into),
            _ => churn(&socket).await,
        };
        let us = u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX);
        drop(permit);
        match r {
            Ok(()) => t.lat[op].push(us),
            Err(e) => t.error(op, e.as_ref()),
        }
    }
    t
}

/// One phase: `clients` tasks for `secs`, and rigd's use sampled every 100 ms.
struct Phase {
    clients: u64,
    secs: f64,
    tally: Tally,
    before: Usage,
    peak: Usage,
    after: Usage,
}

/// Waits (up to 30 s) until the pool has pinned every replacement: each released
/// block is retired and replaced by the pool's niced pinner, and until it has, rigd
/// holds fewer memfds and less shmem than with a full pool, so RSS and fds are
/// compared with the pool full. Then lets the status call's connection close.
fn settle(rt: &tokio::runtime::Runtime, server: &Server) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let full = rt
            .block_on(async { Client::connect(&server.socket).await?.dma_status().await })
            .is_ok_and(|s| {
                s.pools.iter().all(|p| {
                    p.pinning_blocks == 0 && p.free_blocks + p.leased_blocks == p.target_blocks
                })
            });
        if full {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
}

fn phase(rt: &tokio::runtime::Runtime, server: &Server, clients: u64, secs: u64) -> Phase {
    let pid = server.pid();
    settle(rt, server);
    let before = usage(pid);
    let (tally, took, peak) = rt.block_on(async {
        let start = Arc::new(tokio::sync::Barrier::new(
            usize::try_from(clients).expect("clients") + 1,
        ));
        let dma = Arc::new(tokio::sync::Semaphore::new(CHURNERS));
        let tasks: Vec<_> = (0..clients)
            .map(|i| {
                tokio::spawn(one_client(
                    0x5eed ^ (i << 20) ^ clients,
                    server.socket.clone(),
                    secs,
                    Arc::clone(&start),
                    Arc::clone(&dma),
                ))
            })
            .collect();
        start.wait().await;
        let t0 = Instant::now();
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let sampler = tokio::spawn(async move {
            let mut peak = Usage::default();
            loop {
                let u = usage(pid);
                peak.fds = peak.fds.max(u.fds);
                peak.threads = peak.threads.max(u.threads);
                peak.rss_kib = peak.rss_kib.max(u.rss_kib);
                peak.hwm_kib = peak.hwm_kib.max(u.hwm_kib);
                tokio::select! {
                    _ = &mut stop_rx => return peak,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        });
        let mut tally = Tally::default();
        for t in tasks {
            tally.merge(t.await.expect("client task"));
        }
        let took = t0.elapsed();
        let _ = stop_tx.send(());
        (tally, took, sampler.await.expect("sampler"))
    });
    // The connections close a moment after the clients drop them.
    settle(rt, server);
    let mut after = usage(pid);
    let settle = Instant::now();
    while after.fds > before.fds && settle.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        after = usage(pid);
    }
    Phase {
        clients,
        secs: took.as_secs_f64(),
        tally,
        before,
        peak,
        after,
    }
}

struct Report {
    base: Phase,
    load: Phase,
    again: Option<Phase>,
    sessions_after: usize,
    leased_after: u32,
    fake_log: usize,
    cpus: String,
}

fn run(clients: u64, secs: u64, base_secs: u64, twice: bool) -> Report {
    // rigd on one CPU, the clients on another, where there are two (before any
    // thread starts, so all inherit it; the server pins itself).
    let two = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) >= 2;
    let cpus = match two.then(|| pin(0)) {
        Some(Ok(())) => "clients pinned to CPU 0, rigd to CPU 1".to_owned(),
        Some(Err(e)) => format!("not pinned ({e})"),
        None => "not pinned (one CPU)".to_owned(),
    };
    let server = Server::start(two);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // Warm-up: the first calls pay for lazy state on both sides.
    let _ = phase(&rt, &server, 1, 1);
    let base = phase(&rt, &server, 1, base_secs);
    let load = phase(&rt, &server, clients, secs);
    let again = twice.then(|| phase(&rt, &server, clients, secs));
    let (sessions_after, leased_after) = rt.block_on(async {
        let s = Client::connect(&server.socket)
            .await
            .expect("connect")
            .dma_status()
            .await
            .expect("Dma.Status");
        (
            s.clients.len(),
            s.pools.iter().map(|p| p.leased_blocks).sum(),
        )
    });
    // That status call's connection too.
    std::thread::sleep(Duration::from_millis(200));
    let fake_log = server.stop();
    Report {
        base,
        load,
        again,
        sessions_after,
        leased_after,
        fake_log,
        cpus,
    }
}

/// Pins this process (and so the threads it starts from now on) to `cpu`.
fn pin(cpu: usize) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

fn pct(v: &mut [u32], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into at most a few million latencies"
    )]
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    f64::from(v[i]) / 1000.0
}

impl Report {
    fn passed(&self) -> bool {
        let (b, a) = (&self.load.before, &self.load.after);
        let again = self.again.as_ref().is_none_or(|p| {
            p.tally.total_errors() == 0
                && p.after.fds <= b.fds
                && p.after.anon_kib
                    <= a.anon_kib
                        + ROUND_SLACK_KIB
                        + THREAD_KIB * p.after.threads.saturating_sub(a.threads)
                        + STACK_KIB * a.threads
        });
        self.base.tally.total_errors() == 0
            && self.load.tally.total_errors() == 0
            && again
            && self.sessions_after == 0
            && self.leased_after == 0
            // RSS after one round is reported, not judged (the warm-up); the second
            // round of the short run is the leak check.
            && a.fds <= b.fds
    }
}

impl std::fmt::Display for Report {
    #[expect(clippy::cast_precision_loss, reason = "counts of calls")]
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "load: one rigd over the fake kernel; {}", self.cpus)?;
        for p in [Some(&self.base), Some(&self.load), self.again.as_ref()]
            .into_iter()
            .flatten()
        {
            let calls = p.tally.calls();
            let cpu = p.after.cpu_s - p.before.cpu_s;
            writeln!(
                f,
                "phase {} client(s) × {:.1} s: {calls} calls, {:.0} calls/s, errors {} \
                 (connect {}, per op {:?}); rigd CPU {cpu:.2} s ({:.0} µs a call); \
                 RSS {} → peak {} → after {} KiB (VmHWM {}; anon {} → {}); \
                 fds {} → peak {} → after {}; threads {} → peak {} → after {}",
                p.clients,
                p.secs,
                calls as f64 / p.secs,
                p.tally.total_errors(),
                p.tally.connect_errors,
                p.tally.errors,
                cpu * 1e6 / calls.max(1) as f64,
                p.before.rss_kib,
                p.peak.rss_kib,
                p.after.rss_kib,
                p.after.hwm_kib,
                p.before.anon_kib,
                p.after.anon_kib,
                p.before.fds,
                p.peak.fds,
                p.after.fds,
                p.before.threads,
                p.peak.threads,
                p.after.threads,
            )?;
            for e in &p.tally.first_errors {
                writeln!(f, "  error: {e}")?;
            }
        }
        writeln!(
            f,
            "{:<10} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>8} {:>8}",
            "rpc",
            "1: calls",
            "p50 ms",
            "p99 ms",
            "max ms",
            "N: calls",
            "p50 ms",
            "p99 ms",
            "max ms",
            "p50 ×",
            "p99 ×"
        )?;
        for (i, name) in OPS.iter().enumerate() {
            let mut b = self.base.tally.lat[i].clone();
            let mut l = self.load.tally.lat[i].clone();
            let (b50, b99, bmax) = (pct(&mut b, 0.5), pct(&mut b, 0.99), pct(&mut b, 1.0));
            let (l50, l99, lmax) = (pct(&mut l, 0.5), pct(&mut l, 0.99), pct(&mut l, 1.0));
            writeln!(
                f,
                "{name:<10} {:>9} {b50:>9.2} {b99:>9.2} {bmax:>9.2} | {:>9} {l50:>9.2} {l99:>9.2} \
                 {lmax:>9.2} | {:>8.1} {:>8.1}",
                b.len(),
                l.len(),
                l50 / b50.max(1e-3),
                l99 / b99.max(1e-3),
            )?;
        }
        let bt = self.base.tally.calls() as f64 / self.base.secs;
        let lt = self.load.tally.calls() as f64 / self.load.secs;
        writeln!(
            f,
            "throughput: {lt:.0} calls/s at {} clients against {bt:.0} at 1 ({:.2}×)",
            self.load.clients,
            lt / bt.max(1e-9)
        )?;
        writeln!(
            f,
            "after: sessions {}, leased blocks {}; the fakes' call logs (in rigd's process) {} entries",
            self.sessions_after, self.leased_after, self.fake_log
        )?;
        write!(
            f,
            "verdict: {}",
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}
