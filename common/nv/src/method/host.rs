//! The host class, HOPPER_CHANNEL_GPFIFO_A: methods every channel takes whatever its
//! engine, on any subchannel (rig sends them on 0): SET_OBJECT (which binds an engine's
//! class to a subchannel), the 64-bit semaphore release and acquire, WFI, the
//! non-stall interrupt. A timeline release is the last command of a submission
//! (`Channel::release`).
//!
//! Reference: `crate::class::clc86f` (NVC86F_*, from open-gpu-kernel-modules 580.142
//! `src/common/sdk/nvidia/inc/class/clc86f.h`). The driver's clc86f.h names
//! NVC86F_SEM_EXECUTE's fields but not their `_EN` and `_64BIT` values; those are
//! taken from `clc56f`, whose fields sit at the same bits (a test checks it). Not
//! here: the header encoding (this module's parent), the engines' own classes (`copy`,
//! `compute`).

use rig_model::addr::GpuVa;

use super::{MethodError, Subchannel, check_addr, inc, split};
use crate::class::clc56f::{
    NVC56F_NON_STALL_INTERRUPT, NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN,
    NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT, NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN,
    NVC56F_SEM_EXECUTE_RELEASE_WFI_EN,
};
use crate::class::clc86f::{
    NVC86F_SEM_ADDR_HI_OFFSET, NVC86F_SEM_ADDR_LO, NVC86F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG,
    NVC86F_SEM_EXECUTE_OPERATION, NVC86F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ,
    NVC86F_SEM_EXECUTE_OPERATION_RELEASE, NVC86F_SEM_EXECUTE_PAYLOAD_SIZE,
    NVC86F_SEM_EXECUTE_RELEASE_TIMESTAMP, NVC86F_SEM_EXECUTE_RELEASE_WFI, NVC86F_SET_OBJECT,
    NVC86F_WFI, NVC86F_WFI_SCOPE, NVC86F_WFI_SCOPE_CURRENT_VEID,
};

const SEM_EXECUTE_OPERATION_RELEASE: u32 =
    NVC86F_SEM_EXECUTE_OPERATION.of(NVC86F_SEM_EXECUTE_OPERATION_RELEASE);
const SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ: u32 =
    NVC86F_SEM_EXECUTE_OPERATION.of(NVC86F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ);
const SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN: u32 =
    NVC86F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG.of(NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN);
const SEM_EXECUTE_RELEASE_WFI_EN: u32 =
    NVC86F_SEM_EXECUTE_RELEASE_WFI.of(NVC56F_SEM_EXECUTE_RELEASE_WFI_EN);
const SEM_EXECUTE_PAYLOAD_SIZE_64BIT: u32 =
    NVC86F_SEM_EXECUTE_PAYLOAD_SIZE.of(NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT);
const SEM_EXECUTE_RELEASE_TIMESTAMP_EN: u32 =
    NVC86F_SEM_EXECUTE_RELEASE_TIMESTAMP.of(NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN);
/// SEM_ADDR_HI holds address bits 56:32.
const SEM_ADDR_HI_MASK: u64 = NVC86F_SEM_ADDR_HI_OFFSET.max() as u64;

/// SET_OBJECT: binds `class` to `subch` (2 words).
#[inline]
pub fn set_object(subch: Subchannel, class: u32) -> [u32; 2] {
    [
        inc(subch, NVC86F_SET_OBJECT, 1).expect("SET_OBJECT is a valid one-word method"),
        class,
    ]
}

/// WFI with SCOPE CURRENT_VEID (2 words): the methods after it wait until the engine
/// has finished everything before it. Ahead of a kernel launch it keeps a channel's
/// grids in order, so that their releases land in order (docs/compute.md,
/// "Completion").
#[inline]
pub fn wfi() -> [u32; 2] {
    [
        inc(Subchannel(0), NVC86F_WFI, 1).expect("NVC86F_WFI is a valid one-word method"),
        NVC86F_WFI_SCOPE.of(NVC86F_WFI_SCOPE_CURRENT_VEID),
    ]
}

/// A semaphore release of 64-bit `value` and the GPU's timestamp at the 16 bytes at
/// `addr`, after every earlier method of the channel has finished (WFI) (6 words).
///
/// # Errors
/// [`MethodError::Address`] unless `addr` is 16-byte aligned and below 2^57.
#[inline]
pub fn release(addr: GpuVa, value: u64) -> Result<[u32; 6], MethodError> {
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
    #[inline]
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
#[inline]
pub fn release_with(addr: GpuVa, value: u64, how: Release) -> Result<[u32; 6], MethodError> {
    let addr = addr.get();
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

/// NON_STALL_INTERRUPT (1 word, an immediate of data 0): the host raises the GPU's
/// non-stall interrupt when it reaches this method, without stalling the channel. It
/// says nothing about the engine: put it after an acquire or a WFI release of what it
/// announces. HOPPER_CHANNEL_GPFIFO_A's trimmed header omits the method; it is Volta's
/// and Ampere's 0x20, which NVIDIA's own push library sends on Hopper
/// (docs/hardware/nvidia-rm.md, "Non-stall interrupts and OS events").
#[inline]
pub fn non_stall_interrupt() -> [u32; 1] {
    [
        super::immediate(Subchannel(0), NVC56F_NON_STALL_INTERRUPT, 0)
            .expect("NON_STALL_INTERRUPT with data 0 is a valid immediate"),
    ]
}

/// What a channel whose acquire has not been met does meanwhile (`SEM_EXECUTE`'s
/// ACQUIRE_SWITCH_TSG; docs/hardware/nvidia-channels.md, "Waits on the GPU").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// ACQUIRE_SWITCH_TSG: the scheduler switches its channel group out and serves
    /// other groups until the value lands. For a value another group releases: the
    /// waiting group yields the engine at once, and pays the switch back in.
    SwitchGroup,
    /// The PBDMA keeps polling within the group's timeslice. For a value a channel of
    /// the same group releases: switching the group out would switch out the work it
    /// waits for (on an H100 the next kernel then started 12.6 µs after, against 5.4
    /// µs staying).
    Stay,
}

/// Waits until the 64-bit value at `addr` reaches `value` (circular compare), doing
/// `meanwhile` until then (6 words). The channel's host processes no later method
/// until the compare holds; the PBDMA polls the word.
///
/// # Errors
/// [`MethodError::Address`] unless `addr` is 8-byte aligned and below 2^57.
#[inline]
pub fn acquire(addr: GpuVa, value: u64, meanwhile: Waiting) -> Result<[u32; 6], MethodError> {
    let addr = addr.get();
    check_addr(addr, 8)?;
    Ok(semaphore(
        addr,
        value,
        SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ | switch(meanwhile) | SEM_EXECUTE_PAYLOAD_SIZE_64BIT,
    ))
}

/// [`acquire`] of the 32-bit word at `addr` (a copy engine's release, which writes
/// only the low word): the circular compare is taken modulo 2^32, so it holds while
/// the semaphore is fewer than 2^31 values behind or ahead (6 words).
///
/// # Errors
/// [`MethodError::Address`] unless `addr` is 4-byte aligned and below 2^57.
#[inline]
pub fn acquire32(addr: GpuVa, value: u32, meanwhile: Waiting) -> Result<[u32; 6], MethodError> {
    let addr = addr.get();
    check_addr(addr, 4)?;
    Ok(semaphore(
        addr,
        u64::from(value),
        SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ | switch(meanwhile),
    ))
}

#[inline]
fn switch(meanwhile: Waiting) -> u32 {
    match meanwhile {
        Waiting::SwitchGroup => SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN,
        Waiting::Stay => 0,
    }
}

#[inline]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::clc56f;

    #[test]
    fn clc56f_values_are_used_only_where_clc86f_has_the_same_field() {
        use crate::class::clc86f;
        assert_eq!(
            clc56f::NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG,
            clc86f::NVC86F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG
        );
        assert_eq!(
            clc56f::NVC56F_SEM_EXECUTE_RELEASE_WFI,
            clc86f::NVC86F_SEM_EXECUTE_RELEASE_WFI
        );
        assert_eq!(
            clc56f::NVC56F_SEM_EXECUTE_PAYLOAD_SIZE,
            clc86f::NVC86F_SEM_EXECUTE_PAYLOAD_SIZE
        );
        assert_eq!(
            clc56f::NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP,
            clc86f::NVC86F_SEM_EXECUTE_RELEASE_TIMESTAMP
        );
        assert_eq!(clc56f::NVC56F_SEM_ADDR_LO, clc86f::NVC86F_SEM_ADDR_LO);
    }

    #[test]
    fn release_and_acquire_carry_the_address_and_64_bit_value() {
        let r = release(GpuVa(0x12_3456_7890), 0x1_0000_0002).expect("aligned");
        assert_eq!(r, [0x2005_0017, 0x3456_7890, 0x12, 2, 1, 0x0310_0001]);
        let a = acquire(GpuVa(0x12_3456_7898), 7, Waiting::SwitchGroup).expect("aligned");
        assert_eq!(a[5], 0x0100_1003);
        assert_eq!((a[1], a[2], a[3], a[4]), (0x3456_7898, 0x12, 7, 0));
        // Staying clears ACQUIRE_SWITCH_TSG (bit 12) and nothing else.
        let stay = acquire(GpuVa(0x12_3456_7898), 7, Waiting::Stay).expect("aligned");
        assert_eq!(stay[5], 0x0100_0003);
        assert_eq!(stay[..5], a[..5]);
    }

    #[test]
    fn a_32_bit_acquire_drops_the_payload_size_bit_and_the_high_word() {
        let a =
            acquire32(GpuVa(0x12_3456_7894), 0xffff_fff0, Waiting::SwitchGroup).expect("4-aligned");
        // OPERATION ACQ_CIRC_GEQ (3), ACQUIRE_SWITCH_TSG (bit 12), PAYLOAD_SIZE 32BIT.
        assert_eq!(a[5], 0x0000_1003);
        assert_eq!(&a[..5], &[0x2005_0017, 0x3456_7894, 0x12, 0xffff_fff0, 0]);
        assert!(matches!(
            acquire32(GpuVa(0x1002), 1, Waiting::Stay),
            Err(MethodError::Address { .. })
        ));
        assert!(matches!(
            acquire(GpuVa(0x1004), 1, Waiting::Stay),
            Err(MethodError::Address { .. })
        ));
    }

    #[test]
    fn a_release_without_wfi_or_timestamp_drops_those_bits_and_their_alignment() {
        let plain = Release {
            wait_idle: false,
            timestamp: false,
        };
        assert_eq!(
            release_with(GpuVa(0x1008), 3, plain).map(|r| r[5]),
            Ok(0x0100_0001)
        );
        let no_wfi = Release {
            wait_idle: false,
            timestamp: true,
        };
        assert_eq!(
            release_with(GpuVa(0x1010), 3, no_wfi).map(|r| r[5]),
            Ok(0x0300_0001)
        );
        assert!(matches!(
            release_with(GpuVa(0x1008), 3, no_wfi),
            Err(MethodError::Address { .. })
        ));
        assert_eq!(
            release_with(GpuVa(0x1010), 3, Release::default()),
            release(GpuVa(0x1010), 3)
        );
    }
}
