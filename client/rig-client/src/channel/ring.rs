//! The GPFIFO ring: entry encoding and index arithmetic. Pure; the words live in host
//! memory the GPU reads (written through the channel's mapping of it, `lent`).
//!
//! Who writes what: the client writes ring entries and GP_PUT (USERD +0x8c); the GPU's
//! PBDMA writes GP_GET (USERD +0x88) as it fetches entries; rigd reads both for
//! `rigctl channels` and writes neither. An entry between GP_GET and GP_PUT belongs to
//! the GPU until GP_GET passes it.
//!
//! Facts: a ring holds a power of two of entries, at most 2^31 (LIMIT2 is a 5-bit
//! log2: docs/hardware/nvidia-channels.md, "Ring limits"). The entry format, USERD's
//! offsets and the doorbell are rig-nv's `gpfifo`, re-exported here.

use rig_model::addr::GpuVa;

/// The most entries a ring may have (LIMIT2 is 5 bits: docs/hardware/nvidia-channels.md,
/// "Ring limits").
pub const MAX_ENTRIES: u32 = 1 << 31;
/// The fewest entries rig makes a ring with.
pub const MIN_ENTRIES: u32 = 2;
pub use rig_nv::gpfifo::{
    MAX_SEGMENT_WORDS, SEGMENT_VA_LIMIT, USERD_GP_GET, USERD_GP_PUT,
    USERMODE_NOTIFY_CHANNEL_PENDING, decode,
};
/// What a ring refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error(
        "A ring of {entries} entries: the size must be a power of two from {MIN_ENTRIES} to 2^31"
    )]
    Size { entries: u64 },
    #[error("The ring is full: {entries} entries, the GPU has not fetched past entry {get}")]
    Full { entries: u32, get: u32 },
    #[error("GP_GET reads {get}, outside the entries the GPU may own ({old_get}..={put})")]
    BadGet { get: u32, old_get: u32, put: u32 },
    #[error(
        "A segment of {words} words at {va:#x}: segments are 1 to {MAX_SEGMENT_WORDS} dword-aligned words below 2^40"
    )]
    Segment { va: u64, words: u32 },
}

/// One ring entry for a segment of `words` dwords at GPU VA `va` (main level, no sync:
/// the entry is fetched as soon as GP_PUT passes it): `rig_nv::gpfifo::entry`.
///
/// # Errors
/// [`RingError::Segment`]: a misaligned or empty segment, one over the length field, or
/// one that reaches 2^40.
pub fn entry(va: GpuVa, words: u32) -> Result<u64, RingError> {
    rig_nv::gpfifo::entry(va, words).map_err(|e| RingError::Segment {
        va: e.va,
        words: e.words,
    })
}

/// The index arithmetic of one ring: where the next entry goes, and how many are free
/// given the last GP_GET read. One slot stays empty, so GP_PUT == GP_GET means empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    entries: u32,
    put: u32,
    get: u32,
}

impl Ring {
    /// An empty ring of `entries` entries.
    ///
    /// # Errors
    /// [`RingError::Size`] unless `entries` is a power of two in 2..=2^31.
    pub fn new(entries: u64) -> Result<Self, RingError> {
        let n = u32::try_from(entries)
            .ok()
            .filter(|n| n.is_power_of_two() && (MIN_ENTRIES..=MAX_ENTRIES).contains(n))
            .ok_or(RingError::Size { entries })?;
        Ok(Self {
            entries: n,
            put: 0,
            get: 0,
        })
    }

    /// The number of entries.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// GP_PUT as the GPU will read it once published.
    pub fn put(&self) -> u32 {
        self.put
    }

    /// GP_GET as last read.
    pub fn get(&self) -> u32 {
        self.get
    }

    /// Entries the GPU has not fetched yet.
    pub fn pending(&self) -> u32 {
        self.put.wrapping_sub(self.get) & (self.entries - 1)
    }

    /// Entries that can be written before the ring is full.
    pub fn free(&self) -> u32 {
        self.entries - 1 - self.pending()
    }

    /// Takes the slot for the next entry and returns its index; GP_PUT moves past it.
    ///
    /// # Errors
    /// [`RingError::Full`]: read GP_GET again ([`Ring::update_get`]) or wait.
    pub fn push(&mut self) -> Result<u32, RingError> {
        if self.free() == 0 {
            return Err(RingError::Full {
                entries: self.entries,
                get: self.get,
            });
        }
        let at = self.put;
        self.put = (self.put + 1) & (self.entries - 1);
        Ok(at)
    }

    /// Takes a GP_GET read from USERD. It may only move forward, up to GP_PUT: any
    /// other value means USERD was written by someone else, and is refused.
    ///
    /// # Errors
    /// [`RingError::BadGet`], leaving the ring as it was.
    pub fn update_get(&mut self, get: u32) -> Result<(), RingError> {
        let moved = get.wrapping_sub(self.get) & (self.entries - 1);
        if get >= self.entries || moved > self.pending() {
            return Err(RingError::BadGet {
                get,
                old_get: self.get,
                put: self.put,
            });
        }
        self.get = get;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn entries_encode_as_tinygrad_writes_them_but_at_main_level() {
        // tinygrad: (va & ~3) | (len << 42) | (1 << 41); rig leaves LEVEL (bit 41) 0.
        let va = 0x12_3456_7000u64;
        assert_eq!(entry(GpuVa(va), 6), Ok((va & !3) | (6 << 42)));
        assert_eq!(
            entry(
                GpuVa(SEGMENT_VA_LIMIT - 4 * u64::from(MAX_SEGMENT_WORDS)),
                MAX_SEGMENT_WORDS
            )
            .map(|e| e >> 42),
            Ok(u64::from(MAX_SEGMENT_WORDS))
        );
    }

    #[test]
    fn segments_past_2_40_misaligned_empty_or_too_long_are_refused() {
        let bad = |va: GpuVa, words| {
            entry(va, words)
                == Err(RingError::Segment {
                    va: va.get(),
                    words,
                })
        };
        assert!(bad(GpuVa(SEGMENT_VA_LIMIT - 4), 2), "ends past 2^40");
        assert!(!bad(GpuVa(SEGMENT_VA_LIMIT - 8), 2), "ends exactly at 2^40");
        assert!(bad(GpuVa(0x1002), 1));
        assert!(bad(GpuVa(0x1000), 0));
        assert!(bad(GpuVa(0x1000), MAX_SEGMENT_WORDS + 1));
        assert!(bad(GpuVa(u64::MAX - 3), 1), "no overflow");
    }

    #[test]
    fn ring_sizes_are_powers_of_two_from_2_to_2_31() {
        for ok in [2u64, 4, 1 << 20, 1 << 31] {
            assert_eq!(
                Ring::new(ok).map(|r| r.entries()),
                Ok(u32::try_from(ok).expect("fits"))
            );
        }
        for bad in [0u64, 1, 3, 1000, 1 << 32, (1 << 31) + 1, u64::MAX] {
            assert_eq!(Ring::new(bad), Err(RingError::Size { entries: bad }));
        }
    }

    #[test]
    fn an_entry_decodes_to_the_segment_it_encodes() {
        for (va, words) in [
            (0x4, 1),
            (0x12_3456_7890, 6),
            (
                SEGMENT_VA_LIMIT - 4 * u64::from(MAX_SEGMENT_WORDS),
                MAX_SEGMENT_WORDS,
            ),
        ] {
            let e = entry(GpuVa(va), words).expect("encodes");
            assert_eq!(decode(e), (GpuVa(va), words));
        }
    }

    #[test]
    fn a_ring_fills_to_one_less_than_its_size_and_frees_as_gp_get_moves() {
        let mut r = Ring::new(4).expect("ring");
        assert_eq!((r.push(), r.push(), r.push()), (Ok(0), Ok(1), Ok(2)));
        assert_eq!(r.push(), Err(RingError::Full { entries: 4, get: 0 }));
        r.update_get(2).expect("fetched two");
        assert_eq!((r.free(), r.pending()), (2, 1));
        assert_eq!((r.push(), r.push()), (Ok(3), Ok(0)), "wraps");
        assert_eq!(
            r.update_get(3),
            Ok(()),
            "3 lies between GP_GET 2 and GP_PUT 1, wrapped"
        );
        assert_eq!(r.pending(), 2);
    }

    #[test]
    fn gp_get_that_moves_back_or_past_gp_put_is_refused() {
        let mut r = Ring::new(8).expect("ring");
        for _ in 0..5 {
            r.push().expect("room");
        }
        r.update_get(3).expect("forward");
        let before = r.clone();
        assert!(
            matches!(r.update_get(2), Err(RingError::BadGet { .. })),
            "backwards"
        );
        assert!(
            matches!(r.update_get(6), Err(RingError::BadGet { .. })),
            "past put"
        );
        assert!(
            matches!(r.update_get(8), Err(RingError::BadGet { .. })),
            "out of range"
        );
        assert_eq!(r, before);
        r.update_get(5).expect("up to put");
        assert_eq!(r.pending(), 0);
    }

    proptest! {
        /// Against a model that counts every entry pushed and fetched.
        #[test]
        fn the_ring_never_overfills_and_fullness_follows_gp_get(
            log2 in 1u32..12,
            ops in proptest::collection::vec((any::<bool>(), 0u32..64), 1..400),
        ) {
            let n = 1u64 << log2;
            let mut r = Ring::new(n).expect("ring");
            let (mut pushed, mut fetched) = (0u64, 0u64);
            for (push, k) in ops {
                if push {
                    match r.push() {
                        Ok(at) => {
                            prop_assert_eq!(u64::from(at), pushed % n);
                            pushed += 1;
                        }
                        Err(_) => prop_assert_eq!(pushed - fetched, n - 1),
                    }
                } else {
                    let k = u64::from(k).min(pushed - fetched);
                    fetched += k;
                    let get = u32::try_from(fetched % n).expect("below 2^12");
                    prop_assert_eq!(r.update_get(get), Ok(()));
                }
                prop_assert!(pushed - fetched < n);
                prop_assert_eq!(u64::from(r.pending()), pushed - fetched);
                prop_assert_eq!(u64::from(r.free()), n - 1 - (pushed - fetched));
            }
        }
    }
}
