//! Events with the GPU's time, CUDA's `cuEventRecord`/`cuEventElapsedTime` for rig: a
//! record is a host semaphore release on one of the runtime's channels, after its
//! engine has finished everything before it (RELEASE_WFI), of the event's id and the
//! GPU's nanosecond timer (RELEASE_TIMESTAMP) into a 16-byte slot of the runtime's
//! event page, a host lease of the session. The host reads the slot: the id says the
//! record landed, the timestamp when.
//!
//! Flow: [`EventPage::new`] (a lease of `SLOTS` slots) → [`EventPage::record`] on a
//! channel (the words, then a submit) → [`EventPage::time`] (spins until the slot
//! holds the id, checking the channel's error notifier, up to a timeout) →
//! [`EventPage::elapsed`] (end minus start, in nanoseconds).
//!
//! Slots are reused in turn: an event stays readable until `SLOTS` later records, after
//! which reading it is [`EventError::Overwritten`], never another event's time. The
//! timestamp is the GPU's PTIMER as the host method writes it (docs/hardware/
//! nvidia-channels.md, "Host semaphores"), the clock `%globaltimer` reads in a kernel.
//!
//! State: the page, the next id. Not here: the release words (rig-nv's
//! `method::release_with`), the channels (the runtime's).

use std::time::{Duration, Instant};

use rig_client::{
    channel::{Channel, ChannelError, Engine},
    session::{Buffer, Session, SessionError},
};
use rig_model::addr::GpuVa;
use rig_nv::method::Release;

/// Slots on the page: 4096 × 16 bytes = 64 KiB.
pub const SLOTS: u64 = 4096;
const SLOT_BYTES: u64 = 16;

/// A recorded event: its id and where its slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The engine whose channel recorded it.
    pub engine: Engine,
    /// Its id (from 1, never reused in a runtime).
    pub id: u64,
}

/// Why an event could not be had or read.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The page could not be leased or read.
    #[error("The event page: {0}")]
    Page(#[from] SessionError),
    /// The channel's own error: a posted fault, a full pushbuffer.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// The runtime has no event page (one built from channels with `Runtime::with`
    /// gets one from `Runtime::set_event_page`).
    #[error("This runtime has no event page")]
    NoPage,
    /// The event was never recorded by this runtime.
    #[error("Event {id} was never recorded here (the last is {last})")]
    Unknown {
        /// Its id.
        id: u64,
        /// The last recorded.
        last: u64,
    },
    /// `SLOTS` later records reused its slot.
    #[error("Event {id}'s slot holds event {holds}: read an event within {SLOTS} records of it")]
    Overwritten {
        /// Its id.
        id: u64,
        /// What the slot holds now.
        holds: u64,
    },
    /// It did not land in time.
    #[error("Event {id} did not land within {waited:?} (its slot holds {holds})")]
    Timeout {
        /// Its id.
        id: u64,
        /// How long the wait was.
        waited: Duration,
        /// What the slot held.
        holds: u64,
    },
    /// The end came before the start.
    #[error("Event {end} landed {by_ns} ns before event {start}: record the start first")]
    Reversed {
        /// The start's id.
        start: u64,
        /// The end's.
        end: u64,
        /// By how much.
        by_ns: u64,
    },
}

/// The runtime's event slots.
#[derive(Debug)]
pub struct EventPage {
    page: Buffer,
    va: GpuVa,
    last: u64,
}

impl EventPage {
    /// Leases the page in `session`.
    ///
    /// # Errors
    /// [`EventError::Page`] with the session's refusal.
    pub async fn new(session: &Session) -> Result<Self, EventError> {
        Self::on(session.alloc(SLOTS * SLOT_BYTES, 4096).await?)
    }

    /// Uses `page` (at least `SLOTS` × 16 bytes of a host lease with a GPU address).
    ///
    /// # Errors
    /// [`EventError::Page`] (`OutOfRange`) for a page too short or without a GPU
    /// address.
    pub fn on(page: Buffer) -> Result<Self, EventError> {
        let short = SessionError::OutOfRange {
            offset: 0,
            len: SLOTS * SLOT_BYTES,
        };
        let va = page
            .gpu_va()
            .ok_or(SessionError::OutOfRange { offset: 0, len: 0 })?;
        if page.len() < SLOTS * SLOT_BYTES || !va.is_aligned(SLOT_BYTES) {
            return Err(short.into());
        }
        for i in 0..SLOTS * 2 {
            page.write_u64(i * 8, 0)?;
        }
        Ok(Self { page, va, last: 0 })
    }

    fn slot(id: u64) -> u64 {
        (id % SLOTS) * SLOT_BYTES
    }

    /// Records an event on `ch`: once its engine finished everything pushed before,
    /// the GPU writes the event's id and its timer into the event's slot. The caller
    /// submits ([`crate::Runtime::record`] does, unless its doorbells are held).
    ///
    /// # Errors
    /// [`EventError::Channel`] (a full pushbuffer or ring).
    pub fn record(&mut self, ch: &mut Channel) -> Result<Event, EventError> {
        let id = self.last + 1;
        let at = GpuVa(self.va.get() + Self::slot(id));
        ch.release_to(
            at,
            id,
            Release {
                wait_idle: true,
                timestamp: true,
            },
        )?;
        self.last = id;
        Ok(Event {
            engine: ch.engine(),
            id,
        })
    }

    /// Whether `ev` has landed, and its time if so, without waiting.
    ///
    /// # Errors
    /// [`EventError::Unknown`], [`EventError::Overwritten`], [`EventError::Page`].
    pub fn poll(&self, ev: Event) -> Result<Option<u64>, EventError> {
        if ev.id == 0 || ev.id > self.last {
            return Err(EventError::Unknown {
                id: ev.id,
                last: self.last,
            });
        }
        let at = Self::slot(ev.id);
        let holds = self.page.read_u64(at)?;
        if holds > ev.id {
            return Err(EventError::Overwritten { id: ev.id, holds });
        }
        if holds < ev.id {
            return Ok(None);
        }
        Ok(Some(self.page.read_u64(at + 8)?))
    }

    /// Waits up to `timeout` for `ev`, recorded on `ch`, and returns its GPU time in
    /// nanoseconds. A fault the RM posted for `ch` ends the wait: the record after
    /// faulted work never lands.
    ///
    /// # Errors
    /// As [`EventPage::poll`]; [`EventError::Channel`] (`Fault`);
    /// [`EventError::Timeout`].
    pub fn time(&self, ev: Event, ch: &Channel, timeout: Duration) -> Result<u64, EventError> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(t) = self.poll(ev)? {
                return Ok(t);
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(rig_client::channel::FAULT_CHECK_SPINS) {
                if let Some(fault) = ch.fault() {
                    return Err(ChannelError::Fault {
                        channel: ch.id(),
                        fault,
                    }
                    .into());
                }
                if start.elapsed() >= timeout {
                    return Err(EventError::Timeout {
                        id: ev.id,
                        waited: start.elapsed(),
                        holds: self.page.read_u64(Self::slot(ev.id))?,
                    });
                }
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }

    /// Nanoseconds from `start` to `end`, both landed (`times`).
    ///
    /// # Errors
    /// [`EventError::Reversed`] when `end` is earlier.
    pub fn elapsed(start: (Event, u64), end: (Event, u64)) -> Result<u64, EventError> {
        end.1
            .checked_sub(start.1)
            .ok_or_else(|| EventError::Reversed {
                start: start.0.id,
                end: end.0.id,
                by_ns: start.1 - end.1,
            })
    }
}
