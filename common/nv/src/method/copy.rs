//! The copy engine's class, HOPPER_DMA_COPY_A, bound to [`SUBCH_COPY`]: a copy between
//! two GPU virtual addresses of the channel's address space (pitch layout), a copy that
//! the copy engine itself marks done by releasing a semaphore, a release by the engine
//! after the channel's earlier copies, and a memset (the engine's remap unit writing a
//! constant). Pure: every function returns words for the pushbuffer.
//!
//! Why the engine releases: completion is then written by the engine that did the work,
//! after its writes are flushed to system memory (FLUSH_ENABLE, FLUSH_TYPE SYS), so a
//! copy the engine refused or faulted on never reads as complete. On the H200 a copy
//! from an unmapped address faulted and the release in its own LAUNCH_DMA never landed,
//! while a host release after a copy the engine refused did
//! (docs/hardware/nvidia-channels.md, "Privilege and refused work"). The payload is 32
//! bits (the 580 header has no 64-bit one): `Channel::wait` compares it circularly.
//!
//! Reference: `crate::class::clc8b5` (generated from open-gpu-kernel-modules 580.142
//! `src/common/sdk/nvidia/inc/class/clc8b5.h`) and
//! `kernel-open/nvidia-uvm/uvm_hopper_ce.c` (`uvm_hal_hopper_ce_semaphore_release`,
//! `uvm_hal_hopper_ce_memset_4`), which release and memset this way. Not here: the header
//! encoding (this module's parent).

use rig_model::addr::GpuVa;

use super::{Subchannel, inc, split};
use crate::class::clc8b5::{
    NVC8B5_LAUNCH_DMA, NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE,
    NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED, NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE,
    NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT, NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH,
    NVC8B5_LAUNCH_DMA_FLUSH_ENABLE, NVC8B5_LAUNCH_DMA_FLUSH_ENABLE_TRUE,
    NVC8B5_LAUNCH_DMA_FLUSH_TYPE, NVC8B5_LAUNCH_DMA_FLUSH_TYPE_SYS, NVC8B5_LAUNCH_DMA_REMAP_ENABLE,
    NVC8B5_LAUNCH_DMA_REMAP_ENABLE_TRUE, NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE,
    NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_SEMAPHORE_NO_TIMESTAMP,
    NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_SEMAPHORE_WITH_TIMESTAMP,
    NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT, NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH,
    NVC8B5_LINE_LENGTH_IN, NVC8B5_OFFSET_IN_UPPER, NVC8B5_OFFSET_IN_UPPER_UPPER,
    NVC8B5_OFFSET_OUT_UPPER, NVC8B5_SET_REMAP_COMPONENTS_COMPONENT_SIZE,
    NVC8B5_SET_REMAP_COMPONENTS_COMPONENT_SIZE_FOUR, NVC8B5_SET_REMAP_COMPONENTS_DST_X,
    NVC8B5_SET_REMAP_COMPONENTS_DST_X_CONST_B, NVC8B5_SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS,
    NVC8B5_SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS_ONE, NVC8B5_SET_REMAP_CONST_B,
    NVC8B5_SET_SEMAPHORE_A,
};

/// The subchannel rig binds the copy class to (tinygrad's choice, which the RM's
/// classes do not constrain).
pub const SUBCH_COPY: Subchannel = Subchannel(4);

/// The most bytes one LAUNCH_DMA of rig's moves (a copy) or writes (a memset): 1 GiB.
/// LINE_LENGTH_IN is 32 bits, but the engine refuses less than it can say: on the H200
/// and on an H100 one memset line of 2^31 four-byte elements (8 GiB) raised a
/// copy-engine error (Xid 39), while lines of 2 GiB (memset) and 1 GiB (copy) ran. So
/// rig sends no line longer than what ran, and `Channel::copy` / `Channel::fill` split
/// longer transfers into lines of this length (docs/hardware/nvidia-channels.md,
/// "How long one copy-engine line may be").
pub const MAX_LINE: u64 = 1 << 30;
/// The most bytes one copy moves: [`MAX_LINE`].
pub const MAX_COPY: u64 = MAX_LINE;
/// The most bytes one memset writes: [`MAX_LINE`] (LINE_LENGTH_IN then counts 2^28
/// four-byte elements).
pub const MAX_MEMSET: u64 = MAX_LINE;

// LAUNCH_DMA's fields as rig sets them.
const DATA_TRANSFER_TYPE_NONE: u32 =
    NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE.of(NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE);
const DATA_TRANSFER_TYPE_NON_PIPELINED: u32 =
    NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE.of(NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED);
/// FLUSH_ENABLE TRUE with FLUSH_TYPE SYS: the writes reach system memory.
const FLUSH_ENABLE_TRUE: u32 = NVC8B5_LAUNCH_DMA_FLUSH_ENABLE
    .of(NVC8B5_LAUNCH_DMA_FLUSH_ENABLE_TRUE)
    | NVC8B5_LAUNCH_DMA_FLUSH_TYPE.of(NVC8B5_LAUNCH_DMA_FLUSH_TYPE_SYS);
const RELEASE_SEMAPHORE_NO_TIMESTAMP: u32 = NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE
    .of(NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_SEMAPHORE_NO_TIMESTAMP);
const RELEASE_SEMAPHORE_WITH_TIMESTAMP: u32 = NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE
    .of(NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_SEMAPHORE_WITH_TIMESTAMP);
/// Both sides in pitch layout.
const PITCH: u32 = NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT
    .of(NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH)
    | NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT.of(NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH);
const REMAP_ENABLE_TRUE: u32 =
    NVC8B5_LAUNCH_DMA_REMAP_ENABLE.of(NVC8B5_LAUNCH_DMA_REMAP_ENABLE_TRUE);
/// SET_REMAP_COMPONENTS for a 32-bit fill: one four-byte component, constant B.
const REMAP_CONST_B_ONE_FOUR_BYTE: u32 = NVC8B5_SET_REMAP_COMPONENTS_DST_X
    .of(NVC8B5_SET_REMAP_COMPONENTS_DST_X_CONST_B)
    | NVC8B5_SET_REMAP_COMPONENTS_COMPONENT_SIZE
        .of(NVC8B5_SET_REMAP_COMPONENTS_COMPONENT_SIZE_FOUR)
    | NVC8B5_SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS
        .of(NVC8B5_SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS_ONE);
/// OFFSET_*_UPPER and SET_SEMAPHORE_A hold address bits 56:32.
const UPPER_MASK: u64 = NVC8B5_OFFSET_IN_UPPER_UPPER.max() as u64;
const ADDRESS_LIMIT: u64 = 1 << 57;

/// A semaphore the copy engine releases: `payload` written at `addr`, and with
/// `timestamp` the engine's timestamp after it (four words, 16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semaphore {
    /// Its GPU address: 4-byte aligned, 16 with a timestamp.
    pub addr: GpuVa,
    /// The value written (32 bits: clc8b5.h of 580.142 has the one-word payload only).
    pub payload: u32,
    /// Whether the timestamp follows.
    pub timestamp: bool,
}

/// Words rig will not send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    /// An address that is misaligned or past 2^57.
    #[error("{what} at {addr:#x}: it must be {align}-byte aligned and below 2^57")]
    Address {
        /// What the address is of.
        what: &'static str,
        /// The address.
        addr: u64,
        /// Its alignment.
        align: u64,
    },
    /// A length of 0, or of more than one launch moves.
    #[error("{bytes} bytes: one launch moves {unit} to {max} bytes, in whole units of {unit}")]
    Length {
        /// The length asked for.
        bytes: u64,
        /// The unit it must be a multiple of.
        unit: u64,
        /// The most one launch moves.
        max: u64,
    },
}

#[inline]
fn check(what: &'static str, addr: u64, align: u64) -> Result<(), CopyError> {
    if !addr.is_multiple_of(align) || addr >= ADDRESS_LIMIT {
        return Err(CopyError::Address { what, addr, align });
    }
    Ok(())
}

#[inline]
fn header(method: u32, count: u32) -> u32 {
    inc(SUBCH_COPY, method, count).expect("a HOPPER_DMA_COPY_A method of clc8b5.h")
}

/// SET_SEMAPHORE_A/B/PAYLOAD for `s` (4 words) and its LAUNCH_DMA bits.
#[inline]
fn semaphore(s: Semaphore) -> Result<([u32; 4], u32), CopyError> {
    let addr = s.addr.get();
    check("a semaphore", addr, if s.timestamp { 16 } else { 4 })?;
    let (hi, lo) = split(addr, UPPER_MASK);
    let kind = if s.timestamp {
        RELEASE_SEMAPHORE_WITH_TIMESTAMP
    } else {
        RELEASE_SEMAPHORE_NO_TIMESTAMP
    };
    Ok((
        [header(NVC8B5_SET_SEMAPHORE_A, 3), hi, lo, s.payload],
        kind | FLUSH_ENABLE_TRUE,
    ))
}

#[inline]
fn line_length(bytes: u64) -> Result<u32, CopyError> {
    Some(bytes)
        .filter(|&n| n > 0 && n <= MAX_COPY)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or(CopyError::Length {
            bytes,
            unit: 1,
            max: MAX_COPY,
        })
}

/// A copy of `bytes` from `src` to `dst`, both GPU virtual addresses of the channel's
/// address space (9 words). Nothing says when it is done: a copy whose completion
/// matters is [`copy_released`], or is followed by [`release`].
///
/// # Errors
/// [`CopyError::Address`] for an address past 2^57; [`CopyError::Length`] for 0 bytes
/// or more than [`MAX_COPY`].
#[inline]
pub fn copy(src: GpuVa, dst: GpuVa, bytes: u64) -> Result<[u32; 9], CopyError> {
    let (src, dst) = (src.get(), dst.get());
    check("the source", src, 1)?;
    check("the destination", dst, 1)?;
    let len = line_length(bytes)?;
    let (shi, slo) = split(src, UPPER_MASK);
    let (dhi, dlo) = split(dst, UPPER_MASK);
    Ok([
        header(NVC8B5_OFFSET_IN_UPPER, 4),
        shi,
        slo,
        dhi,
        dlo,
        header(NVC8B5_LINE_LENGTH_IN, 1),
        len,
        header(NVC8B5_LAUNCH_DMA, 1),
        DATA_TRANSFER_TYPE_NON_PIPELINED | PITCH,
    ])
}

/// As [`copy`], with the copy engine's flush: its writes have reached system memory
/// (FLUSH_TYPE SYS) when the copy completes (UVM's Hopper CE copies flush the same way,
/// `uvm_hopper_ce.c`).
///
/// # Errors
/// As [`copy`].
#[inline]
pub fn copy_flushed(src: GpuVa, dst: GpuVa, bytes: u64) -> Result<[u32; 9], CopyError> {
    let mut w = copy(src, dst, bytes)?;
    w[8] |= FLUSH_ENABLE_TRUE;
    Ok(w)
}

/// A copy of `bytes` from `src` to `dst` (GPU virtual addresses) that the copy engine
/// marks done by releasing `done` once the bytes are written and flushed (13 words).
///
/// # Errors
/// [`CopyError::Address`] for an address past 2^57 or a misaligned semaphore;
/// [`CopyError::Length`] for 0 bytes or more than [`MAX_COPY`].
#[inline]
pub fn copy_released(
    src: GpuVa,
    dst: GpuVa,
    bytes: u64,
    done: Semaphore,
) -> Result<[u32; 13], CopyError> {
    let (src, dst) = (src.get(), dst.get());
    check("the source", src, 1)?;
    check("the destination", dst, 1)?;
    let len = line_length(bytes)?;
    let (sem, launch) = semaphore(done)?;
    let (shi, slo) = split(src, UPPER_MASK);
    let (dhi, dlo) = split(dst, UPPER_MASK);
    Ok([
        sem[0],
        sem[1],
        sem[2],
        sem[3],
        header(NVC8B5_OFFSET_IN_UPPER, 4),
        shi,
        slo,
        dhi,
        dlo,
        header(NVC8B5_LINE_LENGTH_IN, 1),
        len,
        header(NVC8B5_LAUNCH_DMA, 1),
        DATA_TRANSFER_TYPE_NON_PIPELINED | PITCH | launch,
    ])
}

/// A release of `done` by the copy engine after the copies before it on this channel,
/// with their writes flushed (6 words): UVM's Hopper semaphore release, a LAUNCH_DMA that
/// moves nothing.
///
/// # Errors
/// [`CopyError::Address`] for a misaligned semaphore or one past 2^57.
#[inline]
pub fn release(done: Semaphore) -> Result<[u32; 6], CopyError> {
    let (sem, launch) = semaphore(done)?;
    Ok([
        sem[0],
        sem[1],
        sem[2],
        sem[3],
        header(NVC8B5_LAUNCH_DMA, 1),
        DATA_TRANSFER_TYPE_NONE | launch,
    ])
}

/// Fills `bytes` at `dst` with the 32-bit `value`: the remap unit writes constant B as
/// one four-byte component per element (10 words; 14 with `done`, which the engine
/// releases once the bytes are written and flushed).
///
/// # Errors
/// [`CopyError::Address`] unless `dst` is 4-byte aligned and below 2^57 (and `done`
/// aligned); [`CopyError::Length`] unless `bytes` is a non-zero multiple of 4 of at
/// most [`MAX_MEMSET`].
#[inline]
pub fn memset(
    dst: GpuVa,
    value: u32,
    bytes: u64,
    done: Option<Semaphore>,
) -> Result<Vec<u32>, CopyError> {
    let dst = dst.get();
    check("the destination", dst, 4)?;
    let max = MAX_MEMSET;
    let elements = Some(bytes)
        .filter(|&b| b > 0 && b.is_multiple_of(4) && b <= max)
        .and_then(|b| u32::try_from(b / 4).ok())
        .ok_or(CopyError::Length {
            bytes,
            unit: 4,
            max,
        })?;
    let mut words = Vec::with_capacity(14);
    let mut launch = DATA_TRANSFER_TYPE_NON_PIPELINED | PITCH | REMAP_ENABLE_TRUE;
    if let Some(s) = done {
        let (sem, bits) = semaphore(s)?;
        words.extend(sem);
        launch |= bits;
    }
    let (hi, lo) = split(dst, UPPER_MASK);
    words.extend([
        header(NVC8B5_SET_REMAP_CONST_B, 2),
        value,
        REMAP_CONST_B_ONE_FOUR_BYTE,
        header(NVC8B5_OFFSET_OUT_UPPER, 2),
        hi,
        lo,
        header(NVC8B5_LINE_LENGTH_IN, 1),
        elements,
        header(NVC8B5_LAUNCH_DMA, 1),
        launch,
    ]);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::clc8b5::{
        NVC8B5_OFFSET_IN_LOWER, NVC8B5_OFFSET_OUT_LOWER, NVC8B5_SET_REMAP_COMPONENTS,
        NVC8B5_SET_SEMAPHORE_B, NVC8B5_SET_SEMAPHORE_PAYLOAD,
    };

    #[test]
    fn methods_sent_under_one_header_are_consecutive_in_the_header() {
        for (a, next) in [
            (NVC8B5_SET_SEMAPHORE_A, NVC8B5_SET_SEMAPHORE_B),
            (NVC8B5_SET_SEMAPHORE_B, NVC8B5_SET_SEMAPHORE_PAYLOAD),
            (NVC8B5_OFFSET_IN_UPPER, NVC8B5_OFFSET_IN_LOWER),
            (NVC8B5_OFFSET_IN_LOWER, NVC8B5_OFFSET_OUT_UPPER),
            (NVC8B5_OFFSET_OUT_UPPER, NVC8B5_OFFSET_OUT_LOWER),
            (NVC8B5_SET_REMAP_CONST_B, NVC8B5_SET_REMAP_COMPONENTS),
        ] {
            assert_eq!(a + 4, next, "{next:#x}");
        }
    }

    const SEM: Semaphore = Semaphore {
        addr: GpuVa(0x12_0000_1000),
        payload: 9,
        timestamp: false,
    };

    #[test]
    fn a_released_copy_launches_the_transfer_and_the_semaphore_together() {
        let w = copy_released(GpuVa(0x1_0000_1000), GpuVa(0x2_0000_2000), 256 << 20, SEM)
            .expect("valid");
        assert_eq!(&w[..4], &[0x2003_8090, 0x12, 0x1000, 9]);
        assert_eq!(&w[4..9], &[0x2004_8100, 1, 0x1000, 2, 0x2000]);
        assert_eq!((w[9], w[10]), (0x2001_8106, 256 << 20));
        // NON_PIPELINED | FLUSH | NO_TIMESTAMP release | pitch in and out.
        assert_eq!((w[11], w[12]), (0x2001_80c0, 0x18e));
        let ts = copy_released(
            GpuVa(0),
            GpuVa(0),
            1,
            Semaphore {
                addr: GpuVa(0x1010),
                timestamp: true,
                ..SEM
            },
        )
        .expect("valid");
        assert_eq!(ts[12], 0x196);
        assert_eq!(
            copy_released(GpuVa(0), GpuVa(0), 0, SEM),
            Err(CopyError::Length {
                bytes: 0,
                unit: 1,
                max: MAX_COPY
            })
        );
        copy_released(GpuVa(0), GpuVa(0), MAX_COPY, SEM).expect("within the limits");
        for bad in [MAX_COPY + 1, u32::MAX.into(), 1 << 32] {
            assert!(matches!(
                copy_released(GpuVa(0), GpuVa(0), bad, SEM),
                Err(CopyError::Length { .. })
            ));
        }
        assert!(matches!(
            copy_released(GpuVa(1 << 57), GpuVa(0), 1, SEM),
            Err(CopyError::Address { .. })
        ));
        assert!(matches!(
            copy_released(
                GpuVa(0),
                GpuVa(0),
                1,
                Semaphore {
                    addr: GpuVa(0x1004),
                    timestamp: true,
                    ..SEM
                }
            ),
            Err(CopyError::Address { align: 16, .. })
        ));
    }

    #[test]
    fn copies_name_both_addresses_and_the_length() {
        let c = copy(GpuVa(0x1_0000_1000), GpuVa(0x2_0000_2000), 256 << 20).expect("copy");
        assert_eq!(c[0], 0x2004_8100);
        assert_eq!(&c[1..5], &[1, 0x1000, 2, 0x2000]);
        assert_eq!((c[5], c[6]), (0x2001_8106, 256 << 20));
        assert_eq!((c[7], c[8]), (0x2001_80c0, 0x182));
        let flushed =
            copy_flushed(GpuVa(0x1_0000_1000), GpuVa(0x2_0000_2000), 256 << 20).expect("copy");
        assert_eq!(flushed[..8], c[..8]);
        assert_eq!(flushed[8], 0x186, "only FLUSH_ENABLE added");
        copy(GpuVa(0), GpuVa(0), MAX_COPY).expect("within the limits");
        for bad in [0, MAX_COPY + 1] {
            assert_eq!(
                copy(GpuVa(0), GpuVa(0), bad),
                Err(CopyError::Length {
                    bytes: bad,
                    unit: 1,
                    max: MAX_COPY
                })
            );
        }
        assert!(matches!(
            copy(GpuVa(0), GpuVa(1 << 57), 1),
            Err(CopyError::Address { .. })
        ));
    }

    #[test]
    fn a_release_alone_moves_nothing() {
        let w = release(SEM).expect("aligned");
        assert_eq!(&w[4..], &[0x2001_80c0, 0xc]);
        assert!(matches!(
            release(Semaphore {
                addr: GpuVa(0x1002),
                ..SEM
            }),
            Err(CopyError::Address { align: 4, .. })
        ));
    }

    #[test]
    fn memset_writes_constant_b_in_32_bit_elements() {
        let w = memset(GpuVa(0x3_0000_0000), 0xdead_beef, 4096, None).expect("valid");
        assert_eq!(
            w,
            [
                0x2002_81c1,
                0xdead_beef,
                0x0003_0005, // REMAP_CONST_B, COMPONENTS
                0x2002_8102,
                3,
                0, // OFFSET_OUT
                0x2001_8106,
                1024, // LINE_LENGTH_IN: elements
                0x2001_80c0,
                0x582, // NON_PIPELINED | pitch | REMAP_ENABLE
            ]
        );
        let r = memset(GpuVa(0x3_0000_0000), 0, 4, Some(SEM)).expect("valid");
        assert_eq!(r.len(), 14);
        assert_eq!(r[13], 0x58e, "with FLUSH and the release");
        let max = MAX_MEMSET;
        let line = memset(GpuVa(0), 0, max, None).expect("within the limits");
        assert_eq!(line[7], 1 << 28, "LINE_LENGTH_IN counts four-byte elements");
        // 8 GiB in one line is what the engine refused: never encoded.
        for bad in [0, 2, max + 4, 8 << 30, u64::from(u32::MAX) * 4] {
            assert_eq!(
                memset(GpuVa(0), 0, bad, None),
                Err(CopyError::Length {
                    bytes: bad,
                    unit: 4,
                    max
                })
            );
        }
        assert!(matches!(
            memset(GpuVa(2), 0, 4, None),
            Err(CopyError::Address { align: 4, .. })
        ));
    }
}
