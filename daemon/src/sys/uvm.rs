//! The NVIDIA unified memory driver's (UVM's) ioctls on `/dev/nvidia-uvm`: one safe
//! function per ioctl, with its parameter struct.
//!
//! Kernel ABI, read in NVIDIA/open-gpu-kernel-modules at tag 580.142 (`1a5075f8`),
//! compared with 570.211.01 (`498793d5`), 575.64.05 and 590.48.01 (`2ccbad25`):
//! `kernel-open/nvidia-uvm/uvm_ioctl.h`, `uvm_linux_ioctl.h` (UVM_INITIALIZE),
//! `uvm_types.h` (`UvmGpuMappingAttributes`, `UVM_MAX_GPUS`). On Linux the numbers are
//! the bare `UVM_IOCTL_BASE(i) i`, not `_IOC`-encoded, so nothing in the number says
//! the size: the driver copies `sizeof` *its* struct in and out
//! (`uvm_api.h`, `__UVM_ROUTE_CMD_STACK`/`_ALLOC`). A struct of the wrong release is
//! therefore misread in silence, never refused; the two that changed (UVM_FREE and
//! UVM_UNREGISTER_CHANNEL lost a field in 590) come in two layouts, picked by
//! `nvrm::layout`. Every ioctl returns 0 once it ran and leaves its verdict in
//! `rmStatus`, which these functions type with [`NvStatus`].
//!
//! Not here: the RM's escapes (`sys::nvrm`).

use std::{
    io,
    mem::size_of,
    os::fd::{AsRawFd, BorrowedFd},
};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub use super::nvstatus::NvStatus;
use super::{nvrm::NvHandle, scratch::Scratch};

// Ioctl numbers (`uvm_ioctl.h`, `uvm_linux_ioctl.h`).
pub const UVM_INITIALIZE: u32 = 0x3000_0001;
pub const UVM_REGISTER_GPU_VASPACE: u32 = 25;
pub const UVM_UNREGISTER_GPU_VASPACE: u32 = 26;
pub const UVM_REGISTER_CHANNEL: u32 = 27;
pub const UVM_UNREGISTER_CHANNEL: u32 = 28;
pub const UVM_MAP_EXTERNAL_ALLOCATION: u32 = 33;
pub const UVM_FREE: u32 = 34;
pub const UVM_REGISTER_GPU: u32 = 37;
pub const UVM_UNREGISTER_GPU: u32 = 38;
pub const UVM_CREATE_EXTERNAL_RANGE: u32 = 73;
pub const UVM_MM_INITIALIZE: u32 = 75;

/// `UVM_MAX_GPUS` (`uvm_types.h`): `NV_MAX_DEVICES` (32) ×
/// `UVM_PARENT_ID_MAX_SUB_PROCESSORS` (8).
pub const UVM_MAX_GPUS: usize = 256;

/// `NvProcessorUuid` (`nvCpuUuid.h`): 16 bytes.
pub type NvProcessorUuid = [u8; 16];

/// How a UVM ioctl failed.
#[derive(Debug, thiserror::Error)]
pub enum UvmError {
    /// The kernel refused the call itself (`EINVAL` for an unknown number, `EFAULT`).
    #[error("the {ioctl} ioctl failed")]
    Ioctl {
        ioctl: &'static str,
        #[source]
        source: io::Error,
    },
    /// The driver ran the call and answered `rmStatus` other than `NV_OK`.
    #[error("UVM answered {ioctl} with {status}")]
    Status {
        ioctl: &'static str,
        status: NvStatus,
    },
}

impl UvmError {
    /// The driver's status, when it answered.
    pub fn status(&self) -> Option<NvStatus> {
        match self {
            Self::Status { status, .. } => Some(*status),
            Self::Ioctl { .. } => None,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A UVM parameter struct: its ioctl and where its `rmStatus` is.
pub trait UvmParams: IntoBytes + FromBytes + Immutable + KnownLayout + sealed::Sealed {
    /// The ioctl number.
    const CMD: u32;
    /// The ioctl's name, for errors.
    const NAME: &'static str;
    /// `rmStatus`.
    fn rm_status(&self) -> u32;
}

macro_rules! uvm_params {
    ($t:ty, $cmd:ident, $size:expr) => {
        const _: () = assert!(size_of::<$t>() == $size);
        impl sealed::Sealed for $t {}
        impl UvmParams for $t {
            const CMD: u32 = $cmd;
            const NAME: &'static str = stringify!($cmd);
            fn rm_status(&self) -> u32 {
                self.rm_status
            }
        }
    };
}

/// `UVM_INITIALIZE_PARAMS` (`uvm_linux_ioctl.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmInitializeParams {
    pub flags: u64,
    pub rm_status: u32,
    /// C's tail padding.
    pub pad0: u32,
}
uvm_params!(UvmInitializeParams, UVM_INITIALIZE, 16);

/// `UVM_MM_INITIALIZE_PARAMS` (`uvm_ioctl.h`): issued on a second `/dev/nvidia-uvm`
/// file, naming the first.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmMmInitializeParams {
    /// `uvmFd`.
    pub uvm_fd: i32,
    pub rm_status: u32,
}
uvm_params!(UvmMmInitializeParams, UVM_MM_INITIALIZE, 8);

/// `UVM_REGISTER_GPU_PARAMS` (`uvm_ioctl.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmRegisterGpuParams {
    pub gpu_uuid: NvProcessorUuid,
    /// `numaEnabled` (NvBool, out).
    pub numa_enabled: u8,
    /// C's padding before `numaNodeId`.
    pub pad0: [u8; 3],
    pub numa_node_id: i32,
    pub rm_ctrl_fd: i32,
    pub h_client: NvHandle,
    pub h_smc_part_ref: NvHandle,
    pub rm_status: u32,
}
uvm_params!(UvmRegisterGpuParams, UVM_REGISTER_GPU, 40);

/// `UVM_REGISTER_GPU_VASPACE_PARAMS` (`uvm_ioctl.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmRegisterGpuVaspaceParams {
    pub gpu_uuid: NvProcessorUuid,
    pub rm_ctrl_fd: i32,
    pub h_client: NvHandle,
    /// `hVaSpace`.
    pub h_va_space: NvHandle,
    pub rm_status: u32,
}
uvm_params!(UvmRegisterGpuVaspaceParams, UVM_REGISTER_GPU_VASPACE, 32);

/// `UVM_UNREGISTER_GPU_VASPACE_PARAMS` (`uvm_ioctl.h`; the same in 570.211.01 and
/// 590.48.01).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmUnregisterGpuVaspaceParams {
    pub gpu_uuid: NvProcessorUuid,
    pub rm_status: u32,
}
uvm_params!(
    UvmUnregisterGpuVaspaceParams,
    UVM_UNREGISTER_GPU_VASPACE,
    20
);

/// `UVM_UNREGISTER_GPU_PARAMS` (`uvm_ioctl.h`; the same in 570.211.01 and 590.48.01).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmUnregisterGpuParams {
    pub gpu_uuid: NvProcessorUuid,
    pub rm_status: u32,
}
uvm_params!(UvmUnregisterGpuParams, UVM_UNREGISTER_GPU, 20);

/// `UVM_REGISTER_CHANNEL_PARAMS` (`uvm_ioctl.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmRegisterChannelParams {
    pub gpu_uuid: NvProcessorUuid,
    pub rm_ctrl_fd: i32,
    pub h_client: NvHandle,
    pub h_channel: NvHandle,
    /// C's padding before the 8-aligned `base`.
    pub pad0: u32,
    pub base: u64,
    pub length: u64,
    pub rm_status: u32,
    /// C's tail padding.
    pub pad1: u32,
}
uvm_params!(UvmRegisterChannelParams, UVM_REGISTER_CHANNEL, 56);

/// `UVM_UNREGISTER_CHANNEL_PARAMS` (`uvm_ioctl.h`) up to 580: with `gpuUuid`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmUnregisterChannelParams {
    pub gpu_uuid: NvProcessorUuid,
    pub h_client: NvHandle,
    pub h_channel: NvHandle,
    pub rm_status: u32,
}
uvm_params!(UvmUnregisterChannelParams, UVM_UNREGISTER_CHANNEL, 28);

/// `UVM_UNREGISTER_CHANNEL_PARAMS` (`uvm_ioctl.h`) from 590 (read at 590.48.01):
/// `gpuUuid` is gone.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmUnregisterChannelParamsR590 {
    pub h_client: NvHandle,
    pub h_channel: NvHandle,
    pub rm_status: u32,
}
uvm_params!(UvmUnregisterChannelParamsR590, UVM_UNREGISTER_CHANNEL, 12);

/// `UVM_CREATE_EXTERNAL_RANGE_PARAMS` (`uvm_ioctl.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmCreateExternalRangeParams {
    pub base: u64,
    pub length: u64,
    pub rm_status: u32,
    /// C's tail padding.
    pub pad0: u32,
}
uvm_params!(UvmCreateExternalRangeParams, UVM_CREATE_EXTERNAL_RANGE, 24);

/// `UvmGpuMappingAttributes` (`uvm_types.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmGpuMappingAttributes {
    pub gpu_uuid: NvProcessorUuid,
    /// `gpuMappingType` (`UvmGpuMappingType`: 1 ReadWriteAtomic, 2 ReadWrite, 3 ReadOnly).
    pub gpu_mapping_type: u32,
    /// `gpuCachingType` (`UvmGpuCachingType`).
    pub gpu_caching_type: u32,
    /// `gpuFormatType` (`UvmGpuFormatType`).
    pub gpu_format_type: u32,
    /// `gpuElementBits` (`UvmGpuFormatElementBits`).
    pub gpu_element_bits: u32,
    /// `gpuCompressionType` (`UvmGpuCompressionType`).
    pub gpu_compression_type: u32,
}
const _: () = assert!(size_of::<UvmGpuMappingAttributes>() == 36);

/// `UVM_MAP_EXTERNAL_ALLOCATION_PARAMS` (`uvm_ioctl.h`). 9 KiB: build it with
/// `FromZeros::new_zeroed`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmMapExternalAllocationParams {
    pub base: u64,
    pub length: u64,
    pub offset: u64,
    pub per_gpu_attributes: [UvmGpuMappingAttributes; UVM_MAX_GPUS],
    pub gpu_attributes_count: u64,
    pub rm_ctrl_fd: i32,
    pub h_client: NvHandle,
    pub h_memory: NvHandle,
    pub rm_status: u32,
}
uvm_params!(
    UvmMapExternalAllocationParams,
    UVM_MAP_EXTERNAL_ALLOCATION,
    9264
);

/// `UVM_FREE_PARAMS` (`uvm_ioctl.h`) up to 580: `base` and `length`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmFreeParams {
    pub base: u64,
    pub length: u64,
    pub rm_status: u32,
    /// C's tail padding.
    pub pad0: u32,
}
uvm_params!(UvmFreeParams, UVM_FREE, 24);

/// `UVM_FREE_PARAMS` (`uvm_ioctl.h`) from 590 (read at 590.48.01): `length` is gone.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct UvmFreeParamsR590 {
    pub base: u64,
    pub rm_status: u32,
    /// C's tail padding.
    pub pad0: u32,
}
uvm_params!(UvmFreeParamsR590, UVM_FREE, 16);

/// Issues `P`'s ioctl with `params` as its argument.
///
/// Nothing in a UVM number bounds what the driver copies: it copies `sizeof` its own
/// struct, in and back out, and that struct may be larger than `P` on a release whose
/// layout the caller did not pick (a 580 driver given 590's 16-byte UVM_FREE copies 24
/// bytes). So the driver gets a private copy of `params` at the start of a fresh
/// mapping followed by a guard page (`sys::scratch`): a larger struct reads zeros
/// and writes into the copy, never past `params`; `size_of::<P>()` bytes come back.
///
/// # Errors
/// [`UvmError::Ioctl`] when the kernel refused the call or the copy could not be
/// mapped; [`UvmError::Status`] with the driver's `rmStatus`.
pub fn uvm_ioctl<P: UvmParams>(uvm: BorrowedFd<'_>, params: &mut P) -> Result<(), UvmError> {
    let io_err = |source| UvmError::Ioctl {
        ioctl: P::NAME,
        source,
    };
    let scratch = Scratch::with(params.as_bytes()).map_err(io_err)?;
    // SAFETY: `uvm` is borrowed, so open for the call; the argument is the scratch
    // mapping, alive for the call, read-write for at least `size_of::<P>()` rounded up to
    // a page and then inaccessible, so whatever size the driver copies stays inside it or
    // fails with EFAULT; nothing else refers into it; the return value is checked.
    let ret = unsafe {
        libc::ioctl(
            uvm.as_raw_fd(),
            libc::c_ulong::from(P::CMD),
            scratch.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return Err(io_err(io::Error::last_os_error()));
    }
    params.as_mut_bytes().copy_from_slice(scratch.bytes());
    match NvStatus::from_raw(params.rm_status()) {
        None => Ok(()),
        Some(status) => Err(UvmError::Status {
            ioctl: P::NAME,
            status,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvm_numbers_are_the_bare_header_values() {
        assert_eq!(UvmInitializeParams::CMD, 0x3000_0001);
        assert_eq!(UvmMmInitializeParams::CMD, 75);
        assert_eq!(UvmRegisterGpuParams::CMD, 37);
        assert_eq!(UvmRegisterGpuVaspaceParams::CMD, 25);
        assert_eq!(UvmUnregisterGpuVaspaceParams::CMD, 26);
        assert_eq!(UvmRegisterChannelParams::CMD, 27);
        assert_eq!(UvmUnregisterGpuParams::CMD, 38);
        assert_eq!(UvmUnregisterChannelParams::CMD, 28);
        assert_eq!(UvmUnregisterChannelParamsR590::CMD, 28);
        assert_eq!(UvmMapExternalAllocationParams::CMD, 33);
        assert_eq!(UvmFreeParams::CMD, 34);
        assert_eq!(UvmCreateExternalRangeParams::CMD, 73);
    }

    #[test]
    fn register_channel_puts_base_at_32_and_status_at_48() {
        let p = UvmRegisterChannelParams {
            gpu_uuid: [0xAB; 16],
            rm_ctrl_fd: 3,
            h_client: 0xC1D0_0001,
            h_channel: 0xC1D0_0002,
            base: 0x1_0000_0000,
            length: 0x400_0000,
            rm_status: 0x1F,
            ..Default::default()
        };
        let b = p.as_bytes();
        assert_eq!(b[..16], [0xAB; 16]);
        assert_eq!(b[16..20], 3i32.to_ne_bytes());
        assert_eq!(b[24..28], 0xC1D0_0002u32.to_ne_bytes());
        assert_eq!(b[32..40], 0x1_0000_0000u64.to_ne_bytes());
        assert_eq!(b[40..48], 0x400_0000u64.to_ne_bytes());
        assert_eq!(b[48..52], 0x1Fu32.to_ne_bytes());
    }

    #[test]
    fn map_external_allocation_puts_the_tail_after_256_attributes() {
        use zerocopy::FromZeros;
        let mut p = Box::new(UvmMapExternalAllocationParams::new_zeroed());
        p.per_gpu_attributes[1].gpu_mapping_type = 1;
        p.gpu_attributes_count = 1;
        p.rm_ctrl_fd = 5;
        p.h_memory = 0x77;
        p.rm_status = 0x56;
        let b = p.as_bytes();
        assert_eq!(b[24 + 36 + 16..24 + 36 + 20], 1u32.to_ne_bytes());
        assert_eq!(b[9240..9248], 1u64.to_ne_bytes());
        assert_eq!(b[9248..9252], 5i32.to_ne_bytes());
        assert_eq!(b[9256..9260], 0x77u32.to_ne_bytes());
        assert_eq!(b[9260..9264], 0x56u32.to_ne_bytes());
    }

    #[test]
    fn a_status_other_than_nv_ok_names_the_ioctl() {
        let e = UvmError::Status {
            ioctl: UvmRegisterGpuVaspaceParams::NAME,
            status: NvStatus::InvalidDevice,
        };
        assert_eq!(
            e.to_string(),
            "UVM answered UVM_REGISTER_GPU_VASPACE with NV_ERR_INVALID_DEVICE (0x26)"
        );
    }
}
