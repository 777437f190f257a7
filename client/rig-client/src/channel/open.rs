//! Opening and closing a lent channel: the request on the session's side socket,
//! the memory asked of the session first (pushbuffer, arena and semaphore leases, so a
//! refusal leaves nothing behind in rigd), and the reply's layout checked before
//! anything is mapped: the ring memfd (sealed) or the window in GPU memory, USERD,
//! the notifier and the doorbell page.
//!
//! Flow: [`Channel::open`] and its variants → [`Channel::open_opts`] → `Request::
//! ChannelOpen` → `Reply::ChannelOpened` with three descriptors, and a fourth, the wake
//! descriptor, where rigd watches the GPU's interrupts (docs/channels.md, "On the
//! wire") → the `Channel` of `lent`, whose first command binds the engine's class.
//! [`Channel::close`] asks rigd to deschedule, drain and free it, then frees the memory
//! here. Not here: submitting and waiting (`lent`), releases and copies (`work`).

use std::{
    collections::VecDeque,
    num::NonZeroUsize,
    os::fd::{AsFd, OwnedFd},
};

use rig_model::addr::GpuVa;
use rig_proto::{convert::WireEnum, v1 as pb};
use rig_sys::{
    memfd::SealedMemfd,
    mman::{DeviceMapping, Fill, Mapping, ReadMapping},
};

use super::{
    Pushbuffer,
    lent::{Channel, ChannelError, DEFAULT_PUSHBUFFER, Engine, SetObject, map_err, payload_of},
    mem::{Beside, RingView, Rings},
    ring::Ring,
    timeline::Timeline,
};
use crate::session::{Addressing, Buffer, Reply, Request, Session, SessionError, SessionErrorKind};

/// Alignment of a channel's arena and of its size: a QMD's (SEND_PCAS takes its
/// address in 256-byte units).
pub const ARENA_ALIGN: u64 = 256;

/// How a channel is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Ring entries: a power of two up to rigd's `[channels] max_ring_entries`.
    pub entries: u64,
    /// Pushbuffer bytes, a multiple of 4.
    pub pushbuffer: u64,
    /// Arena bytes, a multiple of [`ARENA_ALIGN`] (0: none): memory the GPU reads that
    /// only this process writes ([`Channel::write_arena`]), where the ring's window is
    /// with [`Rings::Gpu`], a lease of the session's otherwise.
    pub arena: u64,
    /// Where the ring, USERD, pushbuffer and arena live.
    pub rings: Rings,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            entries: 1024,
            pushbuffer: DEFAULT_PUSHBUFFER,
            arena: 0,
            rings: Rings::Host,
        }
    }
}

/// What a channel's reply says about the memory beside its ring, checked.
struct Layout {
    gpfifo: RingView,
    pb_mem: Beside,
    pb: Pushbuffer,
    arena: Beside,
    arena_va: Option<GpuVa>,
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
        let o = Options {
            entries,
            pushbuffer,
            arena: 0,
            rings,
        };
        Self::open_opts(session, engine, o).await
    }

    /// Opens a channel as `o` says. With [`Rings::Gpu`] the window holds the arena
    /// after the pushbuffer, so rigd's `[channels] gpu_ring_bytes` bounds both together.
    ///
    /// # Errors
    /// As [`Channel::open_in`]; [`ChannelError::Arena`] for an arena size that is no
    /// multiple of [`ARENA_ALIGN`].
    pub async fn open_opts(
        session: &Session,
        engine: Engine,
        o: Options,
    ) -> Result<Self, ChannelError> {
        if session.addressing() != Addressing::GpuVa {
            return Err(SessionError::refused(
                SessionErrorKind::NotServed,
                "Channels are lent on RM-served GPUs only: this session's device gives no GPU addresses",
            )
            .into());
        }
        if !o.arena.is_multiple_of(ARENA_ALIGN) {
            return Err(ChannelError::Arena {
                channel: 0,
                offset: 0,
                words: 0,
                len: o.arena,
            });
        }
        // In the window the arena follows the pushbuffer, at its own alignment.
        let pb_span = match o.arena {
            0 => o.pushbuffer,
            _ => o.pushbuffer.next_multiple_of(ARENA_ALIGN) + ARENA_ALIGN + o.arena,
        };
        // Memory first: a refusal here leaves no channel behind in rigd.
        let leases = match o.rings {
            Rings::Host => {
                let arena = match o.arena {
                    0 => None,
                    n => Some(session.alloc(n, ARENA_ALIGN).await?),
                };
                Some((session.alloc(o.pushbuffer, 4096).await?, arena))
            }
            Rings::Gpu => None,
        };
        let sem = session.alloc(16, 16).await?;
        let sem_va = sem.gpu_va().ok_or(ChannelError::Protocol(
            "a channel's session has no GPU addresses",
        ))?;
        // A semaphore from reused session memory may hold an old value.
        sem.write_u64(0, 0)?;
        sem.write_u64(8, 0)?;
        let (reply, fds) = session
            .call(Request::ChannelOpen(pb::ChannelOpen {
                engine: engine.wire().into(),
                entries: o.entries,
                rings: o.rings.wire().into(),
                pushbuffer_bytes: pb_span,
            }))
            .await?;
        let Reply::ChannelOpened(r) = reply else {
            return Err(ChannelError::Protocol(
                "an open must be answered `channel_opened`",
            ));
        };
        let mut fds = fds.into_iter();
        let (Some(ring_fd), Some(notifier_fd), Some(usermode_fd)) =
            (fds.next(), fds.next(), fds.next())
        else {
            return Err(ChannelError::Protocol(
                "an opened channel carries three descriptors",
            ));
        };
        let wake = fds.next().map(rig_sys::wake::Wake::from);
        if wake.is_some() != r.wake || fds.next().is_some() {
            return Err(ChannelError::Protocol(
                "an opened channel carries three descriptors, and a wake descriptor when it says so",
            ));
        }
        let id = r.channel;
        // The wake word: 8 bytes past USERD inside the ring's file, only beside a wake
        // descriptor (rig_client::channel::sleep's arm releases into it).
        let wake_at = match r.wake_offset {
            0 => None,
            at if wake.is_some()
                && at % 8 == 0
                && at >= r.userd_offset + 512
                && at.checked_add(8).is_some_and(|end| end <= r.ring_bytes) =>
            {
                Some(at)
            }
            _ => {
                return Err(ChannelError::Protocol(
                    "the wake word lies outside the ring's file past USERD, or without a wake descriptor",
                ));
            }
        };
        if Rings::from_wire(r.rings) != Some(o.rings) {
            return Err(ChannelError::Protocol(
                "the channel's rings are not where they were asked for",
            ));
        }
        let notifier_file = SealedMemfd::check(notifier_fd).map_err(SessionError::Unsealed)?;
        let userd =
            usize::try_from(r.userd_offset).map_err(|_| ChannelError::Protocol("USERD offset"))?;
        if r.userd_offset + 512 > r.ring_bytes {
            return Err(ChannelError::Protocol("USERD lies past the ring's end"));
        }
        let usermode_len = usize::try_from(r.usermode_bytes)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or(ChannelError::Protocol("usermode size"))?;
        let doorbell_offset = usize::try_from(r.doorbell_offset)
            .ok()
            .filter(|d| d % 4 == 0 && d + 4 <= usermode_len.get())
            .ok_or(ChannelError::Protocol("doorbell offset"))?;
        let layout = match leases {
            Some((pb, arena)) => host_layout(id, &r, ring_fd, o, pb, arena)?,
            None => window_layout(id, &r, &ring_fd, o, userd, pb_span)?,
        };
        // WAKE_OPENED says this client's arms write the word (value + 1), so rigd
        // passes the channel over until one does, instead of waking it on every
        // interrupt as it must a client that never writes it (0).
        let wake_va = match wake_at {
            Some(at) => {
                let at = usize::try_from(at).map_err(|_| ChannelError::Protocol("wake offset"))?;
                layout
                    .gpfifo
                    .write_u64(at, super::sleep::WAKE_OPENED)
                    .map_err(map_err(id, "its wake word"))?;
                Some(GpuVa(r.ring_gpu_va + at as u64))
            }
            None => None,
        };
        let notifier =
            ReadMapping::shared(&notifier_file).map_err(map_err(id, "its error notifier"))?;
        let doorbell = DeviceMapping::map(usermode_fd.as_fd(), usermode_len)
            .map_err(map_err(id, "its doorbell page"))?;
        let engine = Engine::from_wire(r.engine).unwrap_or(engine);
        let mut ch = Self {
            id,
            session: session.id(),
            engine,
            token: r.token,
            doorbell_offset,
            ring_gpu_va: GpuVa(r.ring_gpu_va),
            rings: o.rings,
            gpfifo: layout.gpfifo,
            userd,
            notifier,
            doorbell,
            ring: Ring::new(u64::from(r.entries))?,
            pb: layout.pb,
            pb_mem: layout.pb_mem,
            arena: layout.arena,
            arena_va: layout.arena_va,
            arena_len: o.arena,
            sem,
            sem_va,
            timeline: Timeline::new(),
            payload: payload_of(engine),
            settled: 0,
            tail_release: None,
            unreleased: false,
            queued: VecDeque::new(),
            in_flight: VecDeque::new(),
            recorded: 0,
            rekicks: 0,
            acquired: Vec::new(),
            drained: false,
            wake,
            wake_va,
            policy: super::WaitPolicy::default(),
            armed: 0,
            interrupts: 0,
            sleeps: 0,
            missed_wakes: 0,
            missed_in_a_row: 0,
        };
        ch.push_words(&engine.set_object())?;
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
}

/// Rings in host memory: the ring memfd mapped here, the pushbuffer and arena leases.
fn host_layout(
    id: u64,
    r: &pb::ChannelOpened,
    ring_fd: OwnedFd,
    o: Options,
    pb_lease: Buffer,
    arena: Option<Buffer>,
) -> Result<Layout, ChannelError> {
    let ring_file = SealedMemfd::check(ring_fd).map_err(SessionError::Unsealed)?;
    if ring_file.len() != r.ring_bytes {
        return Err(ChannelError::Protocol(
            "the ring file is not as long as the reply says",
        ));
    }
    let m = Mapping::shared(&ring_file, Fill::Populate).map_err(map_err(id, "its ring"))?;
    let no_va = ChannelError::Protocol("a channel's session has no GPU addresses");
    let pb_va = pb_lease.gpu_va().ok_or(no_va)?;
    let pb = Pushbuffer::new(pb_va, o.pushbuffer / 4)?;
    let arena_va = match &arena {
        Some(a) => Some(a.gpu_va().ok_or(ChannelError::Protocol(
            "a channel's session has no GPU addresses",
        ))?),
        None => None,
    };
    Ok(Layout {
        gpfifo: RingView::Host(m),
        pb_mem: Beside::Lease(pb_lease),
        pb,
        arena: arena.map_or(Beside::None, Beside::Lease),
        arena_va,
    })
}

/// Rings in GPU memory: one window through BAR1 holding ring, USERD, pushbuffer and
/// arena, of which the reply gives the pushbuffer's part (`span` bytes were asked).
fn window_layout(
    id: u64,
    r: &pb::ChannelOpened,
    ring_fd: &OwnedFd,
    o: Options,
    userd: usize,
    span: u64,
) -> Result<Layout, ChannelError> {
    let len = usize::try_from(r.ring_bytes)
        .ok()
        .and_then(NonZeroUsize::new)
        .ok_or(ChannelError::Protocol("window size"))?;
    let at = usize::try_from(r.pushbuffer_offset)
        .ok()
        .filter(|&at| {
            at.is_multiple_of(4)
                && at >= userd + 512
                && r.pushbuffer_bytes >= span
                && r.pushbuffer_offset + r.pushbuffer_bytes <= r.ring_bytes
        })
        .ok_or(ChannelError::Protocol(
            "the pushbuffer lies outside the window",
        ))?;
    let m = DeviceMapping::map(ring_fd.as_fd(), len)
        .map_err(map_err(id, "its window in GPU memory"))?;
    let pb = Pushbuffer::new(GpuVa(r.pushbuffer_gpu_va), o.pushbuffer / 4)?;
    let (arena, arena_va) = match o.arena {
        0 => (Beside::None, None),
        bytes => {
            // The first aligned VA past the pushbuffer; `span` left room for the skip.
            let va = (r.pushbuffer_gpu_va + o.pushbuffer).next_multiple_of(ARENA_ALIGN);
            let skip = va - r.pushbuffer_gpu_va;
            let base = usize::try_from(r.pushbuffer_offset + skip)
                .map_err(|_| ChannelError::Protocol("arena offset"))?;
            if skip + bytes > r.pushbuffer_bytes {
                return Err(ChannelError::Protocol("the arena lies outside the window"));
            }
            (Beside::Window { base, len: bytes }, Some(GpuVa(va)))
        }
    };
    Ok(Layout {
        gpfifo: RingView::Gpu(m),
        pb_mem: Beside::Window {
            base: at,
            len: o.pushbuffer,
        },
        pb,
        arena,
        arena_va,
    })
}
