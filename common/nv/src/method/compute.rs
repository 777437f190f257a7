//! The compute class, HOPPER_COMPUTE_A, bound to [`SUBCH_COMPUTE`]: binding the class,
//! the memory windows, the local memory (SLM) buffer and the cache invalidations once
//! per channel; cache invalidation and the launch (SEND_PCAS) per launch; and the
//! report semaphore. Pure: every function returns words for the pushbuffer.
//!
//! Flow: `Channel::open` sends [`set_object`] with `Engine::Compute`; rig-runtime's
//! compute channel sends the two window methods, the invalidations once
//! ([`invalidate_sked_caches`], [`invalidate_sampler_cache`],
//! [`invalidate_texture_header_cache`]) and, for kernels with a stack,
//! [`set_local_memory`]; per launch it writes constant bank 0 and the QMD to GPU-visible
//! memory, then sends [`invalidate_shader_caches`] and [`send_pcas`].
//!
//! Completion of a launch is the QMD's own release slot, never [`report_semaphore`]:
//! on the H200 a report semaphore pushed after a kernel that faulted still landed
//! (docs/hardware/nvidia-compute.md, "Completion").
//!
//! Reference: `crate::class::clcbc0` (generated from NVIDIA open-gpu-doc
//! `classes/compute/clcbc0.h`); the launch
//! sequence as docs/hardware/nvidia-compute.md describes it (Mesa NVK, tinygrad, a
//! libcuda-free Hopper launcher, and what ran on the H200). Not here: the header
//! encoding (this module's parent), the QMD (`crate::qmd`, one file per version).

use rig_model::addr::GpuVa;

use super::{Subchannel, inc, split};
use crate::class::clcbc0::{
    HOPPER_COMPUTE_A, NVCBC0_INVALIDATE_SAMPLER_CACHE_NO_WFI,
    NVCBC0_INVALIDATE_SAMPLER_CACHE_NO_WFI_LINES, NVCBC0_INVALIDATE_SAMPLER_CACHE_NO_WFI_LINES_ALL,
    NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI, NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT,
    NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT_TRUE,
    NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA,
    NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA_TRUE,
    NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION,
    NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION_TRUE, NVCBC0_INVALIDATE_SKED_CACHES,
    NVCBC0_INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI,
    NVCBC0_INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI_LINES,
    NVCBC0_INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI_LINES_ALL, NVCBC0_SEND_PCAS_A,
    NVCBC0_SEND_PCAS_A_QMD_ADDRESS_SHIFTED8, NVCBC0_SEND_SIGNALING_PCAS2_B,
    NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE,
    NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE,
    NVCBC0_SET_REPORT_SEMAPHORE_A, NVCBC0_SET_REPORT_SEMAPHORE_D_OPERATION,
    NVCBC0_SET_REPORT_SEMAPHORE_D_OPERATION_RELEASE, NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE,
    NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE_FOUR_WORDS,
    NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE_ONE_WORD, NVCBC0_SET_SHADER_LOCAL_MEMORY_A,
    NVCBC0_SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER, NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A,
    NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A_SIZE_UPPER,
    NVCBC0_SET_SHADER_LOCAL_MEMORY_WINDOW_A, NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A,
    NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER,
};

/// The subchannel rig binds the compute class to (tinygrad's choice, which the RM's
/// classes do not constrain).
pub const SUBCH_COMPUTE: Subchannel = Subchannel(1);

const INVALIDATE_INSTRUCTION: u32 = NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION
    .of(NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION_TRUE);
const INVALIDATE_GLOBAL_DATA: u32 = NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA
    .of(NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA_TRUE);
const INVALIDATE_CONSTANT: u32 = NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT
    .of(NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT_TRUE);
/// SET_REPORT_SEMAPHORE_D: OPERATION RELEASE, FLUSH_DISABLE left 0 (the release waits
/// for a flush of the engine's writes), STRUCTURE_SIZE as asked.
const REPORT_D_RELEASE: u32 =
    NVCBC0_SET_REPORT_SEMAPHORE_D_OPERATION.of(NVCBC0_SET_REPORT_SEMAPHORE_D_OPERATION_RELEASE);
const REPORT_D_STRUCTURE_SIZE_ONE_WORD: u32 = NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE
    .of(NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE_ONE_WORD);
const REPORT_D_STRUCTURE_SIZE_FOUR_WORDS: u32 = NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE
    .of(NVCBC0_SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE_FOUR_WORDS);
/// Bits 48:32 of a window base go to the _A method's 17-bit BASE_ADDRESS_UPPER.
const WINDOW_UPPER_MASK: u64 =
    NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER.max() as u64;
/// Bits 56:32 of an address go to a 25-bit _UPPER field.
const UPPER25_MASK: u64 = NVCBC0_SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER.max() as u64;
/// Bits 39:32 of the SLM size per TPC go to NON_THROTTLED_A's SIZE_UPPER.
const SIZE_UPPER_MASK: u64 = NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A_SIZE_UPPER.max() as u64;
/// SEND_PCAS_A takes a QMD's address >> 8 in 32 bits: QMDs lie below 2^40.
pub const QMD_ADDRESS_LIMIT: u64 = (NVCBC0_SEND_PCAS_A_QMD_ADDRESS_SHIFTED8.max() as u64 + 1) << 8;
/// QMDs are 256-byte aligned.
pub const QMD_ALIGN: u64 = 256;

/// A word rig will not send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputeError {
    /// An address that is misaligned or past what its method's fields hold.
    #[error("{what} at {addr:#x}: it must be {align}-byte aligned and below {limit:#x}")]
    Address {
        /// What the address is of.
        what: &'static str,
        /// The address.
        addr: u64,
        /// Its alignment.
        align: u64,
        /// The first address past the fields' reach.
        limit: u64,
    },
    /// A local memory size the NON_THROTTLED methods cannot carry (40 bits).
    #[error("{bytes} bytes of local memory per TPC; the methods carry up to 2^40 - 1")]
    LocalSize {
        /// The size asked for.
        bytes: u64,
    },
}

#[inline]
fn check(what: &'static str, addr: u64, align: u64, limit: u64) -> Result<(), ComputeError> {
    if !addr.is_multiple_of(align) || addr >= limit {
        return Err(ComputeError::Address {
            what,
            addr,
            align,
            limit,
        });
    }
    Ok(())
}

#[inline]
fn header(method: u32, count: u32) -> u32 {
    inc(SUBCH_COMPUTE, method, count).expect("a HOPPER_COMPUTE_A method of clcbc0.h")
}

/// SET_OBJECT: binds HOPPER_COMPUTE_A to the compute subchannel (2 words).
#[inline]
pub fn set_object() -> [u32; 2] {
    super::host::set_object(SUBCH_COMPUTE, HOPPER_COMPUTE_A)
}

/// SET_SHADER_SHARED_MEMORY_WINDOW_A/B: the shared window at `base` (3 words).
///
/// # Errors
/// [`ComputeError::Address`] unless `base` is 4 GiB aligned and below 2^49 (the method's
/// fields; `window::Windows` checks the rest).
#[inline]
pub fn set_shared_memory_window(base: GpuVa) -> Result<[u32; 3], ComputeError> {
    let base = base.get();
    check("the shared window", base, 1 << 32, 1 << 49)?;
    let (hi, lo) = split(base, WINDOW_UPPER_MASK);
    Ok([header(NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A, 2), hi, lo])
}

/// SET_SHADER_LOCAL_MEMORY_WINDOW_A/B: the local window at `base` (3 words).
///
/// # Errors
/// [`ComputeError::Address`] unless `base` is 16 MiB aligned and below 2^49.
#[inline]
pub fn set_local_memory_window(base: GpuVa) -> Result<[u32; 3], ComputeError> {
    let base = base.get();
    check("the local window", base, 16 << 20, 1 << 49)?;
    let (hi, lo) = split(base, WINDOW_UPPER_MASK);
    Ok([header(NVCBC0_SET_SHADER_LOCAL_MEMORY_WINDOW_A, 2), hi, lo])
}

/// The local memory (SLM) buffer a channel's kernels use for their stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalMemory {
    /// The buffer's GPU address.
    pub addr: GpuVa,
    /// Bytes per TPC (`window::Slm::per_tpc`).
    pub per_tpc: u64,
    /// SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C: MAX_SM_COUNT (8:0),
    /// MAX_PLURAL_TPC_GPC_COUNT (23:16), MAX_SINGLETON_TPC_GPC_COUNT (31:24).
    /// [`NON_THROTTLED_C_DEFAULT`] is what Mesa NVK and tinygrad send.
    pub non_throttled_c: u32,
}

/// NON_THROTTLED_C as Mesa NVK and tinygrad send it: MAX_SM_COUNT 0xff.
pub const NON_THROTTLED_C_DEFAULT: u32 = 0xff;
/// Alignment rig asks of an SLM buffer (its size's own granularity).
pub const LOCAL_MEMORY_ALIGN: u64 = 0x2_0000;

/// SET_SHADER_LOCAL_MEMORY_A/B and SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B/C: the SLM
/// buffer and its size per TPC (7 words).
///
/// # Errors
/// [`ComputeError::Address`] unless the buffer is 128 KiB aligned and below 2^57;
/// [`ComputeError::LocalSize`] for a size per TPC of 2^40 or more.
#[inline]
pub fn set_local_memory(m: LocalMemory) -> Result<[u32; 7], ComputeError> {
    check(
        "the local memory buffer",
        m.addr.get(),
        LOCAL_MEMORY_ALIGN,
        1 << 57,
    )?;
    if m.per_tpc >> 40 != 0 {
        return Err(ComputeError::LocalSize { bytes: m.per_tpc });
    }
    let (hi, lo) = split(m.addr.get(), UPPER25_MASK);
    let (size_hi, size_lo) = split(m.per_tpc, SIZE_UPPER_MASK);
    Ok([
        header(NVCBC0_SET_SHADER_LOCAL_MEMORY_A, 2),
        hi,
        lo,
        header(NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, 3),
        size_hi,
        size_lo,
        m.non_throttled_c,
    ])
}

/// INVALIDATE_SKED_CACHES (2 words), once per channel before its first launch.
#[inline]
pub fn invalidate_sked_caches() -> [u32; 2] {
    [header(NVCBC0_INVALIDATE_SKED_CACHES, 1), 0]
}

/// INVALIDATE_SAMPLER_CACHE_NO_WFI, LINES ALL (2 words), once per channel.
#[inline]
pub fn invalidate_sampler_cache() -> [u32; 2] {
    [
        header(NVCBC0_INVALIDATE_SAMPLER_CACHE_NO_WFI, 1),
        NVCBC0_INVALIDATE_SAMPLER_CACHE_NO_WFI_LINES
            .of(NVCBC0_INVALIDATE_SAMPLER_CACHE_NO_WFI_LINES_ALL),
    ]
}

/// INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI, LINES ALL (2 words), once per channel.
#[inline]
pub fn invalidate_texture_header_cache() -> [u32; 2] {
    [
        header(NVCBC0_INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI, 1),
        NVCBC0_INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI_LINES
            .of(NVCBC0_INVALIDATE_TEXTURE_HEADER_CACHE_NO_WFI_LINES_ALL),
    ]
}

/// What [`invalidate_shader_caches`] drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalidate {
    /// Cached instructions (new code was loaded).
    pub instruction: bool,
    /// Cached global data (the host or a copy engine wrote kernel inputs).
    pub global_data: bool,
    /// Cached constants (constant banks were written).
    pub constant: bool,
}

impl Invalidate {
    /// All three, as after loading a module (0x1011; tinygrad's `memory_barrier`).
    pub const ALL: Invalidate = Invalidate {
        instruction: true,
        global_data: true,
        constant: true,
    };
}

/// INVALIDATE_SHADER_CACHES_NO_WFI (2 words): drops cached code, data or constants
/// without waiting for the engine to idle.
#[inline]
pub fn invalidate_shader_caches(what: Invalidate) -> [u32; 2] {
    let mut v = 0;
    if what.instruction {
        v |= INVALIDATE_INSTRUCTION;
    }
    if what.global_data {
        v |= INVALIDATE_GLOBAL_DATA;
    }
    if what.constant {
        v |= INVALIDATE_CONSTANT;
    }
    [header(NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI, 1), v]
}

/// SEND_SIGNALING_PCAS2_B's PCAS_ACTION.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum PcasAction {
    /// INVALIDATE_COPY_SCHEDULE (3): Mesa NVK's launch.
    InvalidateCopySchedule = NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE,
    /// INVALIDATE_PREFETCH_COPY_SCHEDULE (0xA): libcuda's launch.
    InvalidatePrefetchCopySchedule =
        NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE,
}

/// SEND_PCAS_A and SEND_SIGNALING_PCAS2_B: launches the QMD at `qmd` (4 words).
///
/// # Errors
/// [`ComputeError::Address`] unless `qmd` is 256-byte aligned and below 2^40.
#[inline]
pub fn send_pcas(qmd: GpuVa, action: PcasAction) -> Result<[u32; 4], ComputeError> {
    let qmd = qmd.get();
    check("a QMD", qmd, QMD_ALIGN, QMD_ADDRESS_LIMIT)?;
    let shifted = u32::try_from(qmd >> 8).expect("below 2^40");
    Ok([
        header(NVCBC0_SEND_PCAS_A, 1),
        shifted,
        header(NVCBC0_SEND_SIGNALING_PCAS2_B, 1),
        action as u32,
    ])
}

/// SET_REPORT_SEMAPHORE_A..D: the compute engine releases `payload` at `addr` once the
/// methods before it are processed and its writes are flushed (5 words). With
/// `timestamp` it writes four words (the payload, then the GPU's timestamp at
/// `addr + 8`). Not a completion of a launch: on the H200 it landed after a kernel
/// that faulted (docs/hardware/nvidia-compute.md, "Completion").
///
/// # Errors
/// [`ComputeError::Address`] unless `addr` is aligned (4 bytes; 16 with a timestamp)
/// and below 2^57.
#[inline]
pub fn report_semaphore(
    addr: GpuVa,
    payload: u32,
    timestamp: bool,
) -> Result<[u32; 5], ComputeError> {
    let addr = addr.get();
    let align = if timestamp { 16 } else { 4 };
    check("a report semaphore", addr, align, 1 << 57)?;
    let (hi, lo) = split(addr, UPPER25_MASK);
    let d = REPORT_D_RELEASE
        | if timestamp {
            REPORT_D_STRUCTURE_SIZE_FOUR_WORDS
        } else {
            REPORT_D_STRUCTURE_SIZE_ONE_WORD
        };
    Ok([header(NVCBC0_SET_REPORT_SEMAPHORE_A, 4), hi, lo, payload, d])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::clcbc0::{
        NVCBC0_SET_REPORT_SEMAPHORE_B, NVCBC0_SET_REPORT_SEMAPHORE_C,
        NVCBC0_SET_REPORT_SEMAPHORE_D, NVCBC0_SET_SHADER_LOCAL_MEMORY_B,
        NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B,
        NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C, NVCBC0_SET_SHADER_LOCAL_MEMORY_WINDOW_B,
        NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_B,
    };

    #[test]
    fn methods_sent_under_one_header_are_consecutive_in_the_header() {
        for (a, next) in [
            (
                NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A,
                NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_B,
            ),
            (
                NVCBC0_SET_SHADER_LOCAL_MEMORY_WINDOW_A,
                NVCBC0_SET_SHADER_LOCAL_MEMORY_WINDOW_B,
            ),
            (
                NVCBC0_SET_SHADER_LOCAL_MEMORY_A,
                NVCBC0_SET_SHADER_LOCAL_MEMORY_B,
            ),
            (
                NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A,
                NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B,
            ),
            (
                NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B,
                NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C,
            ),
            (NVCBC0_SET_REPORT_SEMAPHORE_A, NVCBC0_SET_REPORT_SEMAPHORE_B),
            (NVCBC0_SET_REPORT_SEMAPHORE_B, NVCBC0_SET_REPORT_SEMAPHORE_C),
            (NVCBC0_SET_REPORT_SEMAPHORE_C, NVCBC0_SET_REPORT_SEMAPHORE_D),
        ] {
            assert_eq!(a + 4, next, "{next:#x}");
        }
    }

    #[test]
    fn windows_split_their_base_into_upper_and_lower_words() {
        assert_eq!(
            set_shared_memory_window(GpuVa(0x7f0e_0000_0000)),
            Ok([0x2002_20a8, 0x7f0e, 0])
        );
        assert_eq!(
            set_local_memory_window(GpuVa(0x7f0d_d100_0000)),
            Ok([0x2002_21ec, 0x7f0d, 0xd100_0000])
        );
        assert_eq!(
            set_local_memory_window(GpuVa(0xff00_0000)),
            Ok([0x2002_21ec, 0, 0xff00_0000])
        );
        let top = (1u64 << 49) - (1 << 32);
        assert_eq!(
            set_shared_memory_window(GpuVa(top)).map(|w| w[1]),
            Ok(0x1_ffff)
        );
        for bad in [1 << 49, (1 << 32) + (16 << 20)] {
            assert!(matches!(
                set_shared_memory_window(GpuVa(bad)),
                Err(ComputeError::Address { .. })
            ));
        }
        assert!(matches!(
            set_local_memory_window(GpuVa(0xff00_1000)),
            Err(ComputeError::Address { .. })
        ));
        assert!(matches!(
            set_local_memory_window(GpuVa(1 << 49)),
            Err(ComputeError::Address { .. })
        ));
    }

    #[test]
    fn local_memory_carries_the_buffer_and_its_size_per_tpc() {
        let m = LocalMemory {
            addr: GpuVa(0x12_3456_0000),
            per_tpc: 0x1_2345_8000,
            non_throttled_c: NON_THROTTLED_C_DEFAULT,
        };
        let w = set_local_memory(m).expect("aligned");
        assert_eq!(&w[..3], &[0x2002_21e4, 0x12, 0x3456_0000]);
        assert_eq!(&w[3..], &[0x2003_20b9, 0x1, 0x2345_8000, 0xff]);
        assert_eq!(
            set_local_memory(LocalMemory {
                per_tpc: 1 << 40,
                ..m
            }),
            Err(ComputeError::LocalSize { bytes: 1 << 40 })
        );
        set_local_memory(LocalMemory {
            per_tpc: (1 << 40) - 1,
            ..m
        })
        .expect("within the limits");
        assert!(matches!(
            set_local_memory(LocalMemory {
                addr: GpuVa(0x1000),
                ..m
            }),
            Err(ComputeError::Address {
                align: 0x2_0000,
                ..
            })
        ));
    }

    #[test]
    fn a_launch_sends_the_qmd_address_in_256_byte_units() {
        assert_eq!(
            send_pcas(GpuVa(0xff_ffff_ff00), PcasAction::InvalidateCopySchedule),
            Ok([0x2001_20ad, 0xffff_ffff, 0x2001_20b0, 3])
        );
        assert_eq!(
            send_pcas(GpuVa(0x1000), PcasAction::InvalidatePrefetchCopySchedule).map(|w| w[3]),
            Ok(0xa)
        );
        for bad in [1 << 40, 0x1080, 0] {
            let r = send_pcas(GpuVa(bad), PcasAction::InvalidateCopySchedule);
            assert_eq!(r.is_ok(), bad == 0, "{bad:#x}");
        }
    }

    #[test]
    fn invalidates_and_report_semaphores_carry_their_bits() {
        assert_eq!(
            invalidate_shader_caches(Invalidate::ALL),
            [0x2001_25a6, 0x1011]
        );
        let none = Invalidate {
            instruction: false,
            global_data: false,
            constant: false,
        };
        assert_eq!(invalidate_shader_caches(none)[1], 0);
        assert_eq!(invalidate_sked_caches(), [0x2001_20a6, 0]);
        assert_eq!(invalidate_sampler_cache(), [0x2001_2509, 0]);
        assert_eq!(invalidate_texture_header_cache(), [0x2001_2091, 0]);
        assert_eq!(set_object(), [0x2001_2000, 0xcbc0]);
        assert_eq!(
            report_semaphore(GpuVa(0x12_3456_7894), 7, false),
            Ok([0x2004_26c0, 0x12, 0x3456_7894, 7, 0x1000_0000])
        );
        assert_eq!(
            report_semaphore(GpuVa(0x1010), 7, true).map(|w| w[4]),
            Ok(0)
        );
        assert!(matches!(
            report_semaphore(GpuVa(0x1004), 7, true),
            Err(ComputeError::Address { align: 16, .. })
        ));
        assert!(matches!(
            report_semaphore(GpuVa(1 << 57), 7, false),
            Err(ComputeError::Address { .. })
        ));
    }
}
