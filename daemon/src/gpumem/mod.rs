//! GPU memory lent to sessions on an RM-served GPU: what each session holds, in whole
//! 2 MiB pages mapped only into its own GPU address space, the quotas per uid and per
//! GPU, the CPU views some may have, and taking it all back when the session ends.
//!
//! Flow: `service::gpumem` (the side socket's requests) → `rig` (who may have a CPU
//! view; the session's ledger) → `channels::Served` (the GPU, and the session's address
//! space, which it made when the session claimed) → [`Lender`] (this file: ids, quotas,
//! what is kept) → `nvrm` (an NV01_MEMORY_LOCAL_USER allocation of 2 MiB pages,
//! [`DeviceMem`], and its map at a 2 MiB-aligned VA of the space's GPU-memory range,
//! [`DeviceView`] in [`Region::GpuMemory`]).
//!
//! State: one [`Lender`] per served GPU: a short-lived mutex over the allocations by
//! session, the bytes charged per uid and in all, and the memory kept for CPU views.
//! RM calls run outside it: a quota is charged before the allocation is made and
//! refunded if it fails, so two sessions never both pass a check that only one fits.
//!
//! Isolation: an allocation is mapped in its session's space alone, and ids come from
//! one counter and are looked up in the session that made them only, so another
//! session's id is [`GpuMemError::UnknownId`]. What the RM hands out is what it
//! cleared: memory freed by one client and allocated again by rigd's RM client read
//! all zero on the H200 (docs/hardware/nvidia-compute.md, "Freed memory comes back
//! cleared"), so rigd lends it as it comes.
//!
//! CPU views (BAR1): a CPU mapping of GPU memory outlives the RM's free of it
//! (docs/hardware/nvidia-rm.md, "Handing mappings to another process"), so memory
//! lent with a CPU view follows the channel windows' rule (docs/channels.md, "Rings in
//! host memory or in GPU memory"): it is kept for rigd's life, stays charged to the uid
//! it was lent to, and is lent again only to that uid, for a request of the same size.
//! Who may ask for one is `rig`'s to decide ([`GpuMemError::CpuViewRefused`]).
//!
//! Off the request path (`chores`, the lender's own thread): spare pages made ahead,
//! so that a lease of one page is one map; the unmap and free of released memory,
//! after the release's reply.
//!
//! Not here: the address space itself (`channels`, `nvrm::space`), the wire
//! (`service`), the order of a session's end (`rig::ledger`: after its channels stop,
//! before its address space goes).

mod chores;
#[cfg(test)]
mod tests;

pub use chores::MAX_PENDING;

use std::{
    collections::{BTreeMap, HashMap},
    fmt, io,
    os::fd::OwnedFd,
    sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock},
};

use rig_model::addr::{GpuVa, layout::GPU_PAGE};
use rig_sys::scm::PeerCred;

use crate::{
    config,
    dma::SessionId,
    error::{Class, Classify, Reason},
    nvrm::{
        AddressSpace, Caching, DeviceMem, DeviceView, Gpu, NvrmError, Pages, Region, Rm, Window,
    },
    sys::nvstatus::NvStatus,
};

/// What may be held at once on one GPU (`[gpu_memory]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// By one uid's sessions together.
    pub per_uid_bytes: u64,
    /// By all sessions together.
    pub per_gpu_bytes: u64,
}

impl Default for Quota {
    fn default() -> Self {
        (&config::GpuMemory::default()).into()
    }
}

impl From<&config::GpuMemory> for Quota {
    fn from(c: &config::GpuMemory) -> Self {
        Self {
            per_uid_bytes: c.per_uid_bytes,
            per_gpu_bytes: c.per_gpu_bytes,
        }
    }
}

/// An allocation's number, unique on its GPU for rigd's life; valid in its session only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuMemId(pub u64);

impl fmt::Display for GpuMemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMemRequest {
    /// A positive multiple of 2 MiB.
    pub bytes: u64,
    /// Also a CPU view through BAR1 (the `/dev/nvidiaN` file that holds it).
    pub cpu_view: bool,
}

/// What a client receives for an allocation.
#[derive(Debug)]
pub struct LentGpuMem {
    pub id: GpuMemId,
    /// 2 MiB-aligned, in the session's GPU-memory range.
    pub gpu_va: GpuVa,
    pub bytes: u64,
    /// With a CPU view: the file to map `bytes` of at offset 0 (write-combined).
    pub cpu_view: Option<OwnedFd>,
}

/// One session's GPU memory, as `rigctl dma` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuMemUse {
    pub session: SessionId,
    pub uid: u32,
    pub allocations: u32,
    pub bytes: u64,
}

/// One GPU's GPU memory in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuMemTotals {
    pub gpu: String,
    /// In sessions' allocations now.
    pub lent_bytes: u64,
    /// Kept for CPU views and idle (charged to their uids until rigd exits).
    pub kept_bytes: u64,
    /// Spare pages made ahead for leases and pages sessions released and keep for
    /// their own next lease (`chores`); lent to no one, charged to no one.
    pub spare_bytes: u64,
    pub quota: Quota,
}

/// Why a request for GPU memory was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuMemError {
    #[error("GPU memory of zero bytes was asked for")]
    ZeroSize,
    #[error("{bytes} bytes of GPU memory: it is lent in whole pages of {GPU_PAGE} bytes")]
    Misaligned { bytes: u64 },
    #[error("{bytes} bytes of GPU memory is more than {limit}, the most {whom} may hold on {gpu}")]
    Oversized {
        bytes: u64,
        limit: u64,
        whom: &'static str,
        gpu: String,
    },
    #[error(
        "{bytes} more bytes of GPU memory would put {whom} over its quota on {gpu}: {held} held of {limit}"
    )]
    Quota {
        bytes: u64,
        held: u64,
        limit: u64,
        whom: String,
        gpu: String,
    },
    #[error("GPU memory {id} is not one of this session's allocations")]
    UnknownId { id: GpuMemId },
    #[error("Uid {uid} may not map GPU memory for the CPU: rigd lends CPU views only to root and {}", .group.as_deref().map_or("no group (set [channels] gpu_rings_group)".to_owned(), |g| format!("the members of group `{g}`")))]
    CpuViewRefused { uid: u32, group: Option<String> },
    #[error("Session {session} has no GPU address space on {gpu}")]
    NoSpace { session: SessionId, gpu: String },
    #[error("{gpu} has no {bytes} bytes of GPU memory free now")]
    Exhausted {
        gpu: String,
        bytes: u64,
        #[source]
        source: NvrmError,
    },
    #[error("{gpu}")]
    Rm {
        gpu: String,
        #[source]
        source: NvrmError,
    },
    #[error("{gpu}: failed to share a CPU view of GPU memory with the client")]
    Share {
        gpu: String,
        #[source]
        source: io::Error,
    },
}

impl Classify for GpuMemError {
    /// The side socket's words; the GPU where the error names one.
    fn class(&self) -> Class {
        match self {
            Self::ZeroSize => Reason::ZeroSize.into(),
            Self::Misaligned { .. } => Reason::Misaligned.into(),
            Self::Oversized { gpu, .. } => Class::new(Reason::Oversized).on(gpu),
            Self::Quota { gpu, .. } => Class::new(Reason::Quota).on(gpu),
            Self::UnknownId { .. } => Reason::UnknownGpuMemory.into(),
            Self::CpuViewRefused { .. } => Reason::CpuViewRefused.into(),
            Self::NoSpace { gpu, .. } => Class::new(Reason::NotServed).on(gpu),
            Self::Exhausted { gpu, .. } => Class::new(Reason::Exhausted).on(gpu),
            Self::Rm { gpu, .. } => Class::new(Reason::Rm).on(gpu),
            Self::Share { gpu, .. } => Class::new(Reason::Internal).on(gpu),
        }
    }
}

/// A served GPU's GPU memory, whatever its `Rm`: what `rig` and the service see of it
/// (implemented by `channels::Served`, which owns the sessions' address spaces).
pub trait GpuMemoryHost: Send + Sync {
    /// Lends GPU memory to `session`, mapped in its address space.
    ///
    /// # Errors
    /// [`GpuMemError::NoSpace`] for a session without one here, and
    /// [`Lender::alloc`]'s.
    fn alloc_gpu_memory(
        &self,
        session: SessionId,
        req: GpuMemRequest,
    ) -> Result<LentGpuMem, GpuMemError>;
    /// Takes one of `session`'s allocations back.
    ///
    /// # Errors
    /// [`GpuMemError::UnknownId`].
    fn free_gpu_memory(&self, session: SessionId, id: GpuMemId) -> Result<(), GpuMemError>;
    /// Ends `session`'s GPU memory; returns how many allocations were taken back.
    fn end_gpu_memory(&self, session: SessionId) -> usize;
    /// Each session's GPU memory (only `uid`'s when given), and the GPU's totals.
    fn gpu_memory_status(&self, uid: Option<u32>) -> (Vec<GpuMemUse>, GpuMemTotals);
    /// What `uid` could still be lent here now.
    fn gpu_memory_left(&self, uid: u32) -> u64;
    /// New quotas for the allocations after (a reload).
    fn set_gpu_memory_quota(&self, quota: Quota);
    /// The graphics engine's geometry, when the RM gave it.
    fn geometry(&self) -> Option<rig_model::nv::ComputeGeometry>;
}

/// One allocation lent to a session.
struct Lent<R: Rm> {
    view: DeviceView<R>,
    bytes: u64,
    cpu_view: bool,
}

impl<R: Rm> fmt::Debug for Lent<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lent")
            .field("gpu_va", &GpuVa(self.view.gpu_va()))
            .field("bytes", &self.bytes)
            .field("cpu_view", &self.cpu_view)
            .finish()
    }
}

/// What one session holds.
#[derive(Debug)]
struct Holding<R: Rm> {
    uid: u32,
    lent: BTreeMap<GpuMemId, Lent<R>>,
    /// A page it released, unmapped, for its next one-page lease (`chores`).
    own: chores::OwnPage<R>,
}

#[derive(Debug)]
struct State<R: Rm> {
    next: u64,
    sessions: HashMap<SessionId, Holding<R>>,
    /// Bytes charged per uid: its live allocations, and all its CPU-view memory kept.
    by_uid: HashMap<u32, u64>,
    /// Bytes charged in all.
    charged: u64,
    /// CPU-view memory, by the uid it was lent to: kept for rigd's life; one that no
    /// allocation holds (`strong_count` 1) is free for that uid again.
    kept: HashMap<u32, Vec<Arc<DeviceMem<R>>>>,
}

impl<R: Rm> State<R> {
    fn held(&self, uid: u32) -> u64 {
        self.by_uid.get(&uid).copied().unwrap_or(0)
    }

    fn charge(&mut self, uid: u32, bytes: u64) {
        *self.by_uid.entry(uid).or_default() += bytes;
        self.charged += bytes;
    }

    fn refund(&mut self, uid: u32, bytes: u64) {
        if let Some(b) = self.by_uid.get_mut(&uid) {
            *b = b.saturating_sub(bytes);
        }
        self.charged = self.charged.saturating_sub(bytes);
    }

    /// Kept CPU-view memory of `uid` of exactly `bytes` that nothing holds.
    fn idle_kept(&self, uid: u32, bytes: u64) -> Option<Arc<DeviceMem<R>>> {
        // Under the state's lock: a kept allocation found idle is taken (its count
        // rises) before anyone else can look; allocations only ever let go of it.
        self.kept.get(&uid).and_then(|k| {
            k.iter()
                .find(|m| m.len() == bytes && Arc::strong_count(m) == 1)
                .cloned()
        })
    }
}

/// One served GPU's GPU memory, by session.
#[derive(Debug)]
pub struct Lender<R: Rm> {
    gpu: Arc<Gpu<R>>,
    name: String,
    quota: RwLock<Quota>,
    state: Mutex<State<R>>,
    chores: chores::Chores<R>,
}

/// What an allocation's RM calls need, decided under the state's lock.
enum Source<R: Rm> {
    /// Kept CPU-view memory of the uid, idle: lent again, already charged.
    Kept(Arc<DeviceMem<R>>),
    /// New memory, `bytes` charged to the uid.
    New,
}

impl<R: Rm> Lender<R> {
    /// Lends `gpu`'s memory under `name` (its PCI address), within `quota`, keeping
    /// `spare_pages` fresh pages ahead (`chores`).
    pub fn new(gpu: Arc<Gpu<R>>, name: String, quota: Quota, spare_pages: u32) -> Self {
        Self {
            chores: chores::Chores::start(Arc::clone(&gpu), &name, spare_pages),
            gpu,
            name,
            quota: RwLock::new(quota),
            state: Mutex::new(State {
                next: 0,
                sessions: HashMap::new(),
                by_uid: HashMap::new(),
                charged: 0,
                kept: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // The books are plain numbers and handles: a panic under the lock leaves them
        // usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The quotas in force.
    pub fn quota(&self) -> Quota {
        *self.quota.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// New quotas for the allocations after (a reload); what is held stays.
    pub fn set_quota(&self, quota: Quota) {
        *self.quota.write().unwrap_or_else(PoisonError::into_inner) = quota;
    }

    /// What `uid` could still be lent here now.
    pub fn left_for(&self, uid: u32) -> u64 {
        let q = self.quota();
        let st = self.lock();
        q.per_uid_bytes
            .saturating_sub(st.held(uid))
            .min(q.per_gpu_bytes.saturating_sub(st.charged))
    }

    fn check_size(&self, bytes: u64, q: Quota) -> Result<(), GpuMemError> {
        if bytes == 0 {
            return Err(GpuMemError::ZeroSize);
        }
        if !bytes.is_multiple_of(GPU_PAGE) {
            return Err(GpuMemError::Misaligned { bytes });
        }
        for (limit, whom) in [
            (q.per_uid_bytes, "one uid"),
            (q.per_gpu_bytes, "all clients"),
        ] {
            if bytes > limit {
                return Err(GpuMemError::Oversized {
                    bytes,
                    limit,
                    whom,
                    gpu: self.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Where the memory comes from, charged; and the allocation's id.
    fn reserve(&self, uid: u32, req: GpuMemRequest) -> Result<(GpuMemId, Source<R>), GpuMemError> {
        let q = self.quota();
        self.check_size(req.bytes, q)?;
        let mut st = self.lock();
        st.next += 1;
        let id = GpuMemId(st.next);
        if req.cpu_view
            && let Some(m) = st.idle_kept(uid, req.bytes)
        {
            return Ok((id, Source::Kept(m)));
        }
        let over = |held: u64, limit: u64, whom: String| GpuMemError::Quota {
            bytes: req.bytes,
            held,
            limit,
            whom,
            gpu: self.name.clone(),
        };
        let held = st.held(uid);
        if held + req.bytes > q.per_uid_bytes {
            return Err(over(held, q.per_uid_bytes, format!("uid {uid}")));
        }
        if st.charged + req.bytes > q.per_gpu_bytes {
            return Err(over(st.charged, q.per_gpu_bytes, "the GPU".to_owned()));
        }
        st.charge(uid, req.bytes);
        Ok((id, Source::New))
    }

    fn failed(&self, bytes: u64, source: NvrmError) -> GpuMemError {
        let gpu = self.name.clone();
        if matches!(source, NvrmError::VaExhausted { .. })
            || source.status() == Some(NvStatus::NoMemory)
        {
            GpuMemError::Exhausted { gpu, bytes, source }
        } else {
            GpuMemError::Rm { gpu, source }
        }
    }

    /// Lends `req.bytes` of GPU memory to `session` (of `peer`), mapped in `space`,
    /// its address space. Whether its uid may have a CPU view is the caller's to
    /// decide, before.
    ///
    /// # Errors
    /// [`GpuMemError::ZeroSize`], [`GpuMemError::Misaligned`],
    /// [`GpuMemError::Oversized`], [`GpuMemError::Quota`], [`GpuMemError::Exhausted`],
    /// [`GpuMemError::Rm`], [`GpuMemError::Share`]; nothing stays charged or mapped.
    pub fn alloc(
        &self,
        session: SessionId,
        peer: PeerCred,
        space: &Arc<AddressSpace<R>>,
        req: GpuMemRequest,
    ) -> Result<LentGpuMem, GpuMemError> {
        let start = std::time::Instant::now();
        // Releases waiting on the lender's thread are memory still held: past the
        // bound, a lease waits for them first (`chores::MAX_PENDING`).
        if self.chores.pending() > MAX_PENDING {
            self.chores.settle();
        }
        let uid = peer.uid;
        let (id, source) = self.reserve(uid, req)?;
        let refund = |this: &Self| {
            if !req.cpu_view {
                this.lock().refund(uid, req.bytes);
            }
        };
        let one_page = !req.cpu_view && req.bytes == GPU_PAGE;
        let mem = match source {
            Source::Kept(m) => m,
            // The page this session released last, if the lender's thread kept it.
            Source::New if let Some(m) = one_page.then(|| self.own_page(session)).flatten() => m,
            Source::New => {
                let caching = req.cpu_view.then_some(Caching::WriteCombined);
                let spare = one_page.then(|| self.chores.take_spare()).flatten();
                let made = match spare {
                    Some(m) => Ok(m),
                    None => DeviceMem::paged(&self.gpu, req.bytes, Pages::Huge, caching),
                };
                match made {
                    Ok(m) => {
                        let m = Arc::new(m);
                        if req.cpu_view {
                            // Kept from now on: its CPU view may outlive its free.
                            self.lock()
                                .kept
                                .entry(uid)
                                .or_default()
                                .push(Arc::clone(&m));
                        }
                        m
                    }
                    Err(e) => {
                        self.lock().refund(uid, req.bytes);
                        return Err(self.failed(req.bytes, e));
                    }
                }
            }
        };
        let cpu_view = if req.cpu_view {
            match mem.window().share() {
                Ok(fd) => Some(fd),
                Err(source) => {
                    return Err(GpuMemError::Share {
                        gpu: self.name.clone(),
                        source,
                    });
                }
            }
        } else {
            None
        };
        let view = match DeviceView::map_in(space, mem, Pages::Huge, Region::GpuMemory) {
            Ok(v) => v,
            Err(e) => {
                refund(self);
                return Err(self.failed(req.bytes, e));
            }
        };
        let gpu_va = GpuVa(view.gpu_va());
        let lent = Lent {
            view,
            bytes: req.bytes,
            cpu_view: req.cpu_view,
        };
        self.lock()
            .sessions
            .entry(session)
            .or_insert_with(|| Holding {
                uid,
                lent: BTreeMap::new(),
                own: chores::OwnPage::default(),
            })
            .lent
            .insert(id, lent);
        let took_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        tracing::debug!(gpu = %self.name, session = session.0, id = id.0, %gpu_va, bytes = req.bytes, cpu_view = req.cpu_view, took_us, "GPU memory lent");
        Ok(LentGpuMem {
            id,
            gpu_va,
            bytes: req.bytes,
            cpu_view,
        })
    }

    /// Unmaps `lent` from its space and frees it (CPU-view memory stays kept); gives
    /// back its charge when it was not a CPU view's. A step that fails is logged; the
    /// allocation is gone from the session all the same.
    fn take_back(&self, session: SessionId, uid: u32, id: GpuMemId, lent: Lent<R>) {
        if let Err(e) = lent.view.close() {
            tracing::warn!(gpu = %self.name, session = session.0, id = id.0, error = &e as &dyn std::error::Error, "unmapping lent GPU memory");
        }
        if !lent.cpu_view {
            self.lock().refund(uid, lent.bytes);
        }
    }

    /// The page `session` released last, unmapped and kept for it (`chores`).
    fn own_page(&self, session: SessionId) -> Option<Arc<DeviceMem<R>>> {
        let own = Arc::clone(&self.lock().sessions.get(&session)?.own);
        own.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Takes one of `session`'s allocations back.
    ///
    /// # Errors
    /// [`GpuMemError::UnknownId`], also for another session's id.
    pub fn free(&self, session: SessionId, id: GpuMemId) -> Result<(), GpuMemError> {
        let (uid, lent, own) = {
            let mut st = self.lock();
            let h = st
                .sessions
                .get_mut(&session)
                .ok_or(GpuMemError::UnknownId { id })?;
            let lent = h.lent.remove(&id).ok_or(GpuMemError::UnknownId { id })?;
            (h.uid, lent, Arc::clone(&h.own))
        };
        // Off the books now; unmapped and freed by the lender's thread after the reply
        // (`chores`), or here when there is no such thread.
        if !lent.cpu_view {
            self.lock().refund(uid, lent.bytes);
        }
        let Lent {
            view,
            bytes,
            cpu_view,
        } = lent;
        let keep = (!cpu_view && bytes == GPU_PAGE).then_some(own);
        if let Err(view) = self.chores.release(view, bytes, keep)
            && let Err(e) = view.close()
        {
            tracing::warn!(gpu = %self.name, session = session.0, id = id.0, error = &e as &dyn std::error::Error, "unmapping lent GPU memory");
        }
        tracing::debug!(gpu = %self.name, session = session.0, id = id.0, "GPU memory released");
        Ok(())
    }

    /// Returns once every release before is unmapped and freed.
    pub fn settle(&self) {
        self.chores.settle();
    }

    /// Ends `session`'s GPU memory: every allocation unmapped from its space and freed.
    /// Returns how many.
    pub fn end(&self, session: SessionId) -> usize {
        // What it released before goes first: nothing of it is mapped when its space goes.
        self.chores.settle();
        let Some(h) = self.lock().sessions.remove(&session) else {
            return 0;
        };
        let n = h.lent.len();
        for (id, lent) in h.lent {
            self.take_back(session, h.uid, id, lent);
        }
        n
    }

    /// Each session's GPU memory (only `uid`'s when given), and the GPU's totals.
    pub fn status(&self, uid: Option<u32>) -> (Vec<GpuMemUse>, GpuMemTotals) {
        let quota = self.quota();
        let st = self.lock();
        let mut uses: Vec<GpuMemUse> = st
            .sessions
            .iter()
            .filter(|(_, h)| uid.is_none_or(|u| h.uid == u))
            .map(|(&session, h)| GpuMemUse {
                session,
                uid: h.uid,
                allocations: u32::try_from(h.lent.len()).unwrap_or(u32::MAX),
                bytes: h.lent.values().map(|l| l.bytes).sum(),
            })
            .collect();
        uses.sort_by_key(|u| u.session);
        let lent_bytes = st
            .sessions
            .values()
            .flat_map(|h| h.lent.values())
            .map(|l| l.bytes)
            .sum();
        let kept_bytes = st
            .kept
            .values()
            .flatten()
            .filter(|m| Arc::strong_count(m) == 1)
            .map(|m| m.len())
            .sum();
        let own_bytes: u64 = st
            .sessions
            .values()
            .filter_map(|h| {
                let own = h.own.lock().unwrap_or_else(PoisonError::into_inner);
                own.as_ref().map(|m| m.len())
            })
            .sum();
        let totals = GpuMemTotals {
            gpu: self.name.clone(),
            lent_bytes,
            kept_bytes,
            spare_bytes: self.chores.spare_bytes() + own_bytes,
            quota,
        };
        (uses, totals)
    }
}
