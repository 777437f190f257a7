//! DMA figures for docs/BENCHMARKS.md, side by side in one run (issue 6):
//!
//! 1. Pinning a pool (GiB/s) against memset of the same size and the kernel's own
//!    hugetlb clearing, on 1 thread and on one per allowed CPU.
//! 2. Through the client library against a real rigd process: alloc + free of 64 KiB
//!    on the fast path (inside a leased block) and with a fresh block lease each time,
//!    next to a raw `SOCK_SEQPACKET` round trip and a gRPC unary call.
//! 3. Time for rigd to reclaim the leases of a client killed with SIGKILL.
//! 4. rigd's resident memory with 1,000 idle connected DMA sessions.
//!
//! Needs root and hugepages (it raises vm.nr_hugepages by what it uses and lowers it
//! again), and release builds of `rigd` and `rig-dma-probe` beside this bench (or
//! `RIGD=`/`PROBE=` paths). Run pinned, e.g.:
//!
//! ```text
//! cargo build --release -p rigd -p rig-client --bins
//! taskset -c 1 cargo bench -p rig-client --bench dma
//! ```

use std::{
    io::{BufRead, BufReader},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use rig_client::dma::{Monitor, Session};
use rigd::dma::{
    Backing, Pool, PoolMode, PoolSpec,
    hugepages::{Hugepages, Reservation},
};

const MIB: u64 = 1 << 20;
const PIN_BLOCKS: u32 = 128;
const SERVE_BLOCKS: u64 = 128;
const LEASE_BATCH: usize = 48;

type BoxError = Box<dyn std::error::Error>;

/// Median, p99 and min of a sample, in µs.
struct Stats {
    median: f64,
    p99: f64,
    min: f64,
    n: usize,
}

fn stats(mut d: Vec<Duration>) -> Stats {
    d.sort_unstable();
    // Nearest rank: the sample at index round((n - 1) * q), q in hundredths.
    let at = |q: usize| {
        let i = ((d.len() - 1) * q + 50) / 100;
        d[i].as_secs_f64() * 1e6
    };
    Stats {
        median: at(50),
        p99: at(99),
        min: at(0),
        n: d.len(),
    }
}

fn row(name: &str, s: &Stats) {
    println!(
        "| {name} | {:.2} | {:.2} | {:.2} | {} |",
        s.median, s.p99, s.min, s.n
    );
}

fn main() -> Result<(), BoxError> {
    // `cargo bench` passes --bench; `cargo test --all-targets` does not, and then this
    // minutes-long run is skipped.
    if !std::env::args().any(|a| a == "--bench") {
        return Ok(());
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("dma bench: needs root (hugepages, physical addresses); skipped");
        return Ok(());
    }
    raise_nofile();
    let bins = std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .map(Path::to_owned)
        .ok_or("no target dir")?;
    let rigd = std::env::var_os("RIGD").map_or_else(|| bins.join("rigd"), PathBuf::from);
    let probe = std::env::var_os("PROBE").map_or_else(|| bins.join("rig-dma-probe"), PathBuf::from);
    let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    let allowed: Vec<usize> = (0..64)
        .filter(|c| cpus.is_set(*c).unwrap_or(false))
        .collect();
    println!("CPUs allowed: {allowed:?}\n");
    pinning(allowed.len())?;
    // `cargo bench -p rig-client --bench dma -- pinning`: the first table only.
    if std::env::args().any(|a| a == "pinning") {
        return Ok(());
    }
    // Everything after runs on one CPU, rigd and the clients it spawns included: on this
    // kind of VM, cross-CPU wake-ups would dominate the round trips.
    let last = *allowed.last().ok_or("no CPU")?;
    let mut one = nix::sched::CpuSet::new();
    one.set(last)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one)?;
    println!("Round trips, reclaim and memory: client and rigd on CPU {last}\n");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(served(&rigd, &probe))
}

/// 1. Pinning against memset, on 1 thread and on one per allowed CPU.
fn pinning(cpus: usize) -> Result<(), BoxError> {
    let bytes = u64::from(PIN_BLOCKS) * 2 * MIB;
    let _pages = Reservation::add(Hugepages::new(Path::new("/sys")), u64::from(PIN_BLOCKS))?;
    println!(
        "### Pinning a pool of {} MiB against memset of the same size\n",
        bytes / MIB
    );
    println!(
        "| threads | rig pool pin GiB/s | kernel hugetlb clearing (fallocate) GiB/s | kernel hugetlb fault-in (MAP_POPULATE) GiB/s | memset GiB/s | pin / memset | pin / kernel clearing |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let len = usize::try_from(bytes)?;
    let mut buf = vec![0u8; len];
    buf.fill(1); // fault it in: memset below measures bandwidth, not page faults
    let mut counts = vec![1usize];
    if cpus > 1 {
        counts.push(cpus);
    }
    for threads in counts {
        let mut pin = Vec::new();
        let mut set = Vec::new();
        let mut kernel = Vec::new();
        let mut populate = Vec::new();
        for round in 0..5u8 {
            let start = Instant::now();
            let pool = Pool::start(
                "bench",
                PoolSpec {
                    mode: PoolMode::Host,
                    blocks: PIN_BLOCKS,
                    backing: Backing::Huge2M,
                    pin_threads: threads,
                },
            )?;
            if !pool.wait_pinned(Duration::from_secs(60)) {
                return Err("pool not pinned in 60 s".into());
            }
            pin.push(start.elapsed());
            let s = pool.status();
            if s.free_blocks != PIN_BLOCKS {
                return Err(
                    format!("pinned {} of {PIN_BLOCKS}: {:?}", s.free_blocks, s.problem).into(),
                );
            }
            drop(pool);
            let start = Instant::now();
            let chunk = len / threads;
            std::thread::scope(|sc| {
                for part in buf.chunks_mut(chunk) {
                    sc.spawn(move || part.fill(round.wrapping_add(2)));
                }
            });
            std::hint::black_box(&buf);
            set.push(start.elapsed());
            kernel.push(kernel_clear(bytes, threads, Clear::Allocate)?);
            populate.push(kernel_clear(bytes, threads, Clear::Populate)?);
        }
        let gib = |d: Duration| bytes as f64 / d.as_secs_f64() / f64::from(1u32 << 30);
        let (p, m, k, f) = (
            gib(stats_median(pin)),
            gib(stats_median(set)),
            gib(stats_median(kernel)),
            gib(stats_median(populate)),
        );
        println!(
            "| {threads} | {p:.2} | {k:.2} | {f:.2} | {m:.2} | {:.0}% | {:.0}% |",
            100.0 * p / m,
            100.0 * p / k
        );
    }
    println!();
    Ok(())
}

/// How [`kernel_clear`] makes the kernel clear hugetlb pages.
#[derive(Clone, Copy)]
enum Clear {
    /// fallocate(2) of the file: what the pool does, outside the mmap lock.
    Allocate,
    /// One `MAP_POPULATE` mmap of the file: every thread's fault-in under one mm.
    Populate,
}

/// The kernel's own rate: `bytes` of hugetlb memfd cleared, one file per thread, with
/// none of the pool's per-block work.
fn kernel_clear(bytes: u64, threads: usize, how: Clear) -> Result<Duration, BoxError> {
    use rigd::sys::{
        memfd,
        mman::{Fill, Mapping},
    };
    let part = bytes / threads as u64;
    let files = (0..threads)
        .map(|_| {
            let fd = memfd::create(c"rig-bench", memfd::Backing::Huge2M)?;
            memfd::set_len(&fd, part)?;
            Ok(fd)
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let len = usize::try_from(part)?;
    let start = Instant::now();
    let maps = std::thread::scope(|sc| {
        let handles: Vec<_> = files
            .iter()
            .map(|fd| {
                sc.spawn(move || match how {
                    Clear::Allocate => memfd::allocate(fd, part).map(|()| None),
                    Clear::Populate => Mapping::shared(fd, len, Fill::Populate).map(Some),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| std::io::Error::other("thread panicked"))?
            })
            .collect::<std::io::Result<Vec<_>>>()
    })?;
    let took = start.elapsed();
    drop(maps);
    Ok(took)
}

fn stats_median(mut d: Vec<Duration>) -> Duration {
    d.sort_unstable();
    d[d.len() / 2]
}

struct Rigd {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
    _pages: Reservation,
}

impl Drop for Rigd {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().cast_signed());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            if start.elapsed() > Duration::from_secs(5) {
                eprintln!("dma bench: rigd did not stop on SIGTERM in 5 s; killing it");
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn start_rigd(rigd: &Path) -> Result<Rigd, BoxError> {
    let pages = Reservation::add(Hugepages::new(Path::new("/sys")), SERVE_BLOCKS)?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("rigd.sock");
    let config = dir.path().join("rigd.toml");
    std::fs::write(
        &config,
        format!(
            "[paths]\nstate_dir = {:?}\npci_ids = {:?}\n[dma]\npool_bytes = {}\nhost_pools = [\"host\"]\n[dma.quota]\nper_uid_bytes = {}\nper_device_bytes = {}\n",
            dir.path().join("state"),
            dir.path().join("pci.ids"),
            SERVE_BLOCKS * 2 * MIB,
            1u64 << 40,
            1u64 << 40,
        ),
    )?;
    let child = Command::new(rigd)
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .env("RUST_LOG", "warn")
        .spawn()?;
    let start = Instant::now();
    while !PathBuf::from(format!("{}.fd", socket.display())).exists() {
        if start.elapsed() > Duration::from_secs(20) {
            return Err("rigd did not start".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(Rigd {
        child,
        socket,
        _dir: dir,
        _pages: pages,
    })
}

async fn pool_full(m: &mut Monitor) -> Result<(), BoxError> {
    let start = Instant::now();
    loop {
        let s = m.status().await?;
        let p = s.pools.first().ok_or("no pool")?;
        if u64::from(p.free_blocks) == SERVE_BLOCKS {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(30) {
            let meminfo = std::fs::read_to_string("/proc/meminfo")?;
            let huge: Vec<&str> = meminfo
                .lines()
                .filter(|l| l.starts_with("HugePages_"))
                .collect();
            return Err(format!("the pool did not refill in 30 s: {p:?}; {huge:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// 2–4, against a rigd process.
async fn served(rigd: &Path, probe: &Path) -> Result<(), BoxError> {
    let d = start_rigd(rigd)?;
    let mut m = Monitor::connect(&d.socket).await?;
    pool_full(&mut m).await?;
    println!("### alloc + free of 64 KiB through rig-client, against rigd in its own process\n");
    println!("| path | median µs | p99 µs | min µs | n |");
    println!("| --- | --- | --- | --- | --- |");
    row(
        "raw SOCK_SEQPACKET round trip, 64 B (echo thread)",
        &stats(raw_round_trips(20_000)?),
    );
    let mut grpc = Vec::new();
    for _ in 0..3000 {
        let t = Instant::now();
        std::hint::black_box(m.status().await?);
        grpc.push(t.elapsed());
    }
    row("gRPC unary round trip (Dma.Status)", &stats(grpc));
    let session = Session::open(&d.socket, "host").await?;
    drop(session.alloc(64 << 10, 4096).await?); // lease the block the fast path uses
    let mut fast = Vec::new();
    for _ in 0..200_000 {
        let t = Instant::now();
        let b = session.alloc(64 << 10, 4096).await?;
        session.free(b).await?;
        fast.push(t.elapsed());
    }
    row(
        "fast path: alloc + free inside a leased block",
        &stats(fast),
    );
    drop(session);
    let (pair, alloc, free) = leases(&d.socket, &mut m).await?;
    row(
        "fresh lease: alloc (lease RPC + fds + mmap) + free (munmap + release RPC)",
        &stats(pair),
    );
    row("  of which alloc", &stats(alloc));
    row("  of which free", &stats(free));
    println!();
    reclaim(&d.socket, probe, &mut m).await?;
    rss(&d, &mut m).await?;
    // Close our gRPC connection while the runtime still runs, so rigd's graceful
    // shutdown does not wait on it.
    drop(m);
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

async fn leases(
    socket: &Path,
    m: &mut Monitor,
) -> Result<(Vec<Duration>, Vec<Duration>, Vec<Duration>), BoxError> {
    let session = Session::open(socket, "host").await?;
    session.set_keep_empty(0);
    let (mut pair, mut alloc, mut free) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..25 {
        // Each release retires its block and the pool pins a new one: measure a batch,
        // then let the pool refill off the clock.
        pool_full(m).await?;
        for _ in 0..LEASE_BATCH {
            let t0 = Instant::now();
            let b = session.alloc(64 << 10, 4096).await?;
            let t1 = Instant::now();
            session.free(b).await?;
            let t2 = Instant::now();
            alloc.push(t1 - t0);
            free.push(t2 - t1);
            pair.push(t2 - t0);
        }
    }
    Ok((pair, alloc, free))
}

/// The floor: a 64-byte packet to an echo thread and back.
fn raw_round_trips(n: usize) -> Result<Vec<Duration>, BoxError> {
    let (a, b): (OwnedFd, OwnedFd) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok(len) = nix::unistd::read(&b, &mut buf) {
            if len == 0 || nix::unistd::write(&b, &buf[..len]).is_err() {
                break;
            }
        }
    });
    let msg = [7u8; 64];
    let mut back = [0u8; 64];
    let mut d = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        nix::unistd::write(&a, &msg)?;
        nix::unistd::read(&a, &mut back)?;
        d.push(t.elapsed());
    }
    drop(a);
    let _ = echo.join();
    Ok(d)
}

/// 3. SIGKILL a client holding a lease; time until rigd shows it gone.
async fn reclaim(socket: &Path, probe: &Path, m: &mut Monitor) -> Result<(), BoxError> {
    let mut took = Vec::new();
    for _ in 0..40 {
        pool_full(m).await?;
        let mut child = Command::new(probe)
            .arg(socket)
            .arg("host")
            .arg((64u64 << 10).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("stdout")?).read_line(&mut line)?;
        if !line.starts_with("ready") {
            return Err(format!("probe: {line}").into());
        }
        let t = Instant::now();
        child.kill()?;
        loop {
            let s = m.status().await?;
            if s.clients.is_empty() && s.pools.iter().all(|p| p.leased_blocks == 0) {
                break;
            }
        }
        took.push(t.elapsed());
        child.wait()?;
    }
    println!("### Reclaim after kill -9 (client holding one 2 MiB lease)\n");
    println!("| measure | median µs | p99 µs | min µs | n |");
    println!("| --- | --- | --- | --- | --- |");
    row(
        "SIGKILL sent → rigd shows no session and no lease (Dma.Status polled)",
        &stats(took),
    );
    println!();
    Ok(())
}

fn status_kib(pid: u32, key: &str) -> Result<u64, BoxError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .ok_or_else(|| format!("{key} in /proc/{pid}/status").into())
}

/// 4. rigd's memory with 1,000 idle sessions.
async fn rss(d: &Rigd, m: &mut Monitor) -> Result<(), BoxError> {
    let pid = d.child.id();
    pool_full(m).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = status_kib(pid, "VmRSS:")?;
    let huge = status_kib(pid, "HugetlbPages:")?;
    let mut sessions = Vec::with_capacity(1000);
    let t = Instant::now();
    for _ in 0..1000 {
        sessions.push(Session::open(&d.socket, "host").await?);
    }
    let open = t.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = m.status().await?;
    let with = status_kib(pid, "VmRSS:")?;
    let hwm = status_kib(pid, "VmHWM:")?;
    drop(sessions);
    let start = Instant::now();
    while !m.status().await?.clients.is_empty() {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("sessions not closed".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let after = status_kib(pid, "VmRSS:")?;
    println!("### rigd's memory with 1,000 idle DMA sessions\n");
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| sessions open (seen by Dma.Status) | {} |",
        s.clients.len()
    );
    println!(
        "| time to open 1,000 sessions | {:.0} ms |",
        open.as_secs_f64() * 1e3
    );
    println!(
        "| VmRSS before (pool of {} MiB pinned) | {:.1} MiB |",
        SERVE_BLOCKS * 2,
        before as f64 / 1024.0
    );
    println!(
        "| VmRSS with 1,000 idle sessions | {:.1} MiB |",
        with as f64 / 1024.0
    );
    println!(
        "| per session | {:.1} KiB |",
        (with.saturating_sub(before)) as f64 / 1000.0
    );
    println!("| VmHWM | {:.1} MiB |", hwm as f64 / 1024.0);
    println!(
        "| VmRSS after they closed | {:.1} MiB |",
        after as f64 / 1024.0
    );
    println!(
        "| HugetlbPages (the pool, not in VmRSS) | {:.0} MiB |",
        huge as f64 / 1024.0
    );
    Ok(())
}

fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
