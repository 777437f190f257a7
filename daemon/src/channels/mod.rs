//! Channels lent to clients on RM-served GPUs: per DMA session, its own GPU address
//! space, its channel groups and its channels; what a client receives to drive them;
//! the error-notifier watch; reclaim when the session ends.
//!
//! Flow: `service::dma::side` (the side socket: open and close requests, descriptors
//! by SCM_RIGHTS) → `rig` (finds the GPU by the session's pool) → [`Served`] (this
//! file: bookkeeping, limits, order) → `nvrm` (the RM objects) and `dma` (a session's
//! leases map into its space through `dma::DeviceMap`).
//!
//! State: one [`Served`] per RM-served GPU, behind the object-safe [`ChannelHost`] so
//! `rig` holds it whatever its `Rm`; inside, a short-lived mutex over the map of
//! clients by session, and one mutex per client. RM calls run under the client's
//! lock only (opening a channel is tens of RM calls, on a blocking thread of the
//! caller's), so one client's open never holds up another's, nor the watch. Lock
//! order: the map, then a client, never the other way.
//!
//! Groups: a session's compute channels share its GR0 group; its copy channels share
//! a group on one of the configured async copy engines (sessions spread over them),
//! or GR0's when none is configured. Every TSG on one runlist is time-sliced against
//! the others, so clients on GR0 wait for each other's slices (docs/BENCHMARKS.md has
//! the H200's figures); copy engines each have their own runlist.
//!
//! Invariants: a client's channels are in its own groups, in its own address space,
//! which holds only its own memory; a session's channels stop (descheduled, drained,
//! freed) before its leases leave the GPU's page tables, and those before the space
//! goes (the pool holds the space until it unmapped the last block). A fault posted for
//! one client's channel stops that client's group (the RM's recovery) and nobody
//! else's; the client reads it through a read-only view of the notifier. rigd then
//! contains it: the watch names the session, and [`ChannelHost::contain`] frees every
//! channel and group of that session without descheduling a faulted group (the RM
//! already did; asking it again waited on the faulted engine until the GPU needed a
//! reset), and refuses the session new channels ([`ChannelError::Faulted`]). A close,
//! an open or the session's end that finds a fault first contains it the same way.
//!
//! Health (`health`): a GPU whose RM says it needs a reset, or whose reclaim has
//! waited on one RM call past [`RECLAIM_BOUND`], lends nothing new
//! ([`ChannelError::GpuUnwell`]) until it is well again.
//!
//! Wakes (`wake`): each lent channel gets an eventfd that a thread of the GPU's signals
//! on every non-stall interrupt the RM reports (`nvrm::NonStall`), so a client's wait
//! can sleep until its value lands; a reclaim signals the session's, then drops them.
//!
//! Shared events (`events`, the books in `crate::events`): a page one session exports
//! and others of its uid import, mapped in each one's space; the exporter's end wakes
//! the importers' wake descriptors.
//!
//! Not here: the wire format (`service`), the RM sequence (`nvrm`), lease pools
//! (`dma`), the client's ring and pushbuffer rules (`rig_client::channel`).

mod boost;
mod events;
mod health;
mod memory;
#[cfg(test)]
mod tests;
mod wake;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt, io,
    os::fd::OwnedFd,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use rig_sys::{mman::ReadMapping, scm::PeerCred};

use self::health::{GpuHealth, Reclaim};
pub use self::health::{Health, RECLAIM_BOUND, recovery_action_name};

use crate::{
    dma::{DeviceMap, SessionId},
    error::{Class, Classify, Reason},
    events::{EventHost, Sharer},
    gpumem::{self, GpuMemoryHost, Lender},
    nvrm::{
        AddressSpace, Caching, Channel, ChannelFault, ChannelGroup, CopyEngine, DeviceMem,
        Doorbell, Engine, Gpu, GroupEngine, NonStall, NvrmError, RingMem, Rm, Window, ring_len,
    },
};

/// The most ring entries the RM takes (docs/hardware/nvidia-channels.md, "Ring
/// limits").
pub const MAX_RING_ENTRIES: u64 = 1 << 31;
/// NVC361_NOTIFY_CHANNEL_PENDING in the usermode page the client maps.
pub const DOORBELL_OFFSET: u64 = 0x90;

/// Limits on what one session may hold, and where its copy channels run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Channels one session may have open.
    pub channels_per_session: usize,
    /// The largest ring a client may ask for, in entries (8 bytes each, host memory
    /// rigd pins for it).
    pub max_ring_entries: u64,
    /// Async copy engines (NV2080_ENGINE_TYPE_COPY0 + n) that sessions' copy channels
    /// are spread over, one engine per session; empty: copy channels join the
    /// session's GR0 group and share the graphics runlist with every client's compute.
    /// None: the GPU's own asynchronous copy engines, as the RM describes them
    /// ([`async_copy_engines`]).
    pub copy_engines: Option<Vec<u8>>,
    /// The most GPU memory one channel's ring, USERD and pushbuffer may take when
    /// they live in GPU memory ([`Rings::Gpu`]).
    pub gpu_ring_bytes: u64,
    /// How many such windows rigd keeps for one uid: they are reused for that uid's
    /// later channels and never given to another (see [`Rings::Gpu`]).
    pub gpu_rings_per_uid: usize,
    /// How long a uid is refused new channels after the RM ended a kernel of its whose
    /// block would not be switched out ([`ChannelError::SwitchTimeout`]); zero: never.
    pub switch_timeout_penalty: Duration,
    /// Each session's GR0 group's timeslice in µs; 0: the RM's default.
    pub timeslice_us: u64,
    /// What GPU memory sessions may hold on the GPU (`gpumem`).
    pub gpu_memory: gpumem::Quota,
    /// Fresh 2 MiB pages kept ahead for leases (`gpumem::chores`).
    pub spare_pages: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            channels_per_session: 8,
            max_ring_entries: 1 << 20,
            copy_engines: None,
            gpu_ring_bytes: 4 << 20,
            gpu_rings_per_uid: 32,
            switch_timeout_penalty: Duration::from_secs(60),
            timeslice_us: 0,
            gpu_memory: gpumem::Quota::default(),
            // None: what rigd runs with comes from the config (`config::GpuMemory`);
            // without spares the RM sees each lease's own calls, in order.
            spare_pages: 0,
        }
    }
}

/// Where a lent channel's ring, USERD and pushbuffer live: the shared vocabulary's.
/// Host: the ring and USERD in a sealed memfd rigd pins, the pushbuffer in the client's
/// own leases; the GPU fetches all three across PCIe, one after the other, and the
/// client's stores are cached ones (the least host time). Gpu: written by the client
/// through BAR1 (write-combined), ring, USERD and pushbuffer in one window rigd
/// allocates; the GPU fetches locally (the shortest round trip) and the client fences
/// before and after GP_PUT. The client's CPU mapping of BAR1 outlives rigd's free
/// (docs/hardware/nvidia-rm.md, "Handing mappings to another process"), so a window,
/// once lent, is kept by rigd and reused only for the same uid, who could reach it
/// anyway; a client that outlives rigd keeps its mapping, which is why rigd lends
/// windows only to whom `[channels] gpu_rings_group` names.
pub use rig_model::nv::Rings;

/// What a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelRequest {
    pub engine: Engine,
    /// Ring entries: a power of two, 2..2^31, within the limit.
    pub entries: u64,
    pub rings: Rings,
    /// With [`Rings::Gpu`], the pushbuffer's bytes in the window (a multiple of 4).
    pub pushbuffer: u64,
}

/// Where a window's pushbuffer starts, and the window's size class: ring, USERD and
/// pushbuffer, rounded up to a power of two of at least 64 KiB, so windows are reused
/// across requests of similar sizes.
fn window_len(entries: u32, pushbuffer: u64) -> (u64, u64) {
    let pb_offset = ring_len(entries).next_multiple_of(4096);
    let len = (pb_offset + pushbuffer).next_power_of_two().max(64 << 10);
    (pb_offset, len)
}

/// A channel's number, unique in its GPU for rigd's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChannelId(pub u64);

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a channel request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("A ring of {entries} entries is not a power of two from 2 to 2^31")]
    RingSize { entries: u64 },
    #[error("A ring of {entries} entries is more than {limit}, the most one channel may have")]
    RingOverQuota { entries: u64, limit: u64 },
    #[error(
        "A channel window of {bytes} bytes (ring, USERD and a pushbuffer of {pushbuffer}) is more than {limit}, the most one may have in GPU memory"
    )]
    WindowOverQuota {
        bytes: u64,
        pushbuffer: u64,
        limit: u64,
    },
    #[error("A pushbuffer of {bytes} bytes: it needs a positive multiple of 4")]
    PushbufferSize { bytes: u64 },
    #[error(
        "Uid {uid} already holds {limit} channel windows in GPU memory on {gpu}, the most one may"
    )]
    WindowsExhausted { uid: u32, gpu: String, limit: usize },
    #[error("Uid {uid} may not have rings in GPU memory: they are lent only to root and {}", .group.as_deref().map_or("no group (set [channels] gpu_rings_group)".to_owned(), |g| format!("the members of group `{g}`")))]
    GpuRingsRefused { uid: u32, group: Option<String> },
    #[error("Session {session} already has {limit} channels open, the most one may have")]
    TooManyChannels { session: SessionId, limit: usize },
    #[error("Channel {channel} is not one of this session's open channels")]
    UnknownChannel { channel: ChannelId },
    #[error("Session {session} has no GPU address space on {gpu}")]
    NoSpace { session: SessionId, gpu: String },
    #[error("Session {session} already has its GPU address space on {gpu}")]
    SpaceExists { session: SessionId, gpu: String },
    #[error("Device {name} is not a GPU rigd serves through its kernel driver")]
    NotServed { name: String },
    #[error("{gpu}")]
    Rm {
        gpu: String,
        #[source]
        source: NvrmError,
    },
    #[error("{gpu}: failed to share {what} with the client")]
    Share {
        gpu: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "Channel {channel} of session {session} faulted ({reason}): rigd freed the session's channels and opens no more for it; open a new session"
    )]
    Faulted {
        session: SessionId,
        channel: ChannelId,
        reason: String,
    },
    #[error("{gpu} lends nothing now: {health}")]
    GpuUnwell { gpu: String, health: Health },
    #[error(
        "Uid {uid} may open no channel on {gpu} for {left_s} s more: the GPU had to end a kernel of its whose block ran on for seconds beside another session's work (rig's contexts are switched out only between blocks)"
    )]
    SwitchTimeout { uid: u32, gpu: String, left_s: u64 },
}

impl Classify for ChannelError {
    /// The same words as the side socket's codes; the GPU where the error names one.
    fn class(&self) -> Class {
        match self {
            Self::RingSize { .. }
            | Self::RingOverQuota { .. }
            | Self::PushbufferSize { .. }
            | Self::WindowOverQuota { .. } => Reason::BadRing.into(),
            Self::WindowsExhausted { gpu, .. } => Class::new(Reason::Exhausted).on(gpu),
            Self::GpuRingsRefused { .. } => Reason::GpuRingsRefused.into(),
            Self::TooManyChannels { .. } => Reason::ChannelLimit.into(),
            Self::UnknownChannel { .. } => Reason::UnknownChannel.into(),
            Self::NotServed { name } => Class::new(Reason::NotServed).on(name),
            Self::NoSpace { gpu, .. } => Class::new(Reason::NotServed).on(gpu),
            Self::SpaceExists { gpu, .. } => Class::new(Reason::BadSession).on(gpu),
            Self::Rm { gpu, .. } => Class::new(Reason::Rm).on(gpu),
            Self::Share { gpu, .. } => Class::new(Reason::Internal).on(gpu),
            Self::Faulted { .. } => Reason::ChannelFaulted.into(),
            Self::GpuUnwell { gpu, .. } => Class::new(Reason::GpuLost).on(gpu),
            Self::SwitchTimeout { gpu, .. } => Class::new(Reason::GpuTime).on(gpu),
        }
    }
}

/// What a client receives for an open channel: numbers, and descriptors to map.
#[derive(Debug)]
pub struct OpenedChannel {
    pub id: ChannelId,
    pub engine: Engine,
    pub entries: u32,
    /// The work submit token the doorbell takes.
    pub token: u32,
    /// The ring's GPU VA (USERD follows at `userd_offset`).
    pub ring_gpu_va: u64,
    pub userd_offset: u64,
    /// Length of the ring + USERD file (with [`Rings::Gpu`], the whole window).
    pub ring_bytes: u64,
    pub rings: Rings,
    /// With [`Rings::Gpu`]: the pushbuffer's offset in the window, its GPU VA and
    /// length; zero otherwise (the client's pushbuffer is its own lease).
    pub pushbuffer_offset: u64,
    pub pushbuffer_gpu_va: u64,
    pub pushbuffer_bytes: u64,
    pub notifier_bytes: u64,
    pub usermode_bytes: u64,
    /// Ring and USERD (read-write: a sealed memfd, or with [`Rings::Gpu`] the
    /// `/dev/nvidiaN` file that holds the window's mapping), error notifier
    /// (read-only), usermode page.
    pub ring: OwnedFd,
    pub notifier: OwnedFd,
    pub usermode: OwnedFd,
    /// The channel's wake descriptor (an eventfd rigd signals on the GPU's non-stall
    /// interrupts, `wake`); None where rigd has no event on the GPU.
    pub wake: Option<OwnedFd>,
    /// The wake word's offset in the ring's file (its GPU VA: `ring_gpu_va` + it),
    /// where the client's arms release their value before the interrupt; 0 where rigd
    /// reads none (no wake descriptor, or the ring in GPU memory).
    pub wake_offset: u64,
}

/// One channel as `rigctl channels` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelView {
    pub id: ChannelId,
    pub gpu: String,
    pub session: SessionId,
    pub uid: u32,
    pub pid: i32,
    pub engine: Engine,
    pub entries: u32,
    pub rings: Rings,
    pub gp_get: u32,
    pub gp_put: u32,
    /// The error the RM posted, if any.
    pub fault: Option<ChannelFault>,
    pub opened: SystemTime,
}

/// A GPU that serves channels and GPU memory, whatever its `Rm`: what `rig` and the
/// service see.
pub trait ChannelHost: GpuMemoryHost + EventHost + Send + Sync + fmt::Debug {
    /// The GPU's name: its PCI address, also its DMA pool's name.
    fn name(&self) -> &str;
    /// Makes `session`'s address space; its leases map there (the returned map).
    ///
    /// # Errors
    /// [`ChannelError::SpaceExists`], [`ChannelError::Rm`].
    fn attach(
        &self,
        session: SessionId,
        peer: PeerCred,
    ) -> Result<Arc<dyn DeviceMap>, ChannelError>;
    /// Opens the channel `req` asks for, for `session`. Whether its uid may have
    /// rings in GPU memory is the caller's to decide, before.
    ///
    /// # Errors
    /// [`ChannelError::RingSize`], [`ChannelError::RingOverQuota`],
    /// [`ChannelError::PushbufferSize`], [`ChannelError::WindowOverQuota`],
    /// [`ChannelError::WindowsExhausted`], [`ChannelError::TooManyChannels`],
    /// [`ChannelError::NoSpace`], [`ChannelError::Rm`], [`ChannelError::Share`].
    fn open(&self, session: SessionId, req: ChannelRequest) -> Result<OpenedChannel, ChannelError>;
    /// Closes one of `session`'s channels: deschedules it if it was its group's last,
    /// waits for its ring to drain, frees it. A step that fails is logged; the
    /// channel is gone all the same.
    ///
    /// # Errors
    /// [`ChannelError::UnknownChannel`].
    fn close(&self, session: SessionId, channel: ChannelId) -> Result<(), ChannelError>;
    /// Ends `session`: stops and frees its channels and groups; its space goes when
    /// its pool has unmapped its leases. Returns how many channels were closed.
    fn end(&self, session: SessionId) -> usize;
    /// Contains a fault of `session`'s: frees all its channels and groups (a faulted
    /// group without descheduling it) and refuses it new channels. False when it has no
    /// fault, or was contained before.
    fn contain(&self, session: SessionId) -> bool;
    /// The GPU's health as last seen: no RM call.
    fn health(&self) -> Health;
    /// Reads the RM's recovery action (a kernel-side read, no GSP RPC), then says the
    /// GPU's health: on a blocking thread, about once a second.
    fn check_health(&self) -> Health;
    /// Every channel; only `uid`'s when given.
    fn status(&self, uid: Option<u32>) -> Vec<ChannelView>;
    /// Reads every channel's notifier and records new faults; returns the sessions
    /// with a new one, each once, to [`ChannelHost::contain`] off the caller's thread.
    /// Skips, for this call, a client whose open or reclaim is under way.
    fn watch(&self) -> Vec<SessionId>;
    /// Sets how many channels one session may have open, for opens from now on (a
    /// reload): a session above a lowered limit keeps its channels and opens no more.
    fn set_channels_per_session(&self, limit: usize);
    /// The copy engines (COPY0 + n) sessions' copy channels are spread over; empty:
    /// each session's GR0 group.
    fn copy_engines(&self) -> Vec<u8>;
    /// The non-stall interrupts seen since rigd began watching them; None when it
    /// does not (channels get no wake descriptor).
    fn interrupts(&self) -> Option<u64>;
    /// Of the channels looked at on those interrupts: how many were signalled, and how
    /// many passed over because their wake words said the interrupt was another's
    /// (`wake`); None as for [`ChannelHost::interrupts`].
    fn wakes(&self) -> Option<(u64, u64)>;
}

/// A channel lent to a session, with what `rigctl channels` shows of it.
struct LentChannel<R: Rm> {
    channel: Channel<R>,
    rings: Rings,
    opened: SystemTime,
    /// The fault already reported, so it is logged once.
    fault: Option<ChannelFault>,
}

impl<R: Rm> fmt::Debug for LentChannel<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LentChannel")
            .field("channel", &self.channel.handle())
            .field("fault", &self.fault)
            .finish_non_exhaustive()
    }
}

/// One session's part of a GPU.
#[derive(Debug)]
struct Client<R: Rm> {
    peer: PeerCred,
    space: Arc<AddressSpace<R>>,
    /// GR0's group: compute channels, and copy channels when no async copy engine
    /// is configured (they then run on GR0's copy engine).
    graphics: Option<Arc<ChannelGroup<R>>>,
    /// The async copy engine's group its copy channels run in, when configured.
    copy: Option<Arc<ChannelGroup<R>>>,
    /// That engine: one of `Served::copy_engines`, picked by session.
    copy_engine: Option<u8>,
    /// Its GR0 group's timeslice (`Limits::timeslice_us`); 0: the RM's default.
    timeslice_us: u64,
    channels: BTreeMap<ChannelId, LentChannel<R>>,
    /// Set once a fault of its was contained: its channels are gone and it opens no more.
    faulted: Option<Contained>,
}

/// A contained fault: the channel that faulted first, what the RM posted, and every
/// channel freed with it (a client may still close them: that is not an error).
#[derive(Debug, Clone)]
struct Contained {
    channel: ChannelId,
    fault: ChannelFault,
    reclaimed: BTreeSet<ChannelId>,
}

impl<R: Rm> Client<R> {
    /// The group a channel on `engine` goes in, made with its first channel. A copy
    /// engine whose group the RM refuses is logged and left: copy channels then join
    /// GR0's group, which every GPU has.
    fn group(&mut self, engine: Engine, gpu: &str) -> Result<&Arc<ChannelGroup<R>>, NvrmError> {
        // A group whose last channel went is spent: the RM refuses new channels in it.
        // Dropping it frees it (no channel holds it any more).
        if self.copy.as_ref().is_some_and(|g| g.is_retired()) {
            self.copy = None;
        }
        if self.graphics.as_ref().is_some_and(|g| g.is_retired()) {
            self.graphics = None;
        }
        if engine == Engine::Copy
            && let Some(ce) = self.copy_engine
        {
            if self.copy.is_none() {
                match ChannelGroup::new(&self.space, GroupEngine::Copy(ce)) {
                    Ok(g) => self.copy = Some(Arc::new(g)),
                    Err(e) => {
                        tracing::warn!(
                            gpu,
                            copy_engine = ce,
                            error = &e as &dyn std::error::Error,
                            "no group on this copy engine: copy channels join GR0's"
                        );
                        self.copy_engine = None;
                    }
                }
            }
            if let Some(g) = &self.copy {
                return Ok(g);
            }
        }
        if self.graphics.is_none() {
            let g = ChannelGroup::new(&self.space, GroupEngine::Graphics)?;
            if self.timeslice_us > 0 {
                g.set_timeslice(self.timeslice_us)?;
            }
            self.graphics = Some(Arc::new(g));
        }
        Ok(self.graphics.as_ref().expect("made above"))
    }

    /// The first of its channels with a fault posted, if any, once the group of every
    /// faulted channel is abandoned (it is then freed, never descheduled).
    fn abandon_faulted(&self) -> Option<(ChannelId, ChannelFault)> {
        let mut first = None;
        for (&id, lent) in &self.channels {
            if let Some(f) = lent.channel.fault() {
                lent.channel.group().abandon();
                first.get_or_insert((id, f));
            }
        }
        first
    }

    /// Deschedules every group that did not fault, closes every channel, then the
    /// groups, naming each step in `r`; returns the channels closed and the failures.
    fn close_all(&mut self, r: &mut Reclaim<'_>) -> (usize, Vec<NvrmError>) {
        self.abandon_faulted();
        let mut failed = Vec::new();
        for g in self.graphics.iter().chain(self.copy.iter()) {
            r.step("deschedule a channel group (GPFIFO_SCHEDULE off)");
            if let Err(e) = g.stop() {
                failed.push(e);
            }
        }
        let channels = std::mem::take(&mut self.channels);
        let n = channels.len();
        for (_, lent) in channels {
            r.step("free a channel and its engine object");
            if let Err(e) = lent.channel.close() {
                failed.push(e);
            }
        }
        for g in [self.copy.take(), self.graphics.take()]
            .into_iter()
            .flatten()
        {
            r.step("free a channel group and its subcontext");
            if let Ok(g) = Arc::try_unwrap(g)
                && let Err(e) = g.close()
            {
                failed.push(e);
            }
        }
        (n, failed)
    }
}

type Shared<R> = Arc<Mutex<Client<R>>>;

#[derive(Debug)]
struct State<R: Rm> {
    clients: HashMap<SessionId, Shared<R>>,
    next: u64,
    /// Channel windows in GPU memory, by the uid they were lent to: kept for rigd's
    /// life (see [`Rings::Gpu`]); one no channel holds is free for that uid again.
    windows: HashMap<u32, Vec<Arc<DeviceMem<R>>>>,
    /// Uids refused new channels until then: the RM ended a kernel of theirs that held
    /// the GPU past its context switch timeout.
    penalised: HashMap<u32, Instant>,
}

fn lock_client<R: Rm>(c: &Mutex<Client<R>>) -> MutexGuard<'_, Client<R>> {
    // A panic under the lock leaves the client's objects whole: they free themselves
    // when dropped.
    c.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The copy engines a session's copy channels may have to themselves: present,
/// asynchronous (not `CE_GRCE`, whose work waits behind the graphics engine's) and
/// able to move system memory (`CE_SYSMEM`: host leases are system memory), in COPYn
/// order (docs/hardware/nvidia-channels.md, "Which copy engine").
#[must_use]
pub fn async_copy_engines(ces: &[CopyEngine]) -> Vec<u8> {
    ces.iter()
        .filter(|c| !c.grce() && c.sysmem())
        .map(|c| c.index)
        .collect()
}

/// One RM-served GPU's channels, by session.
#[derive(Debug)]
pub struct Served<R: Rm> {
    gpu: Arc<Gpu<R>>,
    name: String,
    /// As configured at start; `channels_per_session` is `per_session`'s, which a
    /// reload changes.
    limits: Limits,
    /// The copy engines sessions' copy channels are spread over: `limits.copy_engines`,
    /// or the GPU's asynchronous ones when that is None.
    copy_engines: Vec<u8>,
    per_session: AtomicUsize,
    state: Mutex<State<R>>,
    /// GPU memory lent in the sessions' spaces (`memory`).
    memory: Lender<R>,
    /// Events shared between its sessions (`events`).
    events: Sharer<R>,
    /// The clock boost, on while a channel is lent (`boost`).
    boost: boost::Boost,
    /// Whether the GPU lends, and the reclaims in flight (`health`).
    health: GpuHealth,
    /// Lent channels' wake descriptors and the thread that signals them on the GPU's
    /// non-stall interrupts; None when the RM gave no event (waits then never sleep
    /// in the kernel).
    wakers: Option<wake::Wakers>,
}

impl<R: Rm> Served<R> {
    /// Serves `gpu` under its PCI address.
    pub fn new(gpu: Gpu<R>, limits: Limits) -> Self {
        let name = gpu.card().bdf.clone();
        let copy_engines = limits
            .copy_engines
            .clone()
            .unwrap_or_else(|| match gpu.copy_engines() {
                Ok(ces) => {
                    let picked = async_copy_engines(&ces);
                    tracing::info!(
                        gpu = %name,
                        copy_engines = ?picked,
                        caps = %ces.iter().map(|c| format!("COPY{}:{:02x}{:02x}", c.index, c.caps[0], c.caps[1])).collect::<Vec<_>>().join(" "),
                        "sessions' copy channels go on these copy engines (none: in GR0's group)"
                    );
                    picked
                }
                Err(e) => {
                    tracing::warn!(
                        gpu = %name,
                        error = &e as &dyn std::error::Error,
                        "the RM did not say which copy engines are asynchronous: copy channels join GR0's group"
                    );
                    Vec::new()
                }
            });
        let gpu = Arc::new(gpu);
        let wakers = Self::watch_interrupts(&gpu, &name);
        Self {
            wakers,
            events: Sharer::new(Arc::clone(&gpu), name.clone()),
            copy_engines,
            memory: Lender::new(
                Arc::clone(&gpu),
                name.clone(),
                limits.gpu_memory,
                limits.spare_pages,
            ),
            boost: boost::Boost::default(),
            health: GpuHealth::default(),
            gpu,
            name,
            per_session: AtomicUsize::new(limits.channels_per_session),
            limits,
            state: Mutex::new(State {
                clients: HashMap::new(),
                next: 0,
                windows: HashMap::new(),
                penalised: HashMap::new(),
            }),
        }
    }

    /// `channel`'s wake word as the wake thread reads it, and its offset in the ring
    /// (`wake`); none with the ring in GPU memory, or when the mapping fails (the
    /// channel is then woken on every edge).
    fn wake_word(channel: &Channel<R>) -> Option<(wake::WakeWord, u64)> {
        let (host, at) = channel.wake_word()?;
        let word = ReadMapping::shared(host.file())
            .and_then(|m| wake::WakeWord::new(m, at))
            .inspect_err(|e| {
                tracing::warn!(
                    error = e as &dyn std::error::Error,
                    "no wake word for a channel: it wakes on every interrupt"
                )
            })
            .ok()?;
        Some((word, at as u64))
    }

    /// The GPU's non-stall event and the thread that wakes blocked waits on it; None,
    /// logged, when the RM refused the event (clients' waits then spin and yield).
    fn watch_interrupts(gpu: &Arc<Gpu<R>>, name: &str) -> Option<wake::Wakers> {
        let events = match NonStall::open(gpu) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(
                    gpu = name,
                    error = &e as &dyn std::error::Error,
                    "no non-stall event: clients' waits will not sleep in the kernel"
                );
                return None;
            }
        };
        match wake::Wakers::start(events) {
            Ok(w) => {
                tracing::info!(
                    gpu = name,
                    "blocked waits sleep until the GPU's non-stall interrupt"
                );
                Some(w)
            }
            Err(e) => {
                tracing::warn!(
                    gpu = name,
                    error = &e as &dyn std::error::Error,
                    "no thread for the GPU's non-stall interrupts: clients' waits will not sleep in the kernel"
                );
                None
            }
        }
    }

    /// How many lent channels have a wake descriptor.
    pub fn wake_descriptors(&self) -> usize {
        self.wakers.as_ref().map_or(0, wake::Wakers::count)
    }

    /// The copy engines sessions' copy channels are spread over (COPY0 + n); empty:
    /// they join each session's GR0 group.
    pub fn copy_engines(&self) -> &[u8] {
        &self.copy_engines
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu<R>> {
        &self.gpu
    }

    /// Whether the GPU's clocks are boosted now (a channel is lent on it).
    pub fn boosted(&self) -> bool {
        self.boost.is_on()
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // The map holds only handles: a panic under its lock leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every client, with its session, outside the map's lock.
    fn clients(&self) -> Vec<(SessionId, Shared<R>)> {
        self.lock()
            .clients
            .iter()
            .map(|(&s, c)| (s, Arc::clone(c)))
            .collect()
    }

    fn client(&self, session: SessionId) -> Option<Shared<R>> {
        self.lock().clients.get(&session).cloned()
    }

    fn rm_error(&self, source: NvrmError) -> ChannelError {
        self.health.saw(&self.name, &source);
        ChannelError::Rm {
            gpu: self.name.clone(),
            source,
        }
    }

    fn share(&self, what: &'static str) -> impl FnOnce(io::Error) -> ChannelError + '_ {
        move |source| ChannelError::Share {
            gpu: self.name.clone(),
            what,
            source,
        }
    }

    /// Refuses while the GPU is not [`Health::Serving`].
    fn lending(&self) -> Result<(), ChannelError> {
        match self.health.now() {
            Health::Serving => Ok(()),
            health => Err(ChannelError::GpuUnwell {
                gpu: self.name.clone(),
                health,
            }),
        }
    }

    /// The refusal of a contained session's request.
    fn faulted(session: SessionId, c: &Contained) -> ChannelError {
        ChannelError::Faulted {
            session,
            channel: c.channel,
            reason: format!("info32 {}: {}", c.fault.info32, c.fault.reason()),
        }
    }

    /// If a channel of `c` (under its lock) has a fault posted: frees every channel
    /// and group of it and marks it contained; returns the refusal its requests get
    /// from now on. None when none of its channels faulted.
    fn contain_locked(&self, session: SessionId, c: &mut Client<R>) -> Option<ChannelError> {
        let (channel, fault) = c.abandon_faulted()?;
        let reclaimed: BTreeSet<ChannelId> = c.channels.keys().copied().collect();
        let (n, failed, took) = self.reclaim(session, c);
        let contained = Contained {
            channel,
            fault,
            reclaimed,
        };
        let refusal = Self::faulted(session, &contained);
        tracing::warn!(
            gpu = %self.name, session = session.0, channel = channel.0,
            uid = c.peer.uid, pid = c.peer.pid, channels = n, failed = failed.len(),
            took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "contained a fault (info32 {}: {}): the session's channels are freed and it opens no more",
            fault.info32, fault.reason()
        );
        if fault.is_switch_timeout() {
            self.penalise(c.peer.uid);
        }
        c.faulted = Some(contained);
        Some(refusal)
    }

    /// Refuses `uid` new channels for [`Limits::switch_timeout_penalty`]: a kernel of
    /// its held the graphics engine past the RM's context switch timeout, which every
    /// other session waited out (docs/channels.md, "GPU time").
    fn penalise(&self, uid: u32) {
        let d = self.limits.switch_timeout_penalty;
        if d.is_zero() {
            return;
        }
        // A penalty past what an Instant holds (a config of u64::MAX seconds) is 136
        // years: never, for a running rigd.
        let now = Instant::now();
        let until = now
            .checked_add(d)
            .unwrap_or_else(|| now + Duration::from_secs(u32::MAX.into()));
        self.lock().penalised.insert(uid, until);
        tracing::warn!(
            gpu = %self.name, uid,
            "the GPU ended a kernel whose block would not be switched out; uid {uid} opens no channel for {} s",
            d.as_secs()
        );
    }

    /// Refuses a uid [`ChannelFault::is_switch_timeout`] penalised, until its time is up.
    fn penalty(&self, uid: u32) -> Result<(), ChannelError> {
        let mut st = self.lock();
        let Some(&until) = st.penalised.get(&uid) else {
            return Ok(());
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            st.penalised.remove(&uid);
            return Ok(());
        }
        Err(ChannelError::SwitchTimeout {
            uid,
            gpu: self.name.clone(),
            left_s: left.as_secs().max(1),
        })
    }

    /// Closes all of `c`'s channels and groups, timed step by step; logs each failure
    /// and a slow reclaim, lets the boost go for the channels closed.
    fn reclaim(
        &self,
        session: SessionId,
        c: &mut Client<R>,
    ) -> (usize, Vec<NvrmError>, std::time::Duration) {
        let mut r = self.health.reclaim(session);
        let (n, failed) = c.close_all(&mut r);
        if let Some(w) = &self.wakers {
            w.end_session(session);
        }
        let (took, slowest, step) = r.took();
        drop(r);
        for e in &failed {
            self.health.saw(&self.name, e);
            tracing::warn!(gpu = %self.name, session = session.0, error = e as &dyn std::error::Error, "reclaiming a session's channels");
        }
        if slowest >= RECLAIM_BOUND {
            tracing::warn!(
                gpu = %self.name, session = session.0,
                took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                "a reclaim's RM call took {} ms to {step}",
                slowest.as_millis()
            );
        } else {
            tracing::debug!(gpu = %self.name, session = session.0, channels = n, took_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX), "reclaimed");
        }
        if n > 0 {
            self.boost.closed(&self.gpu, n);
        }
        (n, failed, took)
    }

    fn check_ring(&self, entries: u64) -> Result<(), ChannelError> {
        if !entries.is_power_of_two() || !(2..=MAX_RING_ENTRIES).contains(&entries) {
            return Err(ChannelError::RingSize { entries });
        }
        if entries > self.limits.max_ring_entries {
            return Err(ChannelError::RingOverQuota {
                entries,
                limit: self.limits.max_ring_entries,
            });
        }
        Ok(())
    }
}

impl<R: Rm> Served<R> {
    /// An idle window of `len` bytes kept for `uid`, or a new one.
    fn window(&self, uid: u32, len: u64) -> Result<Arc<DeviceMem<R>>, ChannelError> {
        {
            let st = self.lock();
            let kept = st.windows.get(&uid).map_or(&[][..], Vec::as_slice);
            // Under the map's lock: a window found idle is taken before anyone else
            // can look; channels only ever let go of windows.
            if let Some(w) = kept
                .iter()
                .find(|w| w.len() == len && Arc::strong_count(w) == 1)
            {
                return Ok(Arc::clone(w));
            }
            if kept.len() >= self.limits.gpu_rings_per_uid {
                return Err(ChannelError::WindowsExhausted {
                    uid,
                    gpu: self.name.clone(),
                    limit: self.limits.gpu_rings_per_uid,
                });
            }
        }
        let w = Arc::new(
            DeviceMem::new(&self.gpu, len, Caching::WriteCombined).map_err(|e| self.rm_error(e))?,
        );
        self.lock()
            .windows
            .entry(uid)
            .or_default()
            .push(Arc::clone(&w));
        Ok(w)
    }

    /// How many windows rigd keeps for `uid`, and how many of them a channel holds.
    pub fn windows_of(&self, uid: u32) -> (usize, usize) {
        let st = self.lock();
        let kept = st.windows.get(&uid).map_or(&[][..], Vec::as_slice);
        let held = kept.iter().filter(|w| Arc::strong_count(w) > 1).count();
        (kept.len(), held)
    }

    /// The channel on `group` that `req` asks for, and what the client maps.
    fn make(
        &self,
        group: &Arc<ChannelGroup<R>>,
        uid: u32,
        req: ChannelRequest,
    ) -> Result<(Channel<R>, Lending), ChannelError> {
        let rm = |e| self.rm_error(e);
        match req.rings {
            Rings::Host => {
                let channel = Channel::new(group, req.engine, req.entries).map_err(rm)?;
                let RingMem::Host(ring) = channel.gpfifo() else {
                    unreachable!("Channel::new places the ring in host memory");
                };
                let fd = ring
                    .file()
                    .try_clone()
                    .map(OwnedFd::from)
                    .map_err(self.share("the ring"))?;
                let bytes = ring.len();
                Ok((
                    channel,
                    Lending {
                        fd,
                        bytes,
                        pushbuffer: (0, 0, 0),
                    },
                ))
            }
            Rings::Gpu => {
                if req.pushbuffer == 0 || !req.pushbuffer.is_multiple_of(4) {
                    return Err(ChannelError::PushbufferSize {
                        bytes: req.pushbuffer,
                    });
                }
                // check_ring bounded the entries to 2^31.
                let n = u32::try_from(req.entries).unwrap_or(u32::MAX);
                let (pb_offset, len) = window_len(n, req.pushbuffer);
                if len > self.limits.gpu_ring_bytes {
                    return Err(ChannelError::WindowOverQuota {
                        bytes: len,
                        pushbuffer: req.pushbuffer,
                        limit: self.limits.gpu_ring_bytes,
                    });
                }
                let mem = self.window(uid, len)?;
                let fd = mem.window().share().map_err(self.share("the window"))?;
                let channel =
                    Channel::in_device_mem(group, req.engine, req.entries, mem).map_err(rm)?;
                let va = channel.gpfifo().gpu_va();
                Ok((
                    channel,
                    Lending {
                        fd,
                        bytes: len,
                        pushbuffer: (pb_offset, va + pb_offset, len - pb_offset),
                    },
                ))
            }
        }
    }
}

impl<R: Rm> Drop for Served<R> {
    fn drop(&mut self) {
        // rigd lets the GPU go: its clocks go back to what the RM decides.
        self.boost.clear(&self.gpu);
    }
}

/// What a client maps for a channel's ring: its descriptor and length, and (offset,
/// GPU VA, bytes) of a pushbuffer in it.
struct Lending {
    fd: OwnedFd,
    bytes: u64,
    pushbuffer: (u64, u64, u64),
}

#[cfg(any(test, feature = "fakes"))]
impl<R: Rm> Served<R> {
    /// Writes a fault into `channel`'s notifier as the RM would (tests: a fake GPU
    /// posts no errors of its own). False for a channel not open.
    pub fn post_fault(&self, channel: ChannelId, info32: u32) -> bool {
        self.clients().iter().any(|(_, c)| {
            lock_client(c).channels.get(&channel).is_some_and(|lent| {
                let n = lent.channel.notifier().mapping();
                n.write_u64(8, u64::from(info32)).is_ok() && n.write_u64(0, 1).is_ok()
            })
        })
    }

    /// Writes `word` into `channel`'s wake word, as its arm's release would on the GPU
    /// (tests: a fake GPU runs no host methods). False for a channel not open or
    /// without a word.
    pub fn release_wake_word(&self, channel: ChannelId, word: u64) -> bool {
        self.clients().iter().any(|(_, c)| {
            lock_client(c).channels.get(&channel).is_some_and(|lent| {
                lent.channel
                    .wake_word()
                    .is_some_and(|(host, at)| host.mapping().write_u64(at, word).is_ok())
            })
        })
    }

    /// Releases `value` into the event `session` exported as `event`, as its GPU
    /// would (tests). False for an event the session does not hold.
    pub fn release_event(&self, session: SessionId, event: u64, value: u64) -> bool {
        let id = crate::events::EventId(event);
        self.events
            .write(session, id, rig_model::nv::shared_event::VALUE, value)
    }
}

impl<R: Rm + 'static> ChannelHost for Served<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn copy_engines(&self) -> Vec<u8> {
        self.copy_engines.clone()
    }

    fn interrupts(&self) -> Option<u64> {
        self.wakers
            .as_ref()
            .filter(|w| w.watching())
            .map(wake::Wakers::edges)
    }

    fn wakes(&self) -> Option<(u64, u64)> {
        self.wakers
            .as_ref()
            .filter(|w| w.watching())
            .map(wake::Wakers::signals)
    }

    fn set_channels_per_session(&self, limit: usize) {
        // Relaxed: a lone number read once per open, ordered with nothing else.
        self.per_session.store(limit, Ordering::Relaxed);
    }

    fn attach(
        &self,
        session: SessionId,
        peer: PeerCred,
    ) -> Result<Arc<dyn DeviceMap>, ChannelError> {
        self.lending()?;
        let exists = || ChannelError::SpaceExists {
            session,
            gpu: self.name.clone(),
        };
        if self.lock().clients.contains_key(&session) {
            return Err(exists());
        }
        // The RM calls run outside the map's lock; a second attach of the same
        // session racing this one loses below, and its space is freed as it drops.
        let space = Arc::new(AddressSpace::new(&self.gpu).map_err(|e| self.rm_error(e))?);
        let ces = &self.copy_engines;
        let copy_engine =
            (!ces.is_empty()).then(|| ces[usize::try_from(session.0).unwrap_or(0) % ces.len()]);
        let mut st = self.lock();
        if st.clients.contains_key(&session) {
            return Err(exists());
        }
        st.clients.insert(
            session,
            Arc::new(Mutex::new(Client {
                peer,
                space: Arc::clone(&space),
                graphics: None,
                copy: None,
                copy_engine,
                timeslice_us: self.limits.timeslice_us,
                channels: BTreeMap::new(),
                faulted: None,
            })),
        );
        Ok(space)
    }

    fn open(&self, session: SessionId, req: ChannelRequest) -> Result<OpenedChannel, ChannelError> {
        self.check_ring(req.entries)?;
        self.lending()?;
        let (id, shared) = {
            let mut st = self.lock();
            let shared =
                st.clients
                    .get(&session)
                    .cloned()
                    .ok_or_else(|| ChannelError::NoSpace {
                        session,
                        gpu: self.name.clone(),
                    })?;
            st.next += 1;
            (ChannelId(st.next), shared)
        };
        let mut client = lock_client(&shared);
        if let Some(c) = &client.faulted {
            return Err(Self::faulted(session, c));
        }
        // A fault the watch has not read yet: a channel made now would join a group
        // the RM has stopped (it refused one on an H100 with NV_ERR_FEATURE_NOT_ENABLED).
        if let Some(refusal) = self.contain_locked(session, &mut client) {
            return Err(refusal);
        }
        self.penalty(client.peer.uid)?;
        let limit = self.per_session.load(Ordering::Relaxed);
        if client.channels.len() >= limit {
            return Err(ChannelError::TooManyChannels { session, limit });
        }
        let group = Arc::clone(
            client
                .group(req.engine, &self.name)
                .map_err(|e| self.rm_error(e))?,
        );
        let (channel, lending) = self.make(&group, client.peer.uid, req)?;
        let (pushbuffer_offset, pushbuffer_gpu_va, pushbuffer_bytes) = lending.pushbuffer;
        let mut opened = OpenedChannel {
            id,
            engine: req.engine,
            entries: channel.entries(),
            token: channel.token(),
            ring_gpu_va: channel.gpfifo().gpu_va(),
            userd_offset: channel.userd_offset() as u64,
            ring_bytes: lending.bytes,
            rings: req.rings,
            pushbuffer_offset,
            pushbuffer_gpu_va,
            pushbuffer_bytes,
            notifier_bytes: channel.notifier().len(),
            usermode_bytes: crate::nvrm::USERMODE_LEN as u64,
            ring: lending.fd,
            notifier: channel
                .notifier()
                .file()
                .open_read_only()
                .map(OwnedFd::from)
                .map_err(self.share("the error notifier"))?,
            usermode: self
                .gpu
                .usermode()
                .share()
                .map_err(self.share("the usermode page"))?,
            wake: None,
            wake_offset: 0,
        };
        if let Some(w) = &self.wakers {
            let word = Self::wake_word(&channel);
            let offset = word.as_ref().map_or(0, |(_, at)| *at);
            match w.add(session, id, word.map(|(w, _)| w)) {
                Ok(fd) => (opened.wake, opened.wake_offset) = (Some(fd), offset),
                Err(e) => {
                    tracing::warn!(gpu = %self.name, session = session.0, channel = id.0, error = &e as &dyn std::error::Error, "no wake descriptor for a channel: its waits will not sleep");
                }
            }
        }
        client.channels.insert(
            id,
            LentChannel {
                channel,
                rings: req.rings,
                opened: SystemTime::now(),
                fault: None,
            },
        );
        self.boost.opened(&self.gpu);
        Ok(opened)
    }

    fn close(&self, session: SessionId, channel: ChannelId) -> Result<(), ChannelError> {
        let shared = self
            .client(session)
            .ok_or(ChannelError::UnknownChannel { channel })?;
        let mut client = lock_client(&shared);
        if client
            .faulted
            .as_ref()
            .is_some_and(|c| c.reclaimed.contains(&channel))
        {
            return Ok(());
        }
        if !client.channels.contains_key(&channel) {
            return Err(ChannelError::UnknownChannel { channel });
        }
        // A session with a fault is contained whole, whichever channel it closes.
        if self.contain_locked(session, &mut client).is_some() {
            return Ok(());
        }
        let lent = client
            .channels
            .remove(&channel)
            .ok_or(ChannelError::UnknownChannel { channel })?;
        if let Some(w) = &self.wakers {
            w.remove(session, channel);
        }
        // The channel is gone whatever a teardown step said (each step still ran):
        // the client is told it closed, rigd's log says what went wrong.
        if let Err(e) = lent.channel.close() {
            self.health.saw(&self.name, &e);
            tracing::warn!(gpu = %self.name, session = session.0, channel = channel.0, error = &e as &dyn std::error::Error, "closing a channel");
        }
        drop(client);
        self.boost.closed(&self.gpu, 1);
        Ok(())
    }

    fn end(&self, session: SessionId) -> usize {
        let Some(shared) = self.lock().clients.remove(&session) else {
            return 0;
        };
        let mut c = lock_client(&shared);
        self.reclaim(session, &mut c).0
    }

    fn contain(&self, session: SessionId) -> bool {
        let Some(shared) = self.client(session) else {
            return false;
        };
        let mut c = lock_client(&shared);
        c.faulted.is_none() && self.contain_locked(session, &mut c).is_some()
    }

    fn health(&self) -> Health {
        self.health.now()
    }

    fn check_health(&self) -> Health {
        self.health
            .recovery_action(&self.name, self.gpu.recovery_action());
        self.health.now()
    }

    fn status(&self, uid: Option<u32>) -> Vec<ChannelView> {
        let mut out = Vec::new();
        for (session, shared) in self.clients() {
            let c = lock_client(&shared);
            if uid.is_some_and(|u| c.peer.uid != u) {
                continue;
            }
            out.extend(c.channels.iter().map(|(&id, lent)| {
                let (gp_get, gp_put) = lent.channel.gp_get_put().unwrap_or_default();
                ChannelView {
                    id,
                    gpu: self.name.clone(),
                    session,
                    uid: c.peer.uid,
                    pid: c.peer.pid,
                    engine: lent.channel.engine(),
                    entries: lent.channel.entries(),
                    rings: lent.rings,
                    gp_get,
                    gp_put,
                    fault: lent.channel.fault(),
                    opened: lent.opened,
                }
            }));
        }
        out.sort_by_key(|v| v.id);
        out
    }

    fn watch(&self) -> Vec<SessionId> {
        // Called from the async side every few ms: never wait behind a client's open
        // or reclaim (tens of RM calls under its lock); the next tick reads it again.
        let mut new = Vec::new();
        for (session, shared) in self.clients() {
            let mut c = match shared.try_lock() {
                Ok(c) => c,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => continue,
            };
            let (uid, pid) = (c.peer.uid, c.peer.pid);
            for (id, lent) in &mut c.channels {
                let now = lent.channel.fault();
                if let Some(f) = now
                    && now != lent.fault
                {
                    if new.last() != Some(&session) {
                        new.push(session);
                    }
                    tracing::warn!(
                        gpu = %self.name, session = session.0, channel = id.0,
                        uid, pid,
                        "the RM posted a channel error: {}", rig_model::nv::robust_channel_reason(f.info32)
                    );
                    lent.fault = now;
                }
            }
        }
        new
    }
}
