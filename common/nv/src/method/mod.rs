//! Pushbuffer words, one file per class: the method header every command starts with
//! (here), the host class's methods that any channel takes ([`host`]: SET_OBJECT,
//! 64-bit semaphore release and acquire, WFI), the copy engine's ([`mod@copy`]: copies,
//! the engine's own semaphore release, memset), and the compute class's ([`compute`]:
//! windows, local memory, invalidations, the launch). Pure: every function returns
//! words, and rig-client's `channel::pushbuf` puts them into device-visible memory.
//!
//! A class's methods are only meaningful on the subchannel its SET_OBJECT bound
//! (`host::set_object`); each class file names the subchannel rig binds it to. The
//! words are Hopper's (C86F, C8B5, CBC0); Blackwell's classes (C96F, C9B5, CDC0) take
//! every one of them unchanged, which `generation`'s tests check name by name.
//!
//! Every offset, field and value comes from `crate::class` (generated from the
//! headers): the header format from `clc56f` (NVC56F_DMA_*, which Hopper's C86F
//! shares), the host methods from `clc86f`, the copy engine's from `clc8b5`, the
//! compute class's from `clcbc0`; docs/hardware/nvidia-channels.md ("Pushbuffer
//! headers", "Host semaphores", "Copy engine") and docs/hardware/nvidia-compute.md say
//! what rig sends and why.

pub mod compute;
pub mod copy;
pub mod host;

pub use compute::{ComputeError, SUBCH_COMPUTE};
pub use copy::{CopyError, SUBCH_COPY, copy, copy_flushed};
pub use host::{
    Release, Waiting, acquire, acquire32, non_stall_interrupt, release, release_with, set_object,
    wfi,
};

use rig_model::nv::Engine;

use crate::generation::Generation;

use crate::class::clc56f::{
    NVC56F_DMA_METHOD_ADDRESS, NVC56F_DMA_METHOD_COUNT, NVC56F_DMA_METHOD_SUBCHANNEL,
    NVC56F_DMA_SEC_OP, NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD, NVC56F_DMA_SEC_OP_INC_METHOD,
    NVC56F_DMA_SEC_OP_NON_INC_METHOD,
};

/// The most data words one header announces, and the most an immediate carries.
pub const METHOD_COUNT_MAX: u32 = NVC56F_DMA_METHOD_COUNT.max();

/// SET_OBJECT binding `engine`'s class of `generation` to the subchannel rig uses for
/// it: copy on [`SUBCH_COPY`], compute on [`SUBCH_COMPUTE`] (2 words), a channel's
/// first command.
#[inline]
pub fn bind(generation: &Generation, engine: Engine) -> [u32; 2] {
    let subch = match engine {
        Engine::Copy => SUBCH_COPY,
        Engine::Compute => SUBCH_COMPUTE,
    };
    set_object(subch, generation.class(engine))
}

/// One of a channel's eight subchannels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subchannel(u8);

impl Subchannel {
    /// Subchannel `n`, below 8.
    #[inline]
    pub fn new(n: u8) -> Option<Self> {
        (n < 8).then_some(Self(n))
    }

    /// Its number.
    #[inline]
    pub fn get(self) -> u8 {
        self.0
    }
}

/// A header that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodError {
    #[error("Method offset {method:#x} is not a dword offset below 0x4000")]
    Method { method: u32 },
    #[error("{count} words for one header; at most {METHOD_COUNT_MAX}")]
    Count { count: u32 },
    #[error("Immediate data {data:#x} does not fit 13 bits")]
    Immediate { data: u32 },
    #[error("Address {addr:#x} is not aligned to {align} bytes, or beyond 2^57")]
    Address { addr: u64, align: u64 },
}

#[inline]
fn header(op: u32, subch: Subchannel, method: u32, count: u32) -> Result<u32, MethodError> {
    // Plain shifts of the fields' positions: headers are built on every submission.
    if !method.is_multiple_of(4) || method >> 2 > NVC56F_DMA_METHOD_ADDRESS.max() {
        return Err(MethodError::Method { method });
    }
    if count > METHOD_COUNT_MAX {
        return Err(MethodError::Count { count });
    }
    Ok(op << NVC56F_DMA_SEC_OP.lo
        | count << NVC56F_DMA_METHOD_COUNT.lo
        | u32::from(subch.0) << NVC56F_DMA_METHOD_SUBCHANNEL.lo
        | method >> 2 << NVC56F_DMA_METHOD_ADDRESS.lo)
}

/// INC_METHOD: `count` data words follow, to `method`, `method + 4`, ….
///
/// # Errors
/// [`MethodError::Method`] or [`MethodError::Count`].
#[inline]
pub fn inc(subch: Subchannel, method: u32, count: u32) -> Result<u32, MethodError> {
    header(NVC56F_DMA_SEC_OP_INC_METHOD, subch, method, count)
}

/// NON_INC_METHOD: `count` data words follow, all to `method`.
///
/// # Errors
/// As [`inc`].
#[inline]
pub fn non_inc(subch: Subchannel, method: u32, count: u32) -> Result<u32, MethodError> {
    header(NVC56F_DMA_SEC_OP_NON_INC_METHOD, subch, method, count)
}

/// IMMD_DATA_METHOD: one word that carries its 13-bit data itself.
///
/// # Errors
/// [`MethodError::Method`], or [`MethodError::Immediate`] for data above 13 bits.
#[inline]
pub fn immediate(subch: Subchannel, method: u32, data: u32) -> Result<u32, MethodError> {
    if data > METHOD_COUNT_MAX {
        return Err(MethodError::Immediate { data });
    }
    header(NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD, subch, method, data)
}

/// `addr`'s bits 63:32 masked by `hi_mask`, and bits 31:0: an `_UPPER` and a `_LOWER`
/// method's data, for every class.
#[inline]
fn split(addr: u64, hi_mask: u64) -> (u32, u32) {
    let word = |v: u64| u32::try_from(v).expect("masked to 32 bits");
    (word((addr >> 32) & hi_mask), word(addr & 0xffff_ffff))
}

#[inline]
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
    use crate::class::{clc8b5::HOPPER_DMA_COPY_A, clc86f::*};

    #[test]
    fn headers_match_the_words_tinygrad_and_uvm_write() {
        // tinygrad's 64-bit release header: INC, subchannel 0, SEM_ADDR_LO, 5 words.
        assert_eq!(inc(Subchannel(0), NVC86F_SEM_ADDR_LO, 5), Ok(0x2005_0017));
        assert_eq!(
            set_object(SUBCH_COPY, HOPPER_DMA_COPY_A),
            [0x2001_8000, 0xc8b5]
        );
        let hopper = crate::generation::HOPPER;
        assert_eq!(bind(&hopper, Engine::Copy), [0x2001_8000, 0xc8b5]);
        assert_eq!(bind(&hopper, Engine::Compute), [0x2001_2000, 0xcbc0]);
        assert_eq!(non_inc(Subchannel(7), 0x3ffc, 0x1fff), Ok(0x7fff_efff));
        assert_eq!(
            immediate(
                Subchannel(0),
                crate::class::clc56f::NVC56F_NON_STALL_INTERRUPT,
                0
            ),
            Ok(0x8000_0008)
        );
        assert_eq!(host::non_stall_interrupt(), [0x8000_0008]);
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
            acquire(GpuVa(1 << 57), 1, host::Waiting::Stay),
            Err(MethodError::Address { .. })
        ));
    }
}
