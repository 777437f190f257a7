//! A channel rigd lends on an RM-served GPU: [`Channel`] owns its ring and USERD, a
//! read-only view of its error notifier, its doorbell (the usermode page rigd mapped
//! through an unregistered `/dev/nvidiaN`), a pushbuffer, an optional arena (memory the
//! GPU reads beside the pushbuffer: a runtime's launch descriptors and constant banks)
//! and a 64-bit timeline semaphore in the session's own leased memory.
//!
//! Where the ring lives is the client's choice ([`Rings`]): in host memory (the memfd
//! rigd sent; the pushbuffer and arena are then the session's leases), or in GPU memory
//! the client maps through BAR1 (one window holding ring, USERD, pushbuffer and arena,
//! for the uids rigd allows): the GPU then fetches none of them across PCIe, which on
//! the H200 shortens an empty round trip by about a third (docs/BENCHMARKS.md), at
//! the price of write-combined stores and two store fences per submission.
//!
//! Completion is released by the engine that did the work (docs/channels.md,
//! "Completion"): a copy's value by the copy engine in the copy's own LAUNCH_DMA
//! ([`Channel::copy`]), a launch's by its QMD's release slot (rig-runtime builds the
//! QMD and hands its words to [`Channel::push_released`]); [`Channel::release`] adds
//! nothing when the last command already releases, and a release of the engine's own
//! otherwise. A host release ([`Channel::release_with`]) says only that the channel
//! got there: on the H200 one landed after work the engine had refused
//! (docs/hardware/nvidia-channels.md, "Privilege and refused work"); it is what an
//! empty submission's round trip measures. The copy engine writes 32 bits of the value
//! and the wait compares them circularly (`timeline::extend`); a wait that sees its
//! value also reads the notifier, so work that faulted never reads as done.
//!
//! Hot path ([`Channel::submit`]): ring entries for the closed segments, a store
//! fence, GP_PUT in USERD, (a store fence, for BAR1), the doorbell — loads and stores
//! only, no syscall, no lock shared with anyone. GP_GET is read only when the ring
//! looks full; the semaphore and the notifier only while waiting ([`Channel::wait`]),
//! the notifier every [`FAULT_CHECK_SPINS`] spins and once when the value lands; past
//! [`YIELD_AFTER`], each of those checks also yields the CPU, and where the wait policy
//! says, the wait sleeps until the GPU's interrupt instead (`sleep`).
//!
//! Not here: opening and closing (`open`: requests on the session's side socket, the
//! pushbuffer, arena and semaphore from the session's ledger), copies and releases
//! (`work`), where the memory lies (`mem`); the rules of each piece (segments, ring
//! fullness, the timeline) are `pushbuf`'s, `ring`'s and `timeline`'s; rigd's listing
//! of every channel is `status`'s.

use std::{
    collections::VecDeque,
    io,
    sync::atomic::{Ordering, fence},
    time::{Duration, Instant},
};

use rig_model::addr::GpuVa;

use rig_sys::mman::{self, DeviceMapping, ReadMapping};

use super::{
    MethodError, PushbufError, Pushbuffer, RingError, Segment, TimelineError,
    mem::{Beside, BesideError, RingView, Rings},
    ring::{self, Ring, USERD_GP_GET, USERD_GP_PUT},
    sleep::{BLOCK_SLICE, Phase},
    timeline::{Payload, Timeline, extend},
};
use crate::session::{Buffer, SessionError, SessionId};
use rig_nv::method::{self, ComputeError, CopyError};

/// How many spins of a wait go between reads of the error notifier.
pub const FAULT_CHECK_SPINS: u32 = 256;

/// How long a wait spins alone before it also yields the CPU at each notifier check:
/// past a few round trips the GPU is busy elsewhere (another client's context, a long
/// kernel), and a process sharing this CPU may be the one whose work has landed. On a
/// CPU of its own, `sched_yield` returns at once (docs/channels.md, "Waiting").
pub const YIELD_AFTER: Duration = Duration::from_micros(50);
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

/// The engine a channel drives: the shared vocabulary's, put on and read from the
/// wire by `rig-proto`.
pub use rig_model::nv::Engine;

/// The GPU generation whose classes a lent channel binds: rigd serves Hopper GPUs only
/// (its `nvrm` refuses a GPU without Hopper's classes), so the wire does not carry one
/// yet; serving a second generation adds it there and here.
pub const GENERATION: rig_nv::Generation = rig_nv::generation::HOPPER;

/// The SET_OBJECT that binds an engine's class to its subchannel: copy on 4, compute
/// on 1.
pub(super) trait SetObject {
    fn set_object(self) -> [u32; 2];
}

impl SetObject for Engine {
    fn set_object(self) -> [u32; 2] {
        method::bind(&GENERATION, self)
    }
}

/// How wide the releases of `engine`'s work are: the copy engine's semaphore payload
/// is one word (clc8b5.h of 580), a QMD's release slot two (TWO_WORDS with PAYLOAD64B,
/// docs/hardware/nvidia-compute.md, "Completion").
pub(super) fn payload_of(engine: Engine) -> Payload {
    match engine {
        Engine::Copy => Payload::Word32,
        Engine::Compute => Payload::Word64,
    }
}

/// `; its methods wait on the GPU for channel C's value V, ...`, or nothing.
fn waits_on_line(waits_on: &[(u64, u64)]) -> String {
    if waits_on.is_empty() {
        return String::new();
    }
    let each: Vec<String> = waits_on
        .iter()
        .map(|(c, v)| format!("channel {c}'s value {v}"))
        .collect();
    format!("; its methods wait on the GPU for {}", each.join(", "))
}

/// The error the RM posted in a channel's notifier (its `reason()` names the
/// ROBUST_CHANNEL_* code): the shared vocabulary's.
pub use rig_model::nv::ChannelFault as Fault;

/// What a lent channel's calls can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("Channel {channel}: the GPU stopped it: {} (info32 {}, info16 {:#x})", .fault.reason(), .fault.info32, .fault.info16)]
    Fault { channel: u64, fault: Fault },
    #[error(
        "Channel {channel}: timeline value {value} did not land within {waited:?} (the semaphore reads {current}, GP_GET {gp_get}, GP_PUT {gp_put}; no error posted{})",
        waits_on_line(.waits_on)
    )]
    Timeout {
        channel: u64,
        value: u64,
        waited: Duration,
        current: u64,
        gp_get: u32,
        gp_put: u32,
        /// (channel, value) of each other channel this one's methods wait for on the
        /// GPU (`Channel::acquire`): the largest value acquired of each.
        waits_on: Vec<(u64, u64)>,
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
    Copy(#[from] CopyError),
    #[error(transparent)]
    Compute(#[from] ComputeError),
    #[error(transparent)]
    Timeline(#[from] TimelineError),
    #[error("Channel {channel} drives the {engine:?} engine; this needs the {needs:?} engine")]
    WrongEngine {
        channel: u64,
        engine: Engine,
        needs: Engine,
    },
    #[error(
        "Channel {channel}: words pushed since the last release may be a launch, which only its QMD's release completes; launch through rig-runtime, or use `release_with` for a host release (it says only that the channel got there)"
    )]
    Unreleased { channel: u64 },
    #[error(
        "Channel {channel}: value {value} cannot be chained behind {after}: that is not the last command, queued and not yet submitted"
    )]
    NotChainable {
        channel: u64,
        after: u64,
        value: u64,
    },
    #[error(
        "Channel {channel}: {words} words at arena byte {offset}: the arena is {len} bytes and words are written 8-aligned"
    )]
    Arena {
        channel: u64,
        offset: u64,
        words: usize,
        len: u64,
    },
    #[error("Channel {channel}: failed to map {what}")]
    Map {
        channel: u64,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "Channel {channel} (session {session}) cannot wait for channel {of} of session {of_session}: waits on the GPU stay inside one session's address space"
    )]
    ForeignFence {
        channel: u64,
        session: u64,
        of: u64,
        of_session: u64,
    },
    #[error("rigd's channel reply does not follow the protocol: {0}")]
    Protocol(&'static str),
}

/// A channel of this process's own, on an RM-served GPU. Give it back with
/// [`Channel::close`]; one only dropped stays open in rigd (counting against
/// the session's limit) until the session ends. Its pushbuffer, arena and semaphore
/// memory go back to the session when it drops, unless work it submitted has not
/// completed: then they stay out of use until the session ends, since the GPU may still
/// read and write them.
#[derive(Debug)]
pub struct Channel {
    pub(super) id: u64,
    /// The session it was opened in: its GPU addresses mean something there only.
    pub(super) session: SessionId,
    pub(super) engine: Engine,
    pub(super) token: u32,
    pub(super) doorbell_offset: usize,
    pub(super) ring_gpu_va: GpuVa,
    pub(super) rings: Rings,
    // Field order: mappings go before the buffers their GPU addresses name.
    pub(super) gpfifo: RingView,
    pub(super) userd: usize,
    pub(super) notifier: ReadMapping,
    pub(super) doorbell: DeviceMapping,
    pub(super) ring: Ring,
    pub(super) pb: Pushbuffer,
    pub(super) pb_mem: Beside,
    pub(super) arena: Beside,
    pub(super) arena_va: Option<GpuVa>,
    pub(super) arena_len: u64,
    pub(super) sem: Buffer,
    /// The semaphore's GPU address, checked at open.
    pub(super) sem_va: GpuVa,
    pub(super) timeline: Timeline,
    /// How wide the engine's releases are.
    pub(super) payload: Payload,
    /// Every value up to here is known to have landed.
    pub(super) settled: u64,
    /// The last command pushed releases this value by the engine that runs it (a copy's
    /// LAUNCH_DMA, a launch's QMD): [`Channel::release`] returns it and adds nothing.
    pub(super) tail_release: Option<u64>,
    /// Words were pushed with [`Channel::push`] since the last engine release.
    pub(super) unreleased: bool,
    /// Closed segments not yet in the ring.
    pub(super) queued: VecDeque<Segment>,
    /// (timeline value, pushbuffer end) per submission that released a new value,
    /// oldest first: once the value lands, the words before the end are free. Words
    /// submitted without a release wait for the next one's.
    pub(super) in_flight: VecDeque<(u64, u64)>,
    /// The largest value `in_flight` has held.
    pub(super) recorded: u64,
    /// Doorbells rung again by waits (rings in GPU memory).
    pub(super) rekicks: u64,
    /// The largest value of each other channel this one's methods already wait for
    /// (`fence`): a later acquire of no more is implied.
    pub(super) acquired: Vec<(u64, u64)>,
    /// rigd closed it: the GPU no longer runs its work.
    pub(super) drained: bool,
    /// The wake descriptor rigd signals on the GPU's non-stall interrupts, if it sent
    /// one (`sleep`).
    pub(super) wake: Option<rig_sys::wake::Wake>,
    /// The wake word rigd reads to know an interrupt is this channel's, if it said
    /// where (`sleep`).
    pub(super) wake_va: Option<GpuVa>,
    /// How waits spend their time.
    pub(super) policy: super::WaitPolicy,
    /// The largest value an interrupt was armed for.
    pub(super) armed: u64,
    /// Arms so far.
    pub(super) interrupts: u64,
    /// Sleeps so far.
    pub(super) sleeps: u64,
    /// Values that landed with no wake (`sleep`), in all and in a row.
    pub(super) missed_wakes: u64,
    pub(super) missed_in_a_row: u32,
}

impl Drop for Channel {
    fn drop(&mut self) {
        // Work still in flight may yet read the pushbuffer and arena and write the
        // semaphore.
        let done = self.completed().is_ok_and(|v| v >= self.timeline.last());
        if !self.drained && !done {
            self.pb_mem.keep_out();
            self.arena.keep_out();
            self.sem.keep_out();
        }
    }
}

pub(super) fn map_err(channel: u64, what: &'static str) -> impl FnOnce(io::Error) -> ChannelError {
    move |source| ChannelError::Map {
        channel,
        what,
        source,
    }
}

impl BesideError {
    pub(super) fn into_channel(self, channel: u64, what: &'static str) -> ChannelError {
        match self {
            BesideError::Range => ChannelError::Protocol("a write outside the channel's memory"),
            BesideError::Session(e) => e.into(),
            BesideError::Map(e) => map_err(channel, what)(e),
        }
    }
}

impl Channel {
    /// rigd's handle of the channel (what `rigctl channels` shows).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The session the channel was opened in.
    pub fn session(&self) -> SessionId {
        self.session
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
    pub fn ring_gpu_va(&self) -> GpuVa {
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

    /// The segments of the last `n` ring entries submitted, oldest first, as (GPU VA,
    /// words): what the GPU fetches (tests and debugging read them back).
    ///
    /// # Errors
    /// [`ChannelError::Map`] when the ring cannot be read.
    pub fn submitted(&self, n: u32) -> Result<Vec<(GpuVa, u32)>, ChannelError> {
        let entries = self.ring.entries();
        let word = |at: usize| {
            self.gpfifo
                .read_u32(at)
                .map_err(map_err(self.id, "its ring"))
        };
        (0..n.min(entries - 1))
            .rev()
            .map(|back| {
                let slot = self.ring.put().wrapping_sub(back + 1) & (entries - 1);
                let at = slot as usize * 8;
                let (lo, hi) = (word(at)?, word(at + 4)?);
                Ok(ring::decode(u64::from(lo) | u64::from(hi) << 32))
            })
            .collect()
    }

    /// The timeline semaphore's GPU address (value at +0, timestamp at +8).
    pub fn semaphore_va(&self) -> GpuVa {
        self.sem_va
    }

    /// The wake word's GPU address, where an arm releases its value before its
    /// interrupt so that rigd wakes this channel only for its own; none where rigd
    /// gave none (then every interrupt on the GPU wakes it).
    pub fn wake_word_va(&self) -> Option<GpuVa> {
        self.wake_va
    }

    /// How many bits of a value this channel's engine releases (32 on a copy channel).
    pub fn payload(&self) -> Payload {
        self.payload
    }

    /// The largest timeline value promised so far.
    pub fn last_value(&self) -> u64 {
        self.timeline.last()
    }

    /// The timeline as the GPU last wrote it: the largest value landed (a copy
    /// engine's 32-bit release read as the value in flight it stands for).
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`] (cannot happen for the channel's own semaphore).
    pub fn completed(&self) -> Result<u64, ChannelError> {
        let raw = self.sem.read_u64(0)?;
        Ok(extend(self.payload, self.settled, self.timeline.last(), raw).max(self.settled))
    }

    /// As [`Channel::completed`], remembering what landed.
    pub(super) fn settle(&mut self) -> Result<u64, ChannelError> {
        let c = self.completed()?;
        self.settled = c;
        Ok(c)
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
    /// what completed work used; if still full, [`ChannelError::PushbufferFull`]. The
    /// words count as work no engine release covers yet: on a compute channel
    /// [`Channel::release`] then refuses ([`ChannelError::Unreleased`]).
    ///
    /// # Errors
    /// [`ChannelError::Pushbuffer`] for a command too long,
    /// [`ChannelError::PushbufferFull`].
    pub fn push(&mut self, words: &[u32]) -> Result<(), ChannelError> {
        self.push_words(words)?;
        self.tail_release = None;
        self.unreleased = true;
        Ok(())
    }

    /// [`Channel::push`] without the bookkeeping of what releases it.
    pub(super) fn push_words(&mut self, words: &[u32]) -> Result<(), ChannelError> {
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
        self.pb_mem
            .write_u32s(&self.gpfifo, u64::from(r.at) * 4, words)
            .map_err(|e| e.into_channel(self.id, "its pushbuffer"))?;
        if self.pb.must_close()
            && let Some(seg) = self.pb.close()
        {
            self.queued.push_back(seg);
        }
        Ok(())
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
        // Entries, commands and arena words before GP_PUT, GP_PUT before the doorbell
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

    /// Waits until the timeline reaches `value`, for at most `timeout`, as the
    /// channel's [`WaitPolicy`](super::WaitPolicy) says (spinning, yielding, or asleep
    /// until the GPU's interrupt: `sleep`); a fault the RM posts ends the wait with its
    /// reason, also one posted by the time the value lands. Then what the work used of
    /// the pushbuffer is free again.
    ///
    /// # Errors
    /// [`ChannelError::Fault`], [`ChannelError::Timeout`],
    /// [`ChannelError::Timeline`] for a value never promised.
    pub fn wait(&mut self, value: u64, timeout: Duration) -> Result<(), ChannelError> {
        let start = Instant::now();
        let mut every = REKICK_AFTER;
        let mut kick = start + every;
        let mut spins = 0u32;
        let mut asleep = false;
        loop {
            let current = self.settle()?;
            if self.timeline.reached(value, current)? {
                // Work that faulted never reads as done: whatever landed, a posted
                // error wins.
                if let Some(fault) = self.fault() {
                    return Err(ChannelError::Fault {
                        channel: self.id,
                        fault,
                    });
                }
                self.retire(current)?;
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if asleep || spins.is_multiple_of(FAULT_CHECK_SPINS) {
                // One clock read serves the policy, the rekick and the timeout.
                let now = Instant::now();
                let waited = now - start;
                match self.policy.phase(waited, YIELD_AFTER) {
                    Phase::Spin => {}
                    Phase::Yield => std::thread::yield_now(),
                    Phase::Block => {
                        let mut slice = BLOCK_SLICE.min(timeout.saturating_sub(waited));
                        if self.rings == Rings::Gpu {
                            slice = slice.min(kick.saturating_duration_since(now));
                        }
                        asleep = self.sleep(value, slice)?;
                        if !asleep {
                            std::thread::yield_now();
                        }
                    }
                }
                if self.rings == Rings::Gpu && now >= kick {
                    self.rekick()?;
                    every = (every * 2).min(REKICK_MAX);
                    kick = now + every;
                }
                if let Some(fault) = self.fault() {
                    return Err(ChannelError::Fault {
                        channel: self.id,
                        fault,
                    });
                }
                if waited > timeout {
                    let userd = |o| self.gpfifo.read_u32(self.userd + o).unwrap_or(u32::MAX);
                    return Err(ChannelError::Timeout {
                        channel: self.id,
                        value,
                        waited: start.elapsed(),
                        current,
                        gp_get: userd(USERD_GP_GET),
                        gp_put: userd(USERD_GP_PUT),
                        waits_on: self.acquired.clone(),
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
        let current = self.settle()?;
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
