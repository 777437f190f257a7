//! On the H200 (device machine), in one process: where a channel's ring, USERD and
//! command segments should live for the shortest empty round trip. Skipped unless
//! `RIG_H200=1`; run as root with `--ignored --nocapture`.
//!
//! One RM-owned address space, one GRAPHICS group; per placement a copy channel whose
//! ring and USERD are in host memory (a sealed memfd, as rigd lends today) or in GPU
//! memory written through BAR1, and whose pushbuffer is in host or GPU memory. The
//! semaphore the host polls is always host memory. Each placement times 10,000 empty
//! releases (no WFI, no timestamp; the host spins until the value lands) and the host
//! time of each submission, interleaved in rounds so drift hits all alike.
//!
//! Stores through a write-combined BAR are fenced and read back before the doorbell
//! (docs/hardware/nvidia-channels.md, "Before a doorbell"). Two placements leave
//! the read-back out to see what it costs: they are diagnostic only (without it the
//! GPU may read a stale GP_PUT, and the wait then times out, which ends that
//! placement, not the run).
//!
//! Safety on the GPU: it uses the GPU only through its driver; the only register it
//! writes is the usermode doorbell; BAR1 writes go only to GPU memory this process
//! allocated; every wait is bounded and stops at the first error the RM posts; no
//! managed memory. Everything is freed by drop, in order.

use std::{
    collections::VecDeque,
    error::Error,
    path::Path,
    sync::Arc,
    sync::atomic::{Ordering, fence},
    time::{Duration, Instant},
};

use rig_client::addr::GpuVa;
use rig_client::channel::{Pushbuffer, Ring, Segment, Timeline, ring};
use rig_nv::{
    class::clc8b5::HOPPER_DMA_COPY_A,
    method::{self, SUBCH_COPY},
};
use rig_sys::mman::Mapping;
use rigd::nvrm::{
    AddressSpace, Caching, Channel, ChannelGroup, DeviceMem, DeviceView, Engine, Gpu, GroupEngine,
    HostMem, Placement, RingMem, SysRm, SysWindow, USERD_GP_GET, USERD_GP_PUT, Window,
};

type Res<T> = Result<T, Box<dyn Error>>;

const ENTRIES: u64 = 1024;
const ROUNDS: usize = 10;
const PER_ROUND: usize = 1000;
const PB_WORDS: u64 = 4096;
// TIMEOUT: the first work of a channel takes well under a millisecond; 2 s says
// something is wrong.
const FIRST_TIMEOUT: Duration = Duration::from_secs(2);
// TIMEOUT: an empty release round-trips in microseconds.
const EMPTY_TIMEOUT: Duration = Duration::from_millis(100);
const EMPTY: method::Release = method::Release {
    wait_idle: false,
    timestamp: false,
};

/// Whole-word access to memory the GPU reads: host memory or GPU memory via BAR1.
#[derive(Clone, Copy)]
enum Mem<'a> {
    Host(&'a Mapping),
    Bar(&'a SysWindow),
}

impl Mem<'_> {
    fn w32(self, at: usize, v: u32) -> Res<()> {
        match self {
            Self::Host(m) => m.write_u32(at, v)?,
            Self::Bar(w) => w.write_u32(at, v)?,
        }
        Ok(())
    }
    fn w64(self, at: usize, v: u64) -> Res<()> {
        match self {
            Self::Host(m) => m.write_u64(at, v)?,
            Self::Bar(w) => w.write_u64(at, v)?,
        }
        Ok(())
    }
    fn r32(self, at: usize) -> Res<u32> {
        Ok(match self {
            Self::Host(m) => m.read_u32(at)?,
            Self::Bar(w) => w.read_u32(at)?,
        })
    }
}

#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    ring: Placement,
    pb_in_gpu: bool,
    read_back: bool,
    /// Store fences (sfence) instead of full ones around GP_PUT.
    sfence: bool,
}

const VARIANTS: [Variant; 9] = [
    Variant {
        name: "ring host, pushbuffer host (today)",
        ring: Placement::Host,
        pb_in_gpu: false,
        read_back: false,
        sfence: false,
    },
    Variant {
        name: "ring GPU (WC), pushbuffer host, read-back",
        ring: Placement::Device(Caching::WriteCombined),
        pb_in_gpu: false,
        read_back: true,
        sfence: false,
    },
    Variant {
        name: "ring GPU (WC), pushbuffer GPU (WC), read-back",
        ring: Placement::Device(Caching::WriteCombined),
        pb_in_gpu: true,
        read_back: true,
        sfence: false,
    },
    Variant {
        name: "ring host, pushbuffer GPU (WC), read-back",
        ring: Placement::Host,
        pb_in_gpu: true,
        read_back: true,
        sfence: false,
    },
    Variant {
        name: "diagnostic: ring GPU (UC), pushbuffer host, no read-back",
        ring: Placement::Device(Caching::Uncached),
        pb_in_gpu: false,
        read_back: false,
        sfence: false,
    },
    Variant {
        name: "diagnostic: ring GPU (WC), pushbuffer GPU (WC), no read-back",
        ring: Placement::Device(Caching::WriteCombined),
        pb_in_gpu: true,
        read_back: false,
        sfence: false,
    },
    Variant {
        name: "ring GPU (WC), pushbuffer host, no read-back",
        ring: Placement::Device(Caching::WriteCombined),
        pb_in_gpu: false,
        read_back: false,
        sfence: false,
    },
    Variant {
        name: "ring GPU (WC), pushbuffer GPU (WC), no read-back, sfence",
        ring: Placement::Device(Caching::WriteCombined),
        pb_in_gpu: true,
        read_back: false,
        sfence: true,
    },
    Variant {
        name: "ring GPU (UC), pushbuffer GPU (UC), no read-back",
        ring: Placement::Device(Caching::Uncached),
        pb_in_gpu: true,
        read_back: false,
        sfence: false,
    },
];

/// One channel's pushbuffer memory.
enum Pb {
    Host(HostMem<SysRm>),
    Gpu(DeviceView<SysRm>),
}

fn pb_words(pb: &Pb) -> Mem<'_> {
    match pb {
        Pb::Host(m) => Mem::Host(m.mapping()),
        Pb::Gpu(v) => Mem::Bar(v.mem().window()),
    }
}

fn ring_words(ch: &Channel<SysRm>) -> Mem<'_> {
    match ch.gpfifo() {
        RingMem::Host(m) => Mem::Host(m.mapping()),
        RingMem::Device(v) => Mem::Bar(v.mem().window()),
    }
}

/// One channel, its pushbuffer, and what it measured.
struct Lane {
    v: Variant,
    ch: Channel<SysRm>,
    pb_mem: Pb,
    pb: Pushbuffer,
    ring: Ring,
    timeline: Timeline,
    sem: usize,
    sem_va: u64,
    queued: VecDeque<Segment>,
    last_end: u64,
    rtt: Vec<Duration>,
    host: Vec<Duration>,
    failed: Option<String>,
}

impl Lane {
    fn new(
        v: Variant,
        group: &Arc<ChannelGroup<SysRm>>,
        space: &Arc<AddressSpace<SysRm>>,
        sems: &HostMem<SysRm>,
        sem: usize,
    ) -> Res<Self> {
        let ch = Channel::placed(group, Engine::Copy, ENTRIES, v.ring)?;
        let pb_mem = if v.pb_in_gpu {
            let caching = match v.ring {
                Placement::Device(c) => c,
                Placement::Host => Caching::WriteCombined,
            };
            let mem = DeviceMem::new(space.gpu(), PB_WORDS * 4, caching)?;
            Pb::Gpu(DeviceView::map(space, Arc::new(mem))?)
        } else {
            Pb::Host(HostMem::new(space, PB_WORDS * 4)?)
        };
        let pb_va = match &pb_mem {
            Pb::Host(m) => m.gpu_va(),
            Pb::Gpu(m) => m.gpu_va(),
        };
        Ok(Self {
            v,
            ch,
            pb_mem,
            pb: Pushbuffer::new(GpuVa(pb_va), PB_WORDS)?,
            ring: Ring::new(ENTRIES)?,
            timeline: Timeline::new(),
            sem,
            sem_va: sems.gpu_va() + sem as u64,
            queued: VecDeque::new(),
            last_end: 0,
            rtt: Vec::new(),
            host: Vec::new(),
            failed: None,
        })
    }

    fn pb_words(&self) -> Mem<'_> {
        pb_words(&self.pb_mem)
    }

    fn push(&mut self, words: &[u32]) -> Res<()> {
        let n = u32::try_from(words.len())?;
        let r = self.pb.reserve(n)?;
        if let Some(seg) = r.closed {
            self.queued.push_back(seg);
        }
        let pb = self.pb_words();
        for (i, w) in words.iter().enumerate() {
            pb.w32((r.at as usize + i) * 4, *w)?;
        }
        if self.pb.must_close()
            && let Some(seg) = self.pb.close()
        {
            self.queued.push_back(seg);
        }
        Ok(())
    }

    /// Ring entries, fence, GP_PUT, (fence and read back through BAR1), doorbell.
    fn submit(&mut self) -> Res<()> {
        if let Some(seg) = self.pb.close() {
            self.queued.push_back(seg);
        }
        let userd = self.ch.userd_offset();
        let g = ring_words(&self.ch);
        while let Some(seg) = self.queued.pop_front() {
            if self.ring.free() == 0 {
                self.ring.update_get(g.r32(userd + USERD_GP_GET)?)?;
            }
            let slot = self.ring.push()?;
            g.w64(slot as usize * 8, ring::entry(seg.va, seg.words)?)?;
            self.last_end = seg.end;
        }
        self.fence();
        g.w32(userd + USERD_GP_PUT, self.ring.put())?;
        if self.v.read_back {
            // A read through BAR1 returns once the stores posted before it landed
            // (ring, GP_PUT and commands go through the same BAR).
            fence(Ordering::SeqCst);
            match (g, pb_words(&self.pb_mem)) {
                (Mem::Bar(_), _) => g.r32(userd + USERD_GP_PUT)?,
                (_, pb) => pb.r32(0)?,
            };
        }
        self.fence();
        self.ch.ring_doorbell();
        Ok(())
    }

    fn fence(&self) {
        if self.v.sfence {
            rig_sys::mman::store_fence();
        } else {
            fence(Ordering::SeqCst);
        }
    }

    fn wait(&mut self, sems: &Mapping, v: u64, timeout: Duration) -> Res<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.timeline.reached(v, sems.read_u64(self.sem)?)? {
                self.pb.retire(self.last_end)?;
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                if let Some(f) = self.ch.fault() {
                    return Err(format!(
                        "the RM posted a channel error: info32 {} info16 {:#x}",
                        f.info32, f.info16
                    )
                    .into());
                }
                if start.elapsed() > timeout {
                    let (get, put) = self.ch.gp_get_put()?;
                    return Err(format!(
                        "value {v} did not land within {timeout:?} (GP_GET {get}, GP_PUT {put})"
                    )
                    .into());
                }
            }
            std::hint::spin_loop();
        }
    }

    fn release(&mut self) -> Res<u64> {
        let v = self.timeline.advance()?;
        self.push(&method::release_with(GpuVa(self.sem_va), v, EMPTY)?)?;
        Ok(v)
    }

    /// SET_OBJECT and a first release.
    fn start(&mut self, sems: &Mapping) -> Res<()> {
        self.push(&method::set_object(SUBCH_COPY, HOPPER_DMA_COPY_A))?;
        let v = self.release()?;
        self.submit()?;
        self.wait(sems, v, FIRST_TIMEOUT)
    }

    fn round(&mut self, sems: &Mapping, n: usize) -> Res<()> {
        for _ in 0..n {
            let t0 = Instant::now();
            let v = self.release()?;
            self.submit()?;
            let t1 = Instant::now();
            self.wait(sems, v, EMPTY_TIMEOUT)?;
            let t2 = Instant::now();
            self.host.push(t1 - t0);
            self.rtt.push(t2 - t0);
        }
        Ok(())
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    #[expect(clippy::cast_possible_truncation, reason = "an index below the length")]
    #[expect(clippy::cast_sign_loss, reason = "a non-negative index")]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn run() -> Res<()> {
    let rm = SysRm::open(Path::new("/dev"))?;
    let gpu = Arc::new(Gpu::open(rm, None)?);
    println!("gpu {} release {}", gpu.card().bdf, gpu.release());
    let space = Arc::new(AddressSpace::new(&gpu)?);
    let sems = HostMem::new(&space, 4096)?;
    let group = Arc::new(ChannelGroup::new(&space, GroupEngine::Graphics)?);
    let mut lanes = Vec::new();
    for (i, v) in VARIANTS.iter().enumerate() {
        match Lane::new(*v, &group, &space, &sems, i * 16) {
            Ok(l) => lanes.push(l),
            Err(e) => println!("{}: not made: {e}", v.name),
        }
    }
    let m = sems.mapping();
    for l in &mut lanes {
        if let Err(e) = l.start(m) {
            l.failed = Some(format!("start: {e}"));
        }
    }
    for _ in 0..ROUNDS {
        for l in lanes.iter_mut().filter(|l| l.failed.is_none()) {
            if let Err(e) = l.round(m, PER_ROUND) {
                l.failed = Some(e.to_string());
            }
        }
    }
    // What a submission's host time is made of: the doorbell store alone (the GPU
    // finds no new entry), and a full fence alone.
    if let Some(l) = lanes.first() {
        let n = 10_000u32;
        let t = Instant::now();
        for _ in 0..n {
            l.ch.ring_doorbell();
        }
        let bell = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n {
            fence(Ordering::SeqCst);
        }
        let full = t.elapsed() / n;
        println!(
            "doorbell store alone {:.3} µs, full fence alone {:.3} µs",
            bell.as_secs_f64() * 1e6,
            full.as_secs_f64() * 1e6
        );
    }
    for l in &mut lanes {
        l.rtt.sort();
        l.host.sort();
        match &l.failed {
            Some(e) => println!("{}: stopped after {} releases: {e}", l.v.name, l.rtt.len()),
            None => println!(
                "{}: {} empty releases: round trip median {:.2} µs p99 {:.2} µs; host time per \
                 submit median {:.3} µs p99 {:.3} µs",
                l.v.name,
                l.rtt.len(),
                pct(&l.rtt, 0.5),
                pct(&l.rtt, 0.99),
                pct(&l.host, 0.5),
                pct(&l.host, 0.99)
            ),
        }
    }
    // Channels go before their group, the group and memory before the space.
    drop(lanes);
    drop(group);
    drop(sems);
    drop(space);
    println!("freed");
    Ok(())
}

#[test]
#[ignore = "needs the H200: RIG_H200=1, as root"]
fn placements_of_ring_and_pushbuffer_side_by_side() {
    if std::env::var_os("RIG_H200").is_none() {
        eprintln!("skipped: RIG_H200 is not set");
        return;
    }
    if let Err(e) = run() {
        panic!("{e}");
    }
}
