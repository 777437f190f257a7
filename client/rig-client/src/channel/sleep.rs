//! Waits that sleep: a [`WaitPolicy`] says how a channel's wait spends the time until
//! its value lands, as CUDA's schedule flags do (spin, yield, block, and spin then
//! block, the default); a blocked wait sleeps in poll(2) on the channel's wake
//! descriptor, an eventfd rigd signals whenever the GPU raises a non-stall interrupt.
//!
//! The GPU raises it only when asked: before a wait first sleeps for a value, it arms
//! the channel ([`Channel::arm`]): a host acquire of the channel's own semaphore for
//! that value (the channel's host stops there until the engine has released it; the
//! group stays on the engine, since the release comes from the channel's own work),
//! a release of the value + 1 into the channel's wake word where rigd gave one (rigd
//! then signals this channel only for edges its word announces, not for every other
//! channel's interrupt; the open wrote [`WAKE_OPENED`] there), and then
//! NON_STALL_INTERRUPT. So a wait that ends while spinning costs the GPU nothing, and
//! one that sleeps costs 13 words (7 without a wake word) and one interrupt.
//!
//! The rules (docs/channels.md, "Waiting"):
//! - a wake says only that something on the GPU raised the interrupt (rigd's RM event
//!   is per GPU, not per channel): the wait re-reads its semaphore and its notifier,
//!   and sleeps again if neither changed;
//! - no wake is lost: the eventfd stays readable until read, the value is read after
//!   every wake and before every sleep, and the interrupt is raised only once the value
//!   landed, so the wake it causes comes after the value is visible;
//! - a sleep lasts at most [`BLOCK_SLICE`] (with rings in GPU memory, until the next
//!   doorbell look, `REKICK_*`), so a fault that rigd did not signal or a wake that
//!   never comes (rigd gone) still ends the wait by its timeout;
//! - a channel without a wake descriptor (rigd gave none: no event on its GPU) treats
//!   blocking as yielding; a channel whose pushbuffer or ring has no room for the arm
//!   words yields until they fit (a sleep before they reach the ring would wait for an
//!   interrupt that cannot come); a channel whose wakes did not come for
//!   [`MISSES_BEFORE_YIELD`] values in a row, although the values landed, yields from
//!   then on ([`Channel::missed_wakes`]).
//!
//! Not here: the loop itself (`lent`'s `Channel::wait`), rigd's side (`channels::wake`).

use std::{os::fd::BorrowedFd, time::Duration};

use rig_model::addr::GpuVa;
use rig_nv::method::{self, Release, Waiting};

use super::{Channel, ChannelError, timeline::Payload};

/// What a client that writes its channel's wake word puts there at open: rigd then
/// passes the channel over on interrupts until an arm releases `value + 1` (at least
/// 2) into it; a word still 0 is a client that never writes it, woken on every
/// interrupt (rigd's `channels::wake`).
pub const WAKE_OPENED: u64 = 1;

/// How long [`WaitPolicy::default`] spins (yielding past `YIELD_AFTER`) before it
/// sleeps: longer than an empty round trip and a short kernel, so waits for those
/// never pay a wake-up; short against the CPU a long kernel's wait would burn.
pub const SPIN_BEFORE_BLOCK: Duration = Duration::from_micros(200);

/// The longest one sleep of a blocked wait lasts before it looks again.
pub const BLOCK_SLICE: Duration = Duration::from_millis(50);

/// How long after a sleep's slice a wait whose value landed still waits for the wake
/// before it counts the wake as missed.
pub const WAKE_GRACE: Duration = Duration::from_millis(2);

/// Wakes missed in a row after which a channel's waits no longer sleep (they yield):
/// a rigd that cannot see the GPU's interrupts, or a driver that does not raise them,
/// costs at most this many slow waits, not every wait's latency.
pub const MISSES_BEFORE_YIELD: u32 = 3;

/// How a wait spends the time until its value lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Spin on the semaphore throughout (CUDA's `cudaDeviceScheduleSpin`): the least
    /// latency, a CPU busy for the whole wait.
    Spin,
    /// Spin, and past `YIELD_AFTER` yield the CPU between looks
    /// (`cudaDeviceScheduleYield`).
    Yield,
    /// Sleep in the kernel from the first look that misses until the GPU's interrupt
    /// (`cudaDeviceScheduleBlockingSync`): no CPU while waiting, a wake-up's latency.
    Block,
    /// Spin and yield for this long, then sleep (the default:
    /// [`SPIN_BEFORE_BLOCK`]).
    SpinThenBlock(Duration),
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::SpinThenBlock(SPIN_BEFORE_BLOCK)
    }
}

/// What a wait does next, `waited` into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Spin,
    Yield,
    Block,
}

impl WaitPolicy {
    pub(crate) fn phase(self, waited: Duration, yield_after: Duration) -> Phase {
        let spin_or_yield = if waited >= yield_after {
            Phase::Yield
        } else {
            Phase::Spin
        };
        match self {
            Self::Spin => Phase::Spin,
            Self::Yield => spin_or_yield,
            Self::Block => Phase::Block,
            Self::SpinThenBlock(d) if waited >= d => Phase::Block,
            Self::SpinThenBlock(_) => spin_or_yield,
        }
    }
}

impl Channel {
    /// How this channel's waits spend their time.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.policy
    }

    /// Sets how this channel's waits spend their time, from the next wait on.
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// The wake descriptor rigd signals on the GPU's non-stall interrupts (readable
    /// until drained), to hand to an event loop after [`Channel::arm`]; None when rigd
    /// gave the channel none.
    pub fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.wake.as_ref().map(rig_sys::wake::Wake::fd)
    }

    /// Clears the wake descriptor after an event loop saw it readable; true if it was
    /// signalled. Re-read the value after.
    ///
    /// # Errors
    /// [`ChannelError::Map`] when the descriptor cannot be read.
    pub fn drain_wake(&self) -> Result<bool, ChannelError> {
        match &self.wake {
            Some(w) => w.drain().map_err(|source| self.wake_error(source)),
            None => Ok(false),
        }
    }

    /// How many times waits armed the channel's interrupt.
    pub fn interrupts(&self) -> u64 {
        self.interrupts
    }

    /// Makes the GPU raise a non-stall interrupt once `value` has landed (a host
    /// acquire of the channel's own semaphore, a release of `value + 1` into the wake
    /// word where rigd gave one, then NON_STALL_INTERRUPT: 13 words, or 7, submitted at
    /// once, with whatever was pushed before them). Returns false when the
    /// channel has no wake descriptor, no room in its pushbuffer for the words (nothing
    /// is pushed), or no room in its ring for them now (they stay queued, and a later
    /// arm or submit sends them); true once they are in the ring for `value` or more. A
    /// later arm for no more adds no words.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] for a value never promised; as [`Channel::submit`].
    pub fn arm(&mut self, value: u64) -> Result<bool, ChannelError> {
        if self.wake.is_none() || self.missed_in_a_row >= MISSES_BEFORE_YIELD {
            return Ok(false);
        }
        let current = self.settle()?;
        if self.timeline.reached(value, current)? {
            return Ok(true);
        }
        if self.armed >= value {
            // Armed before; its words may still wait for room in the ring.
            return self.submit_arm();
        }
        let acquire = match self.payload {
            // CAST: the copy engine writes the low 32 bits; the compare is circular
            // modulo 2^32, as `timeline::extend` reads it.
            Payload::Word32 => {
                method::acquire32(self.sem_va, (value & 0xffff_ffff) as u32, Waiting::Stay)?
            }
            Payload::Word64 => method::acquire(self.sem_va, value, Waiting::Stay)?,
        };
        let mut words = [0u32; 13];
        words[..6].copy_from_slice(&acquire);
        let mut n = 6;
        if let Some(va) = self.wake_va {
            // No WFI: the acquire before it already held the host until the value.
            let said = Release {
                wait_idle: false,
                timestamp: false,
            };
            // value + 1: 1 is WAKE_OPENED. Values are far below 2^64.
            let word = value.saturating_add(1);
            words[n..n + 6].copy_from_slice(&method::release_with(va, word, said)?);
            n += 6;
        }
        words[n..=n].copy_from_slice(&method::non_stall_interrupt());
        match self.push_words(&words[..=n]) {
            Ok(()) => {}
            Err(ChannelError::PushbufferFull { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
        // No engine releases after these words: a later `release` adds its own.
        self.tail_release = None;
        self.armed = value;
        self.interrupts += 1;
        self.submit_arm()
    }

    /// Submits what is queued, the arm words last; false when the ring has no room
    /// for them yet (they stay queued): no interrupt can come until they are in it.
    fn submit_arm(&mut self) -> Result<bool, ChannelError> {
        match self.submit() {
            Ok(()) => Ok(true),
            Err(ChannelError::RingFull { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One sleep of a blocked wait for `value`: arms the channel if it is not, then
    /// polls the wake descriptor for at most `slice`. False when the channel could not
    /// be armed (the caller yields instead).
    pub(super) fn sleep(&mut self, value: u64, slice: Duration) -> Result<bool, ChannelError> {
        if !self.arm(value)? {
            return Ok(false);
        }
        // An arm that found the value landed raised nothing to wake on.
        let current = self.settle()?;
        if self.timeline.reached(value, current)? {
            return Ok(true);
        }
        let woken = self.wait_wake(slice)?;
        self.sleeps += 1;
        if woken {
            self.missed_in_a_row = 0;
            return Ok(true);
        }
        // The slice ended with no wake. If the value landed meanwhile, its interrupt
        // should follow within microseconds: give it WAKE_GRACE, and count a miss if
        // it does not come.
        let current = self.settle()?;
        if self.timeline.reached(value, current)? {
            if self.wait_wake(WAKE_GRACE)? {
                self.missed_in_a_row = 0;
            } else {
                self.missed_wakes += 1;
                self.missed_in_a_row += 1;
            }
        }
        Ok(true)
    }

    /// Pushes words that raise the GPU's non-stall interrupt once the 64-bit value at
    /// `addr` (memory this channel itself just released, an exported event's page)
    /// has reached `value`: an acquire that holds the channel's host until the value
    /// is visible, then NON_STALL_INTERRUPT (7 words), so a process whose wait sleeps
    /// on its own channel's wake descriptor wakes after the value landed, not before.
    /// Returns false, pushing nothing, when the channel has no wake descriptor (rigd
    /// has no event on the GPU: nobody's wait sleeps on it).
    ///
    /// # Errors
    /// [`ChannelError::Method`] for an address past 2^57; as [`Channel::push`].
    pub fn interrupt_at(&mut self, addr: GpuVa, value: u64) -> Result<bool, ChannelError> {
        if self.wake.is_none() {
            return Ok(false);
        }
        let mut words = [0u32; 7];
        words[..6].copy_from_slice(&method::acquire(addr, value, Waiting::Stay)?);
        words[6..].copy_from_slice(&method::non_stall_interrupt());
        self.push_words(&words)?;
        self.tail_release = None;
        self.interrupts += 1;
        Ok(true)
    }

    /// Sleeps until the channel's wake descriptor is signalled (any non-stall interrupt
    /// on the GPU, or rigd's wake of this session) or `d` passes, then drains it; true
    /// if it was signalled. Without a descriptor, sleeps `d` and returns false. For a
    /// wait on memory no channel of this session releases (an imported event): the
    /// caller re-reads after each return.
    ///
    /// # Errors
    /// poll(2)'s and read(2)'s, as [`ChannelError::Map`].
    pub fn sleep_until_woken(&self, d: Duration) -> Result<bool, ChannelError> {
        if self.wake.is_none() {
            std::thread::sleep(d);
            return Ok(false);
        }
        self.wait_wake(d)
    }

    /// How many times a sleeping wait's value landed with no wake within
    /// [`WAKE_GRACE`]. After [`MISSES_BEFORE_YIELD`] in a row the channel's waits stop
    /// sleeping and yield instead: its interrupts do not reach this process.
    pub fn missed_wakes(&self) -> u64 {
        self.missed_wakes
    }

    /// How many times waits slept in the kernel.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// Polls the wake descriptor for at most `d`; true if it was signalled (false
    /// without one).
    fn wait_wake(&self, d: Duration) -> Result<bool, ChannelError> {
        match &self.wake {
            Some(w) => w.wait(d).map_err(|source| self.wake_error(source)),
            None => Ok(false),
        }
    }

    fn wake_error(&self, source: std::io::Error) -> ChannelError {
        ChannelError::Map {
            channel: self.id,
            what: "its wake descriptor",
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Y: Duration = Duration::from_micros(50);

    #[test]
    fn each_policy_spins_yields_and_blocks_when_it_says() {
        let us = Duration::from_micros;
        assert_eq!(WaitPolicy::Spin.phase(us(10_000), Y), Phase::Spin);
        assert_eq!(WaitPolicy::Yield.phase(us(10), Y), Phase::Spin);
        assert_eq!(WaitPolicy::Yield.phase(us(60), Y), Phase::Yield);
        assert_eq!(WaitPolicy::Block.phase(us(0), Y), Phase::Block);
        let d = WaitPolicy::default();
        assert_eq!(d, WaitPolicy::SpinThenBlock(SPIN_BEFORE_BLOCK));
        assert_eq!(d.phase(us(10), Y), Phase::Spin);
        assert_eq!(d.phase(us(100), Y), Phase::Yield);
        assert_eq!(d.phase(SPIN_BEFORE_BLOCK, Y), Phase::Block);
        // Blocking sooner than the yield threshold skips the yields.
        assert_eq!(
            WaitPolicy::SpinThenBlock(us(20)).phase(us(30), Y),
            Phase::Block
        );
    }
}
