//! Where launch templates keep their slots in a compute channel's arena: first fit over
//! a free list of 256-byte-aligned byte ranges, freed ranges merged with their
//! neighbours. Pure bookkeeping: the bytes are the channel's (`Channel::write_arena`).
//!
//! Flow: the compute channel asks for a template's slots when it first launches a
//! (kernel, shape); when the arena is full it gives back a template whose launches have
//! all landed, and asks again.

use rig_client::session::arena::Arena as FirstFit;

/// Alignment and granularity of every range (a QMD's alignment).
pub const GRANULE: u64 = 256;

/// Free space in an arena of `len` bytes: rig-client's first-fit carving (the one its
/// sessions carve leases with), at the QMD's granule.
#[derive(Debug, Clone)]
pub struct Arena {
    len: u64,
    ranges: FirstFit,
}

impl Arena {
    /// All of `[0, len)` free (`len` rounded down to the granule).
    pub fn new(len: u64) -> Self {
        let len = len / GRANULE * GRANULE;
        Self {
            len,
            ranges: FirstFit::new(len),
        }
    }

    /// Its size.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// A range of `size` bytes (rounded up to the granule); `None` when no free range
    /// is that large.
    pub fn alloc(&mut self, size: u64) -> Option<u64> {
        let size = size.checked_next_multiple_of(GRANULE)?.max(GRANULE);
        self.ranges.alloc(size, GRANULE)
    }

    /// Gives back `[offset, offset + size)`, as `alloc` handed it out.
    pub fn free(&mut self, offset: u64, size: u64) {
        if let Some(size) = size
            .checked_next_multiple_of(GRANULE)
            .map(|s| s.max(GRANULE))
        {
            self.ranges.free(offset, size);
        }
    }

    /// Bytes free in all.
    #[cfg(test)]
    pub fn free_bytes(&self) -> u64 {
        self.len - self.ranges.used()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn ranges_are_granule_aligned_first_fit_and_merge_back() {
        let mut a = Arena::new(4096 + 100);
        assert_eq!(a.len(), 4096);
        assert_eq!(a.alloc(1), Some(0));
        assert_eq!(a.alloc(300), Some(256));
        assert_eq!(a.alloc(256), Some(768));
        a.free(256, 300);
        assert_eq!(a.alloc(200), Some(256), "first fit, into the hole");
        assert_eq!(a.alloc(4096), None);
        a.free(0, 1);
        a.free(256, 200);
        a.free(768, 256);
        assert_eq!(a.free_bytes(), 4096);
        assert_eq!(a.alloc(4096), Some(0), "one range again");
        assert_eq!(a.alloc(1), None);
        assert_eq!(Arena::new(100).alloc(1), None);
        assert_eq!(Arena::new(4096).alloc(u64::MAX), None);
    }

    proptest! {
        #[test]
        fn ranges_never_overlap_and_all_come_back(sizes in proptest::collection::vec(1u64..5000, 1..60)) {
            let mut a = Arena::new(64 << 10);
            let mut held: Vec<(u64, u64)> = Vec::new();
            for (i, s) in sizes.iter().enumerate() {
                if let Some(at) = a.alloc(*s) {
                    let end = at + s.next_multiple_of(GRANULE);
                    prop_assert!(end <= a.len() && at % GRANULE == 0);
                    for &(o, n) in &held {
                        prop_assert!(end <= o || at >= o + n.next_multiple_of(GRANULE));
                    }
                    held.push((at, *s));
                }
                if i % 3 == 2 && !held.is_empty() {
                    let (o, n) = held.remove(i % held.len());
                    a.free(o, n);
                }
            }
            for (o, n) in held {
                a.free(o, n);
            }
            prop_assert_eq!(a.free_bytes(), a.len());
        }
    }
}
