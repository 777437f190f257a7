//! Wakes for clients' blocked waits: one thread per RM-served GPU sleeps in poll(2) on
//! the RM's non-stall event file (`nvrm::NonStall`) and, on each edge, signals the
//! wake descriptor (an eventfd) of each channel lent on that GPU that the edge may be
//! for; a client whose wait sleeps polls its channel's descriptor and re-reads its
//! semaphore when woken.
//!
//! Which channels: the RM's event is per GPU, so the channel says which of its values
//! raised it. A channel whose ring is in host memory has a **wake word** past its USERD
//! ([`crate::nvrm::wake_offset`]): a client arming a sleep pushes a host acquire for
//! its value, a release of that value into the word, then NON_STALL_INTERRUPT, so by
//! the time the interrupt's edge arrives the word holds the value (docs/channels.md,
//! "Waiting"; the word holds value + 1, and a client writes 1 into it when it opens
//! the channel). On each edge the thread reads every word and signals a channel only
//! when its word grew past 1 and since the last signal. A word still 0 (a client
//! that never writes it), a ring in GPU memory (no word), and a session that
//! imported an event (its waits are for another session's interrupts,
//! [`Wakers::unfilter`]) are signalled on every edge, as before the words. A client that writes its own word
//! can only wake itself too often or too rarely: its ring is its own.
//!
//! Flow: `Served::open` adds a channel's descriptor ([`Wakers::add`]; the client gets
//! a duplicate with the channel's others), `close` removes it, a reclaim (the session's
//! end, or a fault contained) signals then removes every one of the session's, so a
//! client blocked on a channel that faulted wakes at once and reads the fault; the end
//! of an event's exporter signals its importers' ([`Wakers::signal_session`]).
//!
//! Invariants: an edge signals every channel whose word grew, is 0 or is not read;
//! a client wakes when its channel's arm landed or something it cannot filter did,
//! and re-reads before it sleeps again, so a spurious wake costs it one read and a
//! wake is never lost: the word is written before the interrupt it announces. The
//! thread holds the event file and object, and frees them when it ends (dropping
//! [`Wakers`] stops it, and logs how many signals and passes the edges gave). If the
//! event file reports an error (a GPU lost), the thread ends: waits then end by their
//! own time bound (rig-client polls with one), never by a wake that will not come.
//!
//! Not here: the RM objects (`nvrm::events`), the words a client pushes to raise the
//! interrupt and its wait policy (rig-client's `channel`).

use std::{
    collections::{BTreeMap, BTreeSet},
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
use rig_sys::{mman::ReadMapping, wake::Wake};

use super::ChannelId;
use crate::{
    dma::SessionId,
    nvrm::{NonStall, Rm},
};

/// A channel's wake word as rigd reads it: its ring's memory, mapped read-only.
#[derive(Debug)]
pub struct WakeWord {
    map: ReadMapping,
    offset: usize,
}

impl WakeWord {
    /// The word at `offset` of `map` (8-byte aligned, inside it).
    ///
    /// # Errors
    /// `InvalidInput` when it is not.
    pub fn new(map: ReadMapping, offset: usize) -> io::Result<Self> {
        map.read_u64(offset)?;
        Ok(Self { map, offset })
    }
}

/// One channel's descriptor and what decides whether an edge is for it.
#[derive(Debug)]
struct Waker {
    wake: Wake,
    word: Option<WakeWord>,
    /// The word's value at the last signal; 1 before any (the client's open writes 1:
    /// no arm yet).
    signalled: u64,
    /// Every edge: no word, or its session waits for others' interrupts.
    always: bool,
}

impl Waker {
    /// Whether this edge may be for the channel (module docs).
    fn due(&mut self) -> bool {
        let Some(word) = self.word.as_ref().filter(|_| !self.always) else {
            return true;
        };
        match word.map.read_u64(word.offset) {
            Ok(0) | Err(_) => true,
            Ok(v) if v > self.signalled => {
                self.signalled = v;
                true
            }
            Ok(_) => false,
        }
    }
}

#[derive(Debug)]
struct Shared {
    wakes: Mutex<Wakes>,
    stop: Wake,
    /// Edges seen since the thread started.
    edges: AtomicU64,
    /// Descriptors signalled on edges, and edges a channel was passed over for.
    signalled: AtomicU64,
    passed: AtomicU64,
}

#[derive(Debug, Default)]
struct Wakes {
    by_channel: BTreeMap<(SessionId, ChannelId), Waker>,
    /// Sessions whose every channel wakes on every edge ([`Wakers::unfilter`]).
    unfiltered: BTreeSet<SessionId>,
}

impl Shared {
    fn wakes(&self) -> std::sync::MutexGuard<'_, Wakes> {
        // Only descriptors and mappings live under the lock: a panic leaves it usable.
        self.wakes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The wake descriptors of one GPU's lent channels, and the thread that signals them.
#[derive(Debug)]
pub struct Wakers {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    gpu: String,
}

impl Wakers {
    /// Starts the thread that watches `events`; it owns them from now on.
    ///
    /// # Errors
    /// eventfd(2)'s, or the thread's spawn.
    pub fn start<R: Rm>(events: NonStall<R>) -> io::Result<Self> {
        let (stop, _) = Wake::pair()?;
        let shared = Arc::new(Shared {
            wakes: Mutex::new(Wakes::default()),
            stop,
            edges: AtomicU64::new(0),
            signalled: AtomicU64::new(0),
            passed: AtomicU64::new(0),
        });
        let theirs = Arc::clone(&shared);
        let gpu = events.gpu().to_owned();
        let thread = std::thread::Builder::new()
            .name("rigd-wake".into())
            .spawn(move || watch(&events, &theirs))?;
        Ok(Self {
            shared,
            thread: Some(thread),
            gpu,
        })
    }

    /// A wake descriptor for `channel` of `session`, signalled on the edges its wake
    /// `word` says are its own (every edge without one): the client's duplicate.
    ///
    /// # Errors
    /// eventfd(2)'s and dup(2)'s.
    pub fn add(
        &self,
        session: SessionId,
        channel: ChannelId,
        word: Option<WakeWord>,
    ) -> io::Result<OwnedFd> {
        let (ours, theirs) = Wake::pair()?;
        let mut wakes = self.shared.wakes();
        let always = wakes.unfiltered.contains(&session);
        wakes.by_channel.insert(
            (session, channel),
            Waker {
                wake: ours,
                word,
                signalled: 1,
                always,
            },
        );
        Ok(theirs)
    }

    /// Forgets `channel`'s descriptor (the client's copy stays, never signalled again).
    pub fn remove(&self, session: SessionId, channel: ChannelId) {
        self.shared.wakes().by_channel.remove(&(session, channel));
    }

    /// Signals `session`'s channels on every edge from now on, whatever their words
    /// say: it waits for another session's interrupts (an event it imported).
    pub fn unfilter(&self, session: SessionId) {
        let mut wakes = self.shared.wakes();
        wakes.unfiltered.insert(session);
        for w in session_range(&mut wakes.by_channel, session) {
            w.always = true;
        }
    }

    /// Signals every descriptor of `session`, then forgets them: its channels are gone,
    /// and a client blocked on one wakes to read why.
    pub fn end_session(&self, session: SessionId) {
        let mut wakes = self.shared.wakes();
        wakes.unfiltered.remove(&session);
        for w in session_range(&mut wakes.by_channel, session) {
            let _ = w.wake.signal();
        }
        wakes.by_channel.retain(|k, _| k.0 != session);
    }

    /// Signals every descriptor of `session` and keeps them: something its waits may
    /// be for changed without an interrupt (an event it imported lost its exporter).
    pub fn signal_session(&self, session: SessionId) {
        let mut wakes = self.shared.wakes();
        for w in session_range(&mut wakes.by_channel, session) {
            let _ = w.wake.signal();
        }
    }

    /// How many channels have a descriptor.
    pub fn count(&self) -> usize {
        self.shared.wakes().by_channel.len()
    }

    /// The interrupts seen (edges: several between two polls are one).
    pub fn edges(&self) -> u64 {
        self.shared.edges.load(Ordering::Relaxed)
    }

    /// Descriptors signalled on edges, and edges a channel was passed over for (its
    /// word said the edge was another's).
    pub fn signals(&self) -> (u64, u64) {
        (
            self.shared.signalled.load(Ordering::Relaxed),
            self.shared.passed.load(Ordering::Relaxed),
        )
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
        let (signalled, passed) = self.signals();
        tracing::info!(
            gpu = %self.gpu,
            edges = self.edges(),
            signalled,
            passed,
            "the non-stall interrupts' wakes: channels signalled, and passed over by their wake words"
        );
    }
}

/// `session`'s entries.
fn session_range(
    by_channel: &mut BTreeMap<(SessionId, ChannelId), Waker>,
    session: SessionId,
) -> impl Iterator<Item = &mut Waker> {
    by_channel
        .range_mut((session, ChannelId(0))..)
        .take_while(move |(k, _)| k.0 == session)
        .map(|(_, w)| w)
}

/// Signals each channel an edge may be for (module docs).
fn signal_due(shared: &Shared) {
    let (mut signalled, mut passed) = (0, 0);
    for w in shared.wakes().by_channel.values_mut() {
        if w.due() {
            let _ = w.wake.signal();
            signalled += 1;
        } else {
            passed += 1;
        }
    }
    shared.signalled.fetch_add(signalled, Ordering::Relaxed);
    shared.passed.fetch_add(passed, Ordering::Relaxed);
}

/// The thread: poll the event file and the stop descriptor; on an edge, signal the
/// channels it may be for.
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
            signal_due(shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rig_sys::{
        memfd::{Backing, Memfd},
        mman::{Fill, Mapping},
    };

    use super::*;
    use crate::nvrm::{FakeRm, Gpu};

    /// A wake word at 64 of a fresh page: the writer's mapping (the GPU's release) and
    /// rigd's.
    fn word() -> (Mapping, WakeWord) {
        let f = Memfd::sealed(c"rig-wake-test", Backing::Shmem, 4096).expect("memfd");
        let w = Mapping::shared(&f, Fill::Populate).expect("map");
        let r = ReadMapping::shared(&f).expect("map read-only");
        (w, WakeWord::new(r, 64).expect("word"))
    }

    /// One interrupt, once the thread has looked at every channel for it; then which
    /// of `fds` it signalled.
    fn edge(rm: &FakeRm, w: &Wakers, fds: &[Wake]) -> Vec<bool> {
        let (s, p) = w.signals();
        rm.interrupt();
        let until = Instant::now() + Duration::from_secs(10);
        while {
            let (s2, p2) = w.signals();
            s2 + p2 < s + p + fds.len() as u64
        } {
            assert!(Instant::now() < until, "the wake thread never looked");
            std::thread::sleep(Duration::from_millis(1));
        }
        fds.iter().map(|f| f.drain().expect("drain")).collect()
    }

    #[test]
    fn an_edge_signals_only_channels_whose_word_grew_or_that_cannot_filter() {
        let rm = FakeRm::new();
        let gpu = Arc::new(Gpu::open(rm.clone(), None).expect("fake GPU"));
        let w = Wakers::start(NonStall::open(&gpu).expect("event")).expect("thread");
        let (mine, theirs) = (SessionId(1), SessionId(2));
        let (a_gpu, a) = word();
        let (b_gpu, b) = word();
        let fds: Vec<Wake> = [
            w.add(mine, ChannelId(1), Some(a)),
            w.add(theirs, ChannelId(2), Some(b)),
            w.add(mine, ChannelId(3), None),
        ]
        .into_iter()
        .map(|fd| Wake::from(fd.expect("descriptor")))
        .collect();
        // Words still 0: clients that never write them wake on every edge.
        assert_eq!(edge(&rm, &w, &fds), [true, true, true]);
        // 1: opened by clients that write them, nothing armed yet.
        a_gpu.write_u64(64, 1).expect("open");
        b_gpu.write_u64(64, 1).expect("open");
        assert_eq!(edge(&rm, &w, &fds), [false, false, true], "nothing armed");
        // Arms for value 1 release 2.
        a_gpu.write_u64(64, 2).expect("release");
        b_gpu.write_u64(64, 2).expect("release");
        assert_eq!(edge(&rm, &w, &fds), [true, true, true], "both grew");
        assert_eq!(
            edge(&rm, &w, &fds),
            [false, false, true],
            "neither grew: another channel's interrupt; no word, every edge"
        );
        a_gpu.write_u64(64, 3).expect("release");
        assert_eq!(
            edge(&rm, &w, &fds),
            [true, false, true],
            "only A's arm landed"
        );
        // A session that imported an event waits for another's interrupts.
        w.unfilter(theirs);
        assert_eq!(edge(&rm, &w, &fds), [false, true, true]);
        let d = w
            .add(theirs, ChannelId(4), Some(word().1))
            .expect("later channel");
        b_gpu.write_u64(64, 9).expect("release");
        let later = Wake::from(d);
        let mut all = fds;
        all.push(later);
        assert_eq!(
            edge(&rm, &w, &all),
            [false, true, true, true],
            "unfiltered from its start"
        );
        // Its end signals its channels once more and forgets them.
        w.end_session(theirs);
        assert_eq!(
            (all[1].drain().ok(), all[3].drain().ok()),
            (Some(true), Some(true))
        );
        assert_eq!(w.count(), 2);
        assert_eq!(w.edges(), 7);
    }

    #[test]
    fn a_word_outside_its_mapping_is_refused() {
        let f = Memfd::sealed(c"rig-wake-test", Backing::Shmem, 4096).expect("memfd");
        let r = ReadMapping::shared(&f).expect("map");
        let e = WakeWord::new(r, 4092).expect_err("past the page");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
