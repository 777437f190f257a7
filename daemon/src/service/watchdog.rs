//! rigd's own health for systemd's watchdog (sd_watchdog_enabled(3)), and the
//! `STATUS=` line that says what it serves.
//!
//! Flow: a task on the runtime beats ([`beat_every`]), each beat a round trip through
//! the blocking pool, so a beat proves that both the runtime and the pool answer.
//! Blocking work is registered with its limit while it runs ([`Health::begin`]):
//! every gRPC request's ([`READ_LIMIT`], [`Health::take_limit`]), and the side
//! socket's (leases and releases through VFIO, channel and queue opens and closes,
//! whole-device leases and give-backs, a session's reclaim: [`off_runtime`] under the
//! connection's [`HEALTH`], [`SIDE_LIMIT`], [`RECLAIM_LIMIT`]). Workers outside any
//! request report through a probe ([`Health::probe`]): the DMA pools' pinning
//! threads, each block's pin limited to [`PIN_LIMIT`]. A monitor thread, off the
//! runtime so a wedged runtime cannot ping for itself, sends `WATCHDOG=1` every
//! quarter of `WATCHDOG_USEC` only while [`Health::check`] passes: the last beat is
//! younger than half of it and no work has run past its limit. While it fails, the
//! pings stop and `STATUS=` says why ([`Monitor::step`]); missing pings, systemd kills
//! rigd and starts it again, and the new rigd recovers from its journal. Another task
//! sends `STATUS=` whenever the summary (devices held, clients, leases, queues,
//! channels) changes, and the monitor sends it again when rigd is healthy again.
//!
//! Not counted: an unbind worker that a timed-out unbind left in the kernel
//! (`take::unbind`): its request returned `UNBIND_TIMEOUT` and rigd goes on serving,
//! which is the point of that design; restarting would not free the thread either.
//! A side-socket reply that waits for a client to read it is an async wait, not a
//! worker, and holds nothing but that connection.
//!
//! Not here: the notify socket itself (the sd-notify crate), sockets handed over by
//! systemd (`sys::systemd`), the unit's `WatchdogSec=` (systemd/rigd.service).

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::rig::Rig;

/// How often the runtime beats at most: every eighth of the watchdog interval, but
/// no less often than this.
// TIMEOUT: the monitor wants a beat younger than half the watchdog interval (15 s
// with the unit's WatchdogSec=30s); one a second costs one blocking-pool round trip
// a second and leaves that margin many times over.
pub const BEAT: Duration = Duration::from_secs(1);

/// The beat period for a watchdog `interval`.
pub fn beat_every(interval: Duration) -> Duration {
    (interval / 8).clamp(Duration::from_millis(1), BEAT)
}

/// How often the `STATUS=` summary is looked at (it is sent only when it changed).
pub const STATUS_EVERY: Duration = Duration::from_secs(1);

/// The most a read-only request's blocking work may take.
// TIMEOUT: a listing reads a few sysfs files per function (milliseconds); a minute
// means sysfs itself has stopped answering.
pub const READ_LIMIT: Duration = Duration::from_secs(60);

/// The most a take-over, reset or resize may take beyond its unbind wait (the one its
/// request asked for, or the configured `take.unbind_timeout_s`: [`Health::take_limit`]).
// TIMEOUT: the slowest steps seen are a GPU's bus reset with its config restore and
// pinning a large pool at detach, seconds each; five minutes beyond the unbind wait
// is long past anything that still makes progress.
pub const TAKE_LIMIT: Duration = Duration::from_secs(300);

/// The most a side-socket request's blocking work may take: a lease or release's VFIO
/// map, a channel's RM calls (open, or close with its drain), a queue's admin
/// commands, joining a GPU address space.
// TIMEOUT: each is milliseconds; a channel close waits for its ring to drain for at
// most seconds; two minutes means the kernel or the GPU's driver
// has stopped answering.
pub const SIDE_LIMIT: Duration = Duration::from_secs(120);

/// The most a whole-device lease, its give-back, or a session's reclaim may take: a
/// reset with its config restore and the scan for processes that kept the device.
// TIMEOUT: as a take-over's steps (TAKE_LIMIT), without an unbind wait.
pub const RECLAIM_LIMIT: Duration = TAKE_LIMIT;

/// The most one DMA block's pin may take on a pool's pinning thread.
// TIMEOUT: a 2 MiB block's fault-in, mlock and VFIO map take well under a millisecond;
// a minute means the kernel is stuck in that thread (a wedged IOMMU, reclaim that
// never ends).
pub const PIN_LIMIT: Duration = Duration::from_secs(60);

tokio::task_local! {
    /// The health a side-socket connection registers its blocking work with (set
    /// around each connection's task by `service::dma`; unset, work is not
    /// registered, as in tests that serve no watchdog).
    pub static HEALTH: Health;
}

/// Runs `f` on the blocking pool, registered as `what` with `limit` under the
/// connection's [`HEALTH`] while it runs.
///
/// # Errors
/// The task's [`tokio::task::JoinError`] (it panicked).
pub async fn off_runtime<R: Send + 'static>(
    what: &'static str,
    limit: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, tokio::task::JoinError> {
    let working = HEALTH.try_with(|h| h.begin(what, limit)).ok();
    tokio::task::spawn_blocking(move || {
        let _working = working;
        f()
    })
    .await
}

/// Runs `f` here, registered as [`off_runtime`] registers it: on a multi-threaded
/// runtime through `block_in_place` (the worker's other tasks move to another thread;
/// this request's reply needs no wake-up of a pool thread and none back, each tens of
/// microseconds on a VM's idle CPUs: docs/compute.md, "Spare pages"), elsewhere (a test's
/// current-thread runtime) on the blocking pool. For one short blocking call on a
/// request's own path, such as an RM map.
///
/// # Errors
/// As [`off_runtime`].
pub async fn in_place<R: Send + 'static>(
    what: &'static str,
    limit: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, tokio::task::JoinError> {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if !multi {
        return off_runtime(what, limit, f).await;
    }
    let working = HEALTH.try_with(|h| h.begin(what, limit)).ok();
    let r = tokio::task::block_in_place(f);
    drop(working);
    Ok(r)
}

/// A worker outside any request, asked at each check: the name of its oldest step
/// under way and how long it has run, if any.
pub type Probe = Arc<dyn Fn(Instant) -> Option<(String, Duration)> + Send + Sync>;

/// The probes with their limits (closures: Debug prints how many).
#[derive(Default)]
struct Probes(Vec<(Duration, Probe)>);

impl std::fmt::Debug for Probes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} probes", self.0.len())
    }
}
/// Why rigd is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unhealthy {
    #[error(
        "The runtime has not answered for {} ms (the watchdog allows {} ms): its threads or the blocking pool are stuck",
        .silent.as_millis(),
        .limit.as_millis()
    )]
    Stalled { silent: Duration, limit: Duration },
    #[error(
        "{what} has run for {} s, past its limit of {} s: its worker is stuck",
        .running.as_secs(),
        .limit.as_secs()
    )]
    Stuck {
        what: String,
        running: Duration,
        limit: Duration,
    },
}

/// The runtime's last beat and the blocking work in flight; cheap to clone.
#[derive(Debug, Clone)]
pub struct Health(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    origin: Instant,
    /// The configured unbind wait, part of every take-over's limit.
    unbind_wait: Duration,
    /// The last beat, in ns after `origin` (u64 ns last 584 years).
    beat_ns: AtomicU64,
    next_id: AtomicU64,
    work: Mutex<BTreeMap<u64, Work>>,
    /// Workers outside requests, each with its limit.
    probes: Mutex<Probes>,
    /// The last `STATUS=` summary, which the monitor sends again after a spell of
    /// ill health.
    summary: Mutex<Option<String>>,
    /// Whether the monitor's last check failed.
    ill: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Clone, Copy)]
struct Work {
    what: &'static str,
    started: Instant,
    limit: Duration,
}

/// Blocking work in flight; dropping it (the work ended, or panicked) unregisters it.
#[derive(Debug)]
pub struct Working {
    health: Health,
    id: u64,
}

impl Drop for Working {
    fn drop(&mut self) {
        self.health.work().remove(&self.id);
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

impl Health {
    /// Healthy, with a beat now, for a rigd whose unbinds wait 10 s unless asked.
    pub fn new() -> Self {
        Self::with_unbind_wait(Duration::from_secs(10))
    }

    /// As [`Health::new`], for a rigd whose unbinds wait `unbind_wait` unless asked.
    pub fn with_unbind_wait(unbind_wait: Duration) -> Self {
        Self(Arc::new(Inner {
            origin: Instant::now(),
            unbind_wait,
            beat_ns: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            work: Mutex::new(BTreeMap::new()),
            probes: Mutex::new(Probes::default()),
            summary: Mutex::new(None),
            ill: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Adds a worker outside requests that is unhealthy once its step has run past
    /// `limit`.
    pub fn probe(&self, limit: Duration, probe: Probe) {
        self.0
            .probes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .push((limit, probe));
    }

    fn work(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Work>> {
        // Inserts and removes only: the map stays valid whatever a holder did.
        self.0.work.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limit of a take-over whose request asked for an unbind wait of `asked`
    /// (zero: the configured one).
    pub fn take_limit(&self, asked: Duration) -> Duration {
        let wait = if asked.is_zero() {
            self.0.unbind_wait
        } else {
            asked
        };
        TAKE_LIMIT + wait
    }

    /// The runtime answered.
    pub fn beat(&self) {
        self.beat_at(Instant::now());
    }

    fn beat_at(&self, now: Instant) {
        let ns = now.saturating_duration_since(self.0.origin).as_nanos();
        self.0
            .beat_ns
            .store(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Registers blocking work (`what`: the method) that should end within `limit`.
    pub fn begin(&self, what: &'static str, limit: Duration) -> Working {
        self.begin_at(what, limit, Instant::now())
    }

    fn begin_at(&self, what: &'static str, limit: Duration, started: Instant) -> Working {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        self.work().insert(
            id,
            Work {
                what,
                started,
                limit,
            },
        );
        Working {
            health: self.clone(),
            id,
        }
    }

    /// Whether rigd is healthy at `now`: a beat no older than `stale`, and no work
    /// past its limit (the most overdue such work is named).
    ///
    /// # Errors
    /// [`Unhealthy`], saying which.
    pub fn check(&self, now: Instant, stale: Duration) -> Result<(), Unhealthy> {
        let beat = self.0.origin + Duration::from_nanos(self.0.beat_ns.load(Ordering::Relaxed));
        let silent = now.saturating_duration_since(beat);
        if silent > stale {
            return Err(Unhealthy::Stalled {
                silent,
                limit: stale,
            });
        }
        let mut stuck: Vec<(String, Duration, Duration)> = self
            .work()
            .values()
            .map(|w| {
                (
                    w.what.to_owned(),
                    now.saturating_duration_since(w.started),
                    w.limit,
                )
            })
            .collect();
        for (limit, probe) in self
            .0
            .probes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .iter()
        {
            if let Some((what, running)) = probe(now) {
                stuck.push((what, running, *limit));
            }
        }
        let worst = stuck
            .into_iter()
            .filter(|(_, running, limit)| running > limit)
            .max_by_key(|(_, running, limit)| *running - *limit)
            .map(|(what, running, limit)| Unhealthy::Stuck {
                what,
                running,
                limit,
            });
        worst.map_or(Ok(()), Err)
    }
}

/// What the monitor tells systemd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// `WATCHDOG=1`.
    Ping,
    /// `STATUS=…`.
    Status(String),
}

/// The monitor's state between checks.
#[derive(Debug)]
pub struct Monitor {
    health: Health,
    /// How old the last beat may be.
    stale: Duration,
}

impl Monitor {
    pub fn new(health: &Health, stale: Duration) -> Self {
        Self {
            health: health.clone(),
            stale,
        }
    }

    /// One check at `now`: a ping while healthy (with the summary again after a spell
    /// of ill health), else no ping and, once per spell, a `STATUS=` that says why.
    pub fn step(&self, now: Instant) -> Vec<Notice> {
        let inner = &self.health.0;
        match self.health.check(now, self.stale) {
            Ok(()) => {
                let mut out = vec![Notice::Ping];
                if inner.ill.swap(false, Ordering::Relaxed) {
                    tracing::warn!("healthy again: watchdog pings resumed");
                    let summary = inner.summary.lock().unwrap_or_else(PoisonError::into_inner);
                    out.push(Notice::Status(
                        summary.clone().unwrap_or_else(|| "Serving".to_owned()),
                    ));
                }
                out
            }
            Err(e) => {
                if inner.ill.swap(true, Ordering::Relaxed) {
                    return Vec::new();
                }
                let line = super::status::error_line(&e);
                tracing::error!(
                    "{line}; watchdog pings stopped: systemd restarts rigd unless it recovers"
                );
                vec![Notice::Status(format!(
                    "Unhealthy, watchdog pings withheld: {line}"
                ))]
            }
        }
    }
}

/// Beats every `every` through the blocking pool, forever (a task on the runtime).
pub async fn beat(health: Health, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if tokio::task::spawn_blocking(|| ()).await.is_ok() {
            health.beat();
        }
    }
}

/// Starts the monitor thread if systemd asked for a watchdog (`WATCHDOG_USEC`, and
/// `WATCHDOG_PID` naming this process); returns the interval, or `None`.
///
/// # Errors
/// When the thread cannot be started.
pub fn start_monitor(health: &Health) -> std::io::Result<Option<Duration>> {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return Ok(None);
    };
    let health = health.clone();
    std::thread::Builder::new()
        .name("rigd-watchdog".into())
        .spawn(move || monitor(&health, interval))?;
    Ok(Some(interval))
}

fn monitor(health: &Health, interval: Duration) -> ! {
    let m = Monitor::new(health, interval / 2);
    loop {
        for n in m.step(Instant::now()) {
            let _ = match &n {
                Notice::Ping => sd_notify::notify(&[sd_notify::NotifyState::Watchdog]),
                Notice::Status(s) => sd_notify::notify(&[sd_notify::NotifyState::Status(s)]),
            };
        }
        std::thread::sleep(interval / 4);
    }
}

/// What rigd serves, for `STATUS=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub devices: usize,
    pub clients: usize,
    pub leases: u64,
    pub lease_bytes: u64,
    pub queues: usize,
    pub channels: usize,
    /// Served GPUs that lend nothing now (lost or stalled).
    pub unwell: usize,
}

impl Summary {
    /// Reads it from `rig` (device locks are only tried; channels take each served
    /// GPU's lock briefly): on a blocking thread.
    pub fn of(rig: &Rig) -> Self {
        let dma = rig.dma().status(None);
        Self {
            devices: rig.status().0.len(),
            clients: dma.clients.len(),
            leases: dma.clients.iter().map(|c| u64::from(c.leases)).sum(),
            lease_bytes: dma.clients.iter().map(|c| c.bytes).sum(),
            queues: rig.queue_status().len(),
            channels: rig.channel_status(None).len(),
            unwell: rig
                .gpu_health()
                .iter()
                .filter(|(_, h)| *h != crate::channels::Health::Serving)
                .count(),
        }
    }

    /// The `STATUS=` text.
    pub fn line(&self) -> String {
        fn n(count: u64, one: &str) -> String {
            format!("{count} {one}{}", if count == 1 { "" } else { "s" })
        }
        let len = |c: usize| u64::try_from(c).unwrap_or(u64::MAX);
        let unwell = if self.unwell == 0 {
            String::new()
        } else {
            format!(
                "; {} lending nothing (rigctl status)",
                n(len(self.unwell), "GPU")
            )
        };
        format!(
            "Serving: {} held, {} with {} ({} MiB), {}, {}{unwell}",
            n(len(self.devices), "device"),
            n(len(self.clients), "client"),
            n(self.leases, "lease"),
            self.lease_bytes >> 20,
            n(len(self.queues), "queue"),
            n(len(self.channels), "channel"),
        )
    }
}

/// Sends `STATUS=` each time the summary changes, forever (a task on the runtime);
/// while the monitor says rigd is unhealthy its line stays, and the summary is only
/// kept for when it is healthy again.
pub async fn status_lines(rig: Arc<Rig>, health: Health) {
    let mut tick = tokio::time::interval(STATUS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = None;
    loop {
        tick.tick().await;
        let rig = Arc::clone(&rig);
        let Ok(now) = tokio::task::spawn_blocking(move || Summary::of(&rig)).await else {
            continue;
        };
        if sent != Some(now) {
            let line = now.line();
            *health
                .0
                .summary
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(line.clone());
            if !health.0.ill.load(Ordering::Relaxed) {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Status(&line)]);
            }
            sent = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALE: Duration = Duration::from_secs(15);

    #[test]
    fn a_fresh_beat_and_no_work_is_healthy() {
        let h = Health::new();
        let t0 = Instant::now();
        h.beat_at(t0);
        assert_eq!(h.check(t0, STALE), Ok(()));
        assert_eq!(h.check(t0 + STALE, STALE), Ok(()), "exactly at the limit");
    }

    #[test]
    fn a_beat_older_than_the_limit_is_a_stalled_runtime_until_the_next_beat() {
        let h = Health::new();
        let t0 = Instant::now();
        h.beat_at(t0);
        let late = t0 + STALE + Duration::from_millis(1);
        assert!(matches!(
            h.check(late, STALE),
            Err(Unhealthy::Stalled { limit: STALE, .. })
        ));
        h.beat_at(late);
        assert_eq!(h.check(late, STALE), Ok(()));
    }

    #[test]
    fn work_past_its_limit_is_stuck_and_named_and_within_it_is_not() {
        let h = Health::new();
        let t0 = Instant::now();
        let limit = Duration::from_secs(60);
        let _read = h.begin_at("ListDevices", limit, t0);
        let at = t0 + limit;
        h.beat_at(at);
        assert_eq!(h.check(at, STALE), Ok(()), "exactly at its limit");
        let past = at + Duration::from_millis(1);
        h.beat_at(past);
        assert_eq!(
            h.check(past, STALE),
            Err(Unhealthy::Stuck {
                what: "ListDevices".into(),
                running: limit + Duration::from_millis(1),
                limit
            })
        );
    }

    #[test]
    fn the_most_overdue_work_is_named() {
        let h = Health::new();
        let t0 = Instant::now();
        let _a = h.begin_at("Status", Duration::from_secs(10), t0);
        let _b = h.begin_at("Detach", Duration::from_secs(1), t0);
        let _c = h.begin_at("GetDevice", Duration::from_secs(100), t0);
        let at = t0 + Duration::from_secs(20);
        h.beat_at(at);
        assert!(matches!(
            h.check(at, STALE),
            Err(Unhealthy::Stuck { what, .. }) if what == "Detach"
        ));
    }

    #[test]
    fn work_that_ended_no_longer_counts() {
        let h = Health::new();
        let t0 = Instant::now();
        let work = h.begin_at("Reset", Duration::from_secs(1), t0);
        let at = t0 + Duration::from_secs(5);
        h.beat_at(at);
        assert!(h.check(at, STALE).is_err());
        drop(work);
        assert_eq!(h.check(at, STALE), Ok(()));
    }

    #[test]
    fn a_take_over_may_take_its_unbind_wait_beyond_the_take_limit() {
        let h = Health::with_unbind_wait(Duration::from_secs(600));
        assert_eq!(
            h.take_limit(Duration::ZERO),
            TAKE_LIMIT + Duration::from_secs(600)
        );
        assert_eq!(
            h.take_limit(Duration::from_secs(5)),
            TAKE_LIMIT + Duration::from_secs(5)
        );
    }

    #[test]
    fn the_beat_is_an_eighth_of_the_interval_at_most_a_second() {
        assert_eq!(beat_every(Duration::from_secs(30)), BEAT);
        assert_eq!(beat_every(Duration::from_secs(8)), BEAT);
        assert_eq!(
            beat_every(Duration::from_millis(400)),
            Duration::from_millis(50)
        );
        assert_eq!(beat_every(Duration::ZERO), Duration::from_millis(1));
    }

    #[test]
    fn a_summary_line_counts_what_is_served() {
        let s = Summary {
            devices: 1,
            clients: 2,
            leases: 3,
            lease_bytes: 6 << 20,
            queues: 0,
            channels: 1,
            unwell: 0,
        };
        assert_eq!(
            s.line(),
            "Serving: 1 device held, 2 clients with 3 leases (6 MiB), 0 queues, 1 channel"
        );
        let lost = Summary { unwell: 1, ..s };
        assert_eq!(
            lost.line(),
            "Serving: 1 device held, 2 clients with 3 leases (6 MiB), 0 queues, 1 channel; 1 GPU lending nothing (rigctl status)"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runtime_beats_through_the_blocking_pool() {
        let h = Health::new();
        // Older than the limit below: only a beat from the task can pass.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let limit = Duration::from_millis(150);
        assert!(
            h.check(Instant::now(), limit).is_err(),
            "stale before beating"
        );
        let task = tokio::spawn(beat(h.clone(), Duration::from_millis(20)));
        // The first tick is at once.
        tokio::time::sleep(Duration::from_millis(100)).await;
        task.abort();
        assert_eq!(h.check(Instant::now(), limit), Ok(()));
    }

    #[test]
    fn a_stuck_worker_withholds_the_ping_and_status_says_why_until_it_ends() {
        let h = Health::new();
        *h.0.summary.lock().expect("summary") = Some("Serving: 1 device held".into());
        let m = Monitor::new(&h, STALE);
        let t0 = Instant::now();
        h.beat_at(t0);
        assert_eq!(m.step(t0), vec![Notice::Ping]);
        let work = h.begin_at("side.give_back_device", RECLAIM_LIMIT, t0);
        let late = t0 + RECLAIM_LIMIT + Duration::from_secs(1);
        h.beat_at(late);
        let said = m.step(late);
        let [Notice::Status(why)] = said.as_slice() else {
            panic!("no ping, one STATUS=: {said:?}");
        };
        assert!(
            why.starts_with("Unhealthy, watchdog pings withheld: side.give_back_device has run for 301 s, past its limit of 300 s"),
            "{why}"
        );
        assert_eq!(
            m.step(late),
            Vec::new(),
            "said once per spell, still no ping"
        );
        drop(work);
        assert_eq!(
            m.step(late),
            vec![
                Notice::Ping,
                Notice::Status("Serving: 1 device held".into())
            ]
        );
    }

    #[test]
    fn a_pinning_thread_past_its_limit_is_stuck_through_its_probe() {
        let h = Health::new();
        let t0 = Instant::now();
        let since = t0;
        h.probe(
            PIN_LIMIT,
            Arc::new(move |now| Some(("pinning a block of pool 0000:01:00.0".into(), now - since))),
        );
        h.beat_at(t0 + PIN_LIMIT);
        assert_eq!(h.check(t0 + PIN_LIMIT, STALE), Ok(()));
        let late = t0 + PIN_LIMIT + Duration::from_secs(2);
        h.beat_at(late);
        assert!(matches!(
            h.check(late, STALE),
            Err(Unhealthy::Stuck { what, .. }) if what.contains("pool 0000:01:00.0")
        ));
    }

    /// The first failed check within a second, the runtime beating meanwhile.
    async fn first_unhealthy(h: &Health) -> Option<Unhealthy> {
        for _ in 0..100 {
            h.beat();
            if let Err(e) = h.check(Instant::now(), STALE) {
                return Some(e);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn side_work_off_the_runtime_is_registered_while_it_runs() {
        let h = Health::new();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let task = tokio::spawn(HEALTH.scope(h.clone(), async move {
            off_runtime("side.open_queue", Duration::ZERO, move || rx.recv())
                .await
                .expect("joined")
        }));
        // The work blocks on the channel: past its zero limit, it is stuck.
        let stuck = first_unhealthy(&h).await;
        assert!(
            matches!(&stuck, Some(Unhealthy::Stuck { what, .. }) if what == "side.open_queue"),
            "{stuck:?}"
        );
        tx.send(()).expect("unblock");
        task.await.expect("task").expect("received");
        h.beat();
        assert_eq!(
            h.check(Instant::now(), STALE),
            Ok(()),
            "unregistered when done"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_place_work_runs_on_the_requests_thread_and_is_registered() {
        let h = Health::new();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let task = tokio::spawn(HEALTH.scope(h.clone(), async move {
            let here = std::thread::current().id();
            in_place("side.gpu_mem_alloc", Duration::ZERO, move || {
                rx.recv().expect("unblocked");
                std::thread::current().id() == here
            })
            .await
            .expect("ran")
        }));
        let stuck = first_unhealthy(&h).await;
        assert!(
            matches!(&stuck, Some(Unhealthy::Stuck { what, .. }) if what == "side.gpu_mem_alloc"),
            "{stuck:?}"
        );
        tx.send(()).expect("unblock");
        assert!(task.await.expect("task"), "no hand-off to another thread");
    }

    #[tokio::test]
    async fn in_place_work_on_a_current_thread_runtime_goes_to_the_pool() {
        let here = std::thread::current().id();
        let there = in_place("side.gpu_mem_alloc", Duration::from_secs(1), move || {
            std::thread::current().id()
        })
        .await
        .expect("ran");
        assert_ne!(there, here, "block_in_place would panic here");
    }
}
