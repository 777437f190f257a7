//! Waits on the GPU between channels of one session: a [`Fence`] names a value on a
//! channel's timeline (its semaphore's address, the value, how wide the engine writes
//! it), and [`Channel::acquire`] makes another channel's host wait for it before any
//! later method, with no round trip through the host: one copy's data feeds the next
//! kernel, one kernel's result the next copy.
//!
//! The rules (docs/hardware/nvidia-channels.md, "Waits on the GPU"):
//! - a fence is made only for a value the channel promised, and the words that release
//!   it are in the ring before the fence exists ([`Channel::fence`] submits them), so
//!   an acquire never waits for work that was never sent: no wait made here can
//!   deadlock, since work already pushed cannot wait on work pushed after it;
//! - the acquire compares circularly and as wide as the engine releases: 32 bits for
//!   a copy engine's semaphore (its high word is never written), 64 for the compute
//!   engine's and the host's;
//! - a fence of another session is refused (its address means other memory here);
//! - a wait for a channel on the same engine keeps the channel group on the engine
//!   (rigd puts a session's channels of one engine in one group, and switching it
//!   out switches out the work waited for); a wait for another engine's lets the
//!   scheduler serve other groups;
//! - a fence on the channel itself adds nothing: one channel's host runs its methods
//!   in order, and its engine's order is the engine's own (WFI, for a compute channel
//!   that lets grids overlap, is the runtime's concern); nor does a fence an earlier
//!   acquire of this channel already covers (the largest value acquired of each other
//!   channel is kept).
//!
//! Not here: the words (rig-nv's `method::acquire`), what waits for what (rig-runtime).

use rig_model::addr::GpuVa;
use rig_nv::method::{self, Waiting};

use super::{Channel, ChannelError, TimelineError, timeline::Payload};
use crate::session::SessionId;

/// A value on one channel's timeline that other channels of the session may wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// The channel whose engine releases it.
    pub channel: u64,
    /// That channel's session.
    pub session: SessionId,
    /// Its timeline semaphore.
    pub semaphore: GpuVa,
    /// The value.
    pub value: u64,
    /// How wide the engine writes it.
    pub payload: Payload,
}

impl Channel {
    /// A fence for `value` of this channel's timeline. Words not yet in the ring are
    /// submitted first, so the value is on its way when another channel waits for it.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] (`NeverReleased`) for a value never promised; as
    /// [`Channel::submit`].
    pub fn fence(&mut self, value: u64) -> Result<Fence, ChannelError> {
        let last = self.timeline.last();
        if value > last {
            return Err(TimelineError::NeverReleased { value, last }.into());
        }
        // `recorded` is the last value a submission carried to the ring.
        if value > self.recorded {
            self.submit()?;
        }
        Ok(Fence {
            channel: self.id,
            session: self.session,
            semaphore: self.sem_va,
            value,
            payload: self.payload,
        })
    }

    /// Makes this channel wait on the GPU, before any method pushed after this call,
    /// until `fence` has landed: a host semaphore acquire (6 words), which the PBDMA
    /// polls. For a fence of a channel on the same engine, which rigd puts in the
    /// same channel group, the group stays on while it waits ([`Waiting::Stay`]:
    /// switching it out would switch out the work it waits for); for another engine's
    /// the scheduler serves other groups meanwhile ([`Waiting::SwitchGroup`];
    /// docs/hardware/nvidia-channels.md, "Waits on the GPU"). Returns whether words
    /// were pushed (none for a fence on this channel itself). Like every push it takes
    /// effect at the next [`Channel::submit`].
    ///
    /// # Errors
    /// [`ChannelError::ForeignFence`] for a fence of another session; as
    /// [`Channel::push`].
    pub fn acquire(&mut self, fence: Fence) -> Result<bool, ChannelError> {
        if fence.session != self.session {
            return Err(ChannelError::ForeignFence {
                channel: self.id,
                session: self.session.0,
                of: fence.channel,
                of_session: fence.session.0,
            });
        }
        if fence.channel == self.id {
            return Ok(false);
        }
        let known = self.acquired.iter_mut().find(|(c, _)| *c == fence.channel);
        if known.as_ref().is_some_and(|(_, v)| *v >= fence.value) {
            // An earlier acquire on this channel covers it: the host runs methods in
            // order, so everything after that one already waits for more.
            return Ok(false);
        }
        // The release's width says the engine: 64 bits the host's and compute's, 32
        // the copy engine's.
        let meanwhile = if fence.payload == self.payload {
            Waiting::Stay
        } else {
            Waiting::SwitchGroup
        };
        let words = match fence.payload {
            // CAST: the copy engine writes the low 32 bits; the compare is circular
            // modulo 2^32 (`timeline::extend` reads it back the same way).
            Payload::Word32 => method::acquire32(
                fence.semaphore,
                (fence.value & 0xffff_ffff) as u32,
                meanwhile,
            )?,
            Payload::Word64 => method::acquire(fence.semaphore, fence.value, meanwhile)?,
        };
        // Not work an engine releases: the last command no longer releases a value,
        // but nothing raw that only a QMD could complete was pushed either.
        self.push_words(&words)?;
        self.tail_release = None;
        match self.acquired.iter_mut().find(|(c, _)| *c == fence.channel) {
            Some((_, v)) => *v = fence.value,
            None => self.acquired.push((fence.channel, fence.value)),
        }
        Ok(true)
    }

    /// Makes this channel wait on the GPU, before any method pushed after this call,
    /// until the 64-bit value at `addr` has reached `value` (compared circularly):
    /// memory outside every channel's timeline that this session's space maps, an
    /// imported event's page (`event`). Its release comes from another session's
    /// work, so the scheduler serves other groups meanwhile ([`Waiting::SwitchGroup`]):
    /// a wait that never ends holds up only this channel.
    ///
    /// # Errors
    /// [`ChannelError::Method`] for an address past 2^57 or not 8-byte aligned; as
    /// [`Channel::push`].
    pub fn acquire_at(&mut self, addr: GpuVa, value: u64) -> Result<(), ChannelError> {
        let words = method::acquire(addr, value, Waiting::SwitchGroup)?;
        self.push_words(&words)?;
        self.tail_release = None;
        Ok(())
    }
}
