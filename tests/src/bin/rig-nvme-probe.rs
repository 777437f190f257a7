//! rig-nvme-probe BDF [COMMANDS]: drives the disposable machine's QEMU NVMe controller,
//! bound to vfio-pci, the way rigd's `nvme` and `queue` stages and a lent client do,
//! in one root process: rigd's `nvme::Controller` on the VFIO device's BAR0 with its
//! admin queue in a pool lease, an I/O queue pair in a second lease mapped from the
//! lease's memfd (as a client maps it), and `rig_client::queue::nvme` submitting 4 KiB
//! writes of a pattern and reads back, across ring wraps at depths 1 and 32, with each
//! way of ringing the SQ tail doorbell:
//! - `mmio`: the tail stored to BAR0 (before Doorbell Buffer Config);
//! - `shadow-mmio`: the tail in the shadow buffer, then stored to BAR0;
//! - `ioeventfd`: the tail in the shadow buffer, then an eventfd whose VFIO ioeventfd
//!   writes the fixed value 0 to the doorbell (what rigd lends);
//! - `forwarded`: the tail in the shadow buffer, then an eventfd read by another
//!   thread, which stores the shadow tail to BAR0 (a daemon-forwarded kick, here in
//!   the same process).
//!
//! Prints `ok WHAT` or `FAIL WHAT: why` lines, and `measure NAME VALUE UNIT` lines. Runs
//! only inside the disposable machine (the guard). Root: it opens the VFIO group.

use std::{
    error::Error,
    os::unix::fs::FileExt,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use rig_client::queue::{
    Doorbell, Queue, RingMem,
    nvme::{Namespace, NvmeQueue, PrpLists, layout},
};
use rig_sys::{
    memfd::SealedMemfd,
    mman::{Fill, Mapping},
};
use rigd::{
    dma::{BLOCK_SIZE, Backing, DeviceAddr, LeaseId, Pool, PoolMode, PoolSpec},
    nvme::{self, Controller, CqSpec, Options, SqSpec},
    pci::Bdf,
    queue::{
        Kicks,
        nvme::{PoolMem, VfioKicks},
    },
    service::status::error_line,
    sys::mmio::{Mmio, Width},
    vfio::{self, EventFd, RealVfio},
};

type Res<T> = Result<T, Box<dyn Error>>;

/// The ring block: SQ, CQ, PRP lists, shadow doorbells, event indexes, data.
const SQ_AT: u64 = 0;
const CQ_AT: u64 = 0x1_0000;
const LISTS_AT: u64 = 0x2_0000;
const SHADOW_AT: u64 = 0x4_0000;
const EVENTIDX_AT: u64 = 0x4_1000;
const WRITE_AT: u64 = 0x10_0000;
const READ_AT: u64 = 0x18_0000;
const QID: u16 = 1;
/// 4 KiB blocks per run; the 64 MiB disk holds 16384.
const BLOCKS: u64 = 2000;

#[derive(Debug, Clone)]
struct Mem(Arc<Mapping>);

fn at(o: u64) -> usize {
    usize::try_from(o).expect("inside a 2 MiB block")
}

impl RingMem for Mem {
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read(at(offset), buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(at(offset), data)
    }
    fn write_u32(&self, offset: u64, value: u32) -> std::io::Result<()> {
        self.0.write_u32(at(offset), value)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Mmio,
    ShadowMmio,
    IoEventFd,
    Forwarded,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Mmio => "mmio",
            Self::ShadowMmio => "shadow-mmio",
            Self::IoEventFd => "ioeventfd",
            Self::Forwarded => "forwarded",
        }
    }
}

/// One way of ringing the doorbells of queue `QID`.
#[derive(Debug)]
struct Bell {
    mode: Mode,
    mem: Mem,
    bar: Arc<Mmio>,
    sq_db: u64,
    cq_db: u64,
    kick: Option<EventFd>,
}

impl Doorbell for Bell {
    fn sq_tail(&mut self, tail: u32) -> std::io::Result<()> {
        if self.mode != Mode::Mmio {
            self.mem.write_u32(SHADOW_AT + 8 * u64::from(QID), tail)?;
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        match (&self.kick, self.mode) {
            (Some(k), _) => k.write(1),
            (None, _) => self
                .bar
                .write(self.sq_db, Width::W32, tail.into())
                .map_err(std::io::Error::other),
        }
    }

    fn cq_head(&mut self, head: u32) -> std::io::Result<()> {
        match self.mode {
            // Without shadow doorbells the head must reach the register.
            Mode::Mmio => self
                .bar
                .write(self.cq_db, Width::W32, head.into())
                .map_err(std::io::Error::other),
            // With them, the controller reads the head from memory before it posts
            // (QEMU nvme_post_cqes → nvme_update_cq_head), and the queue never holds
            // more than entries − 1 completions, so no register write is needed.
            _ => self.mem.write_u32(SHADOW_AT + 8 * u64::from(QID) + 4, head),
        }
    }
}

struct Probe {
    bdf: Bdf,
    hold: vfio::Handles,
    ctrl: Controller,
    bar: Arc<Mmio>,
    mem: Mem,
    iova: u64,
    fails: u32,
}

fn check<T>(p: &mut Probe, what: &str, r: Res<T>) -> Option<T> {
    match r {
        Ok(v) => {
            println!("ok {what}");
            Some(v)
        }
        Err(e) => {
            println!("FAIL {what}: {}", error_line(&*e));
            p.fails += 1;
            None
        }
    }
}

fn pattern(run: u64, block: u64) -> Vec<u8> {
    let seed = run.wrapping_mul(0x9e37_79b9) ^ block.wrapping_mul(0x85eb_ca6b);
    (0..4096u64)
        .map(|i| (seed.wrapping_add(i.wrapping_mul(131)) >> 3).to_le_bytes()[0])
        .collect()
}

/// What one run measured.
struct Run {
    write_s: f64,
    read_s: f64,
}

impl Probe {
    /// Zeroes queue `QID`'s shadow tail and head and its event indexes before the queue
    /// is created: the controller trusts the shadow tail without a bound check
    /// (docs/hardware/queues.md, "QEMU's NVMe controller"), so a stale one would make
    /// it fetch past the ring. The admin queue's slots (qid 0) are left alone: the
    /// controller keeps them from the register writes, and a zeroed head would make it
    /// think the admin CQ full.
    fn clear_slots(&self) -> Res<()> {
        let slot = 8 * u64::from(QID);
        self.mem.write(SHADOW_AT + slot, &[0; 8])?;
        self.mem.write(EVENTIDX_AT + slot, &[0; 8])?;
        Ok(())
    }

    fn bell(&self, mode: Mode) -> Res<(Bell, Option<thread::JoinHandle<()>>, Arc<AtomicBool>)> {
        let sq_db = self.ctrl.sq_doorbell(QID);
        let cq_db = self.ctrl.cq_doorbell(QID);
        let stop = Arc::new(AtomicBool::new(false));
        let (kick, forwarder) = match mode {
            Mode::Mmio | Mode::ShadowMmio => (None, None),
            Mode::IoEventFd => {
                let kicks = VfioKicks::new(self.hold.device.as_ref())?;
                (
                    Some(kicks.register(sq_db, 0).map_err(|e| e as Box<dyn Error>)?),
                    None,
                )
            }
            Mode::Forwarded => {
                let fd = EventFd::new(0)?;
                let theirs = fd.try_clone()?;
                let (mem, bar, stop2) =
                    (self.mem.clone(), Arc::clone(&self.bar), Arc::clone(&stop));
                let t = thread::spawn(move || {
                    // Blocks in read(2) until the client kicks; then stores the shadow tail.
                    while theirs.read().is_ok() && !stop2.load(Ordering::Acquire) {
                        let tail = mem
                            .0
                            .read_u32(at(SHADOW_AT + 8 * u64::from(QID)))
                            .unwrap_or(0);
                        let _ = bar.write(sq_db, Width::W32, tail.into());
                    }
                });
                (Some(fd), Some(t))
            }
        };
        Ok((
            Bell {
                mode,
                mem: self.mem.clone(),
                bar: Arc::clone(&self.bar),
                sq_db,
                cq_db,
                kick,
            },
            forwarder,
            stop,
        ))
    }

    /// Creates queue `QID` of `depth` commands, writes `BLOCKS` patterns and reads them
    /// back, deletes the queue.
    fn run(&mut self, mode: Mode, depth: u32, run: u64) -> Res<Run> {
        let entries = depth + 1;
        self.mem.write(SQ_AT, &vec![0; 0x2_0000])?;
        self.clear_slots()?;
        self.ctrl.create_cq(&CqSpec {
            qid: QID,
            entries,
            addr: self.iova + CQ_AT,
            vector: None,
        })?;
        self.ctrl.create_sq(&SqSpec {
            qid: QID,
            entries,
            addr: self.iova + SQ_AT,
            cqid: QID,
        })?;
        let (bell, forwarder, stop) = self.bell(mode)?;
        let kick_fd = bell.kick.as_ref().map(EventFd::try_clone).transpose()?;
        let q = Queue::new(self.mem.clone(), bell, layout(entries, SQ_AT, CQ_AT))?;
        let ns = self.ctrl.identify_namespace(1)?;
        let mut q: NvmeQueue<Mem, Bell, (u64, u64)> = NvmeQueue::new(
            q,
            Namespace {
                nsid: 1,
                lba_shift: ns.lba_shift,
                blocks: ns.blocks,
            },
            Some(PrpLists {
                at: LISTS_AT,
                device: self.iova + LISTS_AT,
            }),
        );
        let result = self.workload(&mut q, depth, run);
        if mode == Mode::IoEventFd {
            let kicks = VfioKicks::new(self.hold.device.as_ref())?;
            kicks
                .unregister(self.ctrl.sq_doorbell(QID), 0)
                .map_err(|e| e as Box<dyn Error>)?;
        }
        if let (Some(t), Some(fd)) = (forwarder, kick_fd) {
            stop.store(true, Ordering::Release);
            fd.write(1)?;
            let _ = t.join();
        }
        self.ctrl.delete_sq(QID)?;
        self.ctrl.delete_cq(QID)?;
        result
    }

    fn workload(&self, q: &mut NvmeQueue<Mem, Bell, (u64, u64)>, depth: u32, run: u64) -> Res<Run> {
        let slots = u64::from(depth);
        let base = run * BLOCKS;
        let mut free: Vec<u64> = (0..slots).collect();
        let t = Instant::now();
        let mut i = 0;
        let mut done = 0;
        let mut last = Instant::now();
        while done < BLOCKS {
            while i < BLOCKS && !free.is_empty() {
                let slot = free.pop().expect("a free slot");
                let at = WRITE_AT + slot * 4096;
                self.mem.write(at, &pattern(run, i))?;
                q.write((base + i) * 8, 8, self.iova + at, 4096, (i, slot))?;
                i += 1;
            }
            q.ring()?;
            let mut bad = None;
            let n = q.reap(u32::MAX, |c| {
                if !c.status.is_success() {
                    bad = Some(format!("write {} failed: {:?}", c.tag.0, c.status));
                }
                free.push(c.tag.1);
            })?;
            if let Some(b) = bad {
                return Err(b.into());
            }
            done += u64::from(n);
            stall(&mut last, n, "writes")?;
        }
        let write_s = t.elapsed().as_secs_f64();
        let mut free: Vec<u64> = (0..slots).collect();
        let t = Instant::now();
        let (mut i, mut done) = (0, 0);
        while done < BLOCKS {
            while i < BLOCKS && !free.is_empty() {
                let slot = free.pop().expect("a free slot");
                q.read(
                    (base + i) * 8,
                    8,
                    self.iova + READ_AT + slot * 4096,
                    4096,
                    (i, slot),
                )?;
                i += 1;
            }
            q.ring()?;
            let mut bad = None;
            let mut got = vec![0u8; 4096];
            let mem = &self.mem;
            let n = q.reap(u32::MAX, |c| {
                let (block, slot) = c.tag;
                if !c.status.is_success() {
                    bad = Some(format!("read {block} failed: {:?}", c.status));
                } else if mem.read(READ_AT + slot * 4096, &mut got).is_err()
                    || got != pattern(run, block)
                {
                    bad = Some(format!("block {block} read back differs"));
                }
                free.push(slot);
            })?;
            if let Some(b) = bad {
                return Err(b.into());
            }
            done += u64::from(n);
            stall(&mut last, n, "reads")?;
        }
        Ok(Run {
            write_s,
            read_s: t.elapsed().as_secs_f64(),
        })
    }
}

/// Fails a run that makes no progress for 5 s (a kick that does not reach the device).
fn stall(last: &mut Instant, n: u32, what: &str) -> Res<()> {
    if n > 0 {
        *last = Instant::now();
        return Ok(());
    }
    if last.elapsed() > Duration::from_secs(5) {
        return Err(format!("no {what} completed for 5 s").into());
    }
    std::hint::spin_loop();
    Ok(())
}

fn open(bdf: Bdf) -> Res<Probe> {
    let link = std::fs::read_link(format!("/sys/bus/pci/devices/{bdf}/iommu_group"))?;
    let group = link
        .file_name()
        .and_then(|g| g.to_str())
        .ok_or("no IOMMU group")?
        .to_owned();
    let hold = vfio::open(&RealVfio::new("/dev/vfio"), bdf, &group)?;
    // PCI_COMMAND: memory space and bus mastering on.
    let cfg = hold.device.region(7)?;
    let mut cmd = [0u8; 2];
    hold.device.file().read_at(&mut cmd, cfg.offset + 4)?;
    let cmd = u16::from_le_bytes(cmd) | 0x6;
    hold.device
        .file()
        .write_at(&cmd.to_le_bytes(), cfg.offset + 4)?;
    let pool = Arc::new(Pool::start(
        "nvme-probe",
        PoolSpec {
            mode: PoolMode::Vfio(Arc::new(hold.iommu()?)),
            blocks: 4,
            backing: Backing::Huge2M,
            pin_threads: 1,
        },
    )?);
    if !pool.wait_pinned(Duration::from_secs(20)) {
        return Err("the pool did not fill within 20 s".into());
    }
    let admin = PoolMem::lease(Arc::clone(&pool), 0)?;
    let ctrl = Controller::new(
        bdf,
        Box::new(nvme::map_bar0(bdf, hold.device.as_ref())?),
        Box::new(admin),
        Options::default(),
    )?;
    let lent = pool.lease(LeaseId(u64::MAX - 1), 1)?;
    let Some(DeviceAddr::Iova(iova)) = lent.addr else {
        return Err("the ring lease has no IOVA".into());
    };
    let fd = lent.fds.into_iter().next().ok_or("no block")?;
    let map = Mapping::shared(&SealedMemfd::check(fd)?, Fill::Populate)?;
    assert_eq!(map.len() as u64, BLOCK_SIZE);
    let bar = Arc::new(nvme::map_bar0(bdf, hold.device.as_ref())?);
    // The pool must outlive the leases: keep it for the process's life.
    std::mem::forget(pool);
    Ok(Probe {
        bdf,
        hold,
        ctrl,
        bar,
        mem: Mem(Arc::new(map)),
        iova: iova.0,
        fails: 0,
    })
}

/// Queue `QID` with two entries and nothing in it.
fn empty_queue(p: &mut Probe) -> Res<()> {
    p.clear_slots()?;
    p.ctrl.create_cq(&CqSpec {
        qid: QID,
        entries: 2,
        addr: p.iova + CQ_AT,
        vector: None,
    })?;
    p.ctrl.create_sq(&SqSpec {
        qid: QID,
        entries: 2,
        addr: p.iova + SQ_AT,
        cqid: QID,
    })?;
    Ok(())
}

fn kick_costs(p: &mut Probe) -> Res<()> {
    const N: u32 = 20_000;
    let sq_db = p.ctrl.sq_doorbell(QID);
    let t = Instant::now();
    for _ in 0..N {
        // The tail the queue has (0: an empty queue), as a re-ring would store.
        p.bar.write(sq_db, Width::W32, 0)?;
    }
    println!(
        "measure kick-mmio {:.2} us",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(N)
    );
    let kicks = VfioKicks::new(p.hold.device.as_ref())?;
    let fd = kicks.register(sq_db, 0).map_err(|e| e as Box<dyn Error>)?;
    let t = Instant::now();
    for _ in 0..N {
        fd.write(1)?;
    }
    println!(
        "measure kick-ioeventfd {:.2} us",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(N)
    );
    kicks
        .unregister(sq_db, 0)
        .map_err(|e| e as Box<dyn Error>)?;
    let fd = EventFd::new(0)?;
    let theirs = fd.try_clone()?;
    let done = EventFd::new(0)?;
    let done2 = done.try_clone()?;
    let bar = Arc::clone(&p.bar);
    let t2 = thread::spawn(move || {
        for _ in 0..N {
            if theirs.read().is_err() {
                return;
            }
            let _ = bar.write(sq_db, Width::W32, 0);
            let _ = done2.write(1);
        }
    });
    let t = Instant::now();
    for _ in 0..N {
        fd.write(1)?;
        done.read()?;
    }
    println!(
        "measure kick-forwarded-roundtrip {:.2} us",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(N)
    );
    let _ = t2.join();
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = rig_tests::vm::guard::ensure_inside_guest() {
        eprintln!("refusing to run outside the disposable machine: {e}");
        return ExitCode::from(2);
    }
    let Some(bdf) = std::env::args().nth(1).and_then(|a| a.parse::<Bdf>().ok()) else {
        eprintln!("usage: rig-nvme-probe BDF");
        return ExitCode::from(2);
    };
    let mut p = match open(bdf) {
        Ok(p) => p,
        Err(e) => {
            println!(
                "FAIL open {bdf} through VFIO with a pool: {}",
                error_line(&*e)
            );
            return ExitCode::FAILURE;
        }
    };
    println!(
        "ok open {} through VFIO, rings at IOVA {:#x}",
        p.bdf, p.iova
    );
    let t = Instant::now();
    let started = p.ctrl.start().cloned().map_err(Into::into);
    let Some(id) = check(&mut p, "controller reset, enabled, identified", started) else {
        return ExitCode::FAILURE;
    };
    println!(
        "measure start {:.1} ms\ninfo model={:?} serial={:?} fw={:?} oacs={:#x} mdts={} max_qid={}",
        t.elapsed().as_secs_f64() * 1e3,
        id.model,
        id.serial,
        id.firmware,
        id.oacs,
        id.mdts,
        p.ctrl.max_qid()
    );
    let mut results = Vec::new();
    let mut run = 0;
    let mut go = |p: &mut Probe, mode: Mode, depth: u32, results: &mut Vec<(Mode, u32, Run)>| {
        let what = format!(
            "{} depth {depth}: {BLOCKS} writes then reads, compared",
            mode.name()
        );
        let r = p.run(mode, depth, run);
        run += 1;
        if let Some(r) = check(p, &what, r) {
            println!(
                "measure {}-d{depth}-write-iops {:.0} iops\nmeasure {}-d{depth}-read-iops {:.0} iops",
                mode.name(),
                BLOCKS as f64 / r.write_s,
                mode.name(),
                BLOCKS as f64 / r.read_s
            );
            results.push((mode, depth, r));
        }
    };
    for depth in [1, 32] {
        go(&mut p, Mode::Mmio, depth, &mut results);
    }
    let dbbuf = p
        .ctrl
        .config_dbbuf(p.iova + SHADOW_AT, p.iova + EVENTIDX_AT);
    if check(
        &mut p,
        "Doorbell Buffer Config accepted",
        dbbuf.map_err(Into::into),
    )
    .is_some()
    {
        for mode in [Mode::ShadowMmio, Mode::IoEventFd, Mode::Forwarded] {
            for depth in [1, 32] {
                go(&mut p, mode, depth, &mut results);
            }
        }
    }
    let read_iops = |m: Mode, d: u32| {
        results
            .iter()
            .find(|(mm, dd, _)| *mm == m && *dd == d)
            .map(|(_, _, r)| BLOCKS as f64 / r.read_s)
    };
    if let (Some(lent), Some(direct)) = (
        read_iops(Mode::IoEventFd, 32),
        read_iops(Mode::ShadowMmio, 32),
    ) {
        println!(
            "measure ratio-ioeventfd-vs-shadow-mmio-d32-read {:.3} x",
            lent / direct
        );
    }
    if let (Some(fwd), Some(direct)) = (
        read_iops(Mode::Forwarded, 32),
        read_iops(Mode::ShadowMmio, 32),
    ) {
        println!(
            "measure ratio-forwarded-vs-shadow-mmio-d32-read {:.3} x",
            fwd / direct
        );
    }
    for d in [1, 32] {
        if let Some(iops) = read_iops(Mode::IoEventFd, d) {
            println!(
                "measure ioeventfd-d{d}-read-latency {:.1} us",
                1e6 / iops * f64::from(d)
            );
        }
    }
    // The kick costs need a live queue to ring (an empty one: nothing to fetch).
    let live = empty_queue(&mut p);
    if check(&mut p, "an empty queue for the kick costs", live).is_some() {
        let r = kick_costs(&mut p);
        check(&mut p, "kick costs measured", r);
        let gone = p.ctrl.delete_sq(QID).and_then(|()| p.ctrl.delete_cq(QID));
        check(&mut p, "its queue deleted", gone.map_err(Into::into));
    }
    let off = p.ctrl.disable();
    check(&mut p, "controller disabled", off.map_err(Into::into));
    println!("probe {}: {} failures", p.bdf, p.fails);
    if p.fails == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
