//! Hopper pushbuffer words, one file per class: the method header every command
//! starts with (here), the host class's methods that any channel takes (`host`:
//! SET_OBJECT, 64-bit semaphore release and acquire, WFI), the copy engine's
//! ([`copy`]: copies, the engine's own semaphore release, memset), and the compute
//! class's ([`compute`]: windows, local memory, invalidations, the launch). Pure: every
//! function returns words, and the writer in `pushbuf` puts them into device-visible
//! memory.
//!
//! A class's methods are only meaningful on the subchannel its SET_OBJECT bound
//! (`host::set_object`); each class file names the class and the subchannel rig binds
//! it to. The host methods and the plain copy are re-exported here, so callers write
//! `method::release`, `method::copy`; the engines' own words are `method::copy::…` and
//! `method::compute::…`.
//!
//! References (open-gpu-kernel-modules 580.142): `src/common/sdk/nvidia/inc/class/
//! clc56f.h` (NVC56F_DMA_* header fields, shared by Hopper's C86F), `clc86f.h`
//! (HOPPER_CHANNEL_GPFIFO_A host methods and NVC86F_SEM_EXECUTE), `clc8b5.h`
//! (HOPPER_DMA_COPY_A), summarised in docs/hardware/nvidia-channels.md ("Pushbuffer
//! headers", "Host semaphores", "Copy engine"); open-gpu-doc `classes/compute/clcbc0.h`
//! (HOPPER_COMPUTE_A), summarised in docs/hardware/nvidia-compute.md.

pub mod compute;
pub mod copy;
mod host;
#[cfg(test)]
mod testing;

pub use compute::{ComputeError, HOPPER_COMPUTE_A, SUBCH_COMPUTE};
pub use copy::{
    CopyError, HOPPER_DMA_COPY_A, NVC8B5_LAUNCH_DMA, NVC8B5_LINE_LENGTH_IN, NVC8B5_OFFSET_IN_UPPER,
    SUBCH_COPY, copy, copy_flushed,
};
pub use host::{
    HOPPER_CHANNEL_GPFIFO_A, NVC86F_NON_STALL_INTERRUPT, NVC86F_SEM_ADDR_HI, NVC86F_SEM_ADDR_LO,
    NVC86F_SEM_EXECUTE, NVC86F_SEM_PAYLOAD_HI, NVC86F_SEM_PAYLOAD_LO, NVC86F_SET_OBJECT,
    NVC86F_WFI, Release, acquire, release, release_with, set_object, wfi,
};

// Header fields, NVC56F_DMA_* (clc56f.h).
const DMA_METHOD_ADDRESS_MASK: u32 = 0xfff; // 11:0, the method's dword address
const DMA_METHOD_SUBCHANNEL_SHIFT: u32 = 13; // 15:13
const DMA_METHOD_COUNT_SHIFT: u32 = 16; // 28:16 (IMMD_DATA: the data)
const DMA_METHOD_COUNT_MAX: u32 = 0x1fff;
const DMA_SEC_OP_SHIFT: u32 = 29; // 31:29
const DMA_SEC_OP_INC_METHOD: u32 = 1;
const DMA_SEC_OP_NON_INC_METHOD: u32 = 3;
const DMA_SEC_OP_IMMD_DATA_METHOD: u32 = 4;

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

#[cfg(test)]
mod tests {
    use rig_model::addr::GpuVa;

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
            release(GpuVa(0x1008), 1),
            Err(MethodError::Address { .. })
        ));
        assert!(matches!(
            acquire(GpuVa(1 << 57), 1),
            Err(MethodError::Address { .. })
        ));
    }
}
