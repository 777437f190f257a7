//! rig-compute-probe: kernels and copies through rig-runtime against a running rigd on
//! a real GPU, checked element by element, with the figures CUDA's anchor
//! (tests/h200/cuda_compute_anchor.c) measures on the same cubin. Not an interface for
//! people.
//!
//! `rig-compute-probe [ROLE] SOCKET GPU [CUBIN]` (the cubin also from `RIG_CUBIN`; the
//! fixtures are in client/cubin/tests/data/). ROLE is `all` (the default: everything
//! below), `swarm SECONDS` (one of many clients at once: `store_at` launched one at a
//! time for SECONDS, each launch's own value read back from host memory, and a saxpy
//! with this client's own factor every 500 launches, checked whole at the end) or
//! `spin` (a kernel that runs for about 10 s, then `spinning` on stdout; the process
//! waits to be killed) or `host` (the launch figures only: opening, then `empty`
//! launched one at a time and back to back, for comparing CPUs and machine states in
//! one device call) or `stores` (what stores into GPU memory through BAR1 cost the
//! CPU, by pattern; no kernel) or `deps` (with tests/h200/deps/deps.cu's cubin: GPU
//! waits between channels, the gap between one kernel's end and the next one's start
//! on the same channel, on a second compute channel waiting by acquire, and on one the
//! host started after waiting, with the host time of a dependency; then uploads and
//! downloads ordered around kernels by the GPU alone, every round's value checked;
//! events' GPU time around a 100 µs kernel; the gap between a copy-engine upload's
//! end and a kernel behind it, waiting on the GPU with and without the group switch)
//! or `coop` (with client/cubin/tests/data/coop.cu's cubin in `RIG_COOP_CUBIN`: warp
//! shuffles and an atomic on a `__device__` variable, partial warps through cooperative
//! groups, CUB's block reduce and scan, each checked against the host; a grid sync in
//! cooperative launches of the largest grid the GPU holds at once and of a small one;
//! what a grid sees of its workspace with and without a cooperative launch; and a grid
//! one block too large, refused before anything is sent).
//! With `RIG_PROBE_UID=N` a root start drops
//! to uid N and gid `RIG_PROBE_GID` (default N), no supplementary groups, before
//! connecting; with `RIG_PROBE_RINGS=gpu` both channels put their rings, pushbuffers
//! and the launch arena in GPU memory (rigd must allow the uid); with
//! `RIG_PROBE_INVALIDATE_EACH=1` every launch pushes INVALIDATE_SHADER_CACHES, not only
//! the first after a module load (`ComputeOptions::invalidate_each_launch`).
//!
//! In order: opening (session, channels, the copy kernel, the cubin, a first `empty`
//! kernel; five times); `empty` launches one at a time and 10,000 back to back; saxpy
//! over 2^28 floats (vector add scaled) checked element by element; grid_fill over
//! 4,096 × 256 threads and a 3-D grid; reduce_sum (dynamic shared memory); local_array
//! (local memory); const_global and read_counter (banks 3 and 4, a `__device__`
//! global); copies host → device and device → host (256 MiB, copy engine) and device →
//! device (1 GiB, copy kernel); GPU memory allocated and freed (2 MiB); last, in a
//! session of its own, a store out of bounds, which must come back as this client's
//! typed fault while the first session keeps running.
//!
//! Prints `rig <name> median <x> p99 <y> <unit> (n <count>)` per figure, the anchor's
//! names, and `check <name> ok …` per result; the first failed check ends the run with
//! a non-zero status.

use std::{
    error::Error,
    process::ExitCode,
    time::{Duration, Instant},
};

use rig_client::{
    channel::{Engine, Rings, WaitPolicy},
    gpumem::GpuMemory,
    session::Session,
};
use rig_model::addr::GpuVa;
use rig_runtime::{
    Alloc, Arg, ComputeChannel, ComputeError, ComputeOptions, CopyOptions, GpuAlloc, Kernel,
    Memory, MemoryError, Module, PcasAction, Place, Runtime, RuntimeError, RuntimeOptions, Span,
    gpu_va,
};

type Res<T> = Result<T, Box<dyn Error>>;

const MIB: u64 = 1 << 20;
const STAGE: u64 = 256 * MIB;
// TIMEOUT: the longest kernel here (saxpy over 2^28, a 1 GiB copy) takes about 1 ms on
// an H200, a channel's first work well under a second; 10 s says something is wrong.
const LONG: Duration = Duration::from_secs(10);

const USAGE: &str = "usage: rig-compute-probe [all | swarm SECONDS | spin | host | stores | deps | waits | coop] SOCKET GPU [CUBIN]   (or RIG_CUBIN=CUBIN)
  deps and waits take tests/h200/deps/deps.cu's cubin; coop also RIG_COOP_CUBIN (coop.cu's)
  env: RIG_PROBE_UID=N [RIG_PROBE_GID=G]  drop to uid N before connecting
       RIG_PROBE_RINGS=gpu                rings, pushbuffers and arena in GPU memory
       RIG_PROBE_INVALIDATE_EACH=1        shader caches invalidated before every launch
       RIG_PROBE_PCAS=copy                INVALIDATE_COPY_SCHEDULE (Mesa's), not libcuda's
  prints `rig NAME median X p99 Y UNIT (n N)` and `check NAME ok ...` lines";

/// Where the probe's device buffers, module images and local memory come from: the
/// GPU memory rigd lends the session ([`GpuAlloc`]), boxed so that one type serves
/// every call.
#[derive(Debug, Clone, Copy)]
struct Device;

impl Alloc for Device {
    type Memory = Box<dyn Memory>;

    fn place(&self) -> Place {
        Place::Gpu
    }

    async fn alloc(
        &self,
        session: &Session,
        bytes: u64,
        align: u64,
    ) -> Result<Box<dyn Memory>, MemoryError> {
        Ok(Box::new(
            GpuAlloc.alloc(session, bytes, align.min(2 * MIB)).await?,
        ))
    }
}

/// Allocates and frees 2 MiB of device memory once; returns the time it took.
async fn alloc_free_2mib(session: &Session) -> Res<Duration> {
    // A buffer carved from the session's pages and returned to them: after the first,
    // no round trip (the library keeps up to 32 MiB of emptied pages).
    let t = Instant::now();
    let b = GpuMemory::alloc_aligned(session, 2 * MIB, 2 * MIB).await?;
    GpuMemory::free(session, b).await?;
    Ok(t.elapsed())
}

/// Leases one 2 MiB page of GPU memory from rigd and gives it back: two round trips,
/// each with the RM's allocation and mapping (or unmapping and free) behind it.
async fn lease_release_2mib(session: &Session) -> Res<Duration> {
    let t = Instant::now();
    let l = GpuMemory::lease(session, 2 * MIB).await?;
    GpuMemory::release(session, l.id).await?;
    Ok(t.elapsed())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (role, rest) = match args.get(1).map(String::as_str) {
        Some("all") => (Role::All, &args[2..]),
        Some("spin") => (Role::Spin, &args[2..]),
        Some("host") => (Role::Host, &args[2..]),
        Some("stores") => (Role::Stores, &args[2..]),
        Some("deps") => (Role::Deps, &args[2..]),
        Some("waits") => (Role::Waits, &args[2..]),
        Some("coop") => (Role::Coop, &args[2..]),
        Some("swarm") => match args.get(2).and_then(|n| n.parse().ok()) {
            Some(n) => (Role::Swarm(n), &args[3..]),
            None => (Role::Usage, &args[..0]),
        },
        _ => (Role::All, args.get(1..).unwrap_or_default()),
    };
    let (socket, gpu, cubin) = match rest {
        [s, g] => (s.clone(), g.clone(), std::env::var("RIG_CUBIN").ok()),
        [s, g, c] => (s.clone(), g.clone(), Some(c.clone())),
        _ => (String::new(), String::new(), None),
    };
    let Some(cubin) = cubin.filter(|_| !socket.is_empty() && role != Role::Usage) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let run = || -> Res<()> {
        let bytes = std::fs::read(&cubin).map_err(|e| format!("{cubin}: {e}"))?;
        // Read before the uid drops, as the first.
        let coop_cubin = match role {
            Role::Coop => {
                let path = std::env::var("RIG_COOP_CUBIN")
                    .map_err(|_| "the coop role reads RIG_COOP_CUBIN")?;
                std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?
            }
            _ => Vec::new(),
        };
        rig_tests::probe::drop_privileges()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            match role {
                Role::Swarm(seconds) => swarm(&socket, &gpu, &bytes, seconds).await,
                Role::Spin => spin(&socket, &gpu, &bytes).await,
                Role::Host => host(&socket, &gpu, &bytes).await,
                Role::Stores => stores(&socket, &gpu).await,
                Role::Deps => deps(&socket, &gpu, &bytes).await,
                Role::Waits => waits(&socket, &gpu, &bytes).await,
                Role::Coop => coop(&socket, &gpu, &bytes, &coop_cubin).await,
                Role::All | Role::Usage => probe(&socket, &gpu, &bytes).await,
            }
        })
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-compute-probe: {}", rig_client::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    All,
    Swarm(u64),
    Spin,
    Host,
    Stores,
    Deps,
    Waits,
    Coop,
    Usage,
}

fn options() -> RuntimeOptions {
    let rings = match std::env::var("RIG_PROBE_RINGS").as_deref() {
        Ok("gpu") => Rings::Gpu,
        _ => Rings::Host,
    };
    RuntimeOptions {
        compute: ComputeOptions {
            rings,
            timeout: LONG,
            invalidate_each_launch: std::env::var("RIG_PROBE_INVALIDATE_EACH").as_deref()
                == Ok("1"),
            pcas: if std::env::var("RIG_PROBE_PCAS").as_deref() == Ok("copy") {
                PcasAction::InvalidateCopySchedule
            } else {
                PcasAction::InvalidatePrefetchCopySchedule
            },
            ..ComputeOptions::default()
        },
        copy: CopyOptions {
            rings,
            ..CopyOptions::default()
        },
    }
}

fn report(name: &str, mut v: Vec<f64>, unit: &str) {
    v.sort_by(f64::total_cmp);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an index below the length"
    )]
    let p99 = v[((v.len() - 1) as f64 * 0.99).round() as usize];
    println!(
        "rig {name} median {:.3} p99 {p99:.3} {unit} (n {})",
        v[v.len() / 2],
        v.len()
    );
}

fn check(name: &str, wrong: u64, of: u64) -> Res<()> {
    if wrong != 0 {
        return Err(format!("check {name} FAILED: {wrong} wrong of {of}").into());
    }
    println!("check {name} ok ({of} checked)");
    Ok(())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One session with its runtime and the cubin loaded.
struct Probe {
    s: Session,
    rt: Runtime,
    m: Module,
    /// Staging: a host lease the copies go through.
    host: rig_client::session::Buffer,
}

impl Probe {
    async fn open(socket: &str, gpu: &str, cubin: &[u8]) -> Res<(Self, Kernel)> {
        Self::open_staged(socket, gpu, cubin, STAGE).await
    }

    /// As [`Probe::open`], with `stage` bytes of staging.
    async fn open_staged(socket: &str, gpu: &str, cubin: &[u8], stage: u64) -> Res<(Self, Kernel)> {
        let s = Session::open(socket, gpu).await?;
        let mut rt = Runtime::open(&s, &Device, options()).await?;
        let m = rt.load(&s, &Device, cubin).await?;
        let empty = m.kernel("empty")?;
        let v = rt.compute().launch(&empty, 1, 1, 0, &[])?;
        rt.compute().wait(v, LONG)?;
        let host = s.alloc(stage, 2 * MIB).await?;
        Ok((Self { s, rt, m, host }, empty))
    }

    /// Host bytes → `dst` at `off`, through the staging lease and the copy engine.
    fn put(&mut self, dst: &dyn Memory, off: u64, bytes: &[u8]) -> Res<Duration> {
        let len = bytes.len() as u64;
        self.host.write(0, bytes)?;
        let t = Instant::now();
        let done = self.rt.copy(
            &self.s,
            Span::new(&self.host, 0, len)?,
            Span::new(dst, off, len)?,
        )?;
        self.rt.wait(done, LONG)?;
        Ok(t.elapsed())
    }

    /// `len` bytes of `src` at `off` → host, through the staging lease and the copy
    /// engine; returns them and the copy's time alone (as CUDA's anchor times its
    /// cuMemcpyDtoH into pinned memory, without reading it afterwards).
    fn get(&mut self, src: &dyn Memory, off: u64, len: u64) -> Res<(Vec<u8>, Duration)> {
        let t = Instant::now();
        let done = self.rt.copy(
            &self.s,
            Span::new(src, off, len)?,
            Span::new(&self.host, 0, len)?,
        )?;
        self.rt.wait(done, LONG)?;
        let took = t.elapsed();
        let mut b = vec![0u8; usize::try_from(len)?];
        self.host.read(0, &mut b)?;
        Ok((b, took))
    }

    fn run(
        &mut self,
        k: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        dyn_shared: u32,
        args: &[Arg<'_>],
    ) -> Res<Duration> {
        let k = self.m.kernel(k)?;
        let t = Instant::now();
        let v = self
            .rt
            .compute()
            .launch(&k, grid, block, dyn_shared, args)?;
        self.rt.compute().wait(v, LONG)?;
        Ok(t.elapsed())
    }

    async fn buffer(&self, bytes: u64) -> Res<Box<dyn Memory>> {
        Ok(Device.alloc(&self.s, bytes, 2 * MIB).await?)
    }
}

fn words(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

async fn probe(socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    println!(
        "client uid={} pid={} rings={:?}",
        nix::unistd::getuid(),
        std::process::id(),
        options().compute.rings
    );
    let mut open = Vec::new();
    for _ in 0..4 {
        let t = Instant::now();
        let (p, _) = Probe::open(socket, gpu, cubin).await?;
        open.push(t.elapsed().as_secs_f64() * 1e3);
        p.rt.close(&p.s).await?;
    }
    let t = Instant::now();
    let (mut p, empty) = Probe::open(socket, gpu, cubin).await?;
    open.push(t.elapsed().as_secs_f64() * 1e3);
    report("open_first_kernel_ms", open, "ms");

    launches(&mut p, &empty)?;
    saxpy_and_copies(&mut p).await?;
    kernels(&mut p).await?;

    let mut al = Vec::new();
    for _ in 0..1000 {
        al.push(us(alloc_free_2mib(&p.s).await?));
    }
    report("alloc_free_2MiB_us", al, "us");
    let mut lr = Vec::new();
    for _ in 0..1000 {
        lr.push(us(lease_release_2mib(&p.s).await?));
    }
    report("lease_release_2MiB_us", lr, "us");
    // The two round trips apart: the lease (a spare page mapped, or an allocation and a
    // map) and the release (off the books; the unmap and free come after the reply).
    let (mut lease, mut release) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        let t = Instant::now();
        let l = GpuMemory::lease(&p.s, 2 * MIB).await?;
        let t1 = Instant::now();
        GpuMemory::release(&p.s, l.id).await?;
        lease.push(us(t1 - t));
        release.push(us(t1.elapsed()));
    }
    report("lease_2MiB_us", lease, "us");
    report("release_2MiB_us", release, "us");

    fault(socket, gpu, cubin).await?;
    // The first session was not disturbed by the other's fault.
    let t = p.run("empty", (1, 1, 1), (1, 1, 1), 0, &[])?;
    println!("check after_fault_other_session_runs ok ({:.1} us)", us(t));
    p.rt.close(&p.s).await?;
    Ok(())
}

async fn host(socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    let (mut p, empty) = Probe::open(socket, gpu, cubin).await?;
    launches(&mut p, &empty)?;
    after_plain_spin(&mut p, &empty)?;
    p.rt.close(&p.s).await?;
    Ok(())
}

/// Single launches as in [`launches`], each waited for by reading the semaphore in a
/// loop with no PAUSE (the library's wait pauses between reads): whether what the wait
/// does to the CPU (a hypervisor may stop a vCPU that pauses for long) shows in the
/// next launch's host time and in a clock read right after the wait.
fn after_plain_spin(p: &mut Probe, empty: &Kernel) -> Res<()> {
    let (mut host, mut clock) = (Vec::new(), Vec::new());
    for i in 0..10_100 {
        let t0 = Instant::now();
        let v = p.rt.compute().launch(empty, 1, 1, 0, &[])?;
        let t1 = Instant::now();
        let mut spins = 0u32;
        while p.rt.compute().channel().completed()? < v {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 16) && t1.elapsed() > LONG {
                break;
            }
        }
        let c0 = Instant::now();
        let c1 = Instant::now();
        p.rt.compute().wait(v, LONG)?;
        if i >= 100 {
            host.push(us(t1 - t0));
            clock.push(us(c1 - c0));
        }
    }
    report("empty_launch_host_plain_spin_us", host, "us");
    report("clock_pair_plain_spin_us", clock, "us");
    Ok(())
}

/// What stores into GPU memory through BAR1 cost the CPU, by pattern: a CPU view of
/// 2 MiB (write-combined), each pattern ending in a store fence as a submit's do,
/// rotating over the view so that no two reps write the same line. Timed in runs of
/// 100 reps (throughput, as launches back to back) and one rep at a time after a
/// 2 µs pause (as a lone launch), patterns interleaved so all see the same machine.
async fn stores(socket: &str, gpu: &str) -> Res<()> {
    let s = Session::open(socket, gpu).await?;
    let (info, view) = GpuMemory::lease_cpu_view(&s, 2 * MIB).await?;
    let lines = view.len() / 64;
    // (name, u64 stores per line, lines, u32 stores) then a fence.
    type Pattern = (&'static str, u64, u64, u64);
    let patterns: [Pattern; 8] = [
        ("fence_only", 0, 0, 0),
        ("1_line_1_u64", 1, 1, 0),
        ("1_line_8_u64", 8, 1, 0),
        ("4_lines_1_u64", 1, 4, 0),
        ("4_lines_8_u64", 8, 4, 0),
        ("6_u32", 0, 0, 6),
        ("2_lines_1_u64_6_u32", 1, 2, 6),
        ("1_line_1_u32", 0, 0, 1),
    ];
    let mut line = 0u64;
    let one = |p: &Pattern, line: &mut u64| -> Res<()> {
        let (_, per, n, words) = *p;
        for _ in 0..n {
            let at = (*line % lines) * 64;
            for k in 0..per {
                view.write_u64(at + 8 * k, k)?;
            }
            *line += 1;
        }
        let at = (*line % lines) * 64;
        for k in 0..words {
            view.write_u32(at + 4 * k, 0x2000_0000)?;
        }
        if words > 0 {
            *line += 1;
        }
        view.fence();
        Ok(())
    };
    let mut runs = vec![Vec::new(); patterns.len()];
    let mut lone = vec![Vec::new(); patterns.len()];
    for round in 0..2200 {
        for (i, p) in patterns.iter().enumerate() {
            if round % 11 == 0 {
                let t = Instant::now();
                for _ in 0..100 {
                    one(p, &mut line)?;
                }
                runs[i].push(us(t.elapsed()) / 100.0);
            } else {
                let pause = Instant::now();
                while pause.elapsed() < Duration::from_micros(2) {
                    std::hint::spin_loop();
                }
                let t = Instant::now();
                one(p, &mut line)?;
                lone[i].push(us(t.elapsed()));
            }
        }
    }
    for (i, p) in patterns.iter().enumerate() {
        report(
            &format!("stores_run_{}_us", p.0),
            std::mem::take(&mut runs[i]),
            "us",
        );
        report(
            &format!("stores_lone_{}_us", p.0),
            std::mem::take(&mut lone[i]),
            "us",
        );
    }
    drop(view);
    GpuMemory::release(&s, info.id).await?;
    Ok(())
}

/// Launches timed together for the batch figure of host time: fewer than a template's
/// 64 slots, so none waits for the GPU.
const HOST_BATCH: u32 = 32;

fn launches(p: &mut Probe, empty: &Kernel) -> Res<()> {
    let (mut rtt, mut host) = (Vec::new(), Vec::new());
    for i in 0..10_100 {
        let t0 = Instant::now();
        let v = p.rt.compute().launch(empty, 1, 1, 0, &[])?;
        let t1 = Instant::now();
        p.rt.compute().wait(v, LONG)?;
        if i >= 100 {
            host.push(us(t1 - t0));
            rtt.push(us(t0.elapsed()));
        }
    }
    report("empty_launch_sync_us", rtt, "us");
    report("empty_launch_host_us", host, "us");
    // Host time without a clock pair per launch: 32 launches back to back timed
    // together (each behind work in flight, so with its WFI), then a wait off the clock.
    let mut batch = Vec::new();
    for i in 0..520 {
        let t0 = Instant::now();
        let mut v = 0;
        for _ in 0..HOST_BATCH {
            v = p.rt.compute().launch(empty, 1, 1, 0, &[])?;
        }
        let spent = t0.elapsed();
        p.rt.compute().wait(v, LONG)?;
        if i >= 20 {
            batch.push(us(spent) / f64::from(HOST_BATCH));
        }
    }
    report("empty_launch_host_batch_us", batch, "us");
    // The same batch written first and submitted once: what the launches' stores cost
    // apart from the submit's fences and doorbell; every other round with each queued
    // launch chained behind the one before (`ComputeOptions::chain`), the runtime's
    // setting put back after.
    let was = p.rt.compute().chains();
    let (mut written, mut chained, mut rung) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..1040 {
        let chain = i % 2 == 1;
        p.rt.compute().set_chain(chain);
        let t0 = Instant::now();
        let mut v = 0;
        for _ in 0..HOST_BATCH {
            v = p.rt.compute().enqueue(empty, 1, 1, 0, &[])?;
        }
        let t1 = Instant::now();
        p.rt.compute().submit()?;
        let t2 = Instant::now();
        p.rt.compute().wait(v, LONG)?;
        if i >= 40 {
            let each = us(t1 - t0) / f64::from(HOST_BATCH);
            if chain {
                chained.push(each);
            } else {
                written.push(each);
                rung.push(us(t2 - t1));
            }
        }
    }
    p.rt.compute().set_chain(was);
    report("empty_enqueue_batch_us", written, "us");
    report("empty_enqueue_batch_chained_us", chained, "us");
    report("batch_submit_us", rung, "us");
    // Where the host time goes: the launch written (enqueue), then the doorbell
    // (submit); and what two clock reads alone cost, which every sample includes.
    let (mut enq, mut sub, mut clock) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..10_100 {
        let t0 = Instant::now();
        let v = p.rt.compute().enqueue(empty, 1, 1, 0, &[])?;
        let t1 = Instant::now();
        p.rt.compute().submit()?;
        let t2 = Instant::now();
        p.rt.compute().wait(v, LONG)?;
        let t3 = Instant::now();
        if i >= 100 {
            enq.push(us(t1 - t0));
            sub.push(us(t2 - t1));
            clock.push(us(Instant::now() - t3));
        }
    }
    report("empty_enqueue_host_us", enq, "us");
    report("empty_submit_host_us", sub, "us");
    report("clock_pair_us", clock, "us");
    let n = 10_000;
    let t = Instant::now();
    let mut v = 0;
    for i in 0..n {
        v = p.rt.compute().enqueue(empty, 1, 1, 0, &[])?;
        if i % 64 == 63 {
            p.rt.compute().submit()?;
        }
    }
    p.rt.compute().submit()?;
    p.rt.compute().wait(v, LONG)?;
    let per = us(t.elapsed()) / f64::from(n);
    println!("rig empty_back_to_back_us median {per:.3} p99 {per:.3} us (n {n})");
    let landed = p.rt.compute().channel().completed()?;
    check("back_to_back_10000_all_released", u64::from(landed != v), 1)
}

async fn saxpy_and_copies(p: &mut Probe) -> Res<()> {
    let n: u64 = 1 << 28;
    let (x, y) = (p.buffer(n * 4).await?, p.buffer(n * 4).await?);
    let piece = STAGE / 4;
    let mut h2d = Vec::new();
    for (which, dst) in [(0, &x), (1, &y)] {
        for at in (0..n).step_by(usize::try_from(piece)?) {
            let b: Vec<u8> = (at..at + piece)
                .flat_map(|i| if which == 0 { (i & 0xfff) as f32 } else { 1.0 }.to_le_bytes())
                .collect();
            let t = p.put(dst.as_ref(), at * 4, &b)?;
            h2d.push(STAGE as f64 / t.as_secs_f64() / 1e9);
        }
    }
    report("h2d_256MiB_GBps", h2d, "GB/s");
    let args = [
        Arg::F32(3.0),
        Arg::Ptr(gpu_va(&*x)?),
        Arg::Ptr(gpu_va(&*y)?),
        Arg::U64(n),
    ];
    let grid = u32::try_from(n / 256)?;
    let mut sax = Vec::new();
    for _ in 0..21 {
        sax.push(us(p.run("saxpy", (grid, 1, 1), (256, 1, 1), 0, &args)?));
    }
    report("saxpy_2e28_us", sax, "us");
    let (mut wrong, mut d2h) = (0u64, Vec::new());
    for at in (0..n).step_by(usize::try_from(piece)?) {
        let (b, t) = p.get(y.as_ref(), at * 4, STAGE)?;
        d2h.push(STAGE as f64 / t.as_secs_f64() / 1e9);
        for (j, w) in words(&b).enumerate() {
            let i = at + j as u64;
            let want = 1.0 + 63.0 * (i & 0xfff) as f32;
            wrong += u64::from(f32::from_bits(w) != want);
        }
    }
    report("d2h_256MiB_GBps", d2h, "GB/s");
    check("saxpy_2e28_element_by_element", wrong, n)?;
    let mut d2d = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let done =
            p.rt.copy(&p.s, Span::all(x.as_ref())?, Span::all(y.as_ref())?)?;
        p.rt.wait(done, LONG)?;
        d2d.push((n * 4) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    report("d2d_1GiB_GBps", d2d, "GB/s");
    let b = p.get(y.as_ref(), (n - piece) * 4, STAGE)?.0;
    let wrong = words(&b)
        .enumerate()
        .filter(|&(j, w)| f32::from_bits(w) != ((n - piece + j as u64) & 0xfff) as f32)
        .count();
    check("d2d_1GiB_last_256MiB", wrong as u64, piece)
}

async fn kernels(p: &mut Probe) -> Res<()> {
    let out = p.buffer(64 * MIB).await?;
    let o = Arg::Ptr(gpu_va(&*out)?);
    for (grid, block) in [((4096, 1, 1), (256, 1, 1)), ((16, 8, 4), (8, 4, 2))] {
        let count = 4096u32 * 256;
        p.put(out.as_ref(), 0, &vec![0u8; count as usize * 4])?;
        p.run("grid_fill", grid, block, 0, &[o])?;
        let b = p.get(out.as_ref(), 0, u64::from(count) * 4)?.0;
        let threads = grid.0 * grid.1 * grid.2 * block.0 * block.1 * block.2;
        let wrong = words(&b)
            .zip(0..threads)
            .filter(|&(w, i)| w != i.wrapping_mul(2_654_435_761).wrapping_add(1))
            .count();
        check(
            &format!("grid_fill_{grid:?}x{block:?}"),
            wrong as u64,
            threads.into(),
        )?;
    }
    // reduce_sum: 2^20 words i % 1000, 256 words of dynamic shared memory per block.
    let nr = 1u32 << 20;
    let input: Vec<u8> = (0..nr).flat_map(|i| (i % 1000).to_le_bytes()).collect();
    p.put(out.as_ref(), 0, &input)?;
    p.put(out.as_ref(), 8 * MIB, &[0u8; 8])?;
    let sum_at = Arg::Ptr(rig_model::addr::GpuVa(gpu_va(&*out)?.get() + 8 * MIB));
    p.run(
        "reduce_sum",
        (nr / 256, 1, 1),
        (256, 1, 1),
        1024,
        &[o, sum_at, Arg::U32(nr)],
    )?;
    let got = u64::from_le_bytes(
        p.get(out.as_ref(), 8 * MIB, 8)?
            .0
            .try_into()
            .map_err(|_| "8 bytes")?,
    );
    let want: u64 = (0..nr).map(|i| u64::from(i % 1000)).sum();
    check("reduce_sum", u64::from(got != want), 1)?;
    // local_array: a dynamically indexed array on each thread's stack.
    let nl = 65536u32;
    let idx: Vec<u8> = (0..nl)
        .flat_map(|i| (i.wrapping_mul(7) & 255).to_le_bytes())
        .collect();
    p.put(out.as_ref(), 0, &idx)?;
    let res = Arg::Ptr(rig_model::addr::GpuVa(gpu_va(&*out)?.get() + 16 * MIB));
    p.run(
        "local_array",
        (nl / 128, 1, 1),
        (128, 1, 1),
        0,
        &[o, res, Arg::U32(nl)],
    )?;
    let b = p.get(out.as_ref(), 16 * MIB, u64::from(nl) * 4)?.0;
    let wrong = words(&b)
        .zip(0u32..)
        .filter(|&(w, i)| w != i.wrapping_mul(31) + (i.wrapping_mul(7) & 255))
        .count();
    check("local_array", wrong as u64, nl.into())?;
    // const_global (banks 3 and 4, relocations) and read_counter (a __device__ global).
    let nn = 4096u32;
    p.run(
        "const_global",
        (nn / 128, 1, 1),
        (128, 1, 1),
        0,
        &[o, Arg::U32(nn)],
    )?;
    let counter_at = Arg::Ptr(rig_model::addr::GpuVa(gpu_va(&*out)?.get() + 24 * MIB));
    p.run("read_counter", (1, 1, 1), (1, 1, 1), 0, &[counter_at])?;
    let table = [3u32, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];
    let b = p.get(out.as_ref(), 0, u64::from(nn) * 4)?.0;
    let wrong = words(&b)
        .enumerate()
        .filter(|&(t, w)| w != table[t & 15] + 0x0100_0000)
        .count();
    check("const_global", wrong as u64, nn.into())?;
    let counter = u64::from_le_bytes(
        p.get(out.as_ref(), 24 * MIB, 8)?
            .0
            .try_into()
            .map_err(|_| "8 bytes")?,
    );
    check("read_counter", u64::from(counter != u64::from(nn)), 1)
}

/// A second session whose kernel stores where its address space maps nothing.
async fn fault(socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    let (mut p, _) = Probe::open(socket, gpu, cubin).await?;
    let k = p.m.kernel("store_at")?;
    // Below every window and everything rigd maps: nothing of this client is there.
    let nowhere = rig_model::addr::GpuVa(0xf_0000_0000);
    let v =
        p.rt.compute()
            .launch(&k, 1, 1, 0, &[Arg::Ptr(nowhere), Arg::U32(7)])?;
    match p.rt.compute().wait(v, LONG) {
        Err(ComputeError::Channel(rig_client::channel::ChannelError::Fault { fault, .. })) => {
            println!(
                "check out_of_bounds_store_faults_typed ok (info32 {} {})",
                fault.info32,
                fault.reason()
            );
        }
        Err(e) => return Err(format!("check out_of_bounds_store FAILED: {e}").into()),
        Ok(()) => return Err("check out_of_bounds_store FAILED: it completed".into()),
    }
    // Its channels' group is stopped; rigd reclaims it either way.
    let closed: Result<(), RuntimeError> = p.rt.close(&p.s).await;
    if let Err(e) = closed {
        println!("closing the faulted session: {e}");
    }
    Ok(())
}

/// Staging for the clients of `swarm` and `spin`: 64 of them share rigd's host pool.
const SMALL_STAGE: u64 = 4 * MIB;

/// `swarm SECONDS`: one of many clients launching at once. `store_at` stores this
/// launch's own value (the pid's low 12 bits and the launch's number) into a host lease,
/// launched and waited for one at a time and read back after each; every 500 launches a
/// saxpy adds this client's own factor to 2^20 floats in its GPU memory, all checked at
/// the end. A value of another client's, or a lost store, fails the check.
async fn swarm(socket: &str, gpu: &str, cubin: &[u8], seconds: u64) -> Res<()> {
    let (mut p, _) = Probe::open_staged(socket, gpu, cubin, SMALL_STAGE).await?;
    let me = std::process::id();
    let tag = me & 0xfff;
    let store = p.m.kernel("store_at")?;
    let results = p.s.alloc(2 * MIB, 2 * MIB).await?;
    let n: u64 = 1 << 20;
    let (x, y) = (p.buffer(n * 4).await?, p.buffer(n * 4).await?);
    let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    p.put(x.as_ref(), 0, &ones)?;
    p.put(y.as_ref(), 0, &vec![0u8; usize::try_from(n * 4)?])?;
    let a = f32::from(u16::try_from(tag % 1000 + 1)?);
    let sax = [
        Arg::F32(a),
        Arg::Ptr(gpu_va(&*x)?),
        Arg::Ptr(gpu_va(&*y)?),
        Arg::U64(n),
    ];
    let grid = u32::try_from(n / 256)?;
    start_together()?;
    let start = monotonic_us()?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut lat, mut wrong, mut saxpys) = (Vec::new(), 0u64, 0u32);
    let mut i = 0u32;
    while Instant::now() < deadline {
        let at = u64::from(i % 4096) * 4;
        let value = (tag << 20) | (i & 0xf_ffff);
        let ptr = rig_model::addr::GpuVa(gpu_va(&results)?.get() + at);
        let t = Instant::now();
        let v =
            p.rt.compute()
                .launch(&store, 1, 1, 0, &[Arg::Ptr(ptr), Arg::U32(value)])?;
        p.rt.compute().wait(v, LONG)?;
        lat.push(us(t.elapsed()));
        let mut got = [0u8; 4];
        results.read(at, &mut got)?;
        wrong += u64::from(u32::from_le_bytes(got) != value);
        i += 1;
        if i.is_multiple_of(500) {
            p.run("saxpy", (grid, 1, 1), (256, 1, 1), 0, &sax)?;
            saxpys += 1;
        }
    }
    let end = monotonic_us()?;
    report("swarm_launch_sync_us", lat, "us");
    println!("swarm window pid {me} start_us {start} end_us {end}");
    check("swarm_store_at_own_value", wrong, i.into())?;
    // y grew by a once per saxpy, each sum rounded to f32 as the kernel's FMA rounds it
    // (a * 1 is exact): past 2^24 that is no longer a * saxpys.
    let want = (0..saxpys).fold(0.0f32, |y, _| a.mul_add(1.0, y));
    let b = p.get(y.as_ref(), 0, n * 4)?.0;
    let wrong = words(&b).filter(|&w| f32::from_bits(w) != want).count();
    check("swarm_saxpy_own_factor", wrong as u64, n)?;
    println!("swarm pid {me} launches {i} saxpys {saxpys}");
    p.rt.close(&p.s).await?;
    Ok(())
}

/// With `SWARM_DIR` set, says this client is ready (a file `ready.PID` there) and waits
/// for a file `go` to appear, which the harness makes once every client is ready: so
/// the clients' timed windows overlap whole, however long each one took to open (CUDA's
/// anchor does the same, tests/h200/cuda_compute_anchor.c).
fn start_together() -> Res<()> {
    let Ok(dir) = std::env::var("SWARM_DIR") else {
        return Ok(());
    };
    let dir = std::path::Path::new(&dir);
    std::fs::write(dir.join(format!("ready.{}", std::process::id())), b"")?;
    let give_up = Instant::now() + Duration::from_secs(120);
    while !dir.join("go").exists() {
        if Instant::now() > give_up {
            return Err("swarm: no go within 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// CLOCK_MONOTONIC in microseconds: one clock for every process on the machine.
fn monotonic_us() -> Res<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)?;
    Ok(t.tv_sec().unsigned_abs() * 1_000_000 + t.tv_nsec().unsigned_abs() / 1000)
}

/// `spin`: a kernel on every SM that runs for about 10 s (2 * 10^10 clocks at the
/// H200's 1.98 GHz), then `spinning`; waits to be killed (60 s at most).
async fn spin(socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    let (mut p, _) = Probe::open_staged(socket, gpu, cubin, SMALL_STAGE).await?;
    let done = p.buffer(2 * MIB).await?;
    p.put(done.as_ref(), 0, &[0u8; 4])?;
    let k = p.m.kernel("spin")?;
    let v = p.rt.compute().launch(
        &k,
        132,
        32,
        0,
        &[Arg::U64(20_000_000_000), Arg::Ptr(gpu_va(&*done)?)],
    )?;
    std::thread::sleep(Duration::from_millis(200));
    if p.rt.compute().channel().completed()? >= v {
        return Err("spin FAILED: the kernel ended within 200 ms".into());
    }
    println!("spinning (value {v} in flight)");
    std::io::Write::flush(&mut std::io::stdout())?;
    std::thread::sleep(Duration::from_secs(60));
    Err("spin: not killed within 60 s".into())
}

/// Nanoseconds from the first stamp (at +0) to the second (at +8) of `out`.
fn gap_ns(out: &rig_client::session::Buffer) -> Res<f64> {
    let mut b = [0u8; 16];
    out.read(0, &mut b)?;
    let end = u64::from_le_bytes(b[..8].try_into()?);
    let start = u64::from_le_bytes(b[8..].try_into()?);
    // CAST: a difference of two GPU clocks, signed: a negative one is a kernel that
    // started before the one it was to follow ended.
    #[expect(
        clippy::cast_possible_wrap,
        clippy::cast_precision_loss,
        reason = "a small difference"
    )]
    Ok(start.wrapping_sub(end) as i64 as f64)
}

/// The `deps` role: waits between channels on the GPU (docs/compute.md,
/// "Dependencies"), side by side with tests/h200/deps/cuda_deps.c.
/// CPU time this thread has used (CLOCK_THREAD_CPUTIME_ID, as tests/h200/deps/cuda_waits.c
/// reads it: getrusage's thread times are sampled at the scheduler's tick and read 0
/// for a thread that spun a millisecond).
fn thread_cpu() -> Res<Duration> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)?;
    Ok(Duration::from_secs(t.tv_sec().unsigned_abs())
        + Duration::from_nanos(t.tv_nsec().unsigned_abs()))
}

/// Waits under each policy (tests/h200/deps/cuda_waits.c is CUDA's side): a kernel
/// that spins 20 µs, 1 ms or 10 ms of %globaltimer, launched and waited for; the host's
/// time from the launch to the wait's return and the CPU the waiting thread used.
/// Checks that blocked waits were woken by the GPU's interrupt, not by the end of a
/// sleep's slice.
async fn waits(socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    let s = Session::open(socket, gpu).await?;
    let mut rt = Runtime::open(&s, &Device, options()).await?;
    let m = rt.load(&s, &Device, cubin).await?;
    let after = m.kernel("stamp_after")?;
    let out = s.alloc(4096, 4096).await?;
    let end_at = Arg::Ptr(out.gpu_va().ok_or("the session is on a served GPU")?);
    let policies = [
        ("spin", WaitPolicy::Spin),
        ("yield", WaitPolicy::Yield),
        ("block", WaitPolicy::Block),
        ("spin_then_block", WaitPolicy::default()),
    ];
    let kernels = [
        ("20us", 20_000u64, 200usize),
        ("1ms", 1_000_000, 50),
        ("10ms", 10_000_000, 10),
    ];
    let mut late = 0u64;
    let mut checked = 0u64;
    for (name, policy) in policies {
        rt.set_wait_policy(policy);
        for (k, ns, rounds) in kernels {
            let args = [Arg::U64(ns), end_at];
            let v = rt.compute().launch(&after, 1, 1, 0, &args)?;
            rt.compute().wait(v, LONG)?;
            let (sleeps, arms) = (
                rt.compute().channel().sleeps(),
                rt.compute().channel().interrupts(),
            );
            let (mut wall, mut cpu) = (vec![], vec![]);
            for _ in 0..rounds {
                let (t, c) = (Instant::now(), thread_cpu()?);
                let v = rt.compute().launch(&after, 1, 1, 0, &args)?;
                rt.compute().wait(v, LONG)?;
                let w = t.elapsed();
                wall.push(w.as_secs_f64() * 1e6);
                cpu.push((thread_cpu()? - c).as_secs_f64() * 1e6);
                if policy == WaitPolicy::Block && ns >= 1_000_000 {
                    // A sleep's slice is 50 ms: a wait woken only by its end would
                    // take that long.
                    checked += 1;
                    late += u64::from(w > Duration::from_nanos(ns) + Duration::from_millis(5));
                }
            }
            let ch = rt.compute().channel();
            println!(
                "waits {name} {k}: {} arms, {} sleeps, {} wakes missed in all",
                ch.interrupts() - arms,
                ch.sleeps() - sleeps,
                ch.missed_wakes()
            );
            report(&format!("waits_{name}_{k}_kernel_wall_us"), wall, "us");
            report(&format!("waits_{name}_{k}_kernel_cpu_us"), cpu, "us");
        }
    }
    rt.set_wait_policy(WaitPolicy::default());
    check("waits_block_woken_by_the_interrupt", late, checked)
}

async fn deps(socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    const ROUNDS: usize = 500;
    // The first kernel runs 20 µs, so the second is queued well before it ends.
    const SPIN_NS: u64 = 20_000;
    let s = Session::open(socket, gpu).await?;
    // This runtime's compute channel launches behind a WFI, never chained: the
    // comparison below chains on a channel of its own.
    let mut o = options();
    o.compute.chain = false;
    let mut rt = Runtime::open(&s, &Device, o).await?;
    let m = rt.load(&s, &Device, cubin).await?;
    let mut c2 = ComputeChannel::open(&s, options().compute).await?;
    let (after, stamp) = (m.kernel("stamp_after")?, m.kernel("stamp")?);
    let out = s.alloc(4096, 4096).await?;
    let at = out.gpu_va().ok_or("the session is on a served GPU")?;
    let (end_at, start_at) = (Arg::Ptr(at), Arg::Ptr(GpuVa(at.get() + 8)));
    let first = [Arg::U64(SPIN_NS), end_at];
    // Warm both channels and the kernels.
    for _ in 0..3 {
        let v = rt.compute().launch(&stamp, 1, 1, 0, &[start_at])?;
        rt.compute().wait(v, LONG)?;
        let v = c2.launch(&stamp, 1, 1, 0, &[start_at])?;
        c2.wait(v, LONG)?;
    }
    let (mut same, mut cross, mut host_wait, mut dep_ns) = (vec![], vec![], vec![], vec![]);
    let mut switched = vec![];
    let mut negative = 0u64;
    for _ in 0..ROUNDS {
        // One channel: the second grid follows the first by the channel's WFI.
        out.write(0, &[0u8; 16])?;
        rt.compute().launch(&after, 1, 1, 0, &first)?;
        let v = rt.compute().launch(&stamp, 1, 1, 0, &[start_at])?;
        rt.compute().wait(v, LONG)?;
        same.push(gap_ns(&out)? / 1e3);

        // Two channels, the second acquiring the first's value on the GPU.
        out.write(0, &[0u8; 16])?;
        let v1 = rt.compute().launch(&after, 1, 1, 0, &first)?;
        let t = Instant::now();
        let fence = rt.compute().channel().fence(v1)?;
        c2.acquire(fence)?;
        dep_ns.push(t.elapsed().as_secs_f64() * 1e9);
        let v2 = c2.launch(&stamp, 1, 1, 0, &[start_at])?;
        c2.wait(v2, LONG)?;
        let g = gap_ns(&out)?;
        negative += u64::from(g < 0.0);
        cross.push(g / 1e3);

        // The same wait with ACQUIRE_SWITCH_TSG, as rig pushed it before: both compute
        // channels are in the session's one channel group, so switching it out also
        // switches out the kernel waited for. Pushed raw, for the comparison.
        out.write(0, &[0u8; 16])?;
        let v1 = rt.compute().launch(&after, 1, 1, 0, &first)?;
        let fence = rt.compute().channel().fence(v1)?;
        let words = rig_nv::method::acquire(
            fence.semaphore,
            fence.value,
            rig_nv::method::Waiting::SwitchGroup,
        )?;
        c2.channel().push(&words)?;
        let v2 = c2.launch(&stamp, 1, 1, 0, &[start_at])?;
        c2.wait(v2, LONG)?;
        let g = gap_ns(&out)?;
        negative += u64::from(g < 0.0);
        switched.push(g / 1e3);

        // Two channels, the host waiting in between (rig before GPU waits).
        out.write(0, &[0u8; 16])?;
        let v1 = rt.compute().launch(&after, 1, 1, 0, &first)?;
        rt.compute().wait(v1, LONG)?;
        let v2 = c2.launch(&stamp, 1, 1, 0, &[start_at])?;
        c2.wait(v2, LONG)?;
        host_wait.push(gap_ns(&out)? / 1e3);
    }
    check("deps_cross_channel_order", negative, 2 * ROUNDS as u64)?;
    report("deps_gap_same_channel_us", same, "us");
    report("deps_gap_cross_channel_acquire_us", cross, "us");
    report(
        "deps_gap_cross_channel_acquire_switch_group_us",
        switched,
        "us",
    );
    report("deps_gap_cross_channel_host_wait_us", host_wait, "us");
    report("deps_host_per_dependency_ns", dep_ns, "ns");

    // Chained launches (`ComputeOptions::chain`): the same pair enqueued back to back
    // and submitted once, on this channel (a host WFI and SEND_PCAS between them) and
    // on one that chains (the first QMD starts the second); then 1,000 `stamp`s queued
    // back to back each way, the host's time from the first enqueue to the last value
    // landing, per launch (a template's 64 slots bound each chain).
    let mut c3 = ComputeChannel::open(
        &s,
        ComputeOptions {
            chain: true,
            ..options().compute
        },
    )
    .await?;
    for _ in 0..3 {
        let v = c3.launch(&stamp, 1, 1, 0, &[start_at])?;
        c3.wait(v, LONG)?;
    }
    let (mut queued, mut chained, mut disordered) = (vec![], vec![], 0u64);
    for _ in 0..ROUNDS {
        for (ch, gaps) in [(rt.compute(), &mut queued), (&mut c3, &mut chained)] {
            out.write(0, &[0u8; 16])?;
            ch.enqueue(&after, 1, 1, 0, &first)?;
            let v = ch.enqueue(&stamp, 1, 1, 0, &[start_at])?;
            ch.submit()?;
            ch.wait(v, LONG)?;
            let g = gap_ns(&out)?;
            disordered += u64::from(g < 0.0);
            gaps.push(g / 1e3);
        }
    }
    check(
        "deps_queued_and_chained_order",
        disordered,
        2 * ROUNDS as u64,
    )?;
    report("deps_gap_same_channel_queued_us", queued, "us");
    report("deps_gap_same_channel_chained_us", chained, "us");
    let (mut wfi_each, mut chained_each) = (vec![], vec![]);
    for _ in 0..20 {
        for (ch, each) in [(rt.compute(), &mut wfi_each), (&mut c3, &mut chained_each)] {
            let t = Instant::now();
            let mut v = 0;
            for _ in 0..1000 {
                v = ch.enqueue(&stamp, 1, 1, 0, &[start_at])?;
            }
            ch.submit()?;
            ch.wait(v, LONG)?;
            each.push(us(t.elapsed()) / 1000.0);
        }
    }
    report("deps_back_to_back_1000_each_us", wfi_each, "us");
    report("deps_back_to_back_1000_chained_each_us", chained_each, "us");
    c3.close(&s).await?;

    // Events with the GPU's time around a kernel that spins 100 µs of %globaltimer,
    // as CUDA's cuEventElapsedTime measures the same kernel.
    let long = [Arg::U64(100_000), end_at];
    let mut elapsed = vec![];
    for _ in 0..ROUNDS {
        let a = rt.record(Engine::Compute, &[])?;
        rt.compute().launch(&after, 1, 1, 0, &long)?;
        let b = rt.record(Engine::Compute, &[])?;
        #[expect(clippy::cast_precision_loss, reason = "nanoseconds of a kernel")]
        elapsed.push(rt.elapsed(a, b, LONG)? as f64 / 1e3);
    }
    report("events_elapsed_100us_kernel_us", elapsed, "us");

    // A kernel behind a copy on the other engine: a 4 KiB upload, an event on the copy
    // channel right after it (the copy engine's time once it is done), and `stamp`
    // behind the copy by a GPU wait; the gap is the kernel's start minus the event.
    // The library's words (another engine's fence: ACQUIRE_SWITCH_TSG), then the
    // same wait staying on the engine, pushed raw.
    let small = s.alloc(4096, 4096).await?;
    let small_dst = Device.alloc(&s, 4096, 4096).await?;
    let (mut yields, mut stays) = (vec![], vec![]);
    for stay in [false, true] {
        for _ in 0..ROUNDS / 2 {
            out.write(0, &[0u8; 16])?;
            let up = rt.copy(
                &s,
                Span::all(&small)?,
                Span::new(small_dst.as_ref(), 0, 4096)?,
            )?;
            let ev = rt.record(Engine::Copy, &[])?;
            let k = if stay {
                let fence = rt.copies().channel().fence(up.value)?;
                let words = rig_nv::method::acquire32(
                    fence.semaphore,
                    (fence.value & 0xffff_ffff) as u32,
                    rig_nv::method::Waiting::Stay,
                )?;
                rt.compute().channel().push(&words)?;
                rt.launch(&stamp, 1, 1, 0, &[start_at], &[])?
            } else {
                rt.launch(&stamp, 1, 1, 0, &[start_at], &[up])?
            };
            rt.wait(k, LONG)?;
            let copied = rt.event_time(ev, LONG)?;
            let mut b = [0u8; 8];
            out.read(8, &mut b)?;
            // The event's release follows the copy's own, so a kernel may start a
            // little before it: the gap is signed (ordering is checked below,
            // `deps_copy_then_kernel`).
            let started = u64::from_le_bytes(b);
            #[expect(
                clippy::cast_possible_wrap,
                clippy::cast_precision_loss,
                reason = "a small difference of two GPU clocks"
            )]
            let gap = started.wrapping_sub(copied) as i64 as f64 / 1e3;
            if stay {
                stays.push(gap)
            } else {
                yields.push(gap)
            }
        }
    }
    check(
        "deps_copy_engine_order",
        negative,
        2 * ROUNDS as u64 + ROUNDS as u64,
    )?;
    report("deps_gap_copy_then_kernel_acquire_us", yields, "us");
    report("deps_gap_copy_then_kernel_acquire_stay_us", stays, "us");

    // A copy beside a kernel: 256 MiB host → GPU memory on the copy channel and a
    // kernel of about as long on the compute channel, no dependency between them.
    let big = 256 * MIB;
    let src = s.alloc(big, 2 * MIB).await?;
    let dst = Device.alloc(&s, big, 2 * MIB).await?;
    let copy = |rt: &mut Runtime| -> Res<_> {
        Ok(rt.copy(&s, Span::all(&src)?, Span::new(dst.as_ref(), 0, big)?)?)
    };
    let t = Instant::now();
    let d = copy(&mut rt)?;
    rt.wait(d, LONG)?;
    let copy_alone = t.elapsed();
    let kernel_ns = u64::try_from(copy_alone.as_nanos())?;
    let spin = [Arg::U64(kernel_ns), end_at];
    let (mut alone_copy, mut alone_kernel, mut beside) = (vec![], vec![], vec![]);
    for _ in 0..20 {
        let t = Instant::now();
        let d = copy(&mut rt)?;
        rt.wait(d, LONG)?;
        alone_copy.push(us(t.elapsed()) / 1e3);
        let t = Instant::now();
        let k = rt.launch(&after, 1, 1, 0, &spin, &[])?;
        rt.wait(k, LONG)?;
        alone_kernel.push(us(t.elapsed()) / 1e3);
        let t = Instant::now();
        let d = copy(&mut rt)?;
        let k = rt.launch(&after, 1, 1, 0, &spin, &[])?;
        rt.wait(d, LONG)?;
        rt.wait(k, LONG)?;
        beside.push(us(t.elapsed()) / 1e3);
    }
    report("beside_copy_256mib_alone_ms", alone_copy, "ms");
    report("beside_kernel_alone_ms", alone_kernel, "ms");
    report("beside_copy_and_kernel_ms", beside, "ms");

    // Uploads then a kernel that reads the upload's last word, and a kernel then a
    // download of what it wrote: each pair ordered by the GPU alone, the host waiting
    // only for the pair's last value. 32 MiB takes the copy engine about 0.6 ms, so a
    // kernel that did not wait would read the previous round's word.
    let n = 8 * MIB; // words
    let bytes = 4 * n;
    let host = s.alloc(bytes, 2 * MIB).await?;
    let dev = Device.alloc(&s, bytes, 2 * MIB).await?;
    let seen = Device.alloc(&s, 4096, 4096).await?;
    let (read_last, fill) = (m.kernel("read_last")?, m.kernel("fill_words")?);
    let (mut up_wrong, mut down_wrong) = (0u64, 0u64);
    const PAIRS: u32 = 64;
    for r in 1..=PAIRS {
        let word = 0x5100_0000 | r;
        host.write(bytes - 4, &word.to_le_bytes())?;
        let up = rt.copy(&s, Span::all(&host)?, Span::new(dev.as_ref(), 0, bytes)?)?;
        let k = rt.launch(
            &read_last,
            1,
            1,
            0,
            &[
                Arg::Ptr(gpu_va(dev.as_ref())?),
                Arg::U64(n),
                Arg::Ptr(gpu_va(seen.as_ref())?),
                Arg::U32(r),
            ],
            &[up],
        )?;
        // The kernel → copy direction: the GPU fills, the copy engine brings it back.
        let fv = 0x6200_0000 | r;
        let f = rt.launch(
            &fill,
            132 * 4,
            256,
            0,
            &[Arg::Ptr(gpu_va(dev.as_ref())?), Arg::U64(n), Arg::U32(fv)],
            &[k],
        )?;
        let down = rt.copy_after(
            &s,
            Span::new(dev.as_ref(), 0, bytes)?,
            Span::all(&host)?,
            &[f],
        )?;
        rt.wait(down, LONG)?;
        let mut last = [0u8; 4];
        host.read(bytes - 4, &mut last)?;
        down_wrong += u64::from(u32::from_le_bytes(last) != fv);
        // What read_last saw, brought back with a copy after it (also GPU-ordered).
        let (mut got, idx) = ([0u8; 4], u64::from(r) * 4);
        let back = rt.copy_after(
            &s,
            Span::new(seen.as_ref(), idx, 4)?,
            Span::new(&out, 64, 4)?,
            &[k],
        )?;
        rt.wait(back, LONG)?;
        out.read(64, &mut got)?;
        up_wrong += u64::from(u32::from_le_bytes(got) != word);
    }
    check("deps_copy_then_kernel", up_wrong, u64::from(PAIRS))?;
    check("deps_kernel_then_copy", down_wrong, u64::from(PAIRS))?;
    c2.close(&s).await?;
    rt.close(&s).await?;
    Ok(())
}

/// A deterministic word for element `i` of the coop inputs.
fn coop_word(i: u32) -> u32 {
    i.wrapping_mul(2_654_435_761).rotate_left(7) % 1000
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    u64::from_le_bytes(w)
}

/// `coop`: coop.cu's kernels, each result against the host's.
async fn coop(socket: &str, gpu: &str, cubin: &[u8], coop_cubin: &[u8]) -> Res<()> {
    use rig_runtime::occupancy;
    let (mut p, _) = Probe::open_staged(socket, gpu, cubin, 64 * MIB).await?;
    let m = p.rt.load(&p.s, &Device, coop_cubin).await?;
    let geometry = rig_runtime::Geometry::of_session(&p.s);
    println!("coop geometry {geometry:?}");
    let buf = p.buffer(64 * MIB).await?;
    let base = gpu_va(&*buf)?.get();
    let at = |off: u64| Arg::Ptr(GpuVa(base + off));
    let (x_off, out_off, aux_off) = (0u64, 32 * MIB, 48 * MIB);
    let n = (1u32 << 22) + 123;
    let x: Vec<u8> = (0..n).flat_map(|i| coop_word(i).to_le_bytes()).collect();
    p.put(buf.as_ref(), x_off, &x)?;
    let sum: u64 = (0..n).map(|i| u64::from(coop_word(i))).sum();

    // shuffle_atomic, three times: the __device__ total is taken and zeroed each time.
    let shuffle = m.kernel("shuffle_atomic")?;
    let take = m.kernel("take_total")?;
    let mut wrong = 0;
    for _ in 0..3 {
        let v =
            p.rt.compute()
                .launch(&shuffle, 264, 256, 0, &[at(x_off), Arg::U32(n)])?;
        p.rt.compute().wait(v, LONG)?;
        let v = p.rt.compute().launch(&take, 1, 1, 0, &[at(out_off)])?;
        p.rt.compute().wait(v, LONG)?;
        let got = u64_at(&p.get(buf.as_ref(), out_off, 8)?.0, 0);
        println!("coop shuffle_atomic sum {got} want {sum}");
        wrong += u64::from(got != sum);
    }
    check("coop_shuffle_atomic", wrong, 3)?;

    // partial_warp: 1,000 threads of 1,024 in bounds, so warp 31 has 8.
    let pw = m.kernel("partial_warp")?;
    let np = 1000u32;
    p.put(buf.as_ref(), out_off, &vec![0u8; 32 * 16])?;
    let v =
        p.rt.compute()
            .launch(&pw, 4, 256, 0, &[at(x_off), at(out_off), Arg::U32(np)])?;
    p.rt.compute().wait(v, LONG)?;
    let b = p.get(buf.as_ref(), out_off, 32 * 16)?.0;
    let got: Vec<u32> = words(&b).collect();
    let mut wrong = 0;
    for w in 0..32u32 {
        let lanes: Vec<u32> = (w * 32..w * 32 + 32).filter(|&i| i < np).collect();
        let sum: u32 = lanes.iter().map(|&i| coop_word(i)).sum();
        let odd = lanes
            .iter()
            .filter(|&&i| coop_word(i) & 1 == 1)
            .fold(0u32, |m, &i| m | 1 << (i - w * 32));
        let tile: u32 = (w * 32..w * 32 + 16)
            .filter(|&i| i < np)
            .map(coop_word)
            .sum();
        let want = [sum, u32::try_from(lanes.len())?, odd, tile];
        let have = &got[w as usize * 4..w as usize * 4 + 4];
        if have != want {
            println!("coop partial_warp warp {w}: {have:?} want {want:?}");
            wrong += 1;
        }
    }
    check("coop_partial_warp", wrong, 32)?;

    // cub_block: 64 blocks of 256 ints (words less 500, some negative).
    let cub = m.kernel("cub_block")?;
    let nc = 64 * 256u32;
    let xi: Vec<i32> = (0..nc).map(|i| coop_word(i) as i32 - 500).collect();
    let bytes: Vec<u8> = xi.iter().flat_map(|v| v.to_le_bytes()).collect();
    p.put(buf.as_ref(), aux_off, &bytes)?;
    let (scan, sums, warps) = (out_off, out_off + 4 * MIB, out_off + 8 * MIB);
    let v = p.rt.compute().launch(
        &cub,
        64,
        256,
        0,
        &[at(aux_off), at(scan), at(sums), at(warps)],
    )?;
    p.rt.compute().wait(v, LONG)?;
    let got_scan: Vec<i32> = words(&p.get(buf.as_ref(), scan, u64::from(nc) * 4)?.0)
        .map(|w| w as i32)
        .collect();
    let got_sums: Vec<i32> = words(&p.get(buf.as_ref(), sums, 64 * 4)?.0)
        .map(|w| w as i32)
        .collect();
    let got_warps: Vec<i32> = words(&p.get(buf.as_ref(), warps, u64::from(nc / 32) * 4)?.0)
        .map(|w| w as i32)
        .collect();
    let mut wrong = 0u64;
    for b in 0..64usize {
        let part = &xi[b * 256..b * 256 + 256];
        let mut acc = 0;
        for (t, v) in part.iter().enumerate() {
            acc += v;
            wrong += u64::from(got_scan[b * 256 + t] != acc);
        }
        wrong += u64::from(got_sums[b] != acc);
        for w in 0..8 {
            let ws: i32 = part[w * 32..w * 32 + 32].iter().sum();
            wrong += u64::from(got_warps[b * 8 + w] != ws);
        }
    }
    check(
        "coop_cub_block_reduce_scan_warp",
        wrong,
        u64::from(nc) + 64 + 512,
    )?;

    // grid_env, ordinary then cooperative: the workspace's address and its two words.
    let env = m.kernel("grid_env")?;
    for cooperative in [false, true] {
        p.put(buf.as_ref(), out_off, &[0xaau8; 20])?;
        let v = if cooperative {
            p.rt.compute()
                .launch_cooperative(&env, 2, 32, 0, &[at(out_off)])?
        } else {
            p.rt.compute().launch(&env, 2, 32, 0, &[at(out_off)])?
        };
        p.rt.compute().wait(v, LONG)?;
        let w: Vec<u32> = words(&p.get(buf.as_ref(), out_off, 20)?.0).collect();
        println!(
            "coop grid_env cooperative={cooperative} envreg1 {:#x} envreg2 {:#x} is_valid {} ws [{:#x}, {:#x}]",
            w[0], w[1], w[2], w[3], w[4]
        );
        // Cooperative: a workspace whose barrier starts at 0 (its size word, which
        // cooperative_groups never reads, is 0 here and 16 under CUDA).
        let want_valid = u32::from(cooperative);
        let ok = w[2] == want_valid
            && if cooperative {
                w[4] == 0 && (w[0] | w[1]) != 0
            } else {
                w[0] == 0 && w[1] == 0 && w[3] == u32::MAX
            };
        check(
            &format!("coop_grid_env_cooperative_{cooperative}"),
            u64::from(!ok),
            1,
        )?;
    }

    // The blocks an SM holds, for the shapes CUDA's anchor asks cuOccupancy about.
    for (name, block, dynamic) in [
        ("grid_sum", 256, 0),
        ("grid_sum", 1024, 0),
        ("grid_sum", 64, 100 * 1024),
        ("grid_sum", 32, 7 * 1024),
        ("grid_sum", 32, 0),
        ("cub_block", 256, 0),
        ("partial_warp", 256, 0),
        ("shuffle_atomic", 256, 0),
    ] {
        let k = m.kernel(name)?;
        let shape = rig_runtime::Shape::new(k.info(), 1, block, dynamic)?;
        let r = occupancy::blocks_per_sm(k.info(), &shape, geometry);
        println!(
            "coop occupancy {name} block {block} dynamic {dynamic} per_sm {} ({:?})",
            r.per_sm, r.limit
        );
    }

    // grid_sum: the largest grid the SMs hold at once, then a small one, each twice.
    let gs = m.kernel("grid_sum")?;
    let shape = rig_runtime::Shape::new(gs.info(), 1, 256, 0)?;
    let per_sm = occupancy::blocks_per_sm(gs.info(), &shape, geometry);
    println!(
        "coop grid_sum 256 threads: rig per_sm {} ({:?})",
        per_sm.per_sm, per_sm.limit
    );
    let most = per_sm.per_sm * geometry.sms;
    // Cap what this run launches at CUDA's figure, when the harness passes it: a grid
    // larger than the GPU holds would spin in its grid sync until the timeout.
    let cap = std::env::var("RIG_COOP_CUDA_PER_SM")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(most, |c| c * geometry.sms);
    let largest = most.min(cap);
    let (partial, total, agree) = (out_off, out_off + 8 * MIB, out_off + 12 * MIB);
    let mut wrong = 0;
    let mut times = Vec::new();
    for grid in [largest, largest, geometry.sms, 7] {
        p.put(buf.as_ref(), total, &[0u8; 8])?;
        p.put(buf.as_ref(), agree, &vec![0u8; grid as usize * 4])?;
        let t = Instant::now();
        let v = p.rt.compute().launch_cooperative(
            &gs,
            grid,
            256,
            0,
            &[at(x_off), Arg::U32(n), at(partial), at(total), at(agree)],
        )?;
        p.rt.compute().wait(v, LONG)?;
        times.push(us(t.elapsed()));
        let got = u64_at(&p.get(buf.as_ref(), total, 8)?.0, 0);
        let agreed = words(&p.get(buf.as_ref(), agree, u64::from(grid) * 4)?.0)
            .filter(|&w| w == 1)
            .count();
        println!(
            "coop grid_sum grid {grid}: sum {got} want {sum}, {agreed} of {grid} blocks saw it"
        );
        wrong += u64::from(got != sum || agreed != grid as usize);
    }
    check("coop_grid_sum_grid_sync", wrong, 4)?;
    report("coop_grid_sum_us", times, "us");

    // One block more than the GPU holds: refused, nothing sent.
    let before = p.rt.compute().channel().last_value();
    match p.rt.compute().launch_cooperative(
        &gs,
        most + 1,
        256,
        0,
        &[at(x_off), Arg::U32(n), at(partial), at(total), at(agree)],
    ) {
        Err(e @ ComputeError::Cooperative { .. }) => {
            println!("coop refused: {}", rig_client::error_line(&e));
            let after = p.rt.compute().channel().last_value();
            check(
                "coop_too_large_refused_nothing_sent",
                u64::from(after != before),
                1,
            )?;
        }
        other => {
            return Err(format!("coop: a grid of {} was not refused: {other:?}", most + 1).into());
        }
    }
    p.rt.close(&p.s).await?;
    Ok(())
}
