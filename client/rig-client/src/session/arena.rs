//! The fast path: allocation inside a lease's blocks, with no round trip to rigd.
//!
//! First fit over a free list of byte ranges, sizes rounded up to 64 bytes (a cache
//! line, so two buffers never share one), alignments up to the block size. Freed
//! ranges merge with their neighbours. Pure logic: no I/O, no unsafe. The session's
//! ledger carves host buffers with it, `gpumem` GPU buffers out of lent pages, and
//! rig-runtime a compute channel's arena into launch slots.

use std::collections::BTreeMap;

/// The smallest unit handed out, and the smallest alignment.
pub const GRANULE: u64 = 64;

/// Free space inside one lease.
#[derive(Debug, Clone)]
pub struct Arena {
    len: u64,
    /// offset → length of each free range.
    free: BTreeMap<u64, u64>,
    used: u64,
}

impl Arena {
    /// All of `[0, len)` free.
    pub fn new(len: u64) -> Self {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(0, len);
        }
        Self { len, free, used: 0 }
    }

    /// The bytes a request of `size` takes.
    pub fn rounded(size: u64) -> Option<u64> {
        size.checked_next_multiple_of(GRANULE)
    }

    /// Finds room for `size` bytes at a multiple of `align` (a power of two); returns
    /// the offset. `None` when no free range fits.
    pub fn alloc(&mut self, size: u64, align: u64) -> Option<u64> {
        let size = Self::rounded(size)?;
        let align = align.max(GRANULE);
        if size == 0 || size > self.len - self.used {
            return None;
        }
        let (start, len, at) = self.free.iter().find_map(|(&start, &len)| {
            let at = start.checked_next_multiple_of(align)?;
            let end = start + len;
            (at.checked_add(size)? <= end).then_some((start, len, at))
        })?;
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        let tail = start + len - (at + size);
        if tail > 0 {
            self.free.insert(at + size, tail);
        }
        self.used += size;
        Some(at)
    }

    /// Returns `[offset, offset + size)` (as `alloc` gave it).
    pub fn free(&mut self, offset: u64, size: u64) {
        let Some(size) = Self::rounded(size) else {
            return;
        };
        let mut start = offset;
        let mut len = size;
        if let Some((&ps, &pl)) = self.free.range(..start).next_back()
            && ps + pl == start
        {
            self.free.remove(&ps);
            start = ps;
            len += pl;
        }
        if let Some(nl) = self.free.remove(&(offset + size)) {
            len += nl;
        }
        self.free.insert(start, len);
        self.used = self.used.saturating_sub(size);
    }

    /// Bytes in use.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Nothing is allocated.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u64 = 2 << 20;

    #[test]
    fn allocations_are_aligned_and_do_not_overlap() {
        let mut a = Arena::new(BLOCK);
        let x = a.alloc(100, 1).expect("x");
        let y = a.alloc(4096, 4096).expect("y");
        let z = a.alloc(1, 1).expect("z");
        assert_eq!(x, 0);
        assert_eq!(y, 4096);
        assert_eq!(z, 128, "into the gap after x, 64-byte rounded");
        assert_eq!(a.used(), 128 + 4096 + 64);
    }

    #[test]
    fn a_whole_block_fits_exactly_and_one_byte_more_does_not() {
        let mut a = Arena::new(BLOCK);
        assert_eq!(a.alloc(BLOCK, BLOCK), Some(0));
        assert_eq!(a.alloc(1, 1), None);
        a.free(0, BLOCK);
        assert_eq!(a.alloc(BLOCK + 1, 1), None);
        assert!(a.is_empty());
    }

    #[test]
    fn block_alignment_after_a_small_allocation_does_not_fit_in_one_block() {
        let mut a = Arena::new(BLOCK);
        a.alloc(64, 1).expect("small");
        assert_eq!(
            a.alloc(64, BLOCK),
            None,
            "the only 2 MiB-aligned offset is taken"
        );
        let mut two = Arena::new(2 * BLOCK);
        two.alloc(64, 1).expect("small");
        assert_eq!(two.alloc(64, BLOCK), Some(BLOCK));
    }

    #[test]
    fn freed_ranges_merge_so_the_whole_arena_is_one_range_again() {
        let mut a = Arena::new(BLOCK);
        let offs: Vec<u64> = (0..8)
            .map(|_| a.alloc(64 << 10, 1).expect("alloc"))
            .collect();
        for i in [1, 3, 5, 7, 0, 2, 6, 4] {
            a.free(offs[i], 64 << 10);
        }
        assert!(a.is_empty());
        assert_eq!(a.alloc(BLOCK, BLOCK), Some(0));
    }

    #[test]
    fn zero_and_overflowing_sizes_are_refused() {
        let mut a = Arena::new(BLOCK);
        assert_eq!(a.alloc(0, 1), None);
        assert_eq!(a.alloc(u64::MAX, 1), None);
        assert_eq!(a.alloc(u64::MAX - 10, 1), None);
    }
}
