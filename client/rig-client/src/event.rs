//! Events shared between sessions of one uid on an RM-served GPU, the role of CUDA's
//! IPC events (`cudaIpcGetEventHandle` / `cudaIpcOpenEventHandle`): one session
//! exports an event ([`ExportedEvent::export`]) and passes its token to another
//! process of the same uid by any means it likes; that process's session imports it
//! ([`ImportedEvent::import`]), and its channels wait on the GPU for the exporter's
//! records ([`ImportedEvent::acquire_on`]), or its host does ([`ImportedEvent::wait`]).
//!
//! The event is one 4 KiB page rigd maps into both sessions' GPU address spaces
//! (read-only for importers) and hands to both as a file (proto/rig/v1/event.proto;
//! the words are `rig_model::nv::shared_event`'s). A record
//! ([`ExportedEvent::record`]) writes the next value into the page's `target` from the
//! CPU, then pushes a host release of it with the GPU's time (after the engine idled)
//! and submits, so the value is on its way before any importer can read it as its
//! target: no wait made here waits for work never sent. An importer waits for the
//! `target` it reads when it asks, as CUDA's `cuStreamWaitEvent` waits for the last
//! record before the call.
//!
//! When the exporter ends (or closes the event), rigd writes how far its work got and
//! lets every GPU wait pass: a wait that passed that way is
//! [`EventError::ExporterGone`] here, never a hang ([`ImportedEvent::check`]). A token
//! of another uid, or one never given, is refused by rigd; so is an import after the
//! exporter went ([`SessionErrorKind::EventGone`](crate::session::SessionErrorKind)).
//!
//! Not here: the words (rig-nv's `method::release_with` and `method::acquire`), the
//! channel's own waits (`channel`), the runtime's streams (rig-runtime).

use std::{
    os::fd::OwnedFd,
    time::{Duration, Instant},
};

use rig_model::{
    addr::GpuVa,
    nv::shared_event::{BYTES, GONE, REACHED, STATE, TARGET, TIME, VALUE},
};
use rig_nv::method;
use rig_proto::v1::{self as pb, session_reply::Body as Reply, session_request::Body as Request};
use rig_sys::{
    memfd::SealedMemfd,
    mman::{Fill, Mapping, ReadMapping},
};

use crate::{
    channel::{Channel, ChannelError, Phase, WaitPolicy, YIELD_AFTER},
    session::{Session, SessionError, SessionId},
};

/// The bytes another session imports an event by.
pub type Token = [u8; 16];

/// The longest one sleep on a wake descriptor lasts before the page is read again:
/// a record whose interrupt did not reach this process still ends the wait within it.
const SLICE: Duration = crate::channel::BLOCK_SLICE;
/// The sleep between reads without a wake descriptor.
const NAP: Duration = Duration::from_millis(1);

/// What an event could fail with.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// rigd's reply broke the protocol.
    #[error("rigd's reply to an event request: {0}")]
    Protocol(&'static str),
    /// The event's page could not be mapped.
    #[error("Mapping event {event}'s page")]
    Map {
        event: u64,
        #[source]
        source: std::io::Error,
    },
    /// The exporter ended (or closed the event) before its work released `value`: a
    /// wait for it passed because rigd let it, not because the work was done.
    #[error(
        "Event {event}'s exporter (session {exporter}) ended before releasing {value}: its work reached {reached}"
    )]
    ExporterGone {
        event: u64,
        exporter: u64,
        value: u64,
        reached: u64,
    },
    /// A record on a channel of another session.
    #[error(
        "Event {event} is session {session}'s: channel {channel} of session {of} cannot record it"
    )]
    ForeignChannel {
        event: u64,
        session: u64,
        channel: u64,
        of: u64,
    },
    /// A host wait ran out of time.
    #[error(
        "Event {event} of session {exporter} did not reach {value} in {waited:?} (it stands at {seen})"
    )]
    Timeout {
        event: u64,
        exporter: u64,
        value: u64,
        seen: u64,
        waited: Duration,
    },
}

/// An event this session exported: it records, others wait.
#[derive(Debug)]
pub struct ExportedEvent {
    id: u64,
    session: SessionId,
    token: Token,
    gpu_va: GpuVa,
    page: Mapping,
    last: u64,
}

/// An event of another session (or this one) that this session imported.
#[derive(Debug)]
pub struct ImportedEvent {
    id: u64,
    exporter: SessionId,
    gpu_va: GpuVa,
    page: ReadMapping,
}

fn offset(at: u64) -> usize {
    usize::try_from(at).expect("a page offset fits a usize")
}

fn one_file(fds: Vec<OwnedFd>) -> Result<SealedMemfd, EventError> {
    let [fd] = <[OwnedFd; 1]>::try_from(fds)
        .map_err(|_| EventError::Protocol("an event's reply carries its page, one file"))?;
    Ok(SealedMemfd::check(fd).map_err(SessionError::Unsealed)?)
}

fn check_page(gpu_va: u64, bytes: u64, file: &SealedMemfd) -> Result<GpuVa, EventError> {
    if bytes != BYTES || file.len() != BYTES || !gpu_va.is_multiple_of(BYTES) {
        return Err(EventError::Protocol(
            "an event's page is one aligned 4 KiB page",
        ));
    }
    Ok(GpuVa(gpu_va))
}

impl ExportedEvent {
    /// Asks rigd for a new event of this session's GPU.
    ///
    /// # Errors
    /// [`EventError::Session`] (rigd's refusal: `NotServed`, `EventLimit`, `Rm`),
    /// [`EventError::Protocol`], [`EventError::Map`].
    pub async fn export(session: &Session) -> Result<Self, EventError> {
        let (reply, fds) = session
            .call(Request::EventExport(pb::EventExport {}))
            .await?;
        let Reply::EventExported(e) = reply else {
            return Err(EventError::Protocol(
                "an export must be answered `event_exported`",
            ));
        };
        let token = Token::try_from(e.token.as_slice())
            .map_err(|_| EventError::Protocol("a token is 16 bytes"))?;
        let file = one_file(fds)?;
        let gpu_va = check_page(e.gpu_va, e.bytes, &file)?;
        let page = Mapping::shared(&file, Fill::Populate).map_err(|source| EventError::Map {
            event: e.event,
            source,
        })?;
        Ok(Self {
            id: e.event,
            session: session.id(),
            token,
            gpu_va,
            page,
            last: 0,
        })
    }

    /// This session's handle.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What another session of this uid imports it by.
    pub fn token(&self) -> Token {
        self.token
    }

    /// Where this session's channels see the page.
    pub fn gpu_va(&self) -> GpuVa {
        self.gpu_va
    }

    /// The last value recorded (0: none yet).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The value the exporter's work has released, and the GPU time (ns) it did.
    pub fn released(&self) -> (u64, u64) {
        read_release(|at| self.page.read_u64(offset(at)).unwrap_or(0))
    }

    /// Records the next value on `channel`, one of this session's: writes it as the
    /// page's target, pushes a host release of it (once the engine finished all the
    /// channel's work before it, with the GPU's time) and, where the channel has a wake
    /// descriptor, the GPU's non-stall interrupt once it landed (importers' sleeping
    /// waits wake on it), and submits. Returns the value.
    ///
    /// # Errors
    /// [`EventError::ForeignChannel`]; [`EventError::Channel`] (as
    /// [`Channel::release_to`] and [`Channel::submit`]).
    pub fn record(&mut self, channel: &mut Channel) -> Result<u64, EventError> {
        if channel.session() != self.session {
            return Err(EventError::ForeignChannel {
                event: self.id,
                session: self.session.0,
                channel: channel.id(),
                of: channel.session().0,
            });
        }
        let value = self.last + 1;
        channel.release_to(
            self.gpu_va,
            value,
            method::Release {
                wait_idle: true,
                timestamp: true,
            },
        )?;
        // Importers whose host waits sleep wake once it is visible.
        channel.interrupt_at(self.gpu_va, value)?;
        // The target is written only once the words are pushed, and before they are
        // submitted: an importer that reads it finds them on their way.
        self.page
            .write_u64(offset(TARGET), value)
            .map_err(|source| EventError::Map {
                event: self.id,
                source,
            })?;
        channel.submit()?;
        self.last = value;
        Ok(value)
    }

    /// Gives the event back: rigd unmaps it here and its importers' waits for values
    /// not yet released end as [`EventError::ExporterGone`].
    ///
    /// # Errors
    /// [`EventError::Session`].
    pub async fn close(self, session: &Session) -> Result<(), EventError> {
        close(session, self.id).await
    }
}

async fn close(session: &Session, id: u64) -> Result<(), EventError> {
    match session
        .call(Request::EventClose(pb::EventClose { event: id }))
        .await?
    {
        (Reply::EventClosed(_), _) => Ok(()),
        _ => Err(EventError::Protocol(
            "a close must be answered `event_closed`",
        )),
    }
}

fn read_release(read: impl Fn(u64) -> u64) -> (u64, u64) {
    (read(VALUE), read(TIME))
}

impl ImportedEvent {
    /// Imports the event `token` names (of this session's GPU and uid).
    ///
    /// # Errors
    /// [`EventError::Session`] (rigd's refusal: `UnknownEvent` for a token never
    /// given, `EventRefused` for another uid's, `EventGone`, `EventLimit`),
    /// [`EventError::Protocol`], [`EventError::Map`].
    pub async fn import(session: &Session, token: &Token) -> Result<Self, EventError> {
        let (reply, fds) = session
            .call(Request::EventImport(pb::EventImport {
                token: token.to_vec(),
            }))
            .await?;
        let Reply::EventImported(e) = reply else {
            return Err(EventError::Protocol(
                "an import must be answered `event_imported`",
            ));
        };
        let file = one_file(fds)?;
        let gpu_va = check_page(e.gpu_va, e.bytes, &file)?;
        let page = ReadMapping::shared(&file).map_err(|source| EventError::Map {
            event: e.event,
            source,
        })?;
        Ok(Self {
            id: e.event,
            exporter: SessionId(e.exporter),
            gpu_va,
            page,
        })
    }

    fn word(&self, at: u64) -> u64 {
        self.page.read_u64(offset(at)).unwrap_or(0)
    }

    /// This session's handle.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The exporting session.
    pub fn exporter(&self) -> SessionId {
        self.exporter
    }

    /// Where this session's channels see the page (read-only).
    pub fn gpu_va(&self) -> GpuVa {
        self.gpu_va
    }

    /// The last value the exporter recorded: what a wait made now waits for.
    pub fn target(&self) -> u64 {
        self.word(TARGET)
    }

    /// The value released, and the GPU time (ns) of that release.
    pub fn released(&self) -> (u64, u64) {
        read_release(|at| self.word(at))
    }

    /// Whether `value` was released by the exporter's work: Ok(true) when it was,
    /// Ok(false) when not yet.
    ///
    /// # Errors
    /// [`EventError::ExporterGone`] when the exporter ended before releasing it.
    pub fn check(&self, value: u64) -> Result<bool, EventError> {
        let released = self.word(VALUE);
        // The state is read after the value: rigd writes it before the value that
        // lets waits pass, so a passed wait finds it.
        if self.word(STATE) == GONE {
            let reached = self.word(REACHED);
            if reached.wrapping_sub(value).cast_signed() < 0 {
                return Err(EventError::ExporterGone {
                    event: self.id,
                    exporter: self.exporter.0,
                    value,
                    reached,
                });
            }
            return Ok(true);
        }
        Ok(released.wrapping_sub(value).cast_signed() >= 0)
    }

    /// Makes `channel` (of this session) wait on the GPU, before anything pushed
    /// after, for the exporter's last record as of now ([`ImportedEvent::target`]);
    /// returns that value (0: nothing recorded, nothing pushed). The wait lets the
    /// scheduler serve other groups meanwhile; check it with [`ImportedEvent::check`]
    /// once the channel's work after it is done.
    ///
    /// # Errors
    /// [`EventError::Channel`] (as [`Channel::acquire_at`]).
    pub fn acquire_on(&self, channel: &mut Channel) -> Result<u64, EventError> {
        let value = self.target();
        if value != 0 {
            channel.acquire_at(self.gpu_va, value)?;
        }
        Ok(value)
    }

    /// Waits on the host until the exporter released `value`, as `sleep_on`'s
    /// [`WaitPolicy`] says (the default's without a channel): spinning, yielding, and
    /// where it blocks, sleeping on that channel's wake descriptor (the exporter's
    /// record raises the GPU's non-stall interrupt, which rigd signals to every
    /// channel's descriptor, and so does the exporter's end) for at most 50 ms at a
    /// time, reading the page after each wake. A channel without a descriptor, or none,
    /// reads the page every millisecond instead. Adds no work to any channel.
    ///
    /// # Errors
    /// [`EventError::Timeout`] naming the event and the value; [`EventError::ExporterGone`];
    /// [`EventError::Channel`] when the descriptor cannot be polled.
    pub fn wait(
        &self,
        value: u64,
        timeout: Duration,
        sleep_on: Option<&Channel>,
    ) -> Result<(), EventError> {
        let start = Instant::now();
        loop {
            if self.check(value)? {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(EventError::Timeout {
                    event: self.id,
                    exporter: self.exporter.0,
                    value,
                    seen: self.word(VALUE),
                    waited,
                });
            }
            let policy = sleep_on.map_or_else(WaitPolicy::default, Channel::wait_policy);
            let left = timeout - waited;
            match policy.phase(waited, YIELD_AFTER) {
                Phase::Spin => std::hint::spin_loop(),
                Phase::Yield => std::thread::yield_now(),
                Phase::Block => match sleep_on.filter(|ch| ch.wake_fd().is_some()) {
                    Some(ch) => {
                        ch.sleep_until_woken(SLICE.min(left))?;
                    }
                    None => std::thread::sleep(NAP.min(left)),
                },
            }
        }
    }

    /// Gives the import back: rigd unmaps the page from this session's space.
    ///
    /// # Errors
    /// [`EventError::Session`].
    pub async fn close(self, session: &Session) -> Result<(), EventError> {
        close(session, self.id).await
    }
}
