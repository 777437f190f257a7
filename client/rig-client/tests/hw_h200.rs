//! On the H200 (device machine), in one process: rigd's RM objects up to running
//! copy and compute channels, driven through `rig_client::channel`'s words, rings and
//! timelines. Skipped unless `RIG_H200=1`; run as root with `--ignored --nocapture`.
//!
//! What it does: opens the GPU and two RM-owned address spaces, as two clients would
//! get; in the first, a GRAPHICS group with a compute and a copy channel (1024-entry
//! rings) and an async copy engine's group with a copy channel alone; maps 2 MiB of
//! host memory for buffers A and B and 64 KiB for the semaphores and pushbuffers;
//! binds each channel's class (SET_OBJECT); copies a 1 MiB pattern A → B on the copy
//! channel and checks B; releases on every channel; times 10,000 empty releases per
//! channel (release v, the host spins until it lands). In the second space, a compute
//! channel releases into its own memory, then once into an address that is mapped only
//! in the first space: the RM must post an MMU fault in its notifier, and the first
//! space's channels must keep running. Frees everything and says what was freed.
//!
//! Safety on the GPU: it uses the GPU only through its driver; the only register it
//! writes is the usermode doorbell (NVC361_NOTIFY_CHANNEL_PENDING); every wait is
//! bounded and stops at the first error the RM posts in the channel's notifier; no
//! managed memory. Everything is freed by `close` in order, or by drop on an error.

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
    class::{clc8b5::HOPPER_DMA_COPY_A, clcbc0::HOPPER_COMPUTE_A},
    method::{self, SUBCH_COMPUTE, SUBCH_COPY},
};
use rigd::nvrm::{
    AddressSpace, Channel, ChannelGroup, Engine, Gpu, GroupEngine, HostMem, SysRm, USERD_GP_GET,
    USERD_GP_PUT,
};

type Res<T> = Result<T, Box<dyn Error>>;

const ENTRIES: u64 = 1024;
const MIB: u64 = 1 << 20;
const EMPTY_SUBMISSIONS: usize = 10_000;
// TIMEOUT: the first work of a channel (context load) and a 1 MiB copy take well under
// a millisecond on an idle H200; 2 s says something is wrong.
const FIRST_TIMEOUT: Duration = Duration::from_secs(2);
// TIMEOUT: an empty release round-trips in microseconds.
const EMPTY_TIMEOUT: Duration = Duration::from_millis(100);

/// Offsets in the 64 KiB command memory.
const COPY_SEM: usize = 0x0;
const COMPUTE_SEM: usize = 0x10;
const COPY_PB: usize = 0x1000;
const COMPUTE_PB: usize = 0x8000;
const LONE_SEM: usize = 0x20;
const LONE_PB: usize = 0xc000;
const PB_WORDS: u64 = 2048;

/// One channel's submission state: its pushbuffer in `cmd`, its ring, its timeline.
struct Submitter<'c> {
    name: &'static str,
    ch: &'c Channel<SysRm>,
    cmd: &'c HostMem<SysRm>,
    pb: Pushbuffer,
    pb_off: usize,
    ring: Ring,
    sem: usize,
    timeline: Timeline,
    /// Closed segments not yet in the ring, and the last one's end for retiring.
    queued: VecDeque<Segment>,
    last_end: u64,
}

impl<'c> Submitter<'c> {
    fn new(
        name: &'static str,
        ch: &'c Channel<SysRm>,
        cmd: &'c HostMem<SysRm>,
        pb_off: usize,
        sem: usize,
    ) -> Res<Self> {
        Ok(Self {
            name,
            ch,
            cmd,
            pb: Pushbuffer::new(GpuVa(cmd.gpu_va() + pb_off as u64), PB_WORDS)?,
            pb_off,
            ring: Ring::new(u64::from(ch.entries()))?,
            sem,
            timeline: Timeline::new(),
            queued: VecDeque::new(),
            last_end: 0,
        })
    }

    fn sem_va(&self) -> u64 {
        self.cmd.gpu_va() + self.sem as u64
    }

    /// Writes one command's words into the pushbuffer.
    fn push(&mut self, words: &[u32]) -> Res<()> {
        let n = u32::try_from(words.len())?;
        let r = self.pb.reserve(n)?;
        if let Some(seg) = r.closed {
            self.queued.push_back(seg);
        }
        let m = self.cmd.mapping();
        for (i, w) in words.iter().enumerate() {
            m.write_u32(self.pb_off + (r.at as usize + i) * 4, *w)?;
        }
        if self.pb.must_close()
            && let Some(seg) = self.pb.close()
        {
            self.queued.push_back(seg);
        }
        Ok(())
    }

    /// Ring entries for every closed segment, store fence, GP_PUT, doorbell.
    fn submit(&mut self) -> Res<()> {
        if let Some(seg) = self.pb.close() {
            self.queued.push_back(seg);
        }
        let g = self
            .ch
            .gpfifo()
            .host()
            .ok_or("Channel::new places the ring in host memory")?
            .mapping();
        let userd = self.ch.userd_offset();
        while let Some(seg) = self.queued.pop_front() {
            self.ring.update_get(g.read_u32(userd + USERD_GP_GET)?)?;
            let slot = self.ring.push()?;
            g.write_u64(slot as usize * 8, ring::entry(seg.va, seg.words)?)?;
            self.last_end = seg.end;
        }
        // The GPU must see the entries and commands before GP_PUT, and GP_PUT before
        // the doorbell (docs/hardware/nvidia-channels.md, "Before a doorbell";
        // host-memory rings need no read-back).
        fence(Ordering::SeqCst);
        g.write_u32(userd + USERD_GP_PUT, self.ring.put())?;
        fence(Ordering::SeqCst);
        self.ch.ring_doorbell();
        Ok(())
    }

    /// Appends a release of the next timeline value; returns it.
    fn release(&mut self) -> Res<u64> {
        self.release_with(method::Release::default())
    }

    fn release_with(&mut self, how: method::Release) -> Res<u64> {
        let v = self.timeline.advance()?;
        self.push(&method::release_with(GpuVa(self.sem_va()), v, how)?)?;
        Ok(v)
    }

    /// Spins until the semaphore reaches `v`, for at most `timeout`, stopping at the
    /// first error the RM posts. Then the pushbuffer behind it is free again.
    fn wait(&mut self, v: u64, timeout: Duration) -> Res<()> {
        let m = self.cmd.mapping();
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.timeline.reached(v, m.read_u64(self.sem)?)? {
                self.pb.retire(self.last_end)?;
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                if let Some(f) = self.ch.fault() {
                    return Err(format!(
                        "{}: the RM posted a channel error: info32 {} info16 {:#x} status \
                         {:#x} at {} ns",
                        self.name, f.info32, f.info16, f.status, f.time_ns
                    )
                    .into());
                }
                if start.elapsed() > timeout {
                    let (get, put) = self.ch.gp_get_put()?;
                    return Err(format!(
                        "{}: value {v} did not land within {timeout:?} (semaphore {}, \
                         GP_GET {get}, GP_PUT {put}, no channel error posted)",
                        self.name,
                        m.read_u64(self.sem)?
                    )
                    .into());
                }
            }
            std::hint::spin_loop();
        }
    }
}

/// Times `n` empty releases: (round trips, host time per submit).
fn time_empty(
    s: &mut Submitter<'_>,
    n: usize,
    how: method::Release,
) -> Res<(Vec<Duration>, Vec<Duration>)> {
    let mut rtt = Vec::with_capacity(n);
    let mut host = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let v = s.release_with(how)?;
        s.submit()?;
        let t1 = Instant::now();
        s.wait(v, EMPTY_TIMEOUT)?;
        let t2 = Instant::now();
        host.push(t1 - t0);
        rtt.push(t2 - t0);
    }
    Ok((rtt, host))
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    // CAST: an index into a slice of at most 10,000.
    #[expect(clippy::cast_possible_truncation, reason = "an index below the length")]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn report(name: &str, (mut rtt, mut host): (Vec<Duration>, Vec<Duration>)) {
    rtt.sort();
    host.sort();
    println!(
        "{name}: {} empty submissions: round trip median {:.2} µs p99 {:.2} µs; host time \
         per submit median {:.3} µs p99 {:.3} µs",
        rtt.len(),
        pct(&rtt, 0.5),
        pct(&rtt, 0.99),
        pct(&host, 0.5),
        pct(&host, 0.99)
    );
}

fn pattern(i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5249_4700
}

fn run() -> Res<()> {
    println!("euid {}", nix::unistd::geteuid());
    let t_open = Instant::now();
    let rm = SysRm::open(Path::new("/dev"))?;
    let gpu = Gpu::open(rm, None)?;
    let card = gpu.card().clone();
    println!(
        "gpu {} {:04x}:{:04x} /dev/nvidia{} release {} uuid {:02x?}",
        card.bdf,
        card.vendor_id,
        card.device_id,
        card.minor,
        gpu.release(),
        gpu.uuid()
    );
    let gpu = Arc::new(gpu);
    let space = Arc::new(AddressSpace::new(&gpu)?);
    let data = HostMem::new(&space, 2 * MIB)?;
    let cmd = HostMem::new(&space, 64 << 10)?;
    let compute_group = Arc::new(ChannelGroup::new(&space, GroupEngine::Graphics)?);
    let compute = Channel::new(&compute_group, Engine::Compute, ENTRIES)?;
    let copy = Channel::new(&compute_group, Engine::Copy, ENTRIES)?;
    println!(
        "opened in {:.1} ms (RM-owned address space, no UVM): data at GPU VA {:#x}, \
         commands at {:#x}; copy channel {:#x} token {:#x} ring at {:#x}; compute channel \
         {:#x} token {:#x} ring at {:#x}",
        t_open.elapsed().as_secs_f64() * 1e3,
        data.gpu_va(),
        cmd.gpu_va(),
        copy.handle(),
        copy.token(),
        copy.gpfifo().gpu_va(),
        compute.handle(),
        compute.token(),
        compute.gpfifo().gpu_va()
    );
    // A copy channel alone in an async copy engine's group: with UVM it was refused
    // (NV_ERR_INVALID_OBJECT at UVM_REGISTER_CHANNEL); an RM-owned space needs no
    // registration.
    let t = Instant::now();
    let ce_group = Arc::new(ChannelGroup::new(&space, GroupEngine::Copy(2))?);
    let lone = Channel::new(&ce_group, Engine::Copy, ENTRIES)?;
    println!(
        "async copy engine 2: group and lone copy channel {:#x} in {:.1} ms",
        lone.handle(),
        t.elapsed().as_secs_f64() * 1e3
    );

    let words = usize::try_from(MIB / 8)?;
    let d = data.mapping();
    for i in 0..words {
        d.write_u64(i * 8, pattern(i))?;
    }
    let (a, b) = (data.gpu_va(), data.gpu_va() + MIB);

    let mut cs = Submitter::new("copy", &copy, &cmd, COPY_PB, COPY_SEM)?;
    cs.push(&method::set_object(SUBCH_COPY, HOPPER_DMA_COPY_A))?;
    cs.push(&method::copy_flushed(GpuVa(a), GpuVa(b), MIB)?)?;
    let v1 = cs.release()?;
    let t = Instant::now();
    cs.submit()?;
    cs.wait(v1, FIRST_TIMEOUT)?;
    println!(
        "copy channel: SET_OBJECT, 1 MiB copy and release {v1} landed in {:.1} µs",
        t.elapsed().as_secs_f64() * 1e6
    );
    let off = usize::try_from(MIB)?;
    for i in 0..words {
        let got = d.read_u64(off + i * 8)?;
        if got != pattern(i) {
            return Err(format!("B differs from A at byte {}: {got:#x}", i * 8).into());
        }
    }
    println!("copy channel: B == A (1 MiB)");

    let mut ks = Submitter::new("compute", &compute, &cmd, COMPUTE_PB, COMPUTE_SEM)?;
    ks.timeline.promise(1)?;
    ks.push(&method::set_object(SUBCH_COMPUTE, HOPPER_COMPUTE_A))?;
    let v2 = ks.release()?;
    let t = Instant::now();
    ks.submit()?;
    ks.wait(v2, FIRST_TIMEOUT)?;
    println!(
        "compute channel: SET_OBJECT and release {v2} landed in {:.1} µs (semaphore reads {})",
        t.elapsed().as_secs_f64() * 1e6,
        cmd.mapping().read_u64(COMPUTE_SEM)?
    );

    // Each kind of release, each channel, in one run: with WFI and the timestamp (what
    // a completion needs after work), and without them (an empty submission has no
    // work to wait for).
    for (what, wait_idle, timestamp) in [
        ("release with WFI and timestamp", true, true),
        ("release without WFI, with timestamp", false, true),
        ("release without WFI or timestamp", false, false),
    ] {
        let how = method::Release {
            wait_idle,
            timestamp,
        };
        report(
            &format!("copy channel, {what}"),
            time_empty(&mut cs, EMPTY_SUBMISSIONS, how)?,
        );
        report(
            &format!("compute channel, {what}"),
            time_empty(&mut ks, EMPTY_SUBMISSIONS, how)?,
        );
    }
    let mut ls = Submitter::new("lone copy", &lone, &cmd, LONE_PB, LONE_SEM)?;
    ls.push(&method::set_object(SUBCH_COPY, HOPPER_DMA_COPY_A))?;
    let v = ls.release()?;
    ls.submit()?;
    ls.wait(v, FIRST_TIMEOUT)?;
    report(
        "lone copy channel (async CE 2), release without WFI or timestamp",
        time_empty(&mut ls, EMPTY_SUBMISSIONS, method::Release::default())?,
    );
    let (get, put) = copy.gp_get_put()?;
    println!("copy channel after: GP_GET {get} GP_PUT {put}");

    // The second client's space hands out the same VAs as the first's (each space
    // has its own allocator), so its first memory lies at `a` too: proof that the two
    // are apart is that its release there leaves A's word alone. 1 MiB + 64 KiB into
    // A is mapped only in the first space.
    let a_word = d.read_u64(COMPUTE_SEM)?;
    second_client(&gpu, a + MIB + (64 << 10))?;
    let now = d.read_u64(COMPUTE_SEM)?;
    if now != a_word {
        return Err(format!(
            "the second space's release reached the first space's memory: {a_word:#x} → {now:#x}"
        )
        .into());
    }
    println!(
        "first space: its word at {:#x} kept {a_word:#x} while the second space released at the same VA",
        a + COMPUTE_SEM as u64
    );
    // The first client's channels still run after the second's fault.
    let v = ks.release()?;
    ks.submit()?;
    ks.wait(v, FIRST_TIMEOUT)?;
    let v = cs.release()?;
    cs.submit()?;
    cs.wait(v, FIRST_TIMEOUT)?;
    println!("first space: compute and copy channels still release after the second's fault");
    drop((cs, ks, ls));
    lone.close()?;
    Arc::into_inner(ce_group)
        .ok_or("a group is still shared")?
        .close()?;

    let t_close = Instant::now();
    copy.close()?;
    println!("freed: copy channel (drained, unregistered, freed, memory; its group still runs)");
    compute.close()?;
    println!("freed: compute channel (group descheduled, drained, unregistered, freed, memory)");
    Arc::into_inner(compute_group)
        .ok_or("a group is still shared")?
        .close()?;
    println!("freed: the channel groups and their subcontexts");
    cmd.close()?;
    data.close()?;
    println!("freed: host memory (RM mapping, OS descriptor, memfd)");
    Arc::into_inner(space)
        .ok_or("the space is still shared")?
        .close()?;
    Arc::into_inner(gpu)
        .ok_or("the GPU is still shared")?
        .close()?;
    println!(
        "freed: address space, usermode page, subdevice, device, root client \
         ({:.1} ms to close)",
        t_close.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

/// A second client's space: a compute channel releases into its own memory, then
/// once into `foreign` (mapped only in the first space), which must fault.
fn second_client(gpu: &Arc<Gpu<SysRm>>, foreign: u64) -> Res<()> {
    let space = Arc::new(AddressSpace::new(gpu)?);
    let cmd = HostMem::new(&space, 64 << 10)?;
    let group = Arc::new(ChannelGroup::new(&space, GroupEngine::Graphics)?);
    let ch = Channel::new(&group, Engine::Compute, ENTRIES)?;
    let mut s = Submitter::new("second client", &ch, &cmd, COMPUTE_PB, COMPUTE_SEM)?;
    s.push(&method::set_object(SUBCH_COMPUTE, HOPPER_COMPUTE_A))?;
    let v = s.release()?;
    s.submit()?;
    s.wait(v, FIRST_TIMEOUT)?;
    println!(
        "second space: its own compute channel released {v} into its own memory at {:#x}",
        cmd.gpu_va()
    );
    // One release to an address only the first space maps. Submitted once; the wait
    // is bounded and ends at the first posted error.
    let v = s.timeline.advance()?;
    s.push(&method::release_with(
        GpuVa(foreign),
        v,
        method::Release::default(),
    )?)?;
    s.submit()?;
    let t = Instant::now();
    let fault = loop {
        if let Some(f) = ch.fault() {
            break Some(f);
        }
        if t.elapsed() > FIRST_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_micros(50));
    };
    match fault {
        Some(f) => println!(
            "second space: release into the first space's {foreign:#x} faulted: info32 {} \
             info16 {:#x} status {:#x}, posted after {:.1} µs",
            f.info32,
            f.info16,
            f.status,
            t.elapsed().as_secs_f64() * 1e6
        ),
        None => {
            return Err(format!(
                "second space: a release into {foreign:#x} (not mapped here) posted no \
                 error within {FIRST_TIMEOUT:?}"
            )
            .into());
        }
    }
    drop(s);
    if let Err(e) = ch.close() {
        println!("second space: closing the faulted channel: {e}");
    }
    Arc::into_inner(group)
        .ok_or("a group is still shared")?
        .close()?;
    cmd.close()?;
    Arc::into_inner(space)
        .ok_or("second space still shared")?
        .close()?;
    println!("second space: freed");
    Ok(())
}

#[test]
#[ignore = "needs the H200: RIG_H200=1, root, --ignored --nocapture"]
fn h200_copy_and_compute_channels_run_and_free_everything() {
    if std::env::var("RIG_H200").as_deref() != Ok("1") {
        println!("skipped: RIG_H200 is not 1");
        return;
    }
    if let Err(e) = run() {
        panic!("{}", rigd::service::status::error_line(e.as_ref()));
    }
}
