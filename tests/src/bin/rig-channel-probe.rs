//! rig-channel-probe: a channel client in a process of its own, for the runs on a
//! real GPU that need one or many (an unprivileged client, kill -9, faults, 64 at
//! once). Not an interface for people.
//!
//! `rig-channel-probe ROLE SOCKET GPU [ARG]`; with `RIG_PROBE_UID=N` a root start
//! drops to uid N and gid `RIG_PROBE_GID` (default N), no supplementary groups, before
//! connecting. Roles:
//! - `basic`: opens a copy and a compute channel; copies a pattern 256 MiB A → B
//!   (timed, 10 times) and checks B; times 10,000 empty releases per channel; then
//!   1,000,000 empty releases on the copy channel across its ring's wraps.
//! - `spin`: opens a channel, prints `ready`, releases until killed.
//! - `fault`: releases into an address its space does not map; expects the RM's
//!   MMU fault as a typed error; then shows its session still answers (a new channel
//!   opens and runs).
//! - `steady SECS`: releases for SECS seconds, each value checked, and prints the
//!   round trips' p50/p99.
//! - `open N`: opens N sessions with one channel each, one after another, and prints
//!   the median time from nothing to a channel that ran its first release.
//! - `copy N`: N timed 256 MiB host-to-host copies on a copy channel (basic's copy
//!   alone), the median's bandwidth.
//!
//! With `RIG_PROBE_RINGS=gpu` every channel it opens has its ring, USERD and
//! pushbuffer in GPU memory (rigd must allow the probe's uid or gid); otherwise in
//! host memory.
//!
//! Every line it prints is `key=value` pairs after a word saying what was measured.

use std::{
    error::Error,
    process::ExitCode,
    time::{Duration, Instant},
};

use rig_client::{
    channel::{Channel, ChannelError, DEFAULT_PUSHBUFFER, EMPTY_RELEASE, Engine, Rings},
    session::{Buffer, Session},
};
use rig_model::addr::GpuVa;
use rig_nv::method;

type Res<T> = Result<T, Box<dyn Error>>;

const MIB: u64 = 1 << 20;
const COPY_BYTES: u64 = 256 * MIB;
// TIMEOUT: a 256 MiB copy takes ~10 ms on an H200, a channel's first work (context
// load) well under a second; 5 s says something is wrong.
const LONG: Duration = Duration::from_secs(5);
// TIMEOUT: an empty release round-trips in microseconds.
const SHORT: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (role, socket, gpu, rest) = match args.as_slice() {
        [_, role, socket, gpu, rest @ ..] => {
            (role.clone(), socket.clone(), gpu.clone(), rest.to_vec())
        }
        _ => {
            eprintln!(
                "usage: rig-channel-probe basic|spin|fault|steady SECS|open N|copy N SOCKET GPU"
            );
            return ExitCode::from(2);
        }
    };
    if let Err(e) = rig_tests::probe::drop_privileges() {
        eprintln!("rig-channel-probe: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rig-channel-probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let arg = rest
        .first()
        .and_then(|a| a.parse::<u64>().ok())
        .unwrap_or(0);
    let done = runtime.block_on(async {
        match role.as_str() {
            "basic" => basic(&socket, &gpu).await,
            "spin" => spin(&socket, &gpu).await,
            "fault" => fault(&socket, &gpu).await,
            "steady" => steady(&socket, &gpu, arg).await,
            "open" => open(&socket, &gpu, arg).await,
            "copy" => copy_only(&socket, &gpu, arg).await,
            _ => Err(format!("unknown role {role}").into()),
        }
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "rig-channel-probe {role}: {}",
                rig_client::error_line(e.as_ref())
            );
            ExitCode::FAILURE
        }
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an index below the length"
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// One empty release round trip: (round trip, host time of release + submit).
fn round_trip(
    ch: &mut Channel,
    how: method::Release,
) -> Result<(Duration, Duration), ChannelError> {
    let t0 = Instant::now();
    let v = ch.release_with(how)?;
    ch.submit()?;
    let t1 = Instant::now();
    ch.wait(v, SHORT)?;
    Ok((t0.elapsed(), t1 - t0))
}

fn time_releases(name: &str, ch: &mut Channel, n: usize, how: method::Release) -> Res<()> {
    let mut rtt = Vec::with_capacity(n);
    let mut host = Vec::with_capacity(n);
    for _ in 0..n {
        let (r, h) = round_trip(ch, how)?;
        rtt.push(r);
        host.push(h);
    }
    rtt.sort();
    host.sort();
    println!(
        "round_trip channel={name} wfi={} timestamp={} n={n} p50_us={:.2} p99_us={:.2} host_p50_us={:.3} host_p99_us={:.3} rings={:?} rekicks={}",
        how.wait_idle,
        how.timestamp,
        pct(&rtt, 0.5),
        pct(&rtt, 0.99),
        pct(&host, 0.5),
        pct(&host, 0.99),
        ch.rings(),
        ch.rekicks()
    );
    Ok(())
}

fn pattern(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5249_4700
}

/// Writes the pattern over the first MiB and one word in every MiB after it.
fn fill(a: &Buffer) -> Res<()> {
    for i in 0..MIB / 8 {
        a.write_u64(i * 8, pattern(i))?;
    }
    for m in 1..a.len() / MIB {
        a.write_u64(m * MIB + 8 * (m % 64), pattern(m << 20))?;
    }
    Ok(())
}

fn check(b: &Buffer) -> Res<()> {
    for i in 0..MIB / 8 {
        let got = b.read_u64(i * 8)?;
        if got != pattern(i) {
            return Err(format!("B differs at byte {}: {got:#x}", i * 8).into());
        }
    }
    for m in 1..b.len() / MIB {
        let got = b.read_u64(m * MIB + 8 * (m % 64))?;
        if got != pattern(m << 20) {
            return Err(format!("B differs in MiB {m}: {got:#x}").into());
        }
    }
    Ok(())
}

async fn basic(socket: &str, gpu: &str) -> Res<()> {
    println!(
        "client uid={} gid={} pid={}",
        nix::unistd::getuid(),
        nix::unistd::getgid(),
        std::process::id()
    );
    let t = Instant::now();
    let session = Session::open(socket, gpu).await?;
    let mut copy = open_one(&session, Engine::Copy, 1024).await?;
    let v = copy.release()?;
    copy.submit()?;
    copy.wait(v, LONG)?;
    println!(
        "opened session_and_copy_channel_ms={:.2} channel={} entries={} ring_va={} rings={:?}",
        t.elapsed().as_secs_f64() * 1e3,
        copy.id(),
        copy.entries(),
        copy.ring_gpu_va(),
        copy.rings()
    );
    let mut compute = open_one(&session, Engine::Compute, 1024).await?;
    let v = compute.release()?;
    compute.submit()?;
    compute.wait(v, LONG)?;
    println!("opened compute_channel={}", compute.id());

    copy_bandwidth(&session, &mut copy, 10).await?;
    let wfi = method::Release {
        wait_idle: true,
        timestamp: false,
    };
    time_releases("copy", &mut copy, 10_000, EMPTY_RELEASE)?;
    time_releases("compute", &mut compute, 10_000, EMPTY_RELEASE)?;
    time_releases("copy", &mut copy, 10_000, wfi)?;
    time_releases("compute", &mut compute, 10_000, wfi)?;
    time_releases("copy_again", &mut copy, 10_000, EMPTY_RELEASE)?;

    // A million empty releases across the ring's wraps, one in flight at a time.
    let n = 1_000_000u64;
    let start_value = copy.last_value();
    let t = Instant::now();
    for _ in 0..n {
        let v = copy.release_with(EMPTY_RELEASE)?;
        copy.submit()?;
        copy.wait(v, SHORT)?;
    }
    let last = copy.completed()?;
    if last != start_value + n {
        return Err(format!(
            "after {n} releases the semaphore reads {last}, not {}",
            start_value + n
        )
        .into());
    }
    println!(
        "million releases={n} wraps={} seconds={:.2} per_release_us={:.2} last={last} rekicks={}",
        n / u64::from(copy.entries()),
        t.elapsed().as_secs_f64(),
        t.elapsed().as_secs_f64() * 1e6 / n as f64,
        copy.rekicks()
    );
    copy.close(&session).await?;
    compute.close(&session).await?;
    println!("closed both");
    Ok(())
}

/// `n` timed copies of a 256 MiB pattern from one leased host buffer to another (each
/// crosses the GPU's link twice), B checked against A after the last; prints the median.
async fn copy_bandwidth(session: &Session, copy: &mut Channel, n: usize) -> Res<()> {
    let n = n.max(1);
    let a = session.alloc(COPY_BYTES, 2 * MIB).await?;
    let b = session.alloc(COPY_BYTES, 2 * MIB).await?;
    fill(&a)?;
    let (src, dst) = (
        a.gpu_va().ok_or("no GPU VA")?,
        b.gpu_va().ok_or("no GPU VA")?,
    );
    let mut times = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        // The copy engine releases the value in the copy's own LAUNCH_DMA.
        let v = copy.copy(src, dst, COPY_BYTES)?;
        copy.submit()?;
        copy.wait(v, LONG)?;
        times.push(t.elapsed());
    }
    check(&b)?;
    times.sort();
    let gbps = |d: Duration| COPY_BYTES as f64 / d.as_secs_f64() / 1e9;
    println!(
        "copy bytes={COPY_BYTES} n={n} median_ms={:.3} median_gb_per_s={:.2} best_gb_per_s={:.2} checked=B==A",
        times[n / 2].as_secs_f64() * 1e3,
        gbps(times[n / 2]),
        gbps(times[0])
    );
    Ok(())
}

/// The copy bandwidth alone, on a session and copy channel of its own: what
/// tests/h200/multi.sh runs on every GPU at once and on each alone.
async fn copy_only(socket: &str, gpu: &str, n: u64) -> Res<()> {
    let session = Session::open(socket, gpu).await?;
    let mut copy = open_one(&session, Engine::Copy, 1024).await?;
    copy_bandwidth(&session, &mut copy, usize::try_from(n).unwrap_or(10)).await?;
    copy.close(&session).await?;
    Ok(())
}

/// Opens a channel with its rings where `RIG_PROBE_RINGS` says.
async fn open_one(
    session: &Session,
    engine: Engine,
    entries: u64,
) -> Result<Channel, ChannelError> {
    let rings = match std::env::var("RIG_PROBE_RINGS").as_deref() {
        Ok("gpu") => Rings::Gpu,
        _ => Rings::Host,
    };
    Channel::open_in(session, engine, entries, DEFAULT_PUSHBUFFER, rings).await
}

async fn spin(socket: &str, gpu: &str) -> Res<()> {
    let session = Session::open(socket, gpu).await?;
    let mut ch = open_one(&session, Engine::Copy, 1024).await?;
    let buf = session.alloc(64 * MIB, 2 * MIB).await?;
    let va = buf.gpu_va().ok_or("no GPU VA")?;
    println!("ready channel={} pid={}", ch.id(), std::process::id());
    // Copies and releases in flight when the kill comes: several 32 MiB copies queued.
    loop {
        for _ in 0..4 {
            ch.copy(va, GpuVa(va.get() + 32 * MIB), 32 * MIB)?;
        }
        let v = ch.release()?;
        ch.submit()?;
        ch.wait(v, LONG)?;
    }
}

async fn fault(socket: &str, gpu: &str) -> Res<()> {
    let session = Session::open(socket, gpu).await?;
    let mut ch = open_one(&session, Engine::Compute, 64).await?;
    let v = ch.release()?;
    ch.submit()?;
    ch.wait(v, LONG)?;
    // Nothing of any client is mapped this high: the window's last 2 MiB.
    let bad = GpuVa((1u64 << 40) - (2 << 20));
    ch.push(&method::release(bad, 7)?)?;
    // A host release: raw words on a compute channel have no engine release.
    let v = ch.release_with(method::Release {
        wait_idle: true,
        timestamp: false,
    })?;
    ch.submit()?;
    match ch.wait(v, LONG) {
        Err(ChannelError::Fault { fault, .. }) => {
            println!(
                "fault info32={} info16={:#x} reason=\"{}\"",
                fault.info32,
                fault.info16,
                fault.reason()
            );
        }
        Err(e) => return Err(format!("expected the RM's fault, got: {e}").into()),
        Ok(()) => return Err("a release into an unmapped address landed".into()),
    }
    ch.close(&session).await?;
    // A faulted session is contained whole: rigd freed its channels and opens it no
    // more, naming the fault (docs/RELIABILITY.md, "When a channel faults, and when the
    // GPU is lost").
    match open_one(&session, Engine::Copy, 64).await {
        Ok(_) => return Err("a faulted session opened another channel".into()),
        Err(e) => {
            let line = rig_client::error_line(&e);
            if !line.contains("faulted") {
                return Err(format!("refused, but not for the fault: {line}").into());
            }
            println!("after_fault same_session refused: {line}");
        }
    }
    // A new session of the same uid opens and runs.
    let fresh = Session::open(socket, gpu).await?;
    let mut again = open_one(&fresh, Engine::Copy, 64).await?;
    let v = again.release()?;
    again.submit()?;
    again.wait(v, LONG)?;
    println!(
        "after_fault new_session new_channel={} released={v}",
        again.id()
    );
    Ok(())
}

async fn steady(socket: &str, gpu: &str, secs: u64) -> Res<()> {
    let session = Session::open(socket, gpu).await?;
    let mut ch = open_one(&session, Engine::Copy, 1024).await?;
    let mut rtt = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs.max(1));
    while Instant::now() < end {
        let t = Instant::now();
        let v = ch.release_with(EMPTY_RELEASE)?;
        ch.submit()?;
        ch.wait(v, LONG)?;
        rtt.push(t.elapsed());
        // Its own pattern: its semaphore holds exactly its own last value.
        let got = ch.completed()?;
        if got != v {
            return Err(format!("semaphore reads {got} after release {v}: cross-talk").into());
        }
    }
    rtt.sort();
    println!(
        "steady pid={} releases={} p50_us={:.2} p99_us={:.2} max_us={:.1} rekicks={}",
        std::process::id(),
        rtt.len(),
        pct(&rtt, 0.5),
        pct(&rtt, 0.99),
        rtt.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
        ch.rekicks()
    );
    Ok(())
}

async fn open(socket: &str, gpu: &str, n: u64) -> Res<()> {
    let mut times = Vec::new();
    for _ in 0..n.max(1) {
        let t = Instant::now();
        let session = Session::open(socket, gpu).await?;
        let mut ch = open_one(&session, Engine::Compute, 1024).await?;
        let v = ch.release()?;
        ch.submit()?;
        ch.wait(v, LONG)?;
        times.push(t.elapsed());
        ch.close(&session).await?;
    }
    times.sort();
    println!(
        "open n={} median_ms={:.2} min_ms={:.2} max_ms={:.2}",
        times.len(),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
    Ok(())
}
