//! The copy engine's class, HOPPER_DMA_COPY_A, bound to [`SUBCH_COPY`]: a copy between
//! two GPU virtual addresses of the channel's address space, pitch layout, optionally
//! flushed to system memory before it completes. Completion is a host release after it
//! (`host`), which waits for the engine to be idle.
//!
//! Reference: open-gpu-kernel-modules 580.142 `src/common/sdk/nvidia/inc/class/
//! clc8b5.h` (NVC8B5_*). Not here: the header encoding (this module's parent), the
//! release that tells the copy is done (`host`).

use super::{MethodError, Subchannel, check_addr, inc, split};

/// HOPPER_DMA_COPY_A (clc8b5.h).
pub const HOPPER_DMA_COPY_A: u32 = 0xc8b5;

/// The subchannel rig binds the copy class to (tinygrad's choice, which the RM's
/// classes do not constrain).
pub const SUBCH_COPY: Subchannel = Subchannel(4);

// Copy engine, NVC8B5_* (clc8b5.h).
pub const NVC8B5_LAUNCH_DMA: u16 = 0x0300;
pub const NVC8B5_OFFSET_IN_UPPER: u16 = 0x0400;
pub const NVC8B5_LINE_LENGTH_IN: u16 = 0x0418;
const LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED: u32 = 2; // 1:0
/// NVC8B5_LAUNCH_DMA_FLUSH_ENABLE_TRUE (bit 2); FLUSH_TYPE (bit 25) left 0 = SYS.
const LAUNCH_DMA_FLUSH_ENABLE_TRUE: u32 = 1 << 2;
const LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH: u32 = 1 << 7;
const LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH: u32 = 1 << 8;
/// OFFSET_IN/OUT_UPPER hold address bits 56:32 (24:0).
const OFFSET_UPPER_MASK: u64 = 0x1ff_ffff;

/// A copy-engine copy of `bytes` from `src` to `dst`, both GPU virtual addresses of
/// the channel's address space, on the copy subchannel (9 words). The copy is not
/// waited for: a [`release`](super::release) after it (with its WFI) says when it is done.
///
/// # Errors
/// [`MethodError::Address`] for an address beyond 2^57; [`MethodError::CopyLength`]
/// for 0 bytes or 4 GiB and more (LINE_LENGTH_IN is 32 bits).
pub fn copy(src: u64, dst: u64, bytes: u64) -> Result<[u32; 9], MethodError> {
    check_addr(src, 1)?;
    check_addr(dst, 1)?;
    let len = u32::try_from(bytes)
        .ok()
        .filter(|&n| n > 0)
        .ok_or(MethodError::CopyLength { bytes })?;
    let (shi, slo) = split(src, OFFSET_UPPER_MASK);
    let (dhi, dlo) = split(dst, OFFSET_UPPER_MASK);
    Ok([
        inc(SUBCH_COPY, NVC8B5_OFFSET_IN_UPPER, 4).expect("four offset methods"),
        shi,
        slo,
        dhi,
        dlo,
        inc(SUBCH_COPY, NVC8B5_LINE_LENGTH_IN, 1).expect("one method"),
        len,
        inc(SUBCH_COPY, NVC8B5_LAUNCH_DMA, 1).expect("one method"),
        LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED
            | LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH
            | LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH,
    ])
}

/// As [`copy`], with the copy engine's flush: its writes have reached system memory
/// (FLUSH_TYPE SYS) when the copy completes, so a host semaphore released after it
/// (with WFI) is never seen before the copied bytes (UVM's Hopper CE copies flush the
/// same way, `uvm_hopper_ce.c`).
///
/// # Errors
/// As [`copy`].
pub fn copy_flushed(src: u64, dst: u64, bytes: u64) -> Result<[u32; 9], MethodError> {
    let mut w = copy(src, dst, bytes)?;
    w[8] |= LAUNCH_DMA_FLUSH_ENABLE_TRUE;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_name_both_addresses_and_the_length() {
        let c = copy(0x1_0000_1000, 0x2_0000_2000, 256 << 20).expect("copy");
        assert_eq!(c[0], 0x2004_8100);
        assert_eq!(&c[1..5], &[1, 0x1000, 2, 0x2000]);
        assert_eq!((c[5], c[6]), (0x2001_8106, 256 << 20));
        assert_eq!((c[7], c[8]), (0x2001_80c0, 0x182));
    }

    #[test]
    fn a_flushed_copy_sets_only_flush_enable_in_launch_dma() {
        let plain = copy(0x1000, 0x2000, 64).expect("copy");
        let flushed = copy_flushed(0x1000, 0x2000, 64).expect("copy");
        assert_eq!(flushed[..8], plain[..8]);
        assert_eq!(flushed[8], 0x186);
    }
}
