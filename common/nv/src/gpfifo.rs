//! GPFIFO ring entries and the channel's control words: what one ring entry says (a
//! pushbuffer segment's address and length), where GP_GET and GP_PUT sit in USERD, and
//! the usermode doorbell. Pure; rig-client's `channel::ring` does the ring's index
//! arithmetic and writes these words, rigd's `nvrm` reads USERD for `rigctl channels`.
//!
//! Facts: the entry format is NVC86F_GP_ENTRY0/1 (`class::clc86f`); LENGTH is 21 bits of
//! dwords and GET/GET_HI 40 bits of address, so segments lie below 2^40
//! (docs/hardware/nvidia-channels.md, "Ring entries"). USERD is `Nvc86fControl`
//! (HopperAControlGPFifo): the GPU's PBDMA writes GPGet as it fetches, the client
//! writes GPPut. Blackwell's `Nvc96fControl` names GPPut at the same offset and no
//! longer names GPGet (`generation`'s tests hold both facts).

use rig_model::addr::GpuVa;

use crate::class::clc86f::{
    NVC86F_GP_ENTRY0_FETCH, NVC86F_GP_ENTRY0_FETCH_UNCONDITIONAL, NVC86F_GP_ENTRY0_GET,
    NVC86F_GP_ENTRY1_GET_HI, NVC86F_GP_ENTRY1_LENGTH, NVC86F_GP_ENTRY1_LEVEL,
    NVC86F_GP_ENTRY1_LEVEL_MAIN, NVC86F_GP_ENTRY1_SYNC, NVC86F_GP_ENTRY1_SYNC_PROCEED,
    Nvc86fControl,
};
use crate::class::clc361::NVC361_NOTIFY_CHANNEL_PENDING;

/// The most dwords one entry fetches (NVC86F_GP_ENTRY1_LENGTH).
pub const MAX_SEGMENT_WORDS: u32 = NVC86F_GP_ENTRY1_LENGTH.max();
/// Segments lie below this GPU virtual address (GET 31:2 and GET_HI 7:0).
pub const SEGMENT_VA_LIMIT: u64 = 1 << (32 + NVC86F_GP_ENTRY1_GET_HI.bits());
/// USERD's GP_GET: the GPU's fetch index.
pub const USERD_GP_GET: usize = Nvc86fControl::GPGet;
/// USERD's GP_PUT: the client's submit index.
pub const USERD_GP_PUT: usize = Nvc86fControl::GPPut;
/// The usermode page's doorbell, written with a channel's work submit token
/// (NVC361_NOTIFY_CHANNEL_PENDING).
pub const USERMODE_NOTIFY_CHANNEL_PENDING: usize = NVC361_NOTIFY_CHANNEL_PENDING as usize;

/// A segment no entry can describe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "A segment of {words} words at {va:#x}: segments are 1 to {MAX_SEGMENT_WORDS} dword-aligned words below 2^40"
)]
pub struct SegmentError {
    /// Its GPU address.
    pub va: u64,
    /// Its length in dwords.
    pub words: u32,
}

/// One ring entry for a segment of `words` dwords at GPU VA `va` (main level, no sync:
/// the entry is fetched as soon as GP_PUT passes it).
///
/// # Errors
/// [`SegmentError`]: a misaligned or empty segment, one over the length field, or one
/// that reaches 2^40.
#[inline]
pub fn entry(va: GpuVa, words: u32) -> Result<u64, SegmentError> {
    let va = va.get();
    let end = va.checked_add(4 * u64::from(words));
    let ok = va.is_multiple_of(4)
        && (1..=MAX_SEGMENT_WORDS).contains(&words)
        && end.is_some_and(|e| e <= SEGMENT_VA_LIMIT);
    if !ok {
        return Err(SegmentError { va, words });
    }
    // Masks and shifts folded from the fields at compile time: this runs for every
    // ring entry a client submits.
    Ok(va & ENTRY0_GET_MASK
        | ENTRY_FIXED
        | ((va >> 32) & ENTRY1_GET_HI_MASK) << 32
        | u64::from(words) << (32 + NVC86F_GP_ENTRY1_LENGTH.lo))
}

/// GET (VA 31:2) in place in ENTRY0.
const ENTRY0_GET_MASK: u64 = (NVC86F_GP_ENTRY0_GET.max() as u64) << NVC86F_GP_ENTRY0_GET.lo;
/// GET_HI (VA 39:32), in ENTRY1 at its own bits (0 up).
const ENTRY1_GET_HI_MASK: u64 =
    (NVC86F_GP_ENTRY1_GET_HI.max() as u64) << NVC86F_GP_ENTRY1_GET_HI.lo;
/// FETCH unconditional; LEVEL main and SYNC proceed in ENTRY1.
const ENTRY_FIXED: u64 = NVC86F_GP_ENTRY0_FETCH.of(NVC86F_GP_ENTRY0_FETCH_UNCONDITIONAL) as u64
    | ((NVC86F_GP_ENTRY1_LEVEL.of(NVC86F_GP_ENTRY1_LEVEL_MAIN)
        | NVC86F_GP_ENTRY1_SYNC.of(NVC86F_GP_ENTRY1_SYNC_PROCEED)) as u64)
        << 32;

/// The segment a ring entry fetches, as [`entry`] encoded it: (GPU VA, words).
#[inline]
pub fn decode(entry: u64) -> (GpuVa, u32) {
    let entry0 = u32::try_from(entry & 0xffff_ffff).expect("masked to 32 bits");
    let entry1 = u32::try_from(entry >> 32).expect("shifted to 32 bits");
    let get = NVC86F_GP_ENTRY0_GET;
    let va = u64::from(get.decode(entry0)) << get.lo
        | u64::from(NVC86F_GP_ENTRY1_GET_HI.decode(entry1)) << 32;
    (GpuVa(va), NVC86F_GP_ENTRY1_LENGTH.decode(entry1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_carries_the_address_and_length_as_tinygrad_writes_them() {
        // tinygrad: (va // 4) << 2 | (len << 42) | (va >> 32 & 0xff) << 32 … as one u64.
        let e = entry(GpuVa(0x12_3456_7890), 5).expect("a segment");
        assert_eq!(e, 0x3456_7890 | (0x12 | 5 << 10) << 32);
        assert_eq!(decode(e), (GpuVa(0x12_3456_7890), 5));
    }

    #[test]
    fn segments_past_the_fields_are_refused() {
        for (va, words) in [
            (0x1002, 1),
            (0x1000, 0),
            (0x1000, MAX_SEGMENT_WORDS + 1),
            (SEGMENT_VA_LIMIT - 4, 2),
            (u64::MAX - 3, 1),
        ] {
            assert_eq!(entry(GpuVa(va), words), Err(SegmentError { va, words }));
        }
        let last = entry(GpuVa(SEGMENT_VA_LIMIT - 4), 1).expect("ends at the limit");
        assert_eq!(decode(last), (GpuVa(SEGMENT_VA_LIMIT - 4), 1));
    }

    #[test]
    fn every_length_and_address_bit_lands_in_its_field() {
        let top = SEGMENT_VA_LIMIT - 4 * u64::from(MAX_SEGMENT_WORDS);
        for (va, words) in [(top, MAX_SEGMENT_WORDS), (0x4, 1), (0x80_0000_0000, 3)] {
            let e = entry(GpuVa(va), words).expect("a segment");
            let (lo, hi) = (
                u32::try_from(e & 0xffff_ffff).expect("low"),
                u32::try_from(e >> 32).expect("high"),
            );
            assert_eq!(
                NVC86F_GP_ENTRY0_FETCH.decode(lo),
                NVC86F_GP_ENTRY0_FETCH_UNCONDITIONAL
            );
            assert_eq!(
                u64::from(NVC86F_GP_ENTRY0_GET.decode(lo)) << 2,
                va & 0xffff_ffff
            );
            assert_eq!(u64::from(NVC86F_GP_ENTRY1_GET_HI.decode(hi)), va >> 32);
            assert_eq!(NVC86F_GP_ENTRY1_LENGTH.decode(hi), words);
            assert_eq!(
                NVC86F_GP_ENTRY1_LEVEL.decode(hi),
                NVC86F_GP_ENTRY1_LEVEL_MAIN
            );
            assert_eq!(
                NVC86F_GP_ENTRY1_SYNC.decode(hi),
                NVC86F_GP_ENTRY1_SYNC_PROCEED
            );
        }
    }

    #[test]
    fn userd_and_doorbell_offsets_are_the_headers() {
        assert_eq!((USERD_GP_GET, USERD_GP_PUT), (0x88, 0x8c));
        assert_eq!(USERMODE_NOTIFY_CHANNEL_PENDING, 0x90);
        assert_eq!(SEGMENT_VA_LIMIT, 1 << 40);
        assert_eq!(MAX_SEGMENT_WORDS, (1 << 21) - 1);
    }
}
