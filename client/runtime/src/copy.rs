//! Copies on the copy engine between the session's memory (host leases and GPU memory
//! in any direction), each end checked against the session's ledger before anything is
//! submitted, completed by the copy engine's own release in the last line's LAUNCH_DMA.
//!
//! Flow: [`CopyChannel::copy`] / [`CopyChannel::fill`] → [`Span::check`] on both ends
//! (the session's ledger) → `Channel::copy` / `Channel::fill` of rig-client (lines of
//! at most 4 GiB - 1, the engine's 32-bit release in the last) → submit → the value,
//! which [`CopyChannel::wait`] waits for. Copies between two places in GPU memory go
//! faster through the copy kernel on a compute channel (`Runtime::copy` chooses): one
//! copy engine moved 95 GB/s device to device on the H200, the kernel 1949 GB/s
//! (docs/hardware/nvidia-compute.md, "What the H200 ran").
//!
//! State: one lent copy channel. Not here: the words (rig-nv's `method::copy`).

use std::time::Duration;

use rig_client::{
    channel::{Channel, ChannelError, Engine, Fence, Options, Rings},
    session::Session,
};

use crate::memory::{MemoryError, Span};

/// Why a copy was refused or did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The channel's own error: a posted fault, a timeout, a full ring.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// An end the session does not hold, or a range past its memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The two ends differ in length.
    #[error("A copy of {src} bytes into {dst}: the ends must be as long")]
    Lengths {
        /// The source's length.
        src: u64,
        /// The destination's.
        dst: u64,
    },
    /// Nothing to copy.
    #[error("A copy of 0 bytes")]
    Empty,
    /// A copy channel was asked of a channel of another engine.
    #[error("Channel {channel} drives the {engine:?} engine, not the copy engine")]
    WrongEngine {
        /// rigd's handle.
        channel: u64,
        /// Its engine.
        engine: Engine,
    },
}

/// How a copy channel is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOptions {
    /// Ring entries.
    pub entries: u64,
    /// Pushbuffer bytes.
    pub pushbuffer: u64,
    /// Where the ring and pushbuffer live.
    pub rings: Rings,
}

impl Default for CopyOptions {
    fn default() -> Self {
        Self {
            entries: 1024,
            pushbuffer: 64 << 10,
            rings: Rings::Host,
        }
    }
}

/// A lent copy channel that copies between the session's memory.
#[derive(Debug)]
pub struct CopyChannel {
    ch: Channel,
}

impl CopyChannel {
    /// Opens a copy channel in `session`.
    ///
    /// # Errors
    /// [`CopyError::Channel`] with rigd's refusal.
    pub async fn open(session: &Session, o: CopyOptions) -> Result<Self, CopyError> {
        let ch = Channel::open_opts(
            session,
            Engine::Copy,
            Options {
                entries: o.entries,
                pushbuffer: o.pushbuffer,
                arena: 0,
                rings: o.rings,
            },
        )
        .await?;
        Ok(Self { ch })
    }

    /// Copies on `ch`, which must be a copy channel; a channel of another engine comes
    /// back with the refusal.
    ///
    /// # Errors
    /// [`CopyError::WrongEngine`], with the channel.
    pub fn from_channel(ch: Channel) -> Result<Self, Box<(CopyError, Channel)>> {
        if ch.engine() != Engine::Copy {
            let e = CopyError::WrongEngine {
                channel: ch.id(),
                engine: ch.engine(),
            };
            return Err(Box::new((e, ch)));
        }
        Ok(Self { ch })
    }

    /// The lent channel.
    pub fn channel(&mut self) -> &mut Channel {
        &mut self.ch
    }

    /// Copies `src` to `dst` (as long as each other), both checked against `session`'s
    /// ledger first, and submits. Returns the value the copy engine releases when the
    /// last byte is written.
    ///
    /// # Errors
    /// [`CopyError::Memory`] (`NotOwned`) and [`CopyError::Lengths`] /
    /// [`CopyError::Empty`] with nothing submitted; [`CopyError::Channel`].
    pub fn copy(
        &mut self,
        session: &Session,
        src: Span<'_>,
        dst: Span<'_>,
    ) -> Result<u64, CopyError> {
        let v = self.enqueue_copy(session, src, dst)?;
        self.ch.submit()?;
        Ok(v)
    }

    /// [`CopyChannel::copy`] without ringing the doorbell ([`CopyChannel::submit`]).
    ///
    /// # Errors
    /// As [`CopyChannel::copy`].
    pub fn enqueue_copy(
        &mut self,
        session: &Session,
        src: Span<'_>,
        dst: Span<'_>,
    ) -> Result<u64, CopyError> {
        check(session, &src, &dst)?;
        Ok(self.ch.copy(src.va(), dst.va(), src.len())?)
    }

    /// Fills `dst` with the 32-bit `value` (a multiple of 4 bytes at a 4-aligned
    /// address), checked against `session`'s ledger first, and submits; returns the
    /// value the copy engine releases when it is done.
    ///
    /// # Errors
    /// As [`CopyChannel::copy`]; [`CopyError::Channel`] for a misaligned or odd range.
    pub fn fill(&mut self, session: &Session, dst: Span<'_>, value: u32) -> Result<u64, CopyError> {
        let v = self.enqueue_fill(session, dst, value)?;
        self.ch.submit()?;
        Ok(v)
    }

    /// [`CopyChannel::fill`] without ringing the doorbell ([`CopyChannel::submit`]).
    ///
    /// # Errors
    /// As [`CopyChannel::fill`].
    pub fn enqueue_fill(
        &mut self,
        session: &Session,
        dst: Span<'_>,
        value: u32,
    ) -> Result<u64, CopyError> {
        if dst.is_empty() {
            return Err(CopyError::Empty);
        }
        dst.check(session)?;
        Ok(self.ch.fill(dst.va(), value, dst.len())?)
    }

    /// Rings the doorbell for everything enqueued.
    ///
    /// # Errors
    /// [`CopyError::Channel`] (`RingFull`).
    pub fn submit(&mut self) -> Result<(), CopyError> {
        Ok(self.ch.submit()?)
    }

    /// Makes the next copy or fill wait on the GPU until `fence` (another channel's
    /// value, e.g. a launch whose output it copies) landed: a semaphore acquire on this
    /// channel. The copy engine runs a channel's copies in order, so a fence of this
    /// channel adds nothing.
    ///
    /// # Errors
    /// [`CopyError::Channel`]: a fence of another session (`ForeignFence`), a full
    /// pushbuffer.
    pub fn acquire(&mut self, fence: Fence) -> Result<(), CopyError> {
        self.ch.acquire(fence)?;
        Ok(())
    }

    /// Waits up to `timeout` until the copy engine released `value`; a fault the RM
    /// posted for the channel comes back typed, never as done.
    ///
    /// # Errors
    /// [`CopyError::Channel`] (`Fault`, `Timeout`).
    pub fn wait(&mut self, value: u64, timeout: Duration) -> Result<(), CopyError> {
        Ok(self.ch.wait(value, timeout)?)
    }

    /// Closes the channel in rigd.
    ///
    /// # Errors
    /// As `Channel::close`.
    pub async fn close(self, session: &Session) -> Result<(), CopyError> {
        Ok(self.ch.close(session).await?)
    }
}

/// The checks every copy makes before it submits: lengths, then both ends against the
/// session's ledger.
pub(crate) fn check(session: &Session, src: &Span<'_>, dst: &Span<'_>) -> Result<(), CopyError> {
    if src.len() != dst.len() {
        return Err(CopyError::Lengths {
            src: src.len(),
            dst: dst.len(),
        });
    }
    if src.is_empty() {
        return Err(CopyError::Empty);
    }
    src.check(session)?;
    dst.check(session)?;
    Ok(())
}
