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
//! else's; the watch records it for `rigctl channels`, and the client reads the same
//! notifier through a read-only view.
//!
//! Not here: the wire format (`service`), the RM sequence (`nvrm`), lease pools
//! (`dma`), the client's ring and pushbuffer rules (`rig_client::channel`).

#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeMap, HashMap},
    fmt, io,
    os::fd::OwnedFd,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::SystemTime,
};

use rig_sys::scm::PeerCred;

use crate::{
    dma::{DeviceMap, SessionId},
    nvrm::{
        AddressSpace, Channel, ChannelFault, ChannelGroup, Doorbell, Engine, Gpu, GroupEngine,
        NvrmError, Rm,
    },
};

/// The most ring entries the RM takes (seed: "A channel's ring holds up to 2^31
/// entries").
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
    pub copy_engines: Vec<u8>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            channels_per_session: 8,
            max_ring_entries: 1 << 20,
            copy_engines: Vec::new(),
        }
    }
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
    /// Length of the ring + USERD file.
    pub ring_bytes: u64,
    pub notifier_bytes: u64,
    pub usermode_bytes: u64,
    /// Ring and USERD (read-write), error notifier (read-only), usermode page.
    pub ring: OwnedFd,
    pub notifier: OwnedFd,
    pub usermode: OwnedFd,
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
    pub gp_get: u32,
    pub gp_put: u32,
    /// The error the RM posted, if any.
    pub fault: Option<ChannelFault>,
    pub opened: SystemTime,
}

/// A GPU that serves channels, whatever its `Rm`: what `rig` and the service see.
pub trait ChannelHost: Send + Sync + fmt::Debug {
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
    /// Opens a channel of `entries` ring entries on `engine` for `session`.
    ///
    /// # Errors
    /// [`ChannelError::RingSize`], [`ChannelError::RingOverQuota`],
    /// [`ChannelError::TooManyChannels`], [`ChannelError::NoSpace`],
    /// [`ChannelError::Rm`], [`ChannelError::Share`].
    fn open(
        &self,
        session: SessionId,
        engine: Engine,
        entries: u64,
    ) -> Result<OpenedChannel, ChannelError>;
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
    /// Every channel; only `uid`'s when given.
    fn status(&self, uid: Option<u32>) -> Vec<ChannelView>;
    /// Reads every channel's notifier and records new faults; returns how many.
    /// Skips, for this call, a client whose open or reclaim is under way.
    fn watch(&self) -> usize;
}

struct Lent<R: Rm> {
    channel: Channel<R>,
    opened: SystemTime,
    /// The fault already reported, so it is logged once.
    fault: Option<ChannelFault>,
}

impl<R: Rm> fmt::Debug for Lent<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lent")
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
    /// That engine: one of `Limits::copy_engines`, picked by session.
    copy_engine: Option<u8>,
    channels: BTreeMap<ChannelId, Lent<R>>,
}

impl<R: Rm> Client<R> {
    /// The group a channel on `engine` goes in, made with its first channel. A copy
    /// engine whose group the RM refuses is logged and left: copy channels then join
    /// GR0's group, which every GPU has.
    fn group(&mut self, engine: Engine, gpu: &str) -> Result<&Arc<ChannelGroup<R>>, NvrmError> {
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
            self.graphics = Some(Arc::new(ChannelGroup::new(
                &self.space,
                GroupEngine::Graphics,
            )?));
        }
        Ok(self.graphics.as_ref().expect("made above"))
    }

    /// Deschedules every group, closes every channel, then the groups; returns the
    /// channels closed and the failures.
    fn close_all(&mut self) -> (usize, Vec<NvrmError>) {
        let mut failed = Vec::new();
        for g in self.graphics.iter().chain(self.copy.iter()) {
            if let Err(e) = g.stop() {
                failed.push(e);
            }
        }
        let channels = std::mem::take(&mut self.channels);
        let n = channels.len();
        for (_, lent) in channels {
            if let Err(e) = lent.channel.close() {
                failed.push(e);
            }
        }
        for g in [self.copy.take(), self.graphics.take()]
            .into_iter()
            .flatten()
        {
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
}

fn lock_client<R: Rm>(c: &Mutex<Client<R>>) -> MutexGuard<'_, Client<R>> {
    // A panic under the lock leaves the client's objects whole: they free themselves
    // when dropped.
    c.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One RM-served GPU's channels, by session.
#[derive(Debug)]
pub struct Served<R: Rm> {
    gpu: Arc<Gpu<R>>,
    name: String,
    limits: Limits,
    state: Mutex<State<R>>,
}

impl<R: Rm> Served<R> {
    /// Serves `gpu` under its PCI address.
    pub fn new(gpu: Gpu<R>, limits: Limits) -> Self {
        let name = gpu.card().bdf.clone();
        Self {
            gpu: Arc::new(gpu),
            name,
            limits,
            state: Mutex::new(State {
                clients: HashMap::new(),
                next: 0,
            }),
        }
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu<R>> {
        &self.gpu
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
}

impl<R: Rm + 'static> ChannelHost for Served<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn attach(
        &self,
        session: SessionId,
        peer: PeerCred,
    ) -> Result<Arc<dyn DeviceMap>, ChannelError> {
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
        let ces = &self.limits.copy_engines;
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
                channels: BTreeMap::new(),
            })),
        );
        Ok(space)
    }

    fn open(
        &self,
        session: SessionId,
        engine: Engine,
        entries: u64,
    ) -> Result<OpenedChannel, ChannelError> {
        self.check_ring(entries)?;
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
        let limit = self.limits.channels_per_session;
        if client.channels.len() >= limit {
            return Err(ChannelError::TooManyChannels { session, limit });
        }
        let group = Arc::clone(
            client
                .group(engine, &self.name)
                .map_err(|e| self.rm_error(e))?,
        );
        let channel = Channel::new(&group, engine, entries).map_err(|e| self.rm_error(e))?;
        // Channel::new places rings in host memory, the only kind lent so far.
        let ring = channel.gpfifo().host().ok_or_else(|| {
            self.share("the ring")(std::io::Error::other("it lies in GPU memory"))
        })?;
        let opened = OpenedChannel {
            id,
            engine,
            entries: channel.entries(),
            token: channel.token(),
            ring_gpu_va: ring.gpu_va(),
            userd_offset: channel.userd_offset() as u64,
            ring_bytes: ring.len(),
            notifier_bytes: channel.notifier().len(),
            usermode_bytes: crate::nvrm::USERMODE_LEN as u64,
            ring: ring
                .file()
                .try_clone()
                .map(OwnedFd::from)
                .map_err(self.share("the ring"))?,
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
        };
        client.channels.insert(
            id,
            Lent {
                channel,
                opened: SystemTime::now(),
                fault: None,
            },
        );
        Ok(opened)
    }

    fn close(&self, session: SessionId, channel: ChannelId) -> Result<(), ChannelError> {
        let shared = self
            .client(session)
            .ok_or(ChannelError::UnknownChannel { channel })?;
        let mut client = lock_client(&shared);
        let lent = client
            .channels
            .remove(&channel)
            .ok_or(ChannelError::UnknownChannel { channel })?;
        // The channel is gone whatever a teardown step said (each step still ran):
        // the client is told it closed, rigd's log says what went wrong.
        if let Err(e) = lent.channel.close() {
            tracing::warn!(gpu = %self.name, session = session.0, channel = channel.0, error = &e as &dyn std::error::Error, "closing a channel");
        }
        Ok(())
    }

    fn end(&self, session: SessionId) -> usize {
        let Some(shared) = self.lock().clients.remove(&session) else {
            return 0;
        };
        let (n, failed) = lock_client(&shared).close_all();
        for e in failed {
            tracing::warn!(gpu = %self.name, session = session.0, error = &e as &dyn std::error::Error, "reclaiming a session's channels");
        }
        n
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

    fn watch(&self) -> usize {
        // Called from the async side every few ms: never wait behind a client's open
        // or reclaim (tens of RM calls under its lock); the next tick reads it again.
        let mut new = 0;
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
                    new += 1;
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
