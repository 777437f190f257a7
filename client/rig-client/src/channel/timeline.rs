//! A channel's timeline: a 64-bit value the GPU releases into host memory, which only
//! grows. The client picks the values; this module refuses one that would move it
//! backwards before any word is written (a waiter on a larger value would otherwise
//! wait forever, or a later wait would pass early), and tells whether a value read back
//! has been reached.
//!
//! Who writes what: the GPU writes the semaphore (value at +0, timestamp at +8); the
//! client reads it; nobody else writes it. Which engine writes it, and how wide, is the
//! channel's ([`Payload`]): the compute engine and the host write all 64 bits (a QMD's
//! release slot with TWO_WORDS and PAYLOAD64B; `method::release`), the copy engine only
//! the low 32 (HOPPER_DMA_COPY_A's semaphore payload is one word). A 32-bit payload is
//! read back as the one value in flight whose low 32 bits it holds ([`extend`]); that
//! is exact while fewer than 2^31 values are in flight, which the pushbuffer guarantees
//! (every release takes at least 6 of its at most 2^31 words, and a word is reused only
//! after the release behind it landed).

/// What a timeline refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    #[error("A release of {value} after {last}: the timeline never moves backwards")]
    Backwards { value: u64, last: u64 },
    #[error("The timeline is at its last value, 2^64 - 1")]
    Exhausted,
    #[error("A wait for {value}, which no release has promised (the last is {last})")]
    NeverReleased { value: u64, last: u64 },
}

/// How many bits of the timeline value the engine writes into the semaphore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// The low 32 bits (the copy engine's semaphore release).
    Word32,
    /// All 64 bits (a QMD release slot with TWO_WORDS and PAYLOAD64B; host releases).
    Word64,
}

/// The timeline value a semaphore read `raw` stands for, given that every value up to
/// `settled` is known to have landed and none past `last` was promised. With a 64-bit
/// payload that is `raw`; with a 32-bit one, the value in `settled..=last` whose low 32
/// bits `raw` holds (host releases on the same semaphore write the same low bits), or
/// `settled` when none does (a word from before the channel, or torn by nothing: the
/// value has not moved). Exact while `last - settled < 2^32`.
pub fn extend(payload: Payload, settled: u64, last: u64, raw: u64) -> u64 {
    match payload {
        Payload::Word64 => raw,
        Payload::Word32 => {
            // CAST: the low 32 bits are what the engine wrote; the distance is taken
            // modulo 2^32 on purpose.
            let low = (raw & 0xffff_ffff) as u32;
            let ahead = u64::from(low.wrapping_sub((settled & 0xffff_ffff) as u32));
            settled
                .checked_add(ahead)
                .filter(|&v| v <= last)
                .unwrap_or(settled)
        }
    }
}

/// The values promised so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    last: u64,
}

impl Timeline {
    /// A timeline whose semaphore starts at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The largest value promised.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Promises the next value and returns it.
    ///
    /// # Errors
    /// [`TimelineError::Exhausted`] after 2^64 - 1.
    pub fn advance(&mut self) -> Result<u64, TimelineError> {
        let v = self.last.checked_add(1).ok_or(TimelineError::Exhausted)?;
        self.last = v;
        Ok(v)
    }

    /// Promises `value`, which must not be below the last one (the same value again
    /// is allowed: it moves nothing).
    ///
    /// # Errors
    /// [`TimelineError::Backwards`], promising nothing.
    pub fn promise(&mut self, value: u64) -> Result<u64, TimelineError> {
        if value < self.last {
            return Err(TimelineError::Backwards {
                value,
                last: self.last,
            });
        }
        self.last = value;
        Ok(value)
    }

    /// Whether `current`, read from the semaphore, has reached `value`.
    ///
    /// # Errors
    /// [`TimelineError::NeverReleased`] for a value beyond every promise: the wait
    /// could never end.
    pub fn reached(&self, value: u64, current: u64) -> Result<bool, TimelineError> {
        if value > self.last {
            return Err(TimelineError::NeverReleased {
                value,
                last: self.last,
            });
        }
        Ok(current >= value)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn values_grow_and_a_smaller_one_is_refused() {
        let mut t = Timeline::new();
        assert_eq!(t.advance(), Ok(1));
        assert_eq!(t.promise(10), Ok(10));
        assert_eq!(t.promise(10), Ok(10), "the same value again moves nothing");
        assert_eq!(
            t.promise(9),
            Err(TimelineError::Backwards { value: 9, last: 10 })
        );
        assert_eq!(t.last(), 10);
        assert_eq!(t.advance(), Ok(11));
        assert_eq!(t.promise(u64::MAX), Ok(u64::MAX));
        assert_eq!(t.advance(), Err(TimelineError::Exhausted));
    }

    #[test]
    fn waits_end_at_their_value_and_waits_past_every_promise_are_refused() {
        let mut t = Timeline::new();
        t.promise(5).expect("promise");
        assert_eq!(t.reached(5, 4), Ok(false));
        assert_eq!(t.reached(5, 5), Ok(true));
        assert_eq!(t.reached(3, 5), Ok(true));
        assert_eq!(
            t.reached(6, 5),
            Err(TimelineError::NeverReleased { value: 6, last: 5 })
        );
    }

    #[test]
    fn a_32_bit_payload_extends_to_the_value_in_flight_with_those_low_bits() {
        let w32 = Payload::Word32;
        assert_eq!(extend(w32, 0, 5, 3), 3);
        assert_eq!(extend(w32, 3, 5, 3), 3, "no progress");
        // Across a 2^32 boundary: the high word in memory is stale, the low one new.
        let base = (7 << 32) - 2;
        assert_eq!(extend(w32, base, base + 10, 1), (7 << 32) + 1);
        assert_eq!(extend(w32, base, base + 10, (6 << 32) | 1), (7 << 32) + 1);
        // Low bits of no value in flight (nothing landed since): stays settled.
        assert_eq!(extend(w32, 100, 105, 99), 100);
        assert_eq!(extend(w32, 100, 105, 106), 100);
        assert_eq!(
            extend(w32, u64::MAX - 1, u64::MAX, u64::from(u32::MAX)),
            u64::MAX
        );
        assert_eq!(extend(Payload::Word64, 100, 105, 99), 99);
    }

    proptest! {
        #[test]
        fn a_32_bit_read_of_any_value_in_flight_extends_to_that_value(
            settled in any::<u64>(),
            ahead in 0u64..(1 << 31),
            beyond in 0u64..(1 << 31),
        ) {
            let v = settled.saturating_add(ahead);
            let last = v.saturating_add(beyond);
            prop_assert_eq!(extend(Payload::Word32, settled, last, v & 0xffff_ffff), v);
        }

        #[test]
        fn the_promised_value_never_decreases(values in proptest::collection::vec(any::<u64>(), 1..100)) {
            let mut t = Timeline::new();
            let mut max = 0;
            for v in values {
                let r = t.promise(v);
                prop_assert_eq!(r.is_ok(), v >= max);
                max = max.max(v);
                prop_assert_eq!(t.last(), max);
            }
        }
    }
}
