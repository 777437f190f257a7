//! A hardware queue pair a client drives itself: a submission ring it writes and a
//! completion ring the device writes, in the client's leased DMA memory. Generic: it
//! knows entry sizes, where the phase bit sits and how to ring a doorbell, nothing of
//! any device. `nvme` puts NVMe's commands on top; `lent` gets such a queue from rigd
//! on a session ([`LentQueue::open`]); `status` reads rigd's list of the queues it
//! lends.
//!
//! Flow: [`Queue::submit`] writes one entry at the SQ tail (refusing with
//! [`QueueError::Full`] when `limit` commands are in flight) → [`Queue::ring`]
//! publishes the tail through the [`Doorbell`] (for a lent NVMe queue: the shadow tail
//! in memory, then the eventfd kick) → the device fetches, executes, and writes a
//! completion with the current phase → [`Queue::reap`] takes every entry whose phase
//! bit says it is new, flips the expected phase at each wrap, and publishes the new CQ
//! head through the doorbell once.
//!
//! Who writes what: the client writes SQ entries between its tail and the device's
//! fetch position, and the doorbells; the device writes CQ entries from its tail to
//! the client's head; rigd writes neither ring once it has created the queue (it
//! deletes the queue before it takes the memory back). An SQ slot is the client's
//! again once the completion of a command at or after it is reaped: the device fetches
//! in ring order, so `completed ≤ fetched`, and counting in-flight commands as
//! `submitted − reaped` never reuses a slot the device may still read.
//!
//! Invariants: one SQ slot and one CQ slot always stay empty (a full ring would look
//! empty: NVMe 1.4 §4.1 "queue full" condition), so at most
//! `min(sq_entries, cq_entries) − 1` commands are in flight; the phase the client
//! expects starts at 1 and flips each time its head wraps to 0.
//!
//! Not here: the memory (the session's ledger, `crate::session`), creating the queue
//! on the device (rigd's `nvme` and `queue`).

mod lent;
pub mod nvme;
mod status;

use std::sync::atomic::{Ordering, fence};

pub use lent::{LentQueue, QueueErrorKind, ShadowBell, queue_bytes};
pub use status::QueueInfo;

use crate::session::{Buffer, SessionError};

/// What a queue refuses or fails with.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("The queue is full: {in_flight} commands in flight, the most it takes")]
    Full { in_flight: u32 },
    #[error("A {what} of {entries} entries of {bytes} bytes: {why}")]
    Layout {
        what: &'static str,
        entries: u32,
        bytes: u32,
        why: &'static str,
    },
    #[error("An entry of {got} bytes for a ring of {want}-byte entries")]
    EntrySize { got: usize, want: u32 },
    #[error("Failed to {step} in the queue's memory")]
    Memory {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("Failed to ring the {which} doorbell")]
    Doorbell {
        which: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("Command id {cid} completed, but no command with it is in flight")]
    UnknownCommand { cid: u16 },
    #[error("A transfer of {len} bytes at {addr:#x}: {why}")]
    Transfer { addr: u64, len: u64, why: String },
    /// A request of a lent queue's session failed: the side socket, the memory, or
    /// rigd's generic refusal.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// rigd refused a lent queue; `message` is one line for a person.
    #[error("{message}")]
    Refused {
        kind: QueueErrorKind,
        message: String,
    },
    /// No SR-IOV virtual function of `pf` that rigd holds is free for a queue.
    #[error(
        "No virtual function of {pf} is free for an isolated queue: {}",
        if tried.is_empty() { "rigd holds none of its VFs in vfio mode".to_owned() } else { format!("{} serve other clients or refused", tried.join(", ")) }
    )]
    NoFreeFunction { pf: String, tried: Vec<String> },
}

/// The memory a queue's rings live in: volatile copies at byte offsets, and whole
/// 32-bit stores for values a device must never read torn.
pub trait RingMem {
    /// # Errors
    /// An `io::Error` for bytes outside the memory.
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// # Errors
    /// An `io::Error` for bytes outside the memory.
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// One aligned 32-bit volatile store.
    ///
    /// # Errors
    /// An `io::Error` for bytes outside the memory or a misaligned offset.
    fn write_u32(&self, offset: u64, value: u32) -> std::io::Result<()>;
}

impl RingMem for Buffer {
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        Buffer::read(self, offset, buf).map_err(std::io::Error::other)
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        Buffer::write(self, offset, data).map_err(std::io::Error::other)
    }

    fn write_u32(&self, offset: u64, value: u32) -> std::io::Result<()> {
        Buffer::write_u32(self, offset, value).map_err(std::io::Error::other)
    }
}

/// Shared memory: the queue and its shadow doorbell hold the same buffer.
impl<T: RingMem + ?Sized> RingMem for std::sync::Arc<T> {
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        T::read(self, offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        T::write(self, offset, data)
    }

    fn write_u32(&self, offset: u64, value: u32) -> std::io::Result<()> {
        T::write_u32(self, offset, value)
    }
}

/// How a queue tells the device about a new SQ tail or CQ head.
pub trait Doorbell {
    /// The SQ tail is now `tail` (entries up to it are written).
    ///
    /// # Errors
    /// The doorbell's `io::Error`.
    fn sq_tail(&mut self, tail: u32) -> std::io::Result<()>;
    /// The CQ head is now `head` (entries before it may be overwritten).
    ///
    /// # Errors
    /// The doorbell's `io::Error`.
    fn cq_head(&mut self, head: u32) -> std::io::Result<()>;
}

/// Where a queue's rings are and what their entries look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Byte offset of the SQ in the memory, its entries and entry size.
    pub sq_at: u64,
    pub sq_entries: u32,
    pub sq_entry_bytes: u32,
    /// The same for the CQ.
    pub cq_at: u64,
    pub cq_entries: u32,
    pub cq_entry_bytes: u32,
    /// The phase bit: byte offset inside a CQ entry, and bit in that byte.
    pub phase_byte: u32,
    pub phase_bit: u8,
}

/// One queue pair's indexes over its memory and doorbell.
#[derive(Debug)]
pub struct Queue<M, D> {
    mem: M,
    doorbell: D,
    layout: Layout,
    sq_tail: u32,
    /// SQ tail last given to the doorbell.
    published: u32,
    cq_head: u32,
    phase: bool,
    in_flight: u32,
    limit: u32,
}

impl<M: RingMem, D: Doorbell> Queue<M, D> {
    /// A queue over rings that are empty now (a new queue: the CQ memory is zeroed, so
    /// no entry carries phase 1).
    ///
    /// # Errors
    /// [`QueueError::Layout`] for a ring of fewer than 2 entries, entries of 0 bytes, a
    /// phase bit outside the entry, or rings that overlap.
    pub fn new(mem: M, doorbell: D, layout: Layout) -> Result<Self, QueueError> {
        check_layout(&layout)?;
        Ok(Self {
            mem,
            doorbell,
            layout,
            sq_tail: 0,
            published: 0,
            cq_head: 0,
            phase: true,
            in_flight: 0,
            limit: layout.sq_entries.min(layout.cq_entries) - 1,
        })
    }

    /// The most commands in flight at once.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Commands submitted and not yet reaped.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    pub fn sq_tail(&self) -> u32 {
        self.sq_tail
    }

    pub fn cq_head(&self) -> u32 {
        self.cq_head
    }

    /// The phase the next new completion carries.
    pub fn phase(&self) -> bool {
        self.phase
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn mem(&self) -> &M {
        &self.mem
    }

    pub fn doorbell(&mut self) -> &mut D {
        &mut self.doorbell
    }

    /// Writes `entry` at the SQ tail and advances it; the device learns of it at the
    /// next [`Queue::ring`]. Returns the slot written.
    ///
    /// # Errors
    /// [`QueueError::Full`] (back-pressure: reap first), [`QueueError::EntrySize`],
    /// [`QueueError::Memory`].
    pub fn submit(&mut self, entry: &[u8]) -> Result<u32, QueueError> {
        if self.in_flight >= self.limit {
            return Err(QueueError::Full {
                in_flight: self.in_flight,
            });
        }
        if entry.len() != self.layout.sq_entry_bytes as usize {
            return Err(QueueError::EntrySize {
                got: entry.len(),
                want: self.layout.sq_entry_bytes,
            });
        }
        let slot = self.sq_tail;
        let at = self.layout.sq_at + u64::from(slot) * u64::from(self.layout.sq_entry_bytes);
        self.mem
            .write(at, entry)
            .map_err(|source| QueueError::Memory {
                step: "write a submission entry",
                source,
            })?;
        self.sq_tail = (slot + 1) % self.layout.sq_entries;
        self.in_flight += 1;
        Ok(slot)
    }

    /// Publishes the SQ tail if it moved since the last time.
    ///
    /// # Errors
    /// [`QueueError::Doorbell`].
    pub fn ring(&mut self) -> Result<(), QueueError> {
        if self.published == self.sq_tail {
            return Ok(());
        }
        // Every entry written is visible before the tail that publishes it.
        fence(Ordering::Release);
        self.doorbell
            .sq_tail(self.sq_tail)
            .map_err(|source| QueueError::Doorbell {
                which: "submission",
                source,
            })?;
        self.published = self.sq_tail;
        Ok(())
    }

    /// Takes up to `max` new completions in ring order, giving each entry's bytes to
    /// `each`, then publishes the CQ head once. Returns how many were taken.
    ///
    /// # Errors
    /// [`QueueError::Memory`], [`QueueError::Doorbell`]; an error `each` returns stops
    /// the reap after that entry (the entry counts as taken).
    pub fn reap(
        &mut self,
        max: u32,
        mut each: impl FnMut(&[u8]) -> Result<(), QueueError>,
    ) -> Result<u32, QueueError> {
        let bytes = self.layout.cq_entry_bytes as usize;
        let mut entry = vec![0u8; bytes];
        let mut taken = 0;
        let mut failed = None;
        let memory = |source| QueueError::Memory {
            step: "read a completion entry",
            source,
        };
        while taken < max {
            let at = self.layout.cq_at + u64::from(self.cq_head) * bytes as u64;
            // The phase first, then the rest: read together, the bytes before the
            // phase could be the old entry's while the phase is already the new one.
            let mut phase = [0u8];
            self.mem
                .read(at + u64::from(self.layout.phase_byte), &mut phase)
                .map_err(memory)?;
            if (phase[0] >> self.layout.phase_bit & 1 == 1) != self.phase {
                break;
            }
            fence(Ordering::Acquire);
            self.mem.read(at, &mut entry).map_err(memory)?;
            self.cq_head = (self.cq_head + 1) % self.layout.cq_entries;
            if self.cq_head == 0 {
                self.phase = !self.phase;
            }
            self.in_flight = self.in_flight.saturating_sub(1);
            taken += 1;
            if let Err(e) = each(&entry) {
                failed = Some(e);
                break;
            }
        }
        if taken > 0 {
            self.doorbell
                .cq_head(self.cq_head)
                .map_err(|source| QueueError::Doorbell {
                    which: "completion",
                    source,
                })?;
        }
        failed.map_or(Ok(taken), Err)
    }
}

fn check_layout(l: &Layout) -> Result<(), QueueError> {
    let bad = |what, entries, bytes, why| {
        Err(QueueError::Layout {
            what,
            entries,
            bytes,
            why,
        })
    };
    for (what, entries, bytes) in [
        ("submission ring", l.sq_entries, l.sq_entry_bytes),
        ("completion ring", l.cq_entries, l.cq_entry_bytes),
    ] {
        if entries < 2 {
            return bad(what, entries, bytes, "a ring needs at least 2 entries");
        }
        if bytes == 0 {
            return bad(what, entries, bytes, "entries must have bytes");
        }
    }
    if l.phase_byte >= l.cq_entry_bytes || l.phase_bit > 7 {
        return bad(
            "completion ring",
            l.cq_entries,
            l.cq_entry_bytes,
            "the phase bit lies outside an entry",
        );
    }
    let sq_end = l.sq_at + u64::from(l.sq_entries) * u64::from(l.sq_entry_bytes);
    let cq_end = l.cq_at + u64::from(l.cq_entries) * u64::from(l.cq_entry_bytes);
    if l.sq_at < cq_end && l.cq_at < sq_end {
        return bad(
            "submission ring",
            l.sq_entries,
            l.sq_entry_bytes,
            "it overlaps the completion ring",
        );
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
