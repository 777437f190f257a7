//! The lender's own thread: the RM work a lease or a release need not wait for.
//!
//! - **Spare pages.** Up to `[gpu_memory] spare_pages` fresh 2 MiB allocations
//!   (NV01_MEMORY_LOCAL_USER, huge pages, no CPU window), made here ahead of need and
//!   lent to no one until a session leases exactly one page: that lease is then one
//!   map into the session's space instead of an allocation and a map. A spare is always
//!   memory the RM has just handed out, never memory a session had, so it holds what
//!   the RM cleared (docs/hardware/nvidia-compute.md, "Freed memory comes back
//!   cleared"), as a lease's own allocation would. Taking one asks for a refill.
//! - **Released memory.** A release is taken off the session's books and its charge
//!   given back at once; the unmap from the session's space and the RM's free run here,
//!   in the order they were released. The VA range stays the session's until its unmap,
//!   so no other lease is mapped over it meanwhile, and until then only that session's
//!   own work can reach the memory. A release never waits here; a lease waits for the
//!   releases before it when more than [`MAX_PENDING`] is pending, so a client that
//!   releases faster than the RM frees holds at most that beyond its quota.
//! - **A session's own page.** A released one-page allocation that unmapped cleanly is
//!   kept, not freed, when its session keeps none yet ([`OwnPage`]): that session's next
//!   one-page lease maps it again, so a session that leases and releases a page back to
//!   back costs the RM one map and one unmap per cycle instead of also a free and an
//!   allocation. It holds only what that session wrote, is lent to no one else, and is
//!   freed with the session.
//! - **A session's end** does its own unmaps and frees (in the ledger's order, before
//!   its address space goes) after [`Chores::settle`]: whatever it released earlier is
//!   gone first.
//!
//! Not here: the books and quotas (`gpumem`), the RM objects (`nvrm::vidmem`).

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread::JoinHandle,
};

use rig_model::addr::layout::GPU_PAGE;

use crate::nvrm::{DeviceMem, DeviceView, Gpu, Pages, Rm};

/// GPU memory released and not yet unmapped and freed, most, per GPU: 16 pages.
pub const MAX_PENDING: u64 = 16 * GPU_PAGE;

/// Where a session keeps its one released page for its next lease: the session's
/// books hold it, the lender's thread fills it.
pub type OwnPage<R> = Arc<Mutex<Option<Arc<DeviceMem<R>>>>>;

enum Chore<R: Rm> {
    /// Unmap a released allocation of `bytes`, then keep it in `keep` (a one-page
    /// allocation, when the slot is empty) or free it.
    Release {
        view: DeviceView<R>,
        bytes: u64,
        keep: Option<OwnPage<R>>,
    },
    /// Make spares up to the target.
    Refill,
    /// Answer once every chore before is done.
    Settle(mpsc::SyncSender<()>),
}

struct Shared<R: Rm> {
    spares: Mutex<Vec<DeviceMem<R>>>,
    target: usize,
    /// Bytes in `Release` chores not yet done.
    pending: AtomicU64,
}

impl<R: Rm> Shared<R> {
    fn spares(&self) -> std::sync::MutexGuard<'_, Vec<DeviceMem<R>>> {
        // A list of allocations: a panic under the lock leaves it usable.
        self.spares.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One GPU's lender thread and what it keeps.
pub struct Chores<R: Rm> {
    tx: Option<mpsc::Sender<Chore<R>>>,
    shared: Arc<Shared<R>>,
    thread: Option<JoinHandle<()>>,
}

impl<R: Rm> std::fmt::Debug for Chores<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chores")
            .field("spares", &self.shared.spares().len())
            .field("target", &self.shared.target)
            .field("pending", &self.shared.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<R: Rm> Chores<R> {
    /// Starts `gpu`'s lender thread (named for `name`, its PCI address), which makes
    /// `spares` spare pages at once. Without a thread (the system refused one), every
    /// release does its own work and no spares are kept.
    pub fn start(gpu: Arc<Gpu<R>>, name: &str, spares: u32) -> Self {
        let shared = Arc::new(Shared {
            spares: Mutex::new(Vec::new()),
            target: usize::try_from(spares).unwrap_or(usize::MAX),
            pending: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::channel();
        let worker = Arc::clone(&shared);
        let gpu_name = name.to_owned();
        let thread = std::thread::Builder::new()
            .name("rigd-gpumem".into())
            .spawn(move || run(&gpu, &gpu_name, &worker, &rx));
        let (tx, thread) = match thread {
            Ok(t) => (Some(tx), Some(t)),
            Err(e) => {
                tracing::warn!(
                    gpu = name,
                    error = &e as &dyn std::error::Error,
                    "no GPU memory thread: leases and releases do all their RM calls"
                );
                (None, None)
            }
        };
        let c = Self { tx, shared, thread };
        if c.shared.target > 0 {
            c.send(Chore::Refill);
        }
        c
    }

    fn send(&self, chore: Chore<R>) -> Option<Chore<R>> {
        match &self.tx {
            Some(tx) => tx.send(chore).err().map(|e| e.0),
            None => Some(chore),
        }
    }

    /// A spare page, if one is ready (a refill is asked for).
    pub fn take_spare(&self) -> Option<DeviceMem<R>> {
        let m = self.shared.spares().pop()?;
        self.send(Chore::Refill);
        Some(m)
    }

    /// Bytes released and not yet unmapped and freed.
    pub fn pending(&self) -> u64 {
        self.shared.pending.load(Ordering::Acquire)
    }

    /// Bytes of spare pages ready now.
    pub fn spare_bytes(&self) -> u64 {
        self.shared.spares().len() as u64 * GPU_PAGE
    }

    /// Hands `view` (a released allocation of `bytes`) to the thread to unmap and free;
    /// gives it back only when there is no thread. Never waits: what is pending is
    /// bounded by the leases, which wait past [`MAX_PENDING`] (`Lender::alloc`).
    /// A one-page allocation goes to `keep` afterwards when that is empty.
    pub fn release(
        &self,
        view: DeviceView<R>,
        bytes: u64,
        keep: Option<OwnPage<R>>,
    ) -> Result<(), DeviceView<R>> {
        let pending = &self.shared.pending;
        pending.fetch_add(bytes, Ordering::AcqRel);
        match self.send(Chore::Release { view, bytes, keep }) {
            None => Ok(()),
            Some(Chore::Release { view, bytes, .. }) => {
                pending.fetch_sub(bytes, Ordering::AcqRel);
                Err(view)
            }
            Some(_) => unreachable!("the chore sent comes back"),
        }
    }

    /// Returns once every release handed over before is unmapped and freed.
    pub fn settle(&self) {
        let (ack, done) = mpsc::sync_channel(1);
        if self.send(Chore::Settle(ack)).is_none() {
            // The thread answers after the chores before; it ends only when we drop.
            let _ = done.recv();
        }
    }
}

impl<R: Rm> Drop for Chores<R> {
    /// Lets the thread finish what it was handed, then frees the spares: nothing this
    /// lender made outlives it.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the GPU memory thread panicked");
        }
        self.shared.spares().clear();
    }
}

fn run<R: Rm>(gpu: &Arc<Gpu<R>>, name: &str, shared: &Shared<R>, rx: &mpsc::Receiver<Chore<R>>) {
    for chore in rx {
        match chore {
            Chore::Release { view, bytes, keep } => {
                let mem = Arc::clone(view.mem());
                match view.close() {
                    Ok(()) => {
                        if let Some(slot) = keep {
                            keep_own(&slot, mem);
                        }
                    }
                    // Not kept: memory whose unmap failed is freed.
                    Err(e) => tracing::warn!(
                        gpu = name,
                        error = &e as &dyn std::error::Error,
                        "unmapping released GPU memory"
                    ),
                }
                shared.pending.fetch_sub(bytes, Ordering::AcqRel);
            }
            Chore::Refill => refill(gpu, name, shared),
            Chore::Settle(ack) => {
                let _ = ack.send(());
            }
        }
    }
}

/// Keeps `mem`, just unmapped, in its session's empty `slot` when it is one page no one
/// else holds (a CPU view's memory stays the uid's); else it is freed here.
fn keep_own<R: Rm>(slot: &OwnPage<R>, mem: Arc<DeviceMem<R>>) {
    if mem.len() != GPU_PAGE || Arc::strong_count(&mem) != 1 {
        return;
    }
    let mut own = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if own.is_none() {
        *own = Some(mem);
    }
}

/// Makes spare pages until there are `shared.target`; stops at the first the RM
/// refuses (the GPU is full: leases then allocate for themselves, and meet the refusal
/// as their own error).
fn refill<R: Rm>(gpu: &Arc<Gpu<R>>, name: &str, shared: &Shared<R>) {
    while shared.spares().len() < shared.target {
        match DeviceMem::paged(gpu, GPU_PAGE, Pages::Huge, None) {
            Ok(m) => shared.spares().push(m),
            Err(e) => {
                tracing::debug!(
                    gpu = name,
                    error = &e as &dyn std::error::Error,
                    "no spare GPU memory page now"
                );
                return;
            }
        }
    }
}
