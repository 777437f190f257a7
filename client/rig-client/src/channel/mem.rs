//! Where a lent channel's memory lies, as this process maps it: the ring and USERD (the
//! memfd rigd sent, or a window of GPU memory through BAR1), and the memory beside them
//! that only this process writes and the GPU reads — the pushbuffer, and the arena a
//! runtime keeps its launch descriptors and constant banks in (a lease of the session,
//! or the rest of the window).
//!
//! Flow: `lent` picks the kind at open ([`Rings`]) and writes through these views; each
//! write is one volatile aligned store, so the GPU never reads a word torn. Ordering
//! against GP_PUT and the doorbell is `lent`'s (`Channel::submit`): a store fence after
//! the last word, before GP_PUT (docs/hardware/nvidia-channels.md, "Before a doorbell").
//!
//! Not here: what the words mean (rig-nv), where in the pushbuffer they go
//! (`pushbuf`), the RM objects behind the window (rigd).

use std::io;

use rig_sys::mman::{DeviceMapping, Mapping};

use crate::session::{Buffer, SessionError};

/// Where a channel's ring, USERD and pushbuffer live ([`Rings::Host`]: the least host
/// time per submission; [`Rings::Gpu`]: the shortest round trip, lent to root and the
/// members of rigd's `[channels] gpu_rings_group` only): the shared vocabulary's.
pub use rig_model::nv::Rings;

/// A channel's ring and USERD as this process maps them.
#[derive(Debug)]
pub(super) enum RingView {
    /// The memfd rigd sent.
    Host(Mapping),
    /// GPU memory through BAR1, write-combined.
    Gpu(DeviceMapping),
}

impl RingView {
    pub(super) fn read_u32(&self, at: usize) -> io::Result<u32> {
        match self {
            Self::Host(m) => m.read_u32(at),
            Self::Gpu(m) => m.read_u32(at),
        }
    }

    pub(super) fn write_u32(&self, at: usize, v: u32) -> io::Result<()> {
        match self {
            Self::Host(m) => m.write_u32(at, v),
            Self::Gpu(m) => m.write_u32(at, v),
        }
    }

    pub(super) fn write_u64(&self, at: usize, v: u64) -> io::Result<()> {
        match self {
            Self::Host(m) => m.write_u64(at, v),
            Self::Gpu(m) => m.write_u64(at, v),
        }
    }
}

/// Memory beside the ring that the GPU reads and only this process writes.
#[derive(Debug)]
pub(super) enum Beside {
    /// Nothing (a channel opened without an arena).
    None,
    /// One of the session's leases.
    Lease(Buffer),
    /// `len` bytes of the ring's window in GPU memory, from byte `base`.
    Window { base: usize, len: u64 },
}

/// Why a write beside the ring failed.
#[derive(Debug)]
pub(super) enum BesideError {
    /// Outside the memory, or none there.
    Range,
    Session(SessionError),
    Map(io::Error),
}

impl Beside {
    /// The offset in the window of `bytes` at `at`, checked to lie inside this part.
    fn window_at(base: usize, len: u64, at: u64, bytes: u64) -> Result<usize, BesideError> {
        at.checked_add(bytes)
            .filter(|&end| end <= len)
            .and_then(|_| usize::try_from(at).ok())
            .and_then(|at| base.checked_add(at))
            .ok_or(BesideError::Range)
    }

    /// Writes `words` from the aligned byte `at` on. The GPU reads none of them before
    /// the next doorbell (the caller's rule), so a lease takes them as one volatile
    /// copy of their bytes (one call, not one per word); the window, whose mapping
    /// takes only whole words, one store each.
    pub(super) fn write_u32s(
        &self,
        ring: &RingView,
        at: u64,
        words: &[u32],
    ) -> Result<(), BesideError> {
        match self {
            Self::None => Err(BesideError::Range),
            Self::Lease(b) => {
                let mut bytes = [0u8; 64];
                for (i, chunk) in words.chunks(16).enumerate() {
                    for (w, out) in chunk.iter().zip(bytes.chunks_exact_mut(4)) {
                        out.copy_from_slice(&w.to_le_bytes());
                    }
                    b.write(at + 64 * i as u64, &bytes[..4 * chunk.len()])
                        .map_err(BesideError::Session)?;
                }
                Ok(())
            }
            Self::Window { base, len } => {
                let at = Self::window_at(*base, *len, at, 4 * words.len() as u64)?;
                for (i, w) in words.iter().enumerate() {
                    ring.write_u32(at + 4 * i, *w).map_err(BesideError::Map)?;
                }
                Ok(())
            }
        }
    }

    /// Writes `bytes` (whole 8-byte words) from the aligned byte `at` on, as
    /// [`Beside::write_u32s`] does.
    pub(super) fn write_bytes(
        &self,
        ring: &RingView,
        at: u64,
        bytes: &[u8],
    ) -> Result<(), BesideError> {
        match self {
            Self::None => Err(BesideError::Range),
            Self::Lease(b) => b.write(at, bytes).map_err(BesideError::Session),
            Self::Window { base, len } => {
                let at = Self::window_at(*base, *len, at, bytes.len() as u64)?;
                for (i, w) in bytes.chunks_exact(8).enumerate() {
                    let mut word = [0u8; 8];
                    word.copy_from_slice(w);
                    ring.write_u64(at + 8 * i, u64::from_le_bytes(word))
                        .map_err(BesideError::Map)?;
                }
                Ok(())
            }
        }
    }

    /// Writes `words` from the aligned byte `at` on, as [`Beside::write_u32s`] does.
    pub(super) fn write_u64s(
        &self,
        ring: &RingView,
        at: u64,
        words: &[u64],
    ) -> Result<(), BesideError> {
        match self {
            Self::None => Err(BesideError::Range),
            Self::Lease(b) => {
                let mut bytes = [0u8; 64];
                for (i, chunk) in words.chunks(8).enumerate() {
                    for (w, out) in chunk.iter().zip(bytes.chunks_exact_mut(8)) {
                        out.copy_from_slice(&w.to_le_bytes());
                    }
                    b.write(at + 64 * i as u64, &bytes[..8 * chunk.len()])
                        .map_err(BesideError::Session)?;
                }
                Ok(())
            }
            Self::Window { base, len } => {
                let bytes = 8 * words.len() as u64;
                let at = Self::window_at(*base, *len, at, bytes)?;
                for (i, w) in words.iter().enumerate() {
                    ring.write_u64(at + 8 * i, *w).map_err(BesideError::Map)?;
                }
                Ok(())
            }
        }
    }

    /// Keeps a lease out of the session's use after the channel drops (the GPU may
    /// still read it); a window is rigd's and goes with the channel.
    pub(super) fn keep_out(&mut self) {
        if let Self::Lease(b) = self {
            b.keep_out();
        }
    }
}
