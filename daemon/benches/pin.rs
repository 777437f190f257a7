//! rigd's DMA pinning figures for docs/BENCHMARKS.md ("DMA"): pinning a pool (GiB/s)
//! against memset of the same size and the kernel's own hugetlb clearing (fallocate(2)
//! and a `MAP_POPULATE` fault-in), on 1 thread and on one per allowed CPU.
//!
//! It measures rigd's `dma::Pool` in this process, no client involved; the figures
//! through the client library against a rigd process are rig-client's `session` bench.
//!
//! Needs root and hugepages (it raises vm.nr_hugepages by what it uses and lowers it
//! again). Run pinned, e.g.:
//!
//! ```text
//! taskset -c 1 cargo bench -p rigd --bench pin
//! ```

use std::{
    path::Path,
    time::{Duration, Instant},
};

use rig_sys::{
    memfd::Memfd,
    mman::{Fill, Mapping},
};
use rigd::{
    dma::{
        Backing, Pool, PoolMode, PoolSpec,
        hugepages::{Hugepages, Reservation},
    },
    sys::memfd,
};

const MIB: u64 = 1 << 20;
const PIN_BLOCKS: u32 = 128;

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    // `cargo bench` passes --bench; `cargo test --all-targets` does not, and then this
    // run of a minute or more is skipped.
    if !std::env::args().any(|a| a == "--bench") {
        return Ok(());
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("pin bench: needs root (hugepages); skipped");
        return Ok(());
    }
    let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    let allowed: Vec<usize> = (0..64)
        .filter(|c| cpus.is_set(*c).unwrap_or(false))
        .collect();
    println!("CPUs allowed: {allowed:?}\n");
    pinning(allowed.len())
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
    let part = bytes / threads as u64;
    // Sealed before the clock starts, as the pool's blocks are before they are mapped:
    // only a sealed memfd maps, and sealing does not touch the pages.
    let files = (0..threads)
        .map(|_| {
            let fd = Memfd::create(c"rig-bench", Backing::Huge2M)?;
            fd.set_len(part)?;
            fd.seal()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let start = Instant::now();
    let maps = std::thread::scope(|sc| {
        let handles: Vec<_> = files
            .iter()
            .map(|fd| {
                sc.spawn(move || match how {
                    Clear::Allocate => memfd::allocate(fd, part).map(|()| None),
                    Clear::Populate => Mapping::shared(fd, Fill::Populate).map(Some),
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
