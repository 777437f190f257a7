//! rigd's GPU VA allocator: first-fit ranges of one window below 2^40 (where ring
//! entries can point), freed ranges coalesced. Pure.

use std::collections::BTreeMap;

/// Free ranges of a window, by start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaAllocator {
    /// start → length of each free range; no two touch.
    free: BTreeMap<u64, u64>,
    base: u64,
    end: u64,
}

impl VaAllocator {
    /// All of `[base, base + len)` free.
    pub fn new(base: u64, len: u64) -> Self {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(base, len);
        }
        Self {
            free,
            base,
            end: base.saturating_add(len),
        }
    }

    /// The lowest free `len` bytes starting on a multiple of `align` (a power of two),
    /// or `None` when no free range holds them.
    pub fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        if len == 0 || !align.is_power_of_two() {
            return None;
        }
        let (start, flen, at) = self.free.iter().find_map(|(&s, &l)| {
            let at = s.checked_next_multiple_of(align)?;
            let end = at.checked_add(len)?;
            (end <= s + l).then_some((s, l, at))
        })?;
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        let tail = start + flen - (at + len);
        if tail > 0 {
            self.free.insert(at + len, tail);
        }
        Some(at)
    }

    /// Returns `[at, at + len)`, which [`VaAllocator::alloc`] gave out. A range
    /// outside the window or overlapping a free one is refused with `false` and
    /// changes nothing.
    pub fn free(&mut self, at: u64, len: u64) -> bool {
        let Some(end) = at.checked_add(len) else {
            return false;
        };
        if len == 0 || at < self.base || end > self.end {
            return false;
        }
        let before = self.free.range(..=at).next_back().map(|(&s, &l)| (s, l));
        let after = self.free.range(at..).next().map(|(&s, &l)| (s, l));
        if before.is_some_and(|(s, l)| s + l > at) || after.is_some_and(|(s, _)| s < end) {
            return false;
        }
        let (mut start, mut stop) = (at, end);
        if let Some((s, _)) = before.filter(|&(s, l)| s + l == at) {
            self.free.remove(&s);
            start = s;
        }
        if let Some((s, l)) = after.filter(|&(s, _)| s == end) {
            self.free.remove(&s);
            stop = s + l;
        }
        self.free.insert(start, stop - start);
        true
    }

    /// Bytes free.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB2: u64 = 2 << 20;

    #[test]
    fn allocations_are_aligned_first_fit_and_the_window_fills_exactly() {
        let mut a = VaAllocator::new(MIB2, 4 * MIB2);
        assert_eq!(a.alloc(4096, MIB2), Some(MIB2));
        assert_eq!(a.alloc(MIB2, MIB2), Some(2 * MIB2));
        assert_eq!(
            a.alloc(2 * MIB2, MIB2),
            Some(3 * MIB2),
            "exactly to the end"
        );
        assert_eq!(a.alloc(1, 1), Some(MIB2 + 4096), "the gap after the first");
        assert_eq!(a.alloc(MIB2, MIB2), None, "max + 1");
    }

    #[test]
    fn zero_lengths_bad_alignments_and_overflow_are_refused() {
        let mut a = VaAllocator::new(0, u64::MAX);
        assert_eq!(a.alloc(0, 4096), None);
        assert_eq!(a.alloc(4096, 3), None);
        assert_eq!(a.alloc(u64::MAX, 1), Some(0));
        assert_eq!(a.alloc(1, 1), None);
    }

    #[test]
    fn freed_ranges_coalesce_and_double_frees_are_refused() {
        let mut a = VaAllocator::new(0, 3 * MIB2);
        let x = a.alloc(MIB2, MIB2).expect("x");
        let y = a.alloc(MIB2, MIB2).expect("y");
        let z = a.alloc(MIB2, MIB2).expect("z");
        assert!(a.free(y, MIB2));
        assert!(!a.free(y, MIB2), "double free");
        assert!(a.free(x, MIB2));
        assert!(a.free(z, MIB2));
        assert_eq!(a, VaAllocator::new(0, 3 * MIB2));
        assert!(!a.free(3 * MIB2, 1), "outside");
        assert_eq!(a.alloc(3 * MIB2, MIB2), Some(0), "one range again");
        assert_eq!(a.free_bytes(), 0);
    }
}
