//! Wakes for clients' blocked waits: one thread per RM-served GPU sleeps in poll(2) on
//! the RM's non-stall event file (`nvrm::NonStall`) and, on each edge, signals the
//! wake descriptor (an eventfd) of every channel lent on that GPU; a client whose wait
//! sleeps polls its channel's descriptor and re-reads its semaphore when woken.
//!
//! Flow: `Served::open` adds a channel's descriptor ([`Wakers::add`]; the client gets
//! a duplicate with the channel's others), `close` removes it, a reclaim (the session's
//! end, or a fault contained) signals then removes every one of the session's, so a
//! client blocked on a channel that faulted wakes at once and reads the fault; the end
//! of an event's exporter signals its importers' ([`Wakers::signal_session`]).
//!
//! Invariants: an edge wakes every channel of the GPU, since the RM says only that
//! the GPU raised one (any channel's NON_STALL_INTERRUPT, any process's); a client
//! wakes only when it armed its channel's interrupt or something else on the GPU
//! raised one, and re-reads before it sleeps again, so a spurious wake costs it one
//! read. The thread holds the event file and object, and frees them when it ends
//! (dropping [`Wakers`] stops it). If the event file reports an error (a GPU lost),
//! the thread ends: waits then end by their own time bound (rig-client polls with
//! one), never by a wake that will not come.
//!
//! Not here: the RM objects (`nvrm::events`), the words a client pushes to raise the
//! interrupt and its wait policy (rig-client's `channel`).

use std::{
    collections::BTreeMap,
    io,
    os::fd::OwnedFd,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    thread::JoinHandle,
};

use nix::{
    errno::Errno,
    poll::{PollFd, PollFlags, PollTimeout, poll},
};
use rig_sys::wake::Wake;

use super::ChannelId;
use crate::{
    dma::SessionId,
    nvrm::{NonStall, Rm},
};

#[derive(Debug)]
struct Shared {
    wakes: Mutex<BTreeMap<(SessionId, ChannelId), Wake>>,
    stop: Wake,
    /// Edges seen since the thread started.
    edges: AtomicU64,
}

impl Shared {
    fn wakes(&self) -> std::sync::MutexGuard<'_, BTreeMap<(SessionId, ChannelId), Wake>> {
        // Only descriptors live under the lock: a panic leaves the map usable.
        self.wakes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The wake descriptors of one GPU's lent channels, and the thread that signals them.
#[derive(Debug)]
pub struct Wakers {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Wakers {
    /// Starts the thread that watches `events`; it owns them from now on.
    ///
    /// # Errors
    /// eventfd(2)'s, or the thread's spawn.
    pub fn start<R: Rm>(events: NonStall<R>) -> io::Result<Self> {
        let (stop, _) = Wake::pair()?;
        let shared = Arc::new(Shared {
            wakes: Mutex::new(BTreeMap::new()),
            stop,
            edges: AtomicU64::new(0),
        });
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("rigd-wake".into())
            .spawn(move || watch(&events, &theirs))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// A wake descriptor for `channel` of `session`: the client's duplicate.
    ///
    /// # Errors
    /// eventfd(2)'s and dup(2)'s.
    pub fn add(&self, session: SessionId, channel: ChannelId) -> io::Result<OwnedFd> {
        let (ours, theirs) = Wake::pair()?;
        self.shared.wakes().insert((session, channel), ours);
        Ok(theirs)
    }

    /// Forgets `channel`'s descriptor (the client's copy stays, never signalled again).
    pub fn remove(&self, session: SessionId, channel: ChannelId) {
        self.shared.wakes().remove(&(session, channel));
    }

    /// Signals every descriptor of `session`, then forgets them: its channels are gone,
    /// and a client blocked on one wakes to read why.
    pub fn end_session(&self, session: SessionId) {
        let mut wakes = self.shared.wakes();
        let ids: Vec<_> = wakes
            .range((session, ChannelId(0))..)
            .take_while(|(k, _)| k.0 == session)
            .map(|(&k, _)| k)
            .collect();
        for k in ids {
            if let Some(w) = wakes.remove(&k) {
                let _ = w.signal();
            }
        }
    }

    /// Signals every descriptor of `session` and keeps them: something its waits may
    /// be for changed without an interrupt (an event it imported lost its exporter).
    pub fn signal_session(&self, session: SessionId) {
        let wakes = self.shared.wakes();
        for (_, w) in wakes
            .range((session, ChannelId(0))..)
            .take_while(|(k, _)| k.0 == session)
        {
            let _ = w.signal();
        }
    }

    /// How many channels have a descriptor.
    pub fn count(&self) -> usize {
        self.shared.wakes().len()
    }

    /// The interrupts seen (edges: several between two polls are one).
    pub fn edges(&self) -> u64 {
        self.shared.edges.load(Ordering::Relaxed)
    }

    /// Whether the thread still watches (it ends when the event file fails).
    pub fn watching(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Wakers {
    fn drop(&mut self) {
        let _ = self.shared.stop.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: poll the event file and the stop descriptor; on an edge, signal every
/// channel's descriptor.
fn watch<R: Rm>(events: &NonStall<R>, shared: &Shared) {
    let interrupt = PollFlags::POLLIN | PollFlags::POLLPRI;
    let failed = PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL;
    tracing::debug!(
        gpu = events.gpu(),
        "watching the GPU's non-stall interrupts"
    );
    loop {
        let mut fds = [
            PollFd::new(events.fd(), interrupt),
            PollFd::new(shared.stop.fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                tracing::warn!(gpu = events.gpu(), error = %e, "polling the non-stall event file failed: blocked waits now end by their time bound");
                return;
            }
        }
        let [ev, stop] = fds.map(|f| f.revents().unwrap_or(PollFlags::empty()));
        if stop.intersects(PollFlags::POLLIN) {
            return;
        }
        if ev.intersects(failed) {
            tracing::warn!(gpu = events.gpu(), revents = ?ev, "the non-stall event file reports an error (a GPU lost?): blocked waits now end by their time bound");
            return;
        }
        if ev.intersects(interrupt) {
            events.consume();
            shared.edges.fetch_add(1, Ordering::Relaxed);
            for w in shared.wakes().values() {
                let _ = w.signal();
            }
        }
    }
}
