//! One device's pool: pinned blocks, their device addresses, leases, and the pinner
//! thread that fills the pool at start and replaces every block a client has had.
//!
//! State: one mutex over free, leased, quarantined and to-be-retired blocks and the
//! IOVA allocator; the pinner waits on a condvar for work and pins outside the lock.
//! Lease waiters are woken through a tokio `Notify` each time a block is added.

use std::{
    collections::{BTreeMap, HashMap},
    os::fd::OwnedFd,
    sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError},
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use tokio::sync::Notify;

use super::{
    BLOCK_SIZE, Backing, DeviceAddr, DeviceMap, DmaError, GpuVa, IommuMap, Iova, IovaAllocator,
    LeaseId, PhysAddr, PoolMode, PoolStatus, block::Block,
};
use crate::sys::sched;

/// What a pool is made of.
#[derive(Debug, Clone)]
pub struct PoolSpec {
    pub mode: PoolMode,
    /// Blocks the pool holds (free plus leased).
    pub blocks: u32,
    pub backing: Backing,
    /// Threads that pin the initial fill; at least 1.
    pub pin_threads: usize,
}

/// A lease's blocks as the pool hands them out.
#[derive(Debug)]
pub struct LeasedBlocks {
    pub addr: Option<DeviceAddr>,
    /// One descriptor per block, in device-address order.
    pub fds: Vec<OwnedFd>,
}

#[derive(Debug)]
struct Leased {
    blocks: Vec<Block>,
    addr: Option<DeviceAddr>,
    /// The session's space its blocks are mapped in (gpu mode).
    map: Option<Arc<dyn DeviceMap>>,
}

#[derive(Debug, Default)]
struct State {
    /// Free blocks by physical address (sysfs mode) or age.
    free: BTreeMap<u64, Block>,
    seq: u64,
    leases: HashMap<LeaseId, Leased>,
    /// Pages mapped a second time ([`Pool::alias`]): IOVA → their lease.
    aliases: BTreeMap<u64, LeaseId>,
    quarantine: Vec<Block>,
    retire: Vec<Block>,
    /// Blocks taken off `retire` whose pages some thread is punching now
    /// ([`take_retire`]): a pin waits for them ([`retire_and_pin`]).
    retiring: usize,
    deficit: u32,
    in_flight: u32,
    /// Blocks that failed to pin; tried again after the next release or reset.
    failed: u32,
    iova: Option<IovaAllocator>,
    problem: Option<Arc<DmaError>>,
    fill_rate: Option<f64>,
    /// A fill is under way (its workers may all be done while it records its rate).
    filling: bool,
    stop: bool,
    /// When each pin under way started, by ticket (the watchdog's probe reads the
    /// oldest: `Pool::oldest_pin`).
    pinning: BTreeMap<u64, Instant>,
    next_pin: u64,
    /// Tests: the pinner takes no work, as a niced thread on a saturated machine.
    #[cfg(test)]
    hold_refills: bool,
}

#[cfg(test)]
fn refills_held(st: &State) -> bool {
    st.hold_refills
}

#[cfg(not(test))]
fn refills_held(_: &State) -> bool {
    false
}

#[derive(Debug)]
struct Shared {
    name: String,
    mode: PoolMode,
    backing: Backing,
    target: u32,
    pin_threads: usize,
    state: Mutex<State>,
    work: Condvar,
    /// Signalled when a fill ends, for [`Pool::wait_pinned`].
    pinned: Condvar,
    /// Signalled when `retiring` drops to zero.
    retired: Condvar,
    added: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic under the lock leaves counters that are at worst stale.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One device's pool. Dropping it stops the pinner and retires every block.
#[derive(Debug)]
pub struct Pool {
    shared: Arc<Shared>,
    pinner: Option<JoinHandle<()>>,
}

impl Pool {
    /// Starts a pool: the pinner begins filling it at once, in the background.
    ///
    /// # Errors
    /// [`DmaError::Config`] for sysfs mode without hugepages; [`DmaError::Iova`] when
    /// the IOMMU's ranges or page sizes cannot hold a block.
    pub fn start(name: &str, spec: PoolSpec) -> Result<Self, DmaError> {
        let iova = match &spec.mode {
            PoolMode::Sysfs if spec.backing != Backing::Huge2M => {
                return Err(DmaError::Config {
                    key: "mode",
                    why: "sysfs mode hands out physical addresses of hugepages only".into(),
                });
            }
            PoolMode::Vfio(iommu) => Some(IovaAllocator::new(
                &iommu.iova_ranges(),
                iommu.page_sizes(),
                BLOCK_SIZE,
            )?),
            // Any page size: the space maps each block whole, at a block-aligned VA.
            PoolMode::Gpu(range) => Some(IovaAllocator::new(
                std::slice::from_ref(range),
                BLOCK_SIZE,
                BLOCK_SIZE,
            )?),
            _ => None,
        };
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            mode: spec.mode,
            backing: spec.backing,
            target: spec.blocks,
            pin_threads: spec.pin_threads.max(1),
            state: Mutex::new(State {
                deficit: spec.blocks,
                iova,
                ..State::default()
            }),
            work: Condvar::new(),
            pinned: Condvar::new(),
            retired: Condvar::new(),
            added: Notify::new(),
        });
        let inner = Arc::clone(&shared);
        let pinner = thread::Builder::new()
            .name(format!("rig-pin-{name}"))
            .spawn(move || pinner(&inner))
            .map_err(|source| DmaError::Block {
                step: super::BlockStep::Create,
                source,
            })?;
        Ok(Self {
            shared,
            pinner: Some(pinner),
        })
    }

    /// How long the oldest block pin under way has run at `now` (`None`: none is),
    /// for the watchdog (`service::watchdog`, `PIN_LIMIT`).
    pub fn oldest_pin(&self, now: Instant) -> Option<Duration> {
        let st = self.shared.state();
        st.pinning
            .values()
            .min()
            .map(|t| now.saturating_duration_since(*t))
    }

    /// The pool's name (its device's).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The pool's mode.
    pub fn mode(&self) -> &PoolMode {
        &self.shared.mode
    }

    /// Blocks the pool holds when full.
    pub fn target_blocks(&self) -> u32 {
        self.shared.target
    }

    /// Woken each time a block becomes free.
    pub fn added(&self) -> &Notify {
        &self.shared.added
    }

    /// Waits until nothing is left to pin (blocks that failed to pin included), or
    /// `timeout` passes; true when filled.
    pub fn wait_pinned(&self, timeout: Duration) -> bool {
        let settled = |st: &State| {
            st.deficit == 0
                && st.in_flight == 0
                && st.failed == 0
                && st.retire.is_empty()
                && st.retiring == 0
                && !st.filling
        };
        // Woken when a fill ends, not polled: a 256 MiB pool pins in ~13 ms, so even a
        // 1 ms poll would add several percent to what callers measure, and a wake-up
        // per block would take a CPU from the pinning.
        let st = self.shared.state();
        let (st, _) = self
            .shared
            .pinned
            .wait_timeout_while(st, timeout, |st| !settled(st))
            .unwrap_or_else(PoisonError::into_inner);
        settled(&st)
    }

    /// Pins one missing block on the calling thread, at the caller's priority, for a
    /// lease that found no free block while replacements are still to be pinned. The
    /// pinner refills at background priority (nice 19): on a machine whose CPUs are
    /// busy it may get almost no time, and leases would be refused "being pinned" for
    /// as long as the load lasts (the load bench and the soak found this; a lease
    /// cannot wait on the scheduler's mercy). False when no block is missing.
    pub fn pin_one(&self) -> bool {
        let shared = &self.shared;
        let retire = {
            let mut st = shared.state();
            if st.stop || st.deficit == 0 {
                return false;
            }
            st.deficit -= 1;
            st.in_flight += 1;
            take_retire(&mut st)
        };
        store(shared, retire_and_pin(shared, retire));
        // The last missing block may have been this one: `wait_pinned` callers wake.
        shared.pinned.notify_all();
        true
    }

    /// Lends `blocks` free blocks under `id`: maps them for the device (vfio), and
    /// returns their device address and a descriptor per block.
    ///
    /// # Errors
    /// [`DmaError::Exhausted`], [`DmaError::NotContiguous`] (sysfs mode, more than one
    /// block), [`DmaError::Iova`]/[`DmaError::Map`] (vfio mode), [`DmaError::Block`]
    /// when a descriptor cannot be duplicated.
    pub fn lease(&self, id: LeaseId, blocks: u32) -> Result<LeasedBlocks, DmaError> {
        self.lease_into(id, blocks, None)
    }

    /// As [`Pool::lease`], a gpu-mode pool mapping the blocks into `map`, the leasing
    /// session's own space.
    ///
    /// # Errors
    /// As [`Pool::lease`]; [`DmaError::DeviceMap`]; [`DmaError::Config`] for a
    /// gpu-mode pool without `map`.
    pub fn lease_into(
        &self,
        id: LeaseId,
        blocks: u32,
        map: Option<&Arc<dyn DeviceMap>>,
    ) -> Result<LeasedBlocks, DmaError> {
        if matches!(self.shared.mode, PoolMode::Gpu(_)) && map.is_none() {
            return Err(DmaError::Config {
                key: "mode",
                why: "a gpu pool leases only into a session's address space".into(),
            });
        }
        let mut st = self.shared.state();
        let free = u32::try_from(st.free.len()).unwrap_or(u32::MAX);
        if free < blocks {
            return Err(DmaError::Exhausted {
                pool: self.shared.name.clone(),
                wanted: blocks,
                free,
                pending: st.deficit + st.in_flight,
            });
        }
        let keys = self.pick(&st, blocks)?;
        let taken: Vec<(u64, Block)> = keys
            .iter()
            .filter_map(|k| st.free.remove(k).map(|b| (*k, b)))
            .collect();
        let put_back = |st: &mut State, taken: Vec<(u64, Block)>| st.free.extend(taken);
        let fds = match taken.iter().map(|(_, b)| b.share()).collect() {
            Ok(fds) => fds,
            Err(e) => {
                put_back(&mut st, taken);
                return Err(e);
            }
        };
        let mapped = match &self.shared.mode {
            PoolMode::Host => Ok(None),
            PoolMode::Sysfs => Ok(taken
                .first()
                .and_then(|(_, b)| b.phys())
                .map(DeviceAddr::Phys)),
            PoolMode::Gpu(_) => {
                let space = st
                    .iova
                    .as_mut()
                    .expect("gpu pools have an address allocator");
                let map = map.expect("checked above").as_ref();
                map_gpu_lease(map, space, &taken).map(|va| Some(DeviceAddr::GpuVa(va)))
            }
            PoolMode::Vfio(iommu) => {
                let space = st.iova.as_mut().expect("vfio pools have an IOVA allocator");
                map_lease(iommu.as_ref(), space, &taken).map(|iova| Some(DeviceAddr::Iova(iova)))
            }
        };
        let addr = match mapped {
            Ok(addr) => addr,
            Err((e, reachable)) => {
                if reachable {
                    // The rollback unmap failed: the device may still reach these
                    // pages, so they never go back to the free list.
                    st.quarantine.extend(taken.into_iter().map(|(_, b)| b));
                } else {
                    put_back(&mut st, taken);
                }
                return Err(e);
            }
        };
        let blocks = taken.into_iter().map(|(_, b)| b).collect();
        let map = map.cloned();
        st.leases.insert(id, Leased { blocks, addr, map });
        Ok(LeasedBlocks { addr, fds })
    }

    /// Which free blocks to lend: the youngest, or in sysfs mode a physically
    /// contiguous run, lowest address first.
    fn pick(&self, st: &State, blocks: u32) -> Result<Vec<u64>, DmaError> {
        if matches!(self.shared.mode, PoolMode::Sysfs) && blocks > 1 {
            return contiguous_run(st.free.keys().copied(), blocks).map_err(|longest| {
                DmaError::NotContiguous {
                    pool: self.shared.name.clone(),
                    blocks,
                    longest,
                }
            });
        }
        let n = usize::try_from(blocks).unwrap_or(usize::MAX);
        Ok(st.free.keys().rev().take(n).copied().collect())
    }

    /// Takes a lease back. Its blocks leave the IOMMU (vfio) and are retired, or are
    /// quarantined until the device's reset (sysfs); fresh blocks replace them.
    ///
    /// # Errors
    /// [`DmaError::UnknownLease`].
    pub fn release(&self, id: LeaseId) -> Result<u32, DmaError> {
        let mut st = self.shared.state();
        if !st.leases.contains_key(&id) {
            return Err(DmaError::UnknownLease { lease: id });
        }
        let unaliased = self.drop_aliases(&mut st, id);
        let leased = st.leases.remove(&id).expect("checked above");
        let n = u32::try_from(leased.blocks.len()).expect("at most MAX_LEASE_BLOCKS");
        if unaliased {
            self.take_back(&mut st, leased);
        } else {
            st.quarantine.extend(leased.blocks);
        }
        st.deficit += n + std::mem::take(&mut st.failed);
        drop(st);
        self.shared.work.notify_all();
        Ok(n)
    }

    fn take_back(&self, st: &mut State, leased: Leased) {
        let len = BLOCK_SIZE * leased.blocks.len() as u64;
        let unmapped = match (&self.shared.mode, leased.addr) {
            (PoolMode::Gpu(_), Some(DeviceAddr::GpuVa(base))) => {
                let map = leased.map.as_ref().expect("gpu leases keep their space");
                Some((Iova(base.0), map.unmap(base.0, len), "GPU"))
            }
            (PoolMode::Vfio(iommu), Some(DeviceAddr::Iova(base))) => {
                Some((base, iommu.unmap(base, len), "IOMMU"))
            }
            _ => None,
        };
        if let Some((base, result, what)) = unmapped {
            match result {
                Ok(()) => {
                    if let Some(space) = st.iova.as_mut()
                        && let Err(e) = space.free(base)
                    {
                        tracing::warn!(pool = %self.shared.name, "{e}");
                    }
                    st.retire.extend(leased.blocks);
                }
                Err(e) => {
                    // Still reachable by the device: never free these pages.
                    tracing::error!(pool = %self.shared.name, error = &e as &dyn std::error::Error, "{what} unmap failed: keeping the lease's blocks out of use");
                    st.quarantine.extend(leased.blocks);
                }
            }
            return;
        }
        match (&self.shared.mode, leased.addr) {
            (PoolMode::Sysfs, _) => {
                for b in &leased.blocks {
                    if let (Ok(now), Some(was)) = (b.read_phys(), b.phys())
                        && now != was
                    {
                        tracing::warn!(pool = %self.shared.name, %was, %now, "a leased block moved while the device could reach it");
                    }
                }
                st.quarantine.extend(leased.blocks);
            }
            _ => st.retire.extend(leased.blocks),
        }
    }

    /// The device was reset: it no longer reaches quarantined blocks, so they are
    /// retired and replaced. Returns how many. A vfio pool keeps blocks whose unmap
    /// failed, since a reset does not unmap them.
    pub fn device_reset(&self) -> u32 {
        let mut st = self.shared.state();
        if !matches!(self.shared.mode, PoolMode::Sysfs) {
            return 0;
        }
        let q = std::mem::take(&mut st.quarantine);
        let n = u32::try_from(q.len()).unwrap_or(u32::MAX);
        st.retire.extend(q);
        // Their replacements were pinned when they were released (`release`): only
        // failed pins are owed here, or each reset would grow the pool by `n`.
        st.deficit += std::mem::take(&mut st.failed);
        drop(st);
        self.shared.work.notify_all();
        n
    }

    /// A lease's device address and length, while it is lent.
    pub fn lease_addr(&self, id: LeaseId) -> Option<(Option<DeviceAddr>, u64)> {
        let st = self.shared.state();
        st.leases
            .get(&id)
            .map(|l| (l.addr, BLOCK_SIZE * l.blocks.len() as u64))
    }

    /// Volatile read of a lease's bytes at `offset` (across blocks).
    ///
    /// # Errors
    /// [`DmaError::UnknownLease`], [`DmaError::OutOfLease`].
    pub fn read(&self, id: LeaseId, offset: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let st = self.shared.state();
        let leased = st
            .leases
            .get(&id)
            .ok_or(DmaError::UnknownLease { lease: id })?;
        let mut done = 0;
        for_each_piece(leased, id, offset, buf.len(), |b, at, len| {
            let r = b.read(at, &mut buf[done..done + len]);
            done += len;
            r
        })
    }

    /// Volatile write of `data` into a lease at `offset` (across blocks).
    ///
    /// # Errors
    /// [`DmaError::UnknownLease`], [`DmaError::OutOfLease`].
    pub fn write(&self, id: LeaseId, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        let st = self.shared.state();
        let leased = st
            .leases
            .get(&id)
            .ok_or(DmaError::UnknownLease { lease: id })?;
        let mut done = 0;
        for_each_piece(leased, id, offset, data.len(), |b, at, len| {
            let r = b.write(at, &data[done..done + len]);
            done += len;
            r
        })
    }

    /// Reads the physical address of each of a lease's blocks again and checks that
    /// none moved since it was pinned (sysfs mode).
    ///
    /// # Errors
    /// [`DmaError::UnknownLease`], [`DmaError::Moved`], pagemap errors.
    pub fn recheck_phys(&self, id: LeaseId) -> Result<Vec<PhysAddr>, DmaError> {
        let st = self.shared.state();
        let leased = st
            .leases
            .get(&id)
            .ok_or(DmaError::UnknownLease { lease: id })?;
        leased
            .blocks
            .iter()
            .map(|b| {
                let now = b.read_phys()?;
                match b.phys() {
                    Some(was) if was != now => Err(DmaError::Moved {
                        va: b.va(),
                        was,
                        now,
                    }),
                    _ => Ok(now),
                }
            })
            .collect()
    }

    /// The pool's counters now; its last pinning failure as the line a report shows
    /// (the error itself stays with the pool, which logged it when it happened).
    pub fn status(&self) -> PoolStatus {
        let st = self.shared.state();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        PoolStatus {
            name: self.shared.name.clone(),
            addressing: self.shared.mode.addressing(),
            block_bytes: BLOCK_SIZE,
            target_blocks: self.shared.target,
            free_blocks: count(st.free.len()),
            leased_blocks: count(st.leases.values().map(|l| l.blocks.len()).sum()),
            quarantined_blocks: count(st.quarantine.len()),
            pinning_blocks: st.deficit + st.in_flight + st.failed,
            pin_gib_per_s: st.fill_rate,
            problem: st.problem.as_deref().map(|e| crate::error::line(e)),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.state().stop = true;
        self.shared.work.notify_all();
        if let Some(p) = self.pinner.take()
            && p.join().is_err()
        {
            tracing::error!(pool = %self.shared.name, "the pinner thread panicked");
        }
        let mut st = self.shared.state();
        let ids: Vec<LeaseId> = st.leases.keys().copied().collect();
        for id in ids {
            let unaliased = self.drop_aliases(&mut st, id);
            let l = st.leases.remove(&id).expect("listed above");
            if unaliased {
                self.take_back(&mut st, l);
            } else {
                st.quarantine.extend(l.blocks);
            }
        }
        let gone = take_retire(&mut st);
        let quarantine = std::mem::take(&mut st.quarantine);
        drop(st);
        retire_taken(&self.shared, gone);
        match &self.shared.mode {
            // A block whose unmap failed may still be reached by the device: it outlives
            // its pool, pinned and mapped, for as long as rigd runs.
            PoolMode::Vfio(_) if !quarantine.is_empty() => {
                tracing::error!(
                    pool = %self.shared.name,
                    blocks = quarantine.len(),
                    "the pool is gone, but its device may still reach these blocks (their IOMMU unmap failed): they stay pinned and unused until rigd exits"
                );
                let name = &self.shared.name;
                lock_orphans().extend(quarantine.into_iter().map(|b| (name.clone(), b)));
            }
            // Without an IOMMU, blocks are quarantined until the device is reset; a pool
            // is removed only after its device stopped mastering the bus (`rig.rs`).
            _ => quarantine.into_iter().for_each(Block::retire),
        }
    }
}

/// Blocks of pools that are gone, which a device may still reach, by pool name: never
/// freed.
static ORPHANS: Mutex<Vec<(String, Block)>> = Mutex::new(Vec::new());

fn lock_orphans() -> MutexGuard<'static, Vec<(String, Block)>> {
    ORPHANS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many blocks of the pools named `pool` outlived them because their IOMMU unmap
/// failed (tests; the error log says it when it happens).
#[cfg(test)]
pub fn orphaned_blocks(pool: &str) -> usize {
    lock_orphans().iter().filter(|(n, _)| n == pool).count()
}

/// Maps a lease's blocks at one contiguous IOVA range. On failure, returns the error
/// and whether the device may still reach some of the blocks (the rollback failed).
#[expect(
    unsafe_code,
    reason = "IommuMap::map: the caller owes that the host memory outlives the mapping"
)]
fn map_lease(
    iommu: &dyn IommuMap,
    space: &mut IovaAllocator,
    blocks: &[(u64, Block)],
) -> Result<Iova, (DmaError, bool)> {
    let len = BLOCK_SIZE * blocks.len() as u64;
    let base = space.alloc(len).map_err(|e| (e.into(), false))?;
    for (i, (_, b)) in blocks.iter().enumerate() {
        let at = Iova(base.0 + BLOCK_SIZE * i as u64);
        // SAFETY: `b` is mapped in rigd for as long as the `Block` lives. The pool
        // keeps each block (in its lease, then quarantine) until `unmap` of this
        // lease's range has returned Ok in `take_back`; only then is it retired, and a
        // block whose unmap failed is never retired while the pool lives. On a failed
        // map below, the blocks mapped so far are unmapped before they are reused.
        let mapped = unsafe { iommu.map(at, b.va(), BLOCK_SIZE) };
        if let Err(e) = mapped {
            let rolled_back = i == 0 || iommu.unmap(base, BLOCK_SIZE * i as u64).is_ok();
            if rolled_back && let Err(f) = space.free(base) {
                tracing::warn!("{f}");
            }
            return Err((e, !rolled_back));
        }
    }
    Ok(base)
}

/// Maps `blocks` at consecutive addresses of `space` into `map`; on failure the
/// blocks mapped so far are unmapped, and the bool says whether that failed too.
fn map_gpu_lease(
    map: &dyn DeviceMap,
    space: &mut IovaAllocator,
    blocks: &[(u64, Block)],
) -> Result<GpuVa, (DmaError, bool)> {
    let len = BLOCK_SIZE * blocks.len() as u64;
    // The session's GPU VA space is allocated with the IOVA allocator's arithmetic.
    let base = space.alloc(len).map_err(|e| (e.into(), false))?.0;
    for (i, (_, b)) in blocks.iter().enumerate() {
        if let Err(e) = map.map_block(base + BLOCK_SIZE * i as u64, b.mapping()) {
            let rolled_back = i == 0 || map.unmap(base, BLOCK_SIZE * i as u64).is_ok();
            if rolled_back && let Err(f) = space.free(Iova(base)) {
                tracing::warn!("{f}");
            }
            return Err((e, !rolled_back));
        }
    }
    Ok(GpuVa(base))
}

/// The first run of `n` keys (physical addresses, ascending) that follow each other
/// by one block, or the longest run there is.
fn contiguous_run(keys: impl Iterator<Item = u64>, n: u32) -> Result<Vec<u64>, u32> {
    let mut run: Vec<u64> = Vec::new();
    let mut longest = 0;
    for k in keys {
        if run
            .last()
            .is_some_and(|l| l.checked_add(BLOCK_SIZE) != Some(k))
        {
            run.clear();
        }
        run.push(k);
        let len = u32::try_from(run.len()).unwrap_or(u32::MAX);
        longest = longest.max(len);
        if len == n {
            return Ok(run);
        }
    }
    Err(longest)
}

/// Calls `f(block, offset in block, length)` for each piece of `[offset, offset+len)`.
fn for_each_piece(
    leased: &Leased,
    id: LeaseId,
    offset: u64,
    len: usize,
    mut f: impl FnMut(&Block, usize, usize) -> std::io::Result<()>,
) -> Result<(), DmaError> {
    let size = BLOCK_SIZE * leased.blocks.len() as u64;
    let out = || DmaError::OutOfLease {
        lease: id,
        offset,
        len: len as u64,
    };
    let end = offset.checked_add(len as u64).ok_or_else(out)?;
    if end > size {
        return Err(out());
    }
    let mut at = offset;
    while at < end {
        let index = usize::try_from(at / BLOCK_SIZE).map_err(|_| out())?;
        let within = at % BLOCK_SIZE;
        let piece = (BLOCK_SIZE - within).min(end - at);
        let (within, piece) = (
            usize::try_from(within).map_err(|_| out())?,
            usize::try_from(piece).map_err(|_| out())?,
        );
        // PANIC: `at < end <= size`, so `index < blocks.len()`.
        f(&leased.blocks[index], within, piece).map_err(|_| out())?;
        at += piece as u64;
    }
    Ok(())
}

/// The first wait before pinning again blocks that failed to pin; it doubles up to
/// [`RETRY_MAX`].
// TIMEOUT: hugepages come back when another program frees them, which nothing signals;
// 50 ms first keeps a brief shortage brief, 5 s at most keeps a lasting one cheap.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The pinner: fills the pool, then retires what comes back and refills.
fn pinner(shared: &Shared) {
    let mut initial = true;
    let mut backoff = RETRY_FIRST;
    loop {
        let retire = {
            let mut st = shared.state();
            while !st.stop && ((st.retire.is_empty() && st.deficit == 0) || refills_held(&st)) {
                if st.failed == 0 {
                    st = shared.work.wait(st).unwrap_or_else(PoisonError::into_inner);
                    continue;
                }
                // Blocks failed to pin (hugepages ran out): try again later, as other
                // programs may give pages back without telling us.
                let (next, waited) = shared
                    .work
                    .wait_timeout(st, backoff)
                    .unwrap_or_else(PoisonError::into_inner);
                st = next;
                if waited.timed_out() {
                    st.deficit += std::mem::take(&mut st.failed);
                    backoff = (backoff * 2).min(RETRY_MAX);
                }
            }
            if st.stop {
                return;
            }
            if st.failed == 0 {
                backoff = RETRY_FIRST;
            }
            st.filling = true;
            take_retire(&mut st)
        };
        // Retire first, so the pages they free can be pinned again.
        retire_taken(shared, retire);
        let threads = if initial { shared.pin_threads } else { 1 };
        fill(shared, threads, initial);
        shared.state().filling = false;
        shared.pinned.notify_all();
        if initial {
            // From now on pinning only replaces returned blocks: background work that
            // must not delay the lease and release requests running beside it.
            if let Err(e) = sched::set_this_thread_nice(sched::BACKGROUND_NICE) {
                tracing::debug!(pool = %shared.name, "refills keep normal priority: {e}");
            }
        }
        initial = false;
    }
}

/// Pins blocks until none are missing, on `threads` threads; the initial fill logs its
/// progress and records its rate.
fn fill(shared: &Shared, threads: usize, initial: bool) {
    let total = shared.state().deficit;
    if total == 0 {
        return;
    }
    let start = Instant::now();
    if initial {
        tracing::info!(pool = %shared.name, blocks = total, mib = u64::from(total) * 2, threads, "pinning");
    }
    let done = std::sync::atomic::AtomicU32::new(0);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| pin_worker(shared, &done, total, initial));
        }
    });
    if initial {
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let pinned = done.load(std::sync::atomic::Ordering::Relaxed);
        let rate = f64::from(pinned) * (BLOCK_SIZE as f64) / secs / f64::from(1u32 << 30);
        shared.state().fill_rate = Some(rate);
        tracing::info!(pool = %shared.name, blocks = pinned, seconds = secs, gib_per_s = rate, "pinned");
    }
}

fn pin_worker(shared: &Shared, done: &std::sync::atomic::AtomicU32, total: u32, report: bool) {
    loop {
        let retire = {
            let mut st = shared.state();
            if st.stop || st.deficit == 0 {
                return;
            }
            st.deficit -= 1;
            st.in_flight += 1;
            take_retire(&mut st)
        };
        // Blocks released while this fill runs go first: their pages are what the next
        // pin needs when the kernel has no spare ones.
        store(shared, retire_and_pin(shared, retire));
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if report && total >= 64 && n < total && n.is_multiple_of(total / 4) {
            tracing::info!(pool = %shared.name, "pinned {n} of {total} blocks");
        }
    }
}

/// Takes the blocks waiting to be retired, counted in `retiring` until
/// [`retire_taken`] has punched them.
fn take_retire(st: &mut State) -> Vec<Block> {
    let blocks = std::mem::take(&mut st.retire);
    st.retiring += blocks.len();
    blocks
}

/// Retires blocks taken with [`take_retire`], then wakes the pins waiting for their
/// pages.
fn retire_taken(shared: &Shared, blocks: Vec<Block>) {
    if blocks.is_empty() {
        return;
    }
    let n = blocks.len();
    blocks.into_iter().for_each(Block::retire);
    let mut st = shared.state();
    st.retiring -= n;
    if st.retiring == 0 {
        drop(st);
        shared.retired.notify_all();
    }
}

/// Retires `blocks` (from [`take_retire`]) and pins one block once no thread is
/// punching pages any more. The pinner, its fill workers and `Pool::pin_one` pin at
/// once; a pool that holds every hugepage needs a retired block's page back before it
/// can pin the next, and without the wait one pin took the deficit while another still
/// held the page it needed: ENOSPC, one time in twenty in
/// `a_pool_holding_every_free_hugepage_refills_from_the_blocks_it_retires`.
fn retire_and_pin(shared: &Shared, blocks: Vec<Block>) -> Result<Block, DmaError> {
    retire_taken(shared, blocks);
    drop(
        shared
            .retired
            .wait_while(shared.state(), |st| st.retiring > 0)
            .unwrap_or_else(PoisonError::into_inner),
    );
    pin_timed(shared, matches!(shared.mode, PoolMode::Sysfs))
}

/// Pins one block, its start listed in `pinning` while it runs (the watchdog reads the
/// oldest: a pin stuck in the kernel withholds the ping).
fn pin_timed(shared: &Shared, physical: bool) -> Result<Block, DmaError> {
    let ticket = {
        let mut st = shared.state();
        st.next_pin += 1;
        let t = st.next_pin;
        st.pinning.insert(t, Instant::now());
        t
    };
    let pinned = Block::pin(shared.backing, physical);
    shared.state().pinning.remove(&ticket);
    pinned
}

/// Puts a block just pinned (one of `in_flight`) among the free ones, or counts its
/// failure; wakes the lease waiters.
fn store(shared: &Shared, pinned: Result<Block, DmaError>) {
    {
        let mut st = shared.state();
        st.in_flight -= 1;
        match pinned {
            Ok(b) => {
                let key = b.phys().map_or_else(
                    || {
                        st.seq += 1;
                        st.seq
                    },
                    |p| p.0,
                );
                st.free.insert(key, b);
            }
            Err(e) => {
                st.failed += 1;
                // Logged once per kind of failure, not once per block.
                if !st.problem.as_deref().is_some_and(|p| same_error(p, &e)) {
                    tracing::warn!(pool = %shared.name, error = &e as &dyn std::error::Error, "pinning a block failed");
                }
                st.problem = Some(Arc::new(e));
            }
        }
    }
    shared.added.notify_waiters();
}

/// Whether two errors read the same, cause by cause.
fn same_error(a: &dyn std::error::Error, b: &dyn std::error::Error) -> bool {
    let words = |e| crate::error::chain(e).map(ToString::to_string);
    words(a).eq(words(b))
}

mod alias;
pub use alias::ALIAS_PAGE;

#[cfg(test)]
mod tests;
