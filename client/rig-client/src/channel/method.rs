//! Hopper pushbuffer words: method headers and the few command sequences rig's
//! channels issue (SET_OBJECT, 64-bit semaphore release and acquire, copy-engine
//! copies). Pure: every function returns words, and the writer in `pushbuf` puts them
//! into device-visible memory.
//!
//! References (open-gpu-kernel-modules 580.142): `src/common/sdk/nvidia/inc/class/
//! clc56f.h` (NVC56F_DMA_* header fields, shared by Hopper's C86F), `clc86f.h`
//! (HOPPER_CHANNEL_GPFIFO_A host methods and NVC86F_SEM_EXECUTE), `clc8b5.h`
//! (HOPPER_DMA_COPY_A), summarised in shared/reference/nvidia-rm.md §3.

/// HOPPER_CHANNEL_GPFIFO_A (clc86f.h).
pub const HOPPER_CHANNEL_GPFIFO_A: u32 = 0xc86f;
/// HOPPER_COMPUTE_A (clcbc0.h).
pub const HOPPER_COMPUTE_A: u32 = 0xcbc0;
/// HOPPER_DMA_COPY_A (clc8b5.h).
pub const HOPPER_DMA_COPY_A: u32 = 0xc8b5;

// Header fields, NVC56F_DMA_* (clc56f.h).
const DMA_METHOD_ADDRESS_MASK: u32 = 0xfff; // 11:0, the method's dword address
const DMA_METHOD_SUBCHANNEL_SHIFT: u32 = 13; // 15:13
const DMA_METHOD_COUNT_SHIFT: u32 = 16; // 28:16 (IMMD_DATA: the data)
const DMA_METHOD_COUNT_MAX: u32 = 0x1fff;
const DMA_SEC_OP_SHIFT: u32 = 29; // 31:29
const DMA_SEC_OP_INC_METHOD: u32 = 1;
const DMA_SEC_OP_NON_INC_METHOD: u32 = 3;
const DMA_SEC_OP_IMMD_DATA_METHOD: u32 = 4;

// Host methods, NVC86F_* (clc86f.h): valid on a channel of any engine.
/// NVC86F_SET_OBJECT: binds a class to the header's subchannel.
pub const NVC86F_SET_OBJECT: u16 = 0x0000;
/// NVC86F_NON_STALL_INTERRUPT.
pub const NVC86F_NON_STALL_INTERRUPT: u16 = 0x0020;
pub const NVC86F_SEM_ADDR_LO: u16 = 0x005c;
pub const NVC86F_SEM_ADDR_HI: u16 = 0x0060;
pub const NVC86F_SEM_PAYLOAD_LO: u16 = 0x0064;
pub const NVC86F_SEM_PAYLOAD_HI: u16 = 0x0068;
pub const NVC86F_SEM_EXECUTE: u16 = 0x006c;
/// NVC86F_WFI: wait for the engine to go idle.
pub const NVC86F_WFI: u16 = 0x0078;
const SEM_EXECUTE_OPERATION_RELEASE: u32 = 1; // 2:0
const SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ: u32 = 3;
const SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN: u32 = 1 << 12;
const SEM_EXECUTE_RELEASE_WFI_EN: u32 = 1 << 20;
const SEM_EXECUTE_PAYLOAD_SIZE_64BIT: u32 = 1 << 24;
const SEM_EXECUTE_RELEASE_TIMESTAMP_EN: u32 = 1 << 25;
/// SEM_ADDR_HI holds address bits 56:32 (24:0).
const SEM_ADDR_HI_MASK: u64 = 0x1ff_ffff;

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

/// The subchannels rig binds: host methods and the compute class on one, the copy
/// class on another (tinygrad's choice, which the RM's classes do not constrain).
pub const SUBCH_COMPUTE: Subchannel = Subchannel(1);
pub const SUBCH_COPY: Subchannel = Subchannel(4);

/// One of a channel's eight subchannels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subchannel(u8);

impl Subchannel {
    /// Subchannel `n`, below 8.
    pub fn new(n: u8) -> Option<Self> {
        (n < 8).then_some(Self(n))
    }

    /// Its number.
    pub fn get(self) -> u8 {
        self.0
    }
}

/// A header that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodError {
    #[error("Method offset {method:#x} is not a dword offset below 0x4000")]
    Method { method: u16 },
    #[error("{count} words for one header; at most {DMA_METHOD_COUNT_MAX}")]
    Count { count: u32 },
    #[error("Immediate data {data:#x} does not fit 13 bits")]
    Immediate { data: u32 },
    #[error("Address {addr:#x} is not aligned to {align} bytes, or beyond 2^57")]
    Address { addr: u64, align: u64 },
    #[error("A copy of {bytes} bytes: one copy moves 1 byte to 4 GiB - 1")]
    CopyLength { bytes: u64 },
}

fn header(op: u32, subch: Subchannel, method: u16, count: u32) -> Result<u32, MethodError> {
    if !method.is_multiple_of(4) || u32::from(method >> 2) > DMA_METHOD_ADDRESS_MASK {
        return Err(MethodError::Method { method });
    }
    if count > DMA_METHOD_COUNT_MAX {
        return Err(MethodError::Count { count });
    }
    Ok(op << DMA_SEC_OP_SHIFT
        | count << DMA_METHOD_COUNT_SHIFT
        | u32::from(subch.0) << DMA_METHOD_SUBCHANNEL_SHIFT
        | u32::from(method >> 2))
}

/// INC_METHOD: `count` data words follow, to `method`, `method + 4`, ….
///
/// # Errors
/// [`MethodError::Method`] or [`MethodError::Count`].
pub fn inc(subch: Subchannel, method: u16, count: u32) -> Result<u32, MethodError> {
    header(DMA_SEC_OP_INC_METHOD, subch, method, count)
}

/// NON_INC_METHOD: `count` data words follow, all to `method`.
///
/// # Errors
/// As [`inc`].
pub fn non_inc(subch: Subchannel, method: u16, count: u32) -> Result<u32, MethodError> {
    header(DMA_SEC_OP_NON_INC_METHOD, subch, method, count)
}

/// IMMD_DATA_METHOD: one word that carries its 13-bit data itself.
///
/// # Errors
/// [`MethodError::Method`], or [`MethodError::Immediate`] for data above 13 bits.
pub fn immediate(subch: Subchannel, method: u16, data: u32) -> Result<u32, MethodError> {
    if data > DMA_METHOD_COUNT_MAX {
        return Err(MethodError::Immediate { data });
    }
    header(DMA_SEC_OP_IMMD_DATA_METHOD, subch, method, data)
}

fn split(addr: u64, hi_mask: u64) -> (u32, u32) {
    let word = |v: u64| u32::try_from(v).expect("masked to 32 bits");
    (word((addr >> 32) & hi_mask), word(addr & 0xffff_ffff))
}

fn check_addr(addr: u64, align: u64) -> Result<(), MethodError> {
    if !addr.is_multiple_of(align) || addr >> 57 != 0 {
        return Err(MethodError::Address { addr, align });
    }
    Ok(())
}

/// SET_OBJECT: binds `class` to `subch` (2 words).
pub fn set_object(subch: Subchannel, class: u32) -> [u32; 2] {
    [
        inc(subch, NVC86F_SET_OBJECT, 1).expect("SET_OBJECT is a valid one-word method"),
        class,
    ]
}

/// A semaphore release of 64-bit `value` and the GPU's timestamp at the 16 bytes at
/// `addr`, after every earlier method of the channel has finished (WFI) (6 words).
///
/// # Errors
/// [`MethodError::Address`] unless `addr` is 16-byte aligned and below 2^57.
pub fn release(addr: u64, value: u64) -> Result<[u32; 6], MethodError> {
    release_with(addr, value, Release::default())
}

/// What a release waits for and writes besides its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// Wait until the engine is idle first (RELEASE_WFI): the value then says every
    /// earlier method's work is done. Without it, the value says only that the host
    /// has processed the methods before it.
    pub wait_idle: bool,
    /// Write the GPU's nanosecond timestamp at `addr + 8` too (16 bytes, 16-aligned).
    pub timestamp: bool,
}

impl Default for Release {
    fn default() -> Self {
        Self {
            wait_idle: true,
            timestamp: true,
        }
    }
}

/// A semaphore release of 64-bit `value` at `addr`, as `how` says (6 words).
///
/// # Errors
/// [`MethodError::Address`] unless `addr` is aligned (16 bytes with a timestamp, 8
/// without) and below 2^57.
pub fn release_with(addr: u64, value: u64, how: Release) -> Result<[u32; 6], MethodError> {
    check_addr(addr, if how.timestamp { 16 } else { 8 })?;
    let mut execute = SEM_EXECUTE_OPERATION_RELEASE | SEM_EXECUTE_PAYLOAD_SIZE_64BIT;
    if how.wait_idle {
        execute |= SEM_EXECUTE_RELEASE_WFI_EN;
    }
    if how.timestamp {
        execute |= SEM_EXECUTE_RELEASE_TIMESTAMP_EN;
    }
    Ok(semaphore(addr, value, execute))
}

/// Waits until the 64-bit value at `addr` reaches `value` (circular compare), letting
/// the scheduler switch to another channel group while it waits (6 words).
///
/// # Errors
/// [`MethodError::Address`] unless `addr` is 8-byte aligned and below 2^57.
pub fn acquire(addr: u64, value: u64) -> Result<[u32; 6], MethodError> {
    check_addr(addr, 8)?;
    Ok(semaphore(
        addr,
        value,
        SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ
            | SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN
            | SEM_EXECUTE_PAYLOAD_SIZE_64BIT,
    ))
}

fn semaphore(addr: u64, value: u64, execute: u32) -> [u32; 6] {
    let (hi, lo) = split(addr, SEM_ADDR_HI_MASK);
    let (vhi, vlo) = split(value, u64::from(u32::MAX));
    [
        inc(Subchannel(0), NVC86F_SEM_ADDR_LO, 5).expect("five host semaphore methods"),
        lo,
        hi,
        vlo,
        vhi,
        execute,
    ]
}

/// A copy-engine copy of `bytes` from `src` to `dst`, both GPU virtual addresses of
/// the channel's address space, on the copy subchannel (9 words). The copy is not
/// waited for: a [`release`] after it (with its WFI) says when it is done.
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
    fn headers_match_the_words_tinygrad_and_uvm_write() {
        // tinygrad's 64-bit release header: INC, subchannel 0, SEM_ADDR_LO, 5 words.
        assert_eq!(inc(Subchannel(0), NVC86F_SEM_ADDR_LO, 5), Ok(0x2005_0017));
        assert_eq!(
            set_object(SUBCH_COPY, HOPPER_DMA_COPY_A),
            [0x2001_8000, 0xc8b5]
        );
        assert_eq!(non_inc(Subchannel(7), 0x3ffc, 0x1fff), Ok(0x7fff_efff));
        assert_eq!(
            immediate(Subchannel(0), NVC86F_NON_STALL_INTERRUPT, 0),
            Ok(0x8000_0008)
        );
    }

    #[test]
    fn release_and_acquire_carry_the_address_and_64_bit_value() {
        let r = release(0x12_3456_7890, 0x1_0000_0002).expect("aligned");
        assert_eq!(r, [0x2005_0017, 0x3456_7890, 0x12, 2, 1, 0x0310_0001]);
        let a = acquire(0x12_3456_7898, 7).expect("aligned");
        assert_eq!(a[5], 0x0100_1003);
        assert_eq!((a[1], a[2], a[3], a[4]), (0x3456_7898, 0x12, 7, 0));
    }

    #[test]
    fn a_release_without_wfi_or_timestamp_drops_those_bits_and_their_alignment() {
        let plain = Release {
            wait_idle: false,
            timestamp: false,
        };
        assert_eq!(
            release_with(0x1008, 3, plain).map(|r| r[5]),
            Ok(0x0100_0001)
        );
        let no_wfi = Release {
            wait_idle: false,
            timestamp: true,
        };
        assert_eq!(
            release_with(0x1010, 3, no_wfi).map(|r| r[5]),
            Ok(0x0300_0001)
        );
        assert!(matches!(
            release_with(0x1008, 3, no_wfi),
            Err(MethodError::Address { .. })
        ));
        assert_eq!(
            release_with(0x1010, 3, Release::default()),
            release(0x1010, 3)
        );
    }

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

    #[test]
    fn out_of_range_fields_are_refused_not_truncated() {
        assert_eq!(
            inc(Subchannel(0), 0x4000, 1),
            Err(MethodError::Method { method: 0x4000 })
        );
        assert_eq!(
            inc(Subchannel(0), 0x5e, 1),
            Err(MethodError::Method { method: 0x5e })
        );
        assert_eq!(
            inc(Subchannel(0), 0, 0x2000),
            Err(MethodError::Count { count: 0x2000 })
        );
        assert_eq!(
            immediate(Subchannel(0), 0, 0x2000),
            Err(MethodError::Immediate { data: 0x2000 })
        );
        assert_eq!(Subchannel::new(8), None);
        assert!(matches!(
            release(0x1008, 1),
            Err(MethodError::Address { .. })
        ));
        assert!(matches!(
            acquire(1 << 57, 1),
            Err(MethodError::Address { .. })
        ));
        assert_eq!(copy(0, 0, 0), Err(MethodError::CopyLength { bytes: 0 }));
        assert_eq!(
            copy(0, 0, 1 << 32),
            Err(MethodError::CopyLength { bytes: 1 << 32 })
        );
    }
}
