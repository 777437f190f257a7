//! The IOVA allocator: device addresses inside the ranges an IOMMU accepts.
//!
//! Every allocation is a multiple of the granule (2 MiB) and aligned to it, so free
//! space stays granule-aligned and best fit needs no alignment padding. Freed space
//! merges with its neighbours and is reused best-fit, smallest hole first, so a
//! long-lived daemon that leases and frees forever never grows its footprint (libvfn
//! PR #40 fixed exactly that leak). Address 0 is never handed out, so a zero device
//! pointer is always a bug.
//!
//! Pure logic: no I/O. `dma::pool` calls it under the pool's lock.

use std::{
    collections::{BTreeMap, BTreeSet},
    ops::RangeInclusive,
};

use super::Iova;

/// Why an IOVA request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IovaError {
    #[error("The IOMMU reports no IOVA range that holds one {granule:#x}-byte page")]
    NoRanges { granule: u64 },
    #[error(
        "The IOMMU supports no page size that divides {granule:#x} bytes (page-size bitmap {bitmap:#x})"
    )]
    PageSizes { bitmap: u64, granule: u64 },
    #[error("{len:#x} bytes is zero or not a multiple of the {granule:#x}-byte granule")]
    BadLength { len: u64, granule: u64 },
    #[error("No free IOVA range of {len:#x} bytes (largest free: {largest:#x})")]
    NoSpace { len: u64, largest: u128 },
    #[error("IOVA {iova} was not allocated")]
    NotAllocated { iova: Iova },
}

/// Free and allocated IOVA space.
#[derive(Debug, Clone)]
pub struct IovaAllocator {
    granule: u64,
    /// Free ranges: start → inclusive end.
    free: BTreeMap<u64, u64>,
    /// The same free ranges by (length, start), for best fit.
    by_len: BTreeSet<(u128, u64)>,
    /// Allocations: start → length.
    used: BTreeMap<u64, u64>,
}

fn len_of(start: u64, end: u64) -> u128 {
    u128::from(end) - u128::from(start) + 1
}

impl IovaAllocator {
    /// Space made of `ranges` (inclusive, as VFIO reports them), cut to `granule`
    /// boundaries. `page_sizes` is the IOMMU's page-size bitmap: some page size must
    /// divide the granule, or the granule could not be mapped at all.
    ///
    /// # Errors
    /// [`IovaError::PageSizes`] and [`IovaError::NoRanges`].
    pub fn new(
        ranges: &[RangeInclusive<u64>],
        page_sizes: u64,
        granule: u64,
    ) -> Result<Self, IovaError> {
        // PANIC: callers pass BLOCK_SIZE; every alignment below relies on a power of two.
        assert!(granule.is_power_of_two(), "granule is a power of two");
        // The smallest page size is the lowest set bit; it divides the granule when it
        // is no larger (both are powers of two).
        let smallest = page_sizes & page_sizes.wrapping_neg();
        if smallest == 0 || smallest > granule {
            return Err(IovaError::PageSizes {
                bitmap: page_sizes,
                granule,
            });
        }
        let mut a = Self {
            granule,
            free: BTreeMap::new(),
            by_len: BTreeSet::new(),
            used: BTreeMap::new(),
        };
        for r in ranges {
            // Round the start up and the end down to the granule; skip address 0.
            let start = (*r.start()).max(granule).checked_next_multiple_of(granule);
            let end_excl = (u128::from(*r.end()) + 1) / u128::from(granule) * u128::from(granule);
            let Some(start) = start else { continue };
            if u128::from(start) >= end_excl {
                continue;
            }
            let end = u64::try_from(end_excl - 1).expect("below 2^64: it came from a u64 end");
            a.insert_free(start, end);
        }
        if a.free.is_empty() {
            return Err(IovaError::NoRanges { granule });
        }
        Ok(a)
    }

    /// The granule every allocation is a multiple of.
    pub fn granule(&self) -> u64 {
        self.granule
    }

    /// Allocates `len` contiguous bytes from the smallest free range that holds them,
    /// at that range's start.
    ///
    /// # Errors
    /// [`IovaError::BadLength`] and [`IovaError::NoSpace`].
    pub fn alloc(&mut self, len: u64) -> Result<Iova, IovaError> {
        if len == 0 || !len.is_multiple_of(self.granule) {
            return Err(IovaError::BadLength {
                len,
                granule: self.granule,
            });
        }
        let Some(&(have, start)) = self.by_len.range((u128::from(len), 0)..).next() else {
            return Err(IovaError::NoSpace {
                len,
                largest: self.largest_free(),
            });
        };
        let end = self.free[&start];
        self.remove_free(start, have);
        if have > u128::from(len) {
            self.insert_free(start + len, end);
        }
        self.used.insert(start, len);
        Ok(Iova(start))
    }

    /// Returns an allocation; it merges with free neighbours.
    ///
    /// # Errors
    /// [`IovaError::NotAllocated`] for an address `alloc` did not return (or returned
    /// and was already freed).
    pub fn free(&mut self, iova: Iova) -> Result<(), IovaError> {
        let len = self
            .used
            .remove(&iova.0)
            .ok_or(IovaError::NotAllocated { iova })?;
        let mut start = iova.0;
        let mut end = iova.0 + (len - 1);
        if let Some((&ps, &pe)) = self.free.range(..start).next_back()
            && pe.checked_add(1) == Some(start)
        {
            self.remove_free(ps, len_of(ps, pe));
            start = ps;
        }
        if let Some(next) = end.checked_add(1)
            && let Some(&ne) = self.free.get(&next)
        {
            self.remove_free(next, len_of(next, ne));
            end = ne;
        }
        self.insert_free(start, end);
        Ok(())
    }

    /// Bytes allocated now.
    pub fn allocated(&self) -> u64 {
        self.used.values().sum()
    }

    /// The largest free range, in bytes.
    pub fn largest_free(&self) -> u128 {
        self.by_len.last().map_or(0, |(l, _)| *l)
    }

    /// The highest address any allocation reaches now (0 when none): what a leak
    /// would make grow.
    pub fn high_water(&self) -> u64 {
        self.used.last_key_value().map_or(0, |(s, l)| s + (l - 1))
    }

    fn insert_free(&mut self, start: u64, end: u64) {
        self.free.insert(start, end);
        self.by_len.insert((len_of(start, end), start));
    }

    fn remove_free(&mut self, start: u64, len: u128) {
        self.free.remove(&start);
        self.by_len.remove(&(len, start));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 2 << 20;

    fn space(ranges: &[RangeInclusive<u64>]) -> IovaAllocator {
        IovaAllocator::new(ranges, 0x4020_1000, G).expect("valid space")
    }

    #[test]
    fn address_zero_is_never_handed_out() {
        let mut a = space(&[0..=(8 * G - 1)]);
        assert_eq!(a.alloc(G).expect("first"), Iova(G));
    }

    #[test]
    fn ranges_are_cut_to_the_granule() {
        // libvfn's default: 0x10000 ..= 2^39 - 1.
        let mut a = space(&[0x1_0000..=((1 << 39) - 1)]);
        assert_eq!(a.alloc(G).expect("fits").0, G);
        assert_eq!(a.largest_free(), u128::from((1u64 << 39) - 2 * G));
        // A range shorter than a granule once cut holds nothing.
        let e = IovaAllocator::new(&[(G + 1)..=(3 * G - 2)], 0x1000, G).expect_err("empty");
        assert_eq!(e, IovaError::NoRanges { granule: G });
    }

    #[test]
    fn a_range_ending_at_the_top_of_the_space_is_usable_to_its_last_byte() {
        let top = u64::MAX - (G - 1);
        let mut a = space(&[top..=u64::MAX]);
        let iova = a.alloc(G).expect("the last granule");
        assert_eq!(iova.0, top);
        assert_eq!(a.high_water(), u64::MAX);
        a.free(iova).expect("free");
        assert_eq!(a.largest_free(), u128::from(G));
        // The whole 64-bit space: 2^64 - G bytes once address 0's granule is cut.
        let whole = space(&[0..=u64::MAX]);
        assert_eq!(whole.largest_free(), (1u128 << 64) - u128::from(G));
    }

    #[test]
    fn length_zero_unaligned_and_one_past_the_space_are_refused() {
        let mut a = space(&[0..=(4 * G - 1)]);
        assert!(matches!(a.alloc(0), Err(IovaError::BadLength { .. })));
        assert!(matches!(
            a.alloc(G + 4096),
            Err(IovaError::BadLength { .. })
        ));
        // 3 granules are free (the first is cut): 3 fit, 4 do not.
        assert!(matches!(a.alloc(4 * G), Err(IovaError::NoSpace { .. })));
        let all = a.alloc(3 * G).expect("exactly the space");
        assert!(matches!(
            a.alloc(G),
            Err(IovaError::NoSpace { largest: 0, .. })
        ));
        a.free(all).expect("free");
    }

    #[test]
    fn page_sizes_must_include_one_that_divides_the_granule() {
        let e = IovaAllocator::new(&[0..=u64::MAX], 1 << 30, G).expect_err("1 GiB only");
        assert!(matches!(e, IovaError::PageSizes { .. }));
        assert!(matches!(
            IovaAllocator::new(&[0..=u64::MAX], 0, G),
            Err(IovaError::PageSizes { .. })
        ));
        IovaAllocator::new(&[0..=u64::MAX], G, G).expect("2 MiB pages are enough");
    }

    #[test]
    fn free_space_is_reused_best_fit() {
        let mut a = space(&[0..=(100 * G - 1)]);
        let x: Vec<Iova> = (0..6).map(|_| a.alloc(G).expect("alloc")).collect();
        // Holes of 1 granule (x[1]) and 2 granules (x[3], x[4]).
        a.free(x[1]).expect("free");
        a.free(x[3]).expect("free");
        a.free(x[4]).expect("free");
        // Two granules go into the 2-granule hole, not the big tail.
        assert_eq!(a.alloc(2 * G).expect("best fit"), x[3]);
        // One goes into the 1-granule hole.
        assert_eq!(a.alloc(G).expect("best fit"), x[1]);
    }

    #[test]
    fn freeing_merges_neighbours_so_a_run_fits_again() {
        let mut a = space(&[0..=(4 * G - 1)]);
        let x: Vec<Iova> = (0..3).map(|_| a.alloc(G).expect("alloc")).collect();
        for i in [0, 2, 1] {
            a.free(x[i]).expect("free");
        }
        assert_eq!(a.alloc(3 * G).expect("merged"), x[0]);
    }

    #[test]
    fn double_free_and_foreign_addresses_are_refused() {
        let mut a = space(&[0..=(4 * G - 1)]);
        let x = a.alloc(G).expect("alloc");
        assert!(matches!(
            a.free(Iova(x.0 + G)),
            Err(IovaError::NotAllocated { .. })
        ));
        a.free(x).expect("free");
        assert_eq!(a.free(x), Err(IovaError::NotAllocated { iova: x }));
    }

    #[test]
    fn endless_lease_and_free_never_grows_the_footprint() {
        let mut a = space(&[0..=((1 << 39) - 1)]);
        let mut live: Vec<Iova> = Vec::new();
        let mut high = 0;
        for i in 0..20_000u64 {
            // A churn of 1..4-granule allocations, at most 16 alive.
            let len = G * (1 + (i * 7919 % 4));
            live.push(a.alloc(len).expect("space never runs out"));
            if live.len() > 16 {
                let victim = live.remove(usize::try_from(i * 31 % 17).expect("small"));
                a.free(victim).expect("free");
            }
            high = high.max(a.high_water());
        }
        // 16 live allocations of at most 4 granules cannot need more than 64 + 4
        // granules of space, with reuse; a bump allocator would be at 20_000 * 2.5.
        assert!(high < 80 * G, "high water {high:#x}");
    }

    #[test]
    fn several_ranges_are_all_used() {
        let mut a = space(&[0..=(2 * G - 1), (10 * G)..=(11 * G - 1)]);
        let one = a.alloc(G).expect("first range");
        let two = a.alloc(G).expect("second range");
        assert_eq!((one, two), (Iova(G), Iova(10 * G)));
        assert!(matches!(a.alloc(G), Err(IovaError::NoSpace { .. })));
        assert_eq!(a.allocated(), 2 * G);
    }
}
