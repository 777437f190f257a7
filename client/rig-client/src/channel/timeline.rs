//! A channel's timeline: a 64-bit value the GPU releases into host memory, which only
//! grows. The client picks the values; this module refuses one that would move it
//! backwards before any word is written (a waiter on a larger value would otherwise
//! wait forever, or a later wait would pass early), and tells whether a value read back
//! has been reached.
//!
//! Who writes what: the GPU writes the semaphore (value at +0, timestamp at +8) with
//! `method::release`; the client reads it; nobody else writes it.

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

    proptest! {
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
