//! Events shared between sessions of one uid on an RM-served GPU, the role of CUDA's
//! IPC events: a 4 KiB semaphore page that rigd makes when a session exports an
//! event, maps read-write into that session's GPU address space, and maps read-only
//! into the space of each session that imports it with its token.
//!
//! Flow: `service::events` (the side socket's requests) → `rig` (the ledger's note)
//! → `channels::Served` (the sessions' address spaces, their wake descriptors) →
//! [`Sharer`] (this file: handles, tokens, who may import, the exporter's end) →
//! `nvrm` ([`SharedPage`] once, a [`SharedView`] per session).
//!
//! The page's words are `rig_model::nv::shared_event`'s (proto/rig/v1/event.proto):
//! the exporter's channels release `value` (with the GPU's time), its CPU writes
//! `target` before it submits a release, importers wait for `target` and read
//! `state` and `reached`, which only rigd writes (docs/compute.md, "Events shared
//! between sessions").
//!
//! Rules:
//! - only the exporter's uid may import, and only on the same GPU (a token is looked
//!   up in this GPU's events only): [`EventError::OtherUid`], [`EventError::UnknownToken`];
//!   the token is 16 random bytes, compared in constant time, and the page is in no
//!   other session's page tables, so an acquire of its address elsewhere faults that
//!   session's channel alone;
//! - importers map it read-only (`nvrm::Access::ReadOnly`): an importer's channel that
//!   writes there faults, so only the exporter's work releases it;
//! - the exporter's end, or its close of the event ([`Sharer::end`], [`Sharer::close`]),
//!   unmaps its view first (its channels stopped before its end: `rig::ledger`), then
//!   writes `reached` (the value its work had released), `state` = GONE, and sets
//!   `value` [`shared_event::POISON_AHEAD`] past the larger of `value` and `target`: no
//!   importer's GPU wait hangs, and a waiter that finds `state` GONE with `reached`
//!   below its value reports the exporter's end. The importers' wake descriptors are
//!   then signalled (their owner, `Served`, does it with the sessions returned here);
//! - the page lives while any view of it does; an importer's view goes at its close
//!   or its end; a gone event imports no more ([`EventError::Gone`]);
//! - a session holds at most [`MAX_PER_SESSION`] events, exported and imported.
//!
//! State: one mutex over every event of the GPU (by handle and by token) and what each
//! session holds; RM calls (a map, an unmap) run under it: they are few, and short.
//!
//! Not here: the address spaces (`channels`, `nvrm::space`), the wire (`service`), the
//! order of a session's end (`rig::ledger`: after its channels, before its memory).

#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    os::fd::OwnedFd,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{Ordering, fence},
    },
};

use rig_model::nv::shared_event;
use rig_sys::scm::PeerCred;

use crate::{
    dma::{DmaError, SessionId, Token, new_token, same_token},
    error::{Class, Classify, Reason},
    nvrm::{Access, AddressSpace, Gpu, NvrmError, Rm, SharedPage, SharedView},
};

/// The most events (exported and imported) one session may hold on one GPU.
pub const MAX_PER_SESSION: usize = 256;

/// A session's handle of an event it exported or imported: one counter per GPU, never
/// reused, looked up in that session only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(pub u64);

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why an export, an import or a close failed.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("Event {event} is not one this session exported or imported")]
    UnknownEvent { event: EventId },
    #[error("No event on {gpu} has that token (it was never given, or its exporter closed it)")]
    UnknownToken { gpu: String },
    #[error("The event's exporter is uid {owner}: uid {uid} may not import it")]
    OtherUid { uid: u32, owner: u32 },
    #[error("Session {exporter}, which exported the event, has ended or closed it")]
    Gone { exporter: SessionId },
    #[error("Session {session} already holds {limit} shared events, the most one may")]
    Limit { session: SessionId, limit: usize },
    #[error("Session {session} has no GPU address space on {gpu}")]
    NoSpace { session: SessionId, gpu: String },
    #[error("{gpu}: an event's page")]
    Rm {
        gpu: String,
        #[source]
        source: NvrmError,
    },
    #[error("{gpu}: failed to share an event's page with the client")]
    Share {
        gpu: String,
        #[source]
        source: std::io::Error,
    },
    #[error("An event's token")]
    Token(#[source] DmaError),
}

impl Classify for EventError {
    /// The same words as the side socket's codes; the GPU where the error names one.
    fn class(&self) -> Class {
        match self {
            Self::UnknownEvent { .. } => Reason::UnknownEvent.into(),
            Self::UnknownToken { gpu } => Class::new(Reason::UnknownEvent).on(gpu),
            Self::OtherUid { .. } => Reason::EventRefused.into(),
            Self::Gone { .. } => Reason::EventGone.into(),
            Self::Limit { .. } => Reason::EventLimit.into(),
            Self::NoSpace { gpu, .. } => Class::new(Reason::NotServed).on(gpu),
            Self::Rm { gpu, .. } => Class::new(Reason::Rm).on(gpu),
            Self::Share { gpu, .. } => Class::new(Reason::Internal).on(gpu),
            Self::Token(_) => Reason::Internal.into(),
        }
    }
}

/// What the exporter receives.
#[derive(Debug)]
pub struct ExportedEvent {
    pub id: EventId,
    pub token: Token,
    /// Where the exporter's channels see the page (mapped read-write).
    pub gpu_va: u64,
    pub bytes: u64,
    /// The page's memfd, read-write.
    pub file: OwnedFd,
}

/// What an importer receives.
#[derive(Debug)]
pub struct ImportedEvent {
    pub id: EventId,
    /// Where the importer's channels see the page (mapped read-only).
    pub gpu_va: u64,
    pub bytes: u64,
    pub exporter: SessionId,
    /// The page, opened read-only.
    pub file: OwnedFd,
}

/// A served GPU's shared events, whatever its `Rm`: what `rig` and the service see
/// (implemented by `channels::Served`, which owns the sessions' address spaces and
/// wake descriptors).
pub trait EventHost: Send + Sync {
    /// Exports a new event from `session`.
    ///
    /// # Errors
    /// [`EventError::NoSpace`] for a session without a space here, and
    /// [`Sharer::export`]'s.
    fn export_event(&self, session: SessionId) -> Result<ExportedEvent, EventError>;
    /// Imports the event `token` names into `session`.
    ///
    /// # Errors
    /// [`EventError::NoSpace`], and [`Sharer::import`]'s.
    fn import_event(&self, session: SessionId, token: &[u8]) -> Result<ImportedEvent, EventError>;
    /// Closes one of `session`'s events; an exporter's close wakes its importers.
    ///
    /// # Errors
    /// [`EventError::UnknownEvent`].
    fn close_event(&self, session: SessionId, id: EventId) -> Result<(), EventError>;
    /// Ends `session`'s events (after its channels stopped), waking the importers of
    /// those it exported; returns how many it held.
    fn end_events(&self, session: SessionId) -> usize;
    /// What each session holds of this GPU's events ([`Sharer::held`]).
    fn events_held(&self) -> Vec<EventsHeld>;
}

/// What one session holds of a GPU's shared events: those it exported (still open)
/// and those it imported (gone ones too, until it closes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsHeld {
    pub session: SessionId,
    pub exported: u32,
    pub imported: u32,
}

/// One exported event.
#[derive(Debug)]
struct Shared<R: Rm> {
    token: Token,
    uid: u32,
    exporter: SessionId,
    page: Arc<SharedPage<R>>,
    gone: bool,
    importers: BTreeSet<SessionId>,
}

/// A session's view of an event: the exporter's (its handle is the event's) or an
/// importer's.
#[derive(Debug)]
struct Held<R: Rm> {
    /// The exporter's handle: the event's key.
    event: EventId,
    view: SharedView<R>,
}

#[derive(Debug)]
struct State<R: Rm> {
    next: u64,
    /// By the exporter's handle; kept while the exporter or an importer holds it.
    events: HashMap<EventId, Shared<R>>,
    held: HashMap<SessionId, BTreeMap<EventId, Held<R>>>,
}

impl<R: Rm> State<R> {
    /// Gives `view` a new handle in `session`: the view of `event`, or, for `None`, an
    /// exporter's view whose handle is the event's own.
    fn hold(&mut self, session: SessionId, event: Option<EventId>, view: SharedView<R>) -> EventId {
        let id = EventId(self.next);
        self.next += 1;
        let event = event.unwrap_or(id);
        self.held
            .entry(session)
            .or_default()
            .insert(id, Held { event, view });
        id
    }
}

/// The shared events of one served GPU.
#[derive(Debug)]
pub struct Sharer<R: Rm> {
    gpu: Arc<Gpu<R>>,
    name: String,
    state: Mutex<State<R>>,
}

/// What a session's end or an exporter's close leaves to its caller: the sessions
/// whose imported event just went, whose waits to wake.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// How many of the session's events went.
    pub events: usize,
    pub importers: BTreeSet<SessionId>,
}

impl<R: Rm> Sharer<R> {
    pub fn new(gpu: Arc<Gpu<R>>, name: String) -> Self {
        Self {
            gpu,
            name,
            state: Mutex::new(State {
                next: 1,
                events: HashMap::new(),
                held: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // A panic under the lock leaves views and pages whole: they free themselves.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn rm(&self) -> impl FnOnce(NvrmError) -> EventError + '_ {
        |source| EventError::Rm {
            gpu: self.name.clone(),
            source,
        }
    }

    fn share(&self) -> impl FnOnce(std::io::Error) -> EventError + '_ {
        |source| EventError::Share {
            gpu: self.name.clone(),
            source,
        }
    }

    fn room(s: &State<R>, session: SessionId) -> Result<(), EventError> {
        if s.held.get(&session).map_or(0, BTreeMap::len) >= MAX_PER_SESSION {
            return Err(EventError::Limit {
                session,
                limit: MAX_PER_SESSION,
            });
        }
        Ok(())
    }

    /// Makes an event for `session` (of `peer`), mapped read-write in `space`.
    ///
    /// # Errors
    /// [`EventError::Limit`], [`EventError::Token`], [`EventError::Rm`],
    /// [`EventError::Share`]; nothing is left made.
    pub fn export(
        &self,
        session: SessionId,
        peer: PeerCred,
        space: &Arc<AddressSpace<R>>,
    ) -> Result<ExportedEvent, EventError> {
        let mut s = self.lock();
        Self::room(&s, session)?;
        let token = new_token().map_err(EventError::Token)?;
        let page = Arc::new(SharedPage::new(&self.gpu, shared_event::BYTES).map_err(self.rm())?);
        let file = page
            .file()
            .try_clone()
            .map(OwnedFd::from)
            .map_err(self.share())?;
        let view = SharedView::map(space, &page, Access::ReadWrite).map_err(self.rm())?;
        let (gpu_va, bytes) = (view.gpu_va(), page.len());
        let id = s.hold(session, None, view);
        s.events.insert(
            id,
            Shared {
                token,
                uid: peer.uid,
                exporter: session,
                page,
                gone: false,
                importers: BTreeSet::new(),
            },
        );
        tracing::debug!(gpu = %self.name, session = session.0, event = id.0, "event exported");
        Ok(ExportedEvent {
            id,
            token,
            gpu_va,
            bytes,
            file,
        })
    }

    /// Maps the event `token` names read-only into `space` for `session` (of `peer`).
    ///
    /// # Errors
    /// [`EventError::UnknownToken`], [`EventError::OtherUid`], [`EventError::Gone`],
    /// [`EventError::Limit`], [`EventError::Rm`], [`EventError::Share`].
    pub fn import(
        &self,
        session: SessionId,
        peer: PeerCred,
        space: &Arc<AddressSpace<R>>,
        token: &[u8],
    ) -> Result<ImportedEvent, EventError> {
        let mut s = self.lock();
        let (&event, shared) = s
            .events
            .iter()
            .find(|(_, e)| same_token(&e.token, token))
            .ok_or_else(|| EventError::UnknownToken {
                gpu: self.name.clone(),
            })?;
        if shared.uid != peer.uid {
            return Err(EventError::OtherUid {
                uid: peer.uid,
                owner: shared.uid,
            });
        }
        if shared.gone {
            return Err(EventError::Gone {
                exporter: shared.exporter,
            });
        }
        let (page, exporter) = (Arc::clone(&shared.page), shared.exporter);
        Self::room(&s, session)?;
        let file = page
            .file()
            .open_read_only()
            .map(OwnedFd::from)
            .map_err(self.share())?;
        let view = SharedView::map(space, &page, Access::ReadOnly).map_err(self.rm())?;
        let (gpu_va, bytes) = (view.gpu_va(), page.len());
        let id = s.hold(session, Some(event), view);
        if let Some(e) = s.events.get_mut(&event) {
            e.importers.insert(session);
        }
        tracing::debug!(gpu = %self.name, session = session.0, event = event.0, exporter = exporter.0, "event imported");
        Ok(ImportedEvent {
            id,
            gpu_va,
            bytes,
            exporter,
            file,
        })
    }

    /// Closes one of `session`'s events: an importer's view is unmapped; the
    /// exporter's close ends the event for everyone (its importers are returned).
    ///
    /// # Errors
    /// [`EventError::UnknownEvent`].
    pub fn close(&self, session: SessionId, id: EventId) -> Result<Ended, EventError> {
        let mut s = self.lock();
        let held = s
            .held
            .get_mut(&session)
            .and_then(|h| h.remove(&id))
            .ok_or(EventError::UnknownEvent { event: id })?;
        let mut ended = Ended {
            events: 1,
            ..Ended::default()
        };
        self.let_go(&mut s, session, id, held, &mut ended);
        Ok(ended)
    }

    /// Ends every event `session` holds: run after its channels stopped. Returns how
    /// many, and the importers of those it exported.
    pub fn end(&self, session: SessionId) -> Ended {
        let mut s = self.lock();
        let mut ended = Ended::default();
        for (id, held) in s.held.remove(&session).unwrap_or_default() {
            ended.events += 1;
            self.let_go(&mut s, session, id, held, &mut ended);
        }
        ended
    }

    /// Unmaps `held` (`session`'s handle `id`) from `session`'s space; the exporter's
    /// own view (its handle is the event's) ends the event. A session that imported its
    /// own event holds both; closing the import ends nothing.
    fn let_go(
        &self,
        s: &mut State<R>,
        session: SessionId,
        id: EventId,
        held: Held<R>,
        ended: &mut Ended,
    ) {
        let Held { event, view } = held;
        let page = Arc::clone(view.page());
        if let Err(e) = view.close() {
            tracing::warn!(gpu = %self.name, session = session.0, event = event.0, error = &e as &dyn std::error::Error, "unmapping an event's page");
        }
        let Some(shared) = s.events.get_mut(&event) else {
            return;
        };
        if id == event {
            shared.gone = true;
            mark_gone(&page);
            ended.importers.extend(shared.importers.iter().copied());
            tracing::debug!(gpu = %self.name, session = session.0, event = event.0, importers = shared.importers.len(), "exported event ended");
        } else if !s.held.get(&session).is_some_and(|h| {
            h.values()
                .any(|o| o.event == event && o.view.access() == Access::ReadOnly)
        }) {
            // Its last import of the event (a session may import one twice).
            shared.importers.remove(&session);
        }
        if shared.gone && shared.importers.is_empty() {
            s.events.remove(&event);
        }
    }

    /// Events whose page is still made (exported, or gone with importers left).
    pub fn count(&self) -> usize {
        self.lock().events.len()
    }

    /// What each session holding an event holds, by session: an exporter's handle is
    /// its event's own, an importer's another.
    pub fn held(&self) -> Vec<EventsHeld> {
        let s = self.lock();
        let mut v: Vec<EventsHeld> = s
            .held
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(&session, h)| {
                let exported = h.iter().filter(|(id, held)| **id == held.event).count();
                let n = |k: usize| u32::try_from(k).unwrap_or(u32::MAX);
                EventsHeld {
                    session,
                    exported: n(exported),
                    imported: n(h.len() - exported),
                }
            })
            .collect();
        v.sort_by_key(|e| e.session);
        v
    }

    /// Writes `value` at byte `at` of the page `session`'s event `id` views, as the
    /// exporter's GPU would (tests: a fake GPU releases nothing). False for an event
    /// the session does not hold.
    #[cfg(any(test, feature = "fakes"))]
    pub fn write(&self, session: SessionId, id: EventId, at: u64, value: u64) -> bool {
        let s = self.lock();
        let Some(h) = s.held.get(&session).and_then(|h| h.get(&id)) else {
            return false;
        };
        usize::try_from(at).is_ok_and(|at| h.view.page().mapping().write_u64(at, value).is_ok())
    }

    /// The GPU VA of `session`'s view of `id` (tests).
    #[cfg(test)]
    pub fn gpu_va(&self, session: SessionId, id: EventId) -> Option<u64> {
        self.lock()
            .held
            .get(&session)
            .and_then(|h| h.get(&id))
            .map(|h| h.view.gpu_va())
    }
}

/// Writes the exporter's end into the page: `reached`, then `state`, then the value
/// that lets every GPU wait pass (module docs). The stores are ordered so that a
/// waiter that sees the new value also sees `state` and `reached`.
fn mark_gone<R: Rm>(page: &SharedPage<R>) {
    use shared_event::{GONE, POISON_AHEAD, REACHED, STATE, TARGET, VALUE};
    let m = page.mapping();
    let at = |o: u64| usize::try_from(o).expect("a page offset");
    let (Ok(value), Ok(target)) = (m.read_u64(at(VALUE)), m.read_u64(at(TARGET))) else {
        return;
    };
    let _ = m.write_u64(at(REACHED), value);
    let _ = m.write_u64(at(STATE), GONE);
    fence(Ordering::SeqCst);
    let _ = m.write_u64(at(VALUE), value.max(target).wrapping_add(POISON_AHEAD));
}
