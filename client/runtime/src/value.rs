//! Values in the session's own memory that the GPU writes and waits on: CUDA's stream
//! memory operations (`cuStreamWriteValue64`, `cuStreamWaitValue64`) for rig. A
//! channel's host releases a 64-bit value (and, if asked, the GPU's nanosecond time in
//! the 8 bytes after it) once its engine finished everything before, or holds the
//! channel until the 64-bit value at an address reaches one. Runtimes whose signals
//! live in memory (tinygrad's HCQ: the host, another device or another channel sets
//! them) order their work on these.
//!
//! Flow: [`crate::Runtime::write_value`] and [`crate::Runtime::wait_value`] check the
//! place here ([`place`]: inside one lease of the session's ledger, long and aligned
//! enough), then push rig-client's `Channel::release_to` (RELEASE_WFI) or
//! `Channel::acquire_at` (ACQ_CIRC_GEQ, switching the channel group out while the value
//! is short, so a value that never comes holds up only that channel:
//! docs/hardware/nvidia-channels.md, "Waits on the GPU").
//!
//! A channel's timeline semaphore is a lease of the session too: a value written over
//! the runtime's own would let its waits see work done that is not, so the runtime
//! refuses it ([`ValueError::Timeline`]).
//!
//! Not here: the words (rig-nv's `method::release_with`, `method::acquire`).

use rig_client::session::Session;
use rig_model::addr::GpuVa;

use crate::memory::{MemoryError, Span};

/// Bytes a written value takes: the value, then the GPU's time when asked for.
pub const WRITTEN_BYTES: u64 = 16;
/// Bytes a waited-for value takes.
pub const WAITED_BYTES: u64 = 8;

/// Why a value could not be written or waited for; nothing was pushed.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// The place is not memory this session holds.
    #[error("The value's place: {0}")]
    Memory(#[from] MemoryError),
    /// Too short a span for what goes there.
    #[error("{len} bytes at {va} are too few: {what} takes {need}")]
    Short {
        /// Where the span starts.
        va: GpuVa,
        /// Its length.
        len: u64,
        /// What was asked.
        what: &'static str,
        /// The bytes it takes.
        need: u64,
    },
    /// A write over the semaphore of one of the runtime's channels.
    #[error("A value written at {} would land on the timeline semaphore at {}: refused", .0.va, .0.semaphore)]
    Timeline(OverTimeline),
    /// The address is not aligned as the semaphore method needs.
    #[error("{what} at {va} needs a {align}-byte aligned address")]
    Misaligned {
        /// The address.
        va: GpuVa,
        /// What was asked.
        what: &'static str,
        /// The alignment it needs.
        align: u64,
    },
}

/// A written value's place over one of the runtime's timelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverTimeline {
    /// Where the written bytes start.
    pub va: GpuVa,
    /// The timeline's semaphore.
    pub semaphore: GpuVa,
}

/// What goes at a value's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// A written value; with the GPU's time after it when `timestamp`.
    Write {
        /// Whether the GPU's time goes in the next 8 bytes.
        timestamp: bool,
    },
    /// A waited-for value.
    Wait,
}

impl Use {
    fn what(self) -> &'static str {
        match self {
            Use::Write { timestamp: true } => "a value with the GPU's time",
            Use::Write { timestamp: false } => "a written value",
            Use::Wait => "a waited-for value",
        }
    }

    /// Bytes it takes, and the alignment the method needs (the timestamped release
    /// writes 16 bytes at a 16-byte aligned address).
    fn bytes(self) -> u64 {
        match self {
            Use::Write { timestamp: true } => WRITTEN_BYTES,
            Use::Write { timestamp: false } | Use::Wait => WAITED_BYTES,
        }
    }
}

/// The GPU address of `at` for `how`, once it is checked: long and aligned enough for
/// it, memory `session`'s ledger holds, and for a write clear of each of `timelines`
/// (the runtime's channels' semaphores, 16 bytes each).
///
/// # Errors
/// [`ValueError::Short`], [`ValueError::Misaligned`], [`ValueError::Memory`]
/// (`NotOwned`), [`ValueError::Timeline`].
pub fn place(
    session: &Session,
    at: &Span<'_>,
    how: Use,
    timelines: &[GpuVa],
) -> Result<GpuVa, ValueError> {
    let (va, need) = (at.va(), how.bytes());
    if at.len() < need {
        return Err(ValueError::Short {
            va,
            len: at.len(),
            what: how.what(),
            need,
        });
    }
    if !va.is_aligned(need) {
        return Err(ValueError::Misaligned {
            va,
            what: how.what(),
            align: need,
        });
    }
    at.check(session)?;
    if matches!(how, Use::Write { .. }) {
        let end = va.get() + need;
        if let Some(&semaphore) = timelines
            .iter()
            .find(|s| s.get() < end && va.get() < s.get() + WRITTEN_BYTES)
        {
            return Err(ValueError::Timeline(OverTimeline { va, semaphore }));
        }
    }
    Ok(va)
}
