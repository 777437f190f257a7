//! DMA figures for docs/BENCHMARKS.md ("DMA") through the client library against a
//! real rigd process, side by side in one run:
//!
//! 1. alloc + free of 64 KiB on the fast path (inside a leased block) and with a fresh
//!    block lease each time, next to a raw `SOCK_SEQPACKET` round trip and a gRPC unary
//!    call.
//! 2. Time for rigd to reclaim the leases of a client killed with SIGKILL.
//! 3. rigd's resident memory with 1,000 idle connected DMA sessions.
//!
//! rigd's pinning rate (no client involved) is rigd's own `pin` bench.
//!
//! Needs root and hugepages (it raises vm.nr_hugepages by what it uses and lowers it
//! again), and release builds of `rigd` and `rig-dma-probe` beside this bench (or
//! `RIGD=`/`PROBE=` paths). Run pinned, e.g.:
//!
//! ```text
//! cargo build --release -p rigd -p rig-tests --bin rig-dma-probe
//! taskset -c 1 cargo bench -p rig-client --bench session
//! ```

use std::{
    io::{BufRead, BufReader},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use rig_client::{Client, session::Session};
use rigd::dma::hugepages::{Hugepages, Reservation};

const MIB: u64 = 1 << 20;
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
        eprintln!("session bench: needs root (hugepages); skipped");
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
    // Everything runs on one CPU, rigd and the clients it spawns included: on this kind
    // of VM, cross-CPU wake-ups would dominate the round trips.
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
                eprintln!("session bench: rigd did not stop on SIGTERM in 5 s; killing it");
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

async fn pool_full(m: &mut Client) -> Result<(), BoxError> {
    let start = Instant::now();
    loop {
        let s = m.dma_status().await?;
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

/// 1–3, against a rigd process.
async fn served(rigd: &Path, probe: &Path) -> Result<(), BoxError> {
    let d = start_rigd(rigd)?;
    let mut m = Client::connect(&d.socket).await?;
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
        std::hint::black_box(m.dma_status().await?);
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
    m: &mut Client,
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

/// 2. SIGKILL a client holding a lease; time until rigd shows it gone.
async fn reclaim(socket: &Path, probe: &Path, m: &mut Client) -> Result<(), BoxError> {
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
            let s = m.dma_status().await?;
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

/// 3. rigd's memory with 1,000 idle sessions.
async fn rss(d: &Rigd, m: &mut Client) -> Result<(), BoxError> {
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
    let s = m.dma_status().await?;
    let with = status_kib(pid, "VmRSS:")?;
    let hwm = status_kib(pid, "VmHWM:")?;
    drop(sessions);
    let start = Instant::now();
    while !m.dma_status().await?.clients.is_empty() {
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
