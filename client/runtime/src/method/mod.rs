//! Pushbuffer method headers, as rig-client's `channel::method` writes them, for the
//! compute and copy words beside this file.
//!
//! Flow: `compute` and `copy` build their words on [`inc`] and [`Subchannel`]; the
//! runtime writes them into a lent channel's pushbuffer.
//!
//! This module mirrors the header encoder of rig-client's `channel::method` (same names,
//! same signatures, same errors) because rig-runtime does not depend on rig-client yet.
//! `compute.rs` and `copy.rs` use nothing but the items here that rig-client's module
//! also has, so when rig-runtime builds on rig-client they move to
//! `channel::method::compute` and `channel::method::copy` as they are (their tests with
//! `testing.rs` and the headers they read), and this file goes.
//!
//! Reference: open-gpu-kernel-modules 580.142 `src/common/sdk/nvidia/inc/class/clc56f.h`
//! (NVC56F_DMA_* header fields, shared by Hopper's host class C86F).

pub mod compute;
pub mod copy;
#[cfg(test)]
mod testing;

/// HOPPER_COMPUTE_A (clcbc0.h).
pub const HOPPER_COMPUTE_A: u32 = 0xcbc0;
/// HOPPER_DMA_COPY_A (clc8b5.h).
pub const HOPPER_DMA_COPY_A: u32 = 0xc8b5;

const DMA_METHOD_ADDRESS_MASK: u32 = 0xfff; // 11:0, the method's dword address
const DMA_METHOD_SUBCHANNEL_SHIFT: u32 = 13; // 15:13
const DMA_METHOD_COUNT_SHIFT: u32 = 16; // 28:16
const DMA_METHOD_COUNT_MAX: u32 = 0x1fff;
const DMA_SEC_OP_SHIFT: u32 = 29; // 31:29
const DMA_SEC_OP_INC_METHOD: u32 = 1;
/// NVC86F_SET_OBJECT: binds a class to the header's subchannel.
pub const NVC86F_SET_OBJECT: u16 = 0x0000;

/// The subchannels rig binds: the compute class on one, the copy class on another.
pub const SUBCH_COMPUTE: Subchannel = Subchannel(1);
/// See [`SUBCH_COMPUTE`].
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
    /// Not a dword offset, or past the 12-bit method address.
    #[error("Method offset {method:#x} is not a dword offset below 0x4000")]
    Method {
        /// The offset.
        method: u16,
    },
    /// More words than a header counts.
    #[error("{count} words for one header; at most {DMA_METHOD_COUNT_MAX}")]
    Count {
        /// The count.
        count: u32,
    },
}

/// INC_METHOD: `count` data words follow, to `method`, `method + 4`, ….
///
/// # Errors
/// [`MethodError::Method`] or [`MethodError::Count`].
pub fn inc(subch: Subchannel, method: u16, count: u32) -> Result<u32, MethodError> {
    if !method.is_multiple_of(4) || u32::from(method >> 2) > DMA_METHOD_ADDRESS_MASK {
        return Err(MethodError::Method { method });
    }
    if count > DMA_METHOD_COUNT_MAX {
        return Err(MethodError::Count { count });
    }
    Ok(DMA_SEC_OP_INC_METHOD << DMA_SEC_OP_SHIFT
        | count << DMA_METHOD_COUNT_SHIFT
        | u32::from(subch.0) << DMA_METHOD_SUBCHANNEL_SHIFT
        | u32::from(method >> 2))
}

/// SET_OBJECT: binds `class` to `subch` (2 words).
pub fn set_object(subch: Subchannel, class: u32) -> [u32; 2] {
    [
        inc(subch, NVC86F_SET_OBJECT, 1).expect("SET_OBJECT is a valid one-word method"),
        class,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_match_rig_clients() {
        assert_eq!(
            set_object(SUBCH_COPY, HOPPER_DMA_COPY_A),
            [0x2001_8000, 0xc8b5]
        );
        assert_eq!(inc(Subchannel(0), 0x5c, 5), Ok(0x2005_0017));
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
        assert_eq!(inc(Subchannel(7), 0x3ffc, 0x1fff), Ok(0x3fff_efff));
        assert_eq!(Subchannel::new(8), None);
        assert_eq!(Subchannel::new(7).map(Subchannel::get), Some(7));
    }
}
