//! A channel rigd lends on an RM-served GPU: [`Channel`] owns its ring and USERD, a
//! read-only view of its error notifier, its doorbell (the usermode page rigd mapped
//! through an unregistered `/dev/nvidiaN`), a pushbuffer and a 64-bit timeline
//! semaphore in the session's own leased memory.
//!
//! Where the ring lives is the client's choice ([`Rings`]): in host memory (the memfd
//! rigd sent; the pushbuffer is then one of the session's leases), or in GPU memory
//! the client maps through BAR1 (one window holding ring, USERD and pushbuffer, for
//! the uids rigd allows): the GPU then fetches none of them across PCIe, which on
//! the H200 shortens an empty round trip by about a third (docs/BENCHMARKS.md), at
//! the price of write-combined stores and two store fences per submission.
//!
//! Hot path ([`Channel::submit`]): ring entries for the closed segments, a store
//! fence, GP_PUT in USERD, (a store fence, for BAR1), the doorbell — loads and stores
//! only, no syscall, no lock shared with anyone. GP_GET is read only when the ring
//! looks full; the semaphore and the notifier only while waiting ([`Channel::wait`]),
//! the notifier every [`FAULT_CHECK_SPINS`] spins, so a posted error ends a wait with
//! the RM's reason.
//!
//! Opening and closing ([`Channel::open`], [`Channel::close`]) are requests on the
//! session's side socket (`crate::session`), and the pushbuffer and semaphore come
//! from the session's ledger; everything else is this process's own memory. The rules
//! of each piece (segments, ring fullness, the timeline) are `pushbuf`'s, `ring`'s and
//! `timeline`'s; rigd's listing of every channel is `status`'s.

use std::{
    collections::VecDeque,
    io,
    num::NonZeroUsize,
    os::fd::{AsFd, OwnedFd},
    sync::atomic::{Ordering, fence},
    time::{Duration, Instant},
};

use rig_proto::v1 as pb;
use rig_sys::{
    memfd::SealedMemfd,
    mman::{self, DeviceMapping, Fill, Mapping, ReadMapping},
};

use super::{
    MethodError, PushbufError, Pushbuffer, RingError, Segment, TimelineError,
    method::{self, HOPPER_COMPUTE_A, HOPPER_DMA_COPY_A, SUBCH_COMPUTE, SUBCH_COPY},
    ring::{self, Ring, USERD_GP_GET, USERD_GP_PUT},
    timeline::Timeline,
};
use crate::session::{Addressing, Buffer, Reply, Request, Session, SessionError, SessionErrorKind};

/// How many spins of a wait go between reads of the error notifier.
pub const FAULT_CHECK_SPINS: u32 = 256;
/// With rings in GPU memory: how long a wait lets the GPU go without the value
/// landing before it looks whether the GPU fetched what was submitted, and if not
/// rings the doorbell again; the interval then doubles, up to [`REKICK_MAX`]. A
/// doorbell can overtake GP_PUT's write through BAR1 inside the GPU, which then reads
/// the old GP_PUT and fetches nothing until the next doorbell (seen on the H200 with
/// 64 clients at once); NVIDIA's drivers read BAR1 back before every doorbell instead,
/// at 1.5 µs of host time each. Ringing again is harmless: the GPU re-reads GP_PUT.
pub const REKICK_AFTER: Duration = Duration::from_micros(20);
/// The longest a wait goes between two such looks.
pub const REKICK_MAX: Duration = Duration::from_millis(1);
/// A release that waits for nothing and writes no timestamp: the value says only
/// that the channel reached it, which is all an empty submission means.
pub const EMPTY_RELEASE: method::Release = method::Release {
    wait_idle: false,
    timestamp: false,
};
/// The pushbuffer a channel gets unless told otherwise: 64 KiB, 16,384 words.
pub const DEFAULT_PUSHBUFFER: u64 = 64 << 10;

/// Where a channel's ring, USERD and pushbuffer live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rings {
    /// Host memory: the least host time per submission.
    #[default]
    Host,
    /// GPU memory through BAR1: the shortest round trip. rigd lends it to root and
    /// the members of its `[channels] gpu_rings_group` only.
    Gpu,
}

impl Rings {
    fn wire(self) -> pb::DmaRings {
        match self {
            Self::Host => pb::DmaRings::Host,
            Self::Gpu => pb::DmaRings::Gpu,
        }
    }

    pub(crate) fn from_wire(v: i32) -> Option<Self> {
        match pb::DmaRings::try_from(v) {
            Ok(pb::DmaRings::Host) => Some(Self::Host),
            Ok(pb::DmaRings::Gpu) => Some(Self::Gpu),
            Err(_) => None,
        }
    }
}

/// A channel's ring and USERD as this process maps them.
#[derive(Debug)]
enum RingView {
    /// The memfd rigd sent.
    Host(Mapping),
    /// GPU memory through BAR1, write-combined.
    Gpu(DeviceMapping),
}

impl RingView {
    fn read_u32(&self, at: usize) -> io::Result<u32> {
        match self {
            Self::Host(m) => m.read_u32(at),
            Self::Gpu(m) => m.read_u32(at),
        }
    }

    fn write_u32(&self, at: usize, v: u32) -> io::Result<()> {
        match self {
            Self::Host(m) => m.write_u32(at, v),
            Self::Gpu(m) => m.write_u32(at, v),
        }
    }

    fn write_u64(&self, at: usize, v: u64) -> io::Result<()> {
        match self {
            Self::Host(m) => m.write_u64(at, v),
            Self::Gpu(m) => m.write_u64(at, v),
        }
    }
}

/// Where a channel's pushbuffer words go.
#[derive(Debug)]
enum PbMem {
    /// One of the session's leases.
    Lease(Buffer),
    /// The ring's window in GPU memory, from this offset.
    Window(usize),
}

/// The engine a channel drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// HOPPER_DMA_COPY_A: copies, on subchannel 4.
    Copy,
    /// HOPPER_COMPUTE_A, on subchannel 1.
    Compute,
}

impl Engine {
    fn wire(self) -> pb::DmaEngine {
        match self {
            Self::Copy => pb::DmaEngine::Copy,
            Self::Compute => pb::DmaEngine::Compute,
        }
    }

    pub(crate) fn from_wire(v: i32) -> Option<Self> {
        match pb::DmaEngine::try_from(v) {
            Ok(pb::DmaEngine::Copy) => Some(Self::Copy),
            Ok(pb::DmaEngine::Compute) => Some(Self::Compute),
            _ => None,
        }
    }

    fn set_object(self) -> [u32; 2] {
        match self {
            Self::Copy => method::set_object(SUBCH_COPY, HOPPER_DMA_COPY_A),
            Self::Compute => method::set_object(SUBCH_COMPUTE, HOPPER_COMPUTE_A),
        }
    }
}

/// The error the RM posted in a channel's notifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// `info32`: a ROBUST_CHANNEL_* code (31: MMU fault; 32: PBDMA error).
    pub info32: u32,
    pub info16: u16,
    pub status: u16,
    /// The RM's timestamp, ns.
    pub time_ns: u64,
}

impl Fault {
    /// The code's name and meaning (`nverror.h`).
    pub fn reason(&self) -> &'static str {
        rig_model::nv::robust_channel_reason(self.info32)
    }
}

/// What a lent channel's calls can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("Channel {channel}: the GPU stopped it: {} (info32 {}, info16 {:#x})", .fault.reason(), .fault.info32, .fault.info16)]
    Fault { channel: u64, fault: Fault },
    #[error(
        "Channel {channel}: timeline value {value} did not land within {waited:?} (the semaphore reads {current}, GP_GET {gp_get}, GP_PUT {gp_put}; no error posted)"
    )]
    Timeout {
        channel: u64,
        value: u64,
        waited: Duration,
        current: u64,
        gp_get: u32,
        gp_put: u32,
    },
    #[error(
        "Channel {channel}: its ring is full ({entries} entries, none fetched since): wait for earlier work"
    )]
    RingFull { channel: u64, entries: u32 },
    #[error("Channel {channel}: its pushbuffer is full: wait for earlier work")]
    PushbufferFull { channel: u64 },
    #[error(transparent)]
    Ring(#[from] RingError),
    #[error(transparent)]
    Pushbuffer(#[from] PushbufError),
    #[error(transparent)]
    Method(#[from] MethodError),
    #[error(transparent)]
    Timeline(#[from] TimelineError),
    #[error("Channel {channel}: failed to map {what}")]
    Map {
        channel: u64,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("rigd's channel reply does not follow the protocol: {0}")]
    Protocol(&'static str),
}

/// A channel of this process's own, on an RM-served GPU. Give it back with
/// [`Channel::close`]; one only dropped stays open in rigd (counting against
/// the session's limit) until the session ends. Its pushbuffer and semaphore memory go
/// back to the session when it drops, unless work it submitted has not completed:
/// then they stay out of use until the session ends, since the GPU may still read and
/// write them.
#[derive(Debug)]
pub struct Channel {
    id: u64,
    engine: Engine,
    token: u32,
    doorbell_offset: usize,
    ring_gpu_va: u64,
    rings: Rings,
    // Field order: mappings go before the buffers their GPU addresses name.
    gpfifo: RingView,
    userd: usize,
    notifier: ReadMapping,
    doorbell: DeviceMapping,
    ring: Ring,
    pb: Pushbuffer,
    pb_mem: PbMem,
    sem: Buffer,
    timeline: Timeline,
    /// Closed segments not yet in the ring.
    queued: VecDeque<Segment>,
    /// (timeline value, pushbuffer end) per submission that released a new value,
    /// oldest first: once the value lands, the words before the end are free. Words
    /// submitted without a release wait for the next one's.
    in_flight: VecDeque<(u64, u64)>,
    /// The largest value `in_flight` has held.
    recorded: u64,
    /// Doorbells rung again by waits (rings in GPU memory).
    rekicks: u64,
    /// rigd closed it: the GPU no longer runs its work.
    drained: bool,
}

impl Drop for Channel {
    fn drop(&mut self) {
        // Work still in flight may yet read the pushbuffer and write the semaphore.
        let done = self
            .sem
            .read_u64(0)
            .is_ok_and(|v| v >= self.timeline.last());
        if !self.drained && !done {
            // A pushbuffer in the window is rigd's: it goes with the channel.
            if let PbMem::Lease(b) = &mut self.pb_mem {
                b.keep_out();
            }
            self.sem.keep_out();
        }
    }
}

fn map_err(channel: u64, what: &'static str) -> impl FnOnce(io::Error) -> ChannelError {
    move |source| ChannelError::Map {
        channel,
        what,
        source,
    }
}

impl Channel {
    /// Opens a channel of `entries` ring entries on `engine` in `session` (an
    /// RM-served GPU's session only), with a [`DEFAULT_PUSHBUFFER`] pushbuffer and a
    /// timeline semaphore from the session's memory; its first submission binds the
    /// engine's class.
    ///
    /// # Errors
    /// [`SessionError::Refused`] with rigd's reason (`BadRing`, `ChannelLimit`,
    /// `NotServed`, `Rm`), the allocation's errors, [`ChannelError::Map`].
    pub async fn open(
        session: &Session,
        engine: Engine,
        entries: u64,
    ) -> Result<Self, ChannelError> {
        Self::open_with(session, engine, entries, DEFAULT_PUSHBUFFER).await
    }

    /// As [`Channel::open`], with a pushbuffer of `pushbuffer` bytes (a multiple of
    /// 4).
    ///
    /// # Errors
    /// As [`Channel::open`].
    pub async fn open_with(
        session: &Session,
        engine: Engine,
        entries: u64,
        pushbuffer: u64,
    ) -> Result<Self, ChannelError> {
        Self::open_in(session, engine, entries, pushbuffer, Rings::Host).await
    }

    /// As [`Channel::open_with`], with the ring, USERD and (for [`Rings::Gpu`]) the
    /// pushbuffer where `rings` says.
    ///
    /// # Errors
    /// As [`Channel::open`]; `GpuRingsRefused` for a uid rigd does not lend GPU memory
    /// to, `BadRing` for a window over rigd's limit, `Exhausted` when the uid's
    /// windows are all held.
    pub async fn open_in(
        session: &Session,
        engine: Engine,
        entries: u64,
        pushbuffer: u64,
        rings: Rings,
    ) -> Result<Self, ChannelError> {
        if session.addressing() != Addressing::GpuVa {
            return Err(SessionError::refused(
                SessionErrorKind::NotServed,
                "Channels are lent on RM-served GPUs only: this session's device gives no GPU addresses",
            )
            .into());
        }
        // Memory first: a refusal here leaves no channel behind in rigd.
        let lease = match rings {
            Rings::Host => Some(session.alloc(pushbuffer, 4096).await?),
            Rings::Gpu => None,
        };
        let sem = session.alloc(16, 16).await?;
        let (reply, fds) = session
            .call(Request::ChannelOpen(pb::ChannelOpen {
                engine: engine.wire().into(),
                entries,
                rings: rings.wire().into(),
                pushbuffer_bytes: pushbuffer,
            }))
            .await?;
        let Reply::ChannelOpened(o) = reply else {
            return Err(ChannelError::Protocol(
                "an open must be answered `channel_opened`",
            ));
        };
        let [ring_fd, notifier_fd, usermode_fd]: [OwnedFd; 3] = fds
            .try_into()
            .map_err(|_| ChannelError::Protocol("an opened channel carries three descriptors"))?;
        let id = o.channel;
        if Rings::from_wire(o.rings) != Some(rings) {
            return Err(ChannelError::Protocol(
                "the channel's rings are not where they were asked for",
            ));
        }
        let notifier_file = SealedMemfd::check(notifier_fd).map_err(SessionError::Unsealed)?;
        let userd =
            usize::try_from(o.userd_offset).map_err(|_| ChannelError::Protocol("USERD offset"))?;
        if o.userd_offset + 512 > o.ring_bytes {
            return Err(ChannelError::Protocol("USERD lies past the ring's end"));
        }
        let usermode_len = usize::try_from(o.usermode_bytes)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or(ChannelError::Protocol("usermode size"))?;
        let doorbell_offset = usize::try_from(o.doorbell_offset)
            .ok()
            .filter(|d| d % 4 == 0 && d + 4 <= usermode_len.get())
            .ok_or(ChannelError::Protocol("doorbell offset"))?;
        let (gpfifo, pb_mem, pb) = match lease {
            Some(b) => {
                let ring_file = SealedMemfd::check(ring_fd).map_err(SessionError::Unsealed)?;
                if ring_file.len() != o.ring_bytes {
                    return Err(ChannelError::Protocol(
                        "the ring file is not as long as the reply says",
                    ));
                }
                let m =
                    Mapping::shared(&ring_file, Fill::Populate).map_err(map_err(id, "its ring"))?;
                let pb_va = b.gpu_va().map(|va| va.get()).ok_or(ChannelError::Protocol(
                    "a channel's session has no GPU addresses",
                ))?;
                let pb = Pushbuffer::new(pb_va, pushbuffer / 4)?;
                (RingView::Host(m), PbMem::Lease(b), pb)
            }
            None => {
                let len = usize::try_from(o.ring_bytes)
                    .ok()
                    .and_then(NonZeroUsize::new)
                    .ok_or(ChannelError::Protocol("window size"))?;
                let at = usize::try_from(o.pushbuffer_offset)
                    .ok()
                    .filter(|&at| {
                        at.is_multiple_of(4)
                            && at >= userd + 512
                            && o.pushbuffer_bytes >= pushbuffer
                            && o.pushbuffer_offset + o.pushbuffer_bytes <= o.ring_bytes
                    })
                    .ok_or(ChannelError::Protocol(
                        "the pushbuffer lies outside the window",
                    ))?;
                let m = DeviceMapping::map(ring_fd.as_fd(), len)
                    .map_err(map_err(id, "its window in GPU memory"))?;
                let pb = Pushbuffer::new(o.pushbuffer_gpu_va, pushbuffer / 4)?;
                (RingView::Gpu(m), PbMem::Window(at), pb)
            }
        };
        let notifier =
            ReadMapping::shared(&notifier_file).map_err(map_err(id, "its error notifier"))?;
        let doorbell = DeviceMapping::map(usermode_fd.as_fd(), usermode_len)
            .map_err(map_err(id, "its doorbell page"))?;
        let mut ch = Self {
            id,
            engine: Engine::from_wire(o.engine).unwrap_or(engine),
            token: o.token,
            doorbell_offset,
            ring_gpu_va: o.ring_gpu_va,
            rings,
            gpfifo,
            userd,
            notifier,
            doorbell,
            ring: Ring::new(u64::from(o.entries))?,
            pb,
            pb_mem,
            sem,
            timeline: Timeline::new(),
            queued: VecDeque::new(),
            in_flight: VecDeque::new(),
            recorded: 0,
            rekicks: 0,
            drained: false,
        };
        ch.push(&engine.set_object())?;
        Ok(ch)
    }

    /// Closes the channel in rigd (deschedule, drain, free) and drops it here;
    /// `session` is the one it was opened in.
    ///
    /// # Errors
    /// [`SessionError::Refused`] (`UnknownChannel`), side-socket errors.
    pub async fn close(mut self, session: &Session) -> Result<(), ChannelError> {
        // rigd stops and drains it first; only then is its memory free here.
        let answer = session
            .call(Request::ChannelClose(pb::ChannelClose { channel: self.id }))
            .await;
        self.drained = matches!(answer, Ok((Reply::ChannelClosed(_), _)));
        drop(self);
        match answer? {
            (Reply::ChannelClosed(_), _) => Ok(()),
            _ => Err(ChannelError::Protocol(
                "a close must be answered `channel_closed`",
            )),
        }
    }
    /// rigd's handle of the channel (what `rigctl channels` shows).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Ring entries.
    pub fn entries(&self) -> u32 {
        self.ring.entries()
    }

    /// The ring's GPU address (USERD follows it).
    pub fn ring_gpu_va(&self) -> u64 {
        self.ring_gpu_va
    }

    /// Where its ring, USERD and pushbuffer live.
    pub fn rings(&self) -> Rings {
        self.rings
    }

    /// How many times waits rang the doorbell again because the GPU had not fetched
    /// what was submitted ([`REKICK_AFTER`]); always 0 with rings in host memory.
    pub fn rekicks(&self) -> u64 {
        self.rekicks
    }

    /// The timeline semaphore's GPU address (value at +0, timestamp at +8).
    pub fn semaphore_va(&self) -> u64 {
        self.sem.gpu_va().map_or(0, |va| va.get())
    }

    /// The largest timeline value promised so far.
    pub fn last_value(&self) -> u64 {
        self.timeline.last()
    }

    /// The timeline semaphore as the GPU last wrote it.
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`] (cannot happen for the channel's own semaphore).
    pub fn completed(&self) -> Result<u64, ChannelError> {
        Ok(self.sem.read_u64(0)?)
    }

    /// The error the RM posted for this channel, if any (a zero notifier is none).
    pub fn fault(&self) -> Option<Fault> {
        let time_ns = self.notifier.read_u64(0).ok()?;
        let words = self.notifier.read_u64(8).ok()?;
        (time_ns != 0 || words != 0).then_some(Fault {
            info32: (words & 0xffff_ffff) as u32,
            info16: ((words >> 32) & 0xffff) as u16,
            status: (words >> 48) as u16,
            time_ns,
        })
    }

    /// Writes one command's words into the pushbuffer. A full pushbuffer first frees
    /// what completed work used; if still full, [`ChannelError::PushbufferFull`].
    ///
    /// # Errors
    /// [`ChannelError::Pushbuffer`] for a command too long,
    /// [`ChannelError::PushbufferFull`].
    pub fn push(&mut self, words: &[u32]) -> Result<(), ChannelError> {
        let n = u32::try_from(words.len()).map_err(|_| PushbufError::TooLarge {
            words: u32::MAX,
            size: self.pb.size(),
        })?;
        let r = match self.pb.reserve(n) {
            Ok(r) => r,
            Err(PushbufError::Full { .. }) => {
                self.retire_completed()?;
                self.pb.reserve(n).map_err(|e| match e {
                    PushbufError::Full { .. } => ChannelError::PushbufferFull { channel: self.id },
                    other => other.into(),
                })?
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(seg) = r.closed {
            self.queued.push_back(seg);
        }
        match &self.pb_mem {
            PbMem::Lease(b) => {
                for (i, w) in words.iter().enumerate() {
                    b.write_u32((u64::from(r.at) + i as u64) * 4, *w)?;
                }
            }
            PbMem::Window(base) => {
                let at = base + r.at as usize * 4;
                for (i, w) in words.iter().enumerate() {
                    self.gpfifo
                        .write_u32(at + i * 4, *w)
                        .map_err(map_err(self.id, "its pushbuffer"))?;
                }
            }
        }
        if self.pb.must_close()
            && let Some(seg) = self.pb.close()
        {
            self.queued.push_back(seg);
        }
        Ok(())
    }

    /// Appends a release of the next timeline value that waits for the engine to be
    /// idle first (WFI), so the value says all earlier work is done; no timestamp.
    /// Returns the value. An empty submission needs no WFI: [`Channel::release_with`]
    /// with [`EMPTY_RELEASE`] saves about a microsecond (docs/BENCHMARKS.md).
    ///
    /// # Errors
    /// As [`Channel::push`]; [`ChannelError::Timeline`] after 2^64 - 1 values.
    pub fn release(&mut self) -> Result<u64, ChannelError> {
        self.release_with(method::Release {
            wait_idle: true,
            timestamp: false,
        })
    }

    /// Appends a release of the next timeline value, waiting for idle and writing
    /// the GPU timestamp as `how` says; returns the value.
    ///
    /// # Errors
    /// As [`Channel::release`].
    pub fn release_with(&mut self, how: method::Release) -> Result<u64, ChannelError> {
        let v = self
            .timeline
            .last()
            .checked_add(1)
            .ok_or(TimelineError::Exhausted)?;
        self.push(&method::release_with(self.semaphore_va(), v, how)?)?;
        self.timeline.advance()?;
        Ok(v)
    }

    /// Appends a release of `value`, which must not be below the last one: a
    /// timeline never moves backwards, so a smaller value is refused before it is
    /// written.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] (`Backwards`), as [`Channel::push`].
    pub fn release_value(&mut self, value: u64) -> Result<u64, ChannelError> {
        if value < self.timeline.last() {
            return Err(TimelineError::Backwards {
                value,
                last: self.timeline.last(),
            }
            .into());
        }
        self.push(&method::release(self.semaphore_va(), value)?)?;
        self.timeline.promise(value)?;
        Ok(value)
    }

    /// Appends a copy of `bytes` from `src` to `dst` (GPU addresses in this session's
    /// leases) on a copy channel, flushed before the next release.
    ///
    /// # Errors
    /// As [`Channel::push`]; [`ChannelError::Method`] for a length over 2^32 - 1.
    pub fn copy(&mut self, src: u64, dst: u64, bytes: u64) -> Result<(), ChannelError> {
        self.push(&method::copy_flushed(src, dst, bytes)?)
    }

    /// Puts every closed segment in the ring, then fence, GP_PUT, doorbell. No
    /// syscall; GP_GET is read only when the ring looks full.
    ///
    /// # Errors
    /// [`ChannelError::RingFull`] when the GPU has fetched nothing since the ring
    /// filled (the segments stay queued: wait, then submit again).
    pub fn submit(&mut self) -> Result<(), ChannelError> {
        if let Some(seg) = self.pb.close() {
            self.queued.push_back(seg);
        }
        let mut end = None;
        while let Some(seg) = self.queued.front().copied() {
            if self.ring.free() == 0 {
                let get = self
                    .gpfifo
                    .read_u32(self.userd + USERD_GP_GET)
                    .map_err(map_err(self.id, "USERD"))?;
                self.ring.update_get(get)?;
                if self.ring.free() == 0 {
                    return Err(ChannelError::RingFull {
                        channel: self.id,
                        entries: self.ring.entries(),
                    });
                }
            }
            let slot = self.ring.push()?;
            self.gpfifo
                .write_u64(slot as usize * 8, ring::entry(seg.va, seg.words)?)
                .map_err(map_err(self.id, "its ring"))?;
            self.queued.pop_front();
            end = Some(seg.end);
        }
        let Some(end) = end else {
            return Ok(());
        };
        let last = self.timeline.last();
        if last > self.recorded {
            self.in_flight.push_back((last, end));
            self.recorded = last;
        }
        // Entries and commands before GP_PUT, GP_PUT before the doorbell
        // (docs/hardware/nvidia-channels.md, "Before a doorbell"). Host memory: x86
        // keeps cached stores in order, the fence orders the compiler and weaker
        // machines. BAR1: write-combined stores may land in any order, so a store
        // fence each side of GP_PUT; no read-back, since GP_PUT itself is in GPU
        // memory (NVIDIA's UVM reads BAR1 back only when GP_PUT is in host memory:
        // `uvm_hal_volta_host_write_gpu_put`, uvm_volta_host.c).
        match self.rings {
            Rings::Host => fence(Ordering::Release),
            Rings::Gpu => mman::store_fence(),
        }
        self.gpfifo
            .write_u32(self.userd + USERD_GP_PUT, self.ring.put())
            .map_err(map_err(self.id, "USERD"))?;
        match self.rings {
            Rings::Host => fence(Ordering::SeqCst),
            Rings::Gpu => mman::store_fence(),
        }
        self.doorbell
            .write_u32(self.doorbell_offset, self.token)
            .map_err(map_err(self.id, "its doorbell"))?;
        Ok(())
    }

    /// Spins until the timeline reaches `value`, for at most `timeout`; a fault the
    /// RM posts ends the wait with its reason. Then what the work used of the
    /// pushbuffer is free again.
    ///
    /// # Errors
    /// [`ChannelError::Fault`], [`ChannelError::Timeout`],
    /// [`ChannelError::Timeline`] for a value never promised.
    pub fn wait(&mut self, value: u64, timeout: Duration) -> Result<(), ChannelError> {
        let start = Instant::now();
        let mut every = REKICK_AFTER;
        let mut kick = start + every;
        let mut spins = 0u32;
        loop {
            let current = self.sem.read_u64(0)?;
            if self.timeline.reached(value, current)? {
                self.retire(current)?;
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(FAULT_CHECK_SPINS) {
                if self.rings == Rings::Gpu && Instant::now() >= kick {
                    self.rekick()?;
                    every = (every * 2).min(REKICK_MAX);
                    kick = Instant::now() + every;
                }
                if let Some(fault) = self.fault() {
                    return Err(ChannelError::Fault {
                        channel: self.id,
                        fault,
                    });
                }
                if start.elapsed() > timeout {
                    let userd = |o| self.gpfifo.read_u32(self.userd + o).unwrap_or(u32::MAX);
                    return Err(ChannelError::Timeout {
                        channel: self.id,
                        value,
                        waited: start.elapsed(),
                        current,
                        gp_get: userd(USERD_GP_GET),
                        gp_put: userd(USERD_GP_PUT),
                    });
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Rings the doorbell again if the GPU has not fetched every entry submitted (one
    /// read of GP_GET through BAR1).
    fn rekick(&mut self) -> Result<(), ChannelError> {
        let get = self
            .gpfifo
            .read_u32(self.userd + USERD_GP_GET)
            .map_err(map_err(self.id, "USERD"))?;
        if get != self.ring.put() {
            self.doorbell
                .write_u32(self.doorbell_offset, self.token)
                .map_err(map_err(self.id, "its doorbell"))?;
            self.rekicks += 1;
        }
        Ok(())
    }

    fn retire_completed(&mut self) -> Result<(), ChannelError> {
        let current = self.sem.read_u64(0)?;
        self.retire(current)
    }

    /// Frees the pushbuffer words of every submission whose value has landed.
    fn retire(&mut self, current: u64) -> Result<(), ChannelError> {
        let mut end = None;
        while let Some(&(v, e)) = self.in_flight.front() {
            if v > current {
                break;
            }
            end = Some(e);
            self.in_flight.pop_front();
        }
        if let Some(e) = end {
            self.pb.retire(e)?;
        }
        Ok(())
    }
}
