//! The NVIDIA resource manager's (RM's) escape ioctls on `/dev/nvidiactl` and
//! `/dev/nvidiaN`: one safe function per escape, and the envelopes they carry.
//!
//! Kernel ABI, read in NVIDIA/open-gpu-kernel-modules at tag 580.142 (`1a5075f8`):
//! escape numbers in `src/nvidia/arch/nvalloc/unix/include/nv_escape.h` and
//! `kernel-open/common/inc/nv-ioctl-numbers.h`; envelopes in
//! `src/common/sdk/nvidia/inc/nvos.h`, `kernel-open/common/inc/nv-ioctl.h` and
//! `src/nvidia/arch/nvalloc/unix/include/nv-unix-nvos-params-wrappers.h`; status codes in
//! `src/common/sdk/nvidia/inc/nvstatuscodes.h`.
//!
//! How the kernel reads a call (`kernel-open/nvidia/nv.c`, `nvidia_ioctl`): only
//! `_IOC_NR` and `_IOC_SIZE` of the number count; it copies `_IOC_SIZE` bytes in and
//! back out. Every escape then checks that size exactly
//! (`src/nvidia/arch/nvalloc/unix/src/escape.c`), and a wrong size comes back as
//! `EINVAL`. An escape that ran returns 0 and leaves the RM's verdict in the
//! envelope's `status`, which these functions turn into [`RmError::Status`].
//!
//! Not here: the class and control parameter structs, which change between releases
//! (`nvrm::layout`). rigd makes no UVM call (`nvrm::space` says why). Only the one envelope
//! that changed, NVOS46 (56 bytes up to 575, 64 from 580), comes in two layouts here.

use std::{
    io,
    mem::size_of,
    os::fd::{AsRawFd, BorrowedFd},
};

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

pub use super::nvstatus::{NV_OK, NvStatus};
use super::scratch::Scratch;

/// `NvHandle` (`nvtypes.h`): a 32-bit RM object handle.
pub type NvHandle = u32;

/// `NV_IOCTL_MAGIC` (`nv-ioctl-numbers.h`).
const NV_IOCTL_MAGIC: u32 = b'F' as u32;
/// `NV_IOCTL_BASE` (`nv-ioctl-numbers.h`).
const NV_IOCTL_BASE: u32 = 200;

// Escape numbers (`nv_escape.h`, `nv-ioctl-numbers.h`).
pub const NV_ESC_RM_ALLOC_MEMORY: u32 = 0x27;
pub const NV_ESC_RM_FREE: u32 = 0x29;
pub const NV_ESC_RM_CONTROL: u32 = 0x2A;
pub const NV_ESC_RM_ALLOC: u32 = 0x2B;
pub const NV_ESC_RM_MAP_MEMORY: u32 = 0x4E;
pub const NV_ESC_RM_MAP_MEMORY_DMA: u32 = 0x57;
pub const NV_ESC_RM_UNMAP_MEMORY_DMA: u32 = 0x58;
pub const NV_ESC_CARD_INFO: u32 = NV_IOCTL_BASE;
pub const NV_ESC_REGISTER_FD: u32 = NV_IOCTL_BASE + 1;
pub const NV_ESC_ALLOC_OS_EVENT: u32 = NV_IOCTL_BASE + 6;
pub const NV_ESC_FREE_OS_EVENT: u32 = NV_IOCTL_BASE + 7;
pub const NV_ESC_CHECK_VERSION_STR: u32 = NV_IOCTL_BASE + 10;

/// `_IOWR('F', nr, size)`, built by nix's `request_code_readwrite!` (the layout of
/// `<asm-generic/ioctl.h>`: direction in bits 31:30, size 29:16, magic 15:8, number 7:0).
///
/// # Panics
/// At compile time when `size` does not fit the 14-bit size field, or `nr` the 8-bit
/// number (nix would mask them silently; every use is in a `const`).
pub const fn nv_iowr(nr: u32, size: usize) -> u32 {
    assert!(size < (1 << 14), "an _IOC size has 14 bits");
    assert!(nr < (1 << 8), "an _IOC number has 8 bits");
    let cmd = nix::request_code_readwrite!(NV_IOCTL_MAGIC, nr, size);
    // CAST: an ioctl number is 32 bits (`_IOC`), whatever type ioctl(2) takes it as.
    #[expect(clippy::cast_possible_truncation, reason = "_IOC numbers are 32 bits")]
    let cmd = cmd as u32;
    cmd
}

/// `_IOC_SIZE(cmd)`.
const fn ioc_size(cmd: u32) -> usize {
    ((cmd >> 16) & 0x3fff) as usize
}

/// RM_ALLOC with NVOS21 (32 bytes). escape.c accepts NVOS21 or NVOS64 by size.
pub const NV_ESC_RM_ALLOC_NVOS21_CMD: u32 = nv_iowr(NV_ESC_RM_ALLOC, size_of::<Nvos21Parameters>());
/// RM_ALLOC with NVOS64 (48 bytes: NVOS21 plus requested rights and flags).
pub const NV_ESC_RM_ALLOC_NVOS64_CMD: u32 = nv_iowr(NV_ESC_RM_ALLOC, size_of::<Nvos64Parameters>());
pub const NV_ESC_RM_CONTROL_CMD: u32 = nv_iowr(NV_ESC_RM_CONTROL, size_of::<Nvos54Parameters>());
pub const NV_ESC_RM_FREE_CMD: u32 = nv_iowr(NV_ESC_RM_FREE, size_of::<Nvos00Parameters>());
pub const NV_ESC_RM_MAP_MEMORY_CMD: u32 = nv_iowr(
    NV_ESC_RM_MAP_MEMORY,
    size_of::<NvIoctlNvos33ParametersWithFd>(),
);
pub const NV_ESC_RM_UNMAP_MEMORY_DMA_CMD: u32 =
    nv_iowr(NV_ESC_RM_UNMAP_MEMORY_DMA, size_of::<Nvos47Parameters>());
pub const NV_ESC_RM_ALLOC_MEMORY_CMD: u32 = nv_iowr(
    NV_ESC_RM_ALLOC_MEMORY,
    size_of::<NvIoctlNvos02ParametersWithFd>(),
);
/// How many cards [`card_info`] asks for; the kernel fills one entry per GPU it drives.
pub const CARD_INFO_ENTRIES: usize = 64;
pub const NV_ESC_CARD_INFO_CMD: u32 = nv_iowr(
    NV_ESC_CARD_INFO,
    CARD_INFO_ENTRIES * size_of::<NvIoctlCardInfo>(),
);
pub const NV_ESC_REGISTER_FD_CMD: u32 = nv_iowr(NV_ESC_REGISTER_FD, size_of::<NvIoctlRegisterFd>());
pub const NV_ESC_ALLOC_OS_EVENT_CMD: u32 =
    nv_iowr(NV_ESC_ALLOC_OS_EVENT, size_of::<NvIoctlOsEvent>());
pub const NV_ESC_FREE_OS_EVENT_CMD: u32 =
    nv_iowr(NV_ESC_FREE_OS_EVENT, size_of::<NvIoctlOsEvent>());
pub const NV_ESC_CHECK_VERSION_STR_CMD: u32 =
    nv_iowr(NV_ESC_CHECK_VERSION_STR, size_of::<NvIoctlRmApiVersion>());

/// `NV0080_CTRL_CMD_GPU_GET_CLASSLIST` (`ctrl/ctrl0080/ctrl0080gpu.h`); its params carry
/// a user pointer, so it has its own function, [`gpu_get_classlist`].
pub const NV0080_CTRL_CMD_GPU_GET_CLASSLIST: u32 = 0x0080_0201;

/// `NV2080_CTRL_CMD_GR_GET_INFO` (`ctrl/ctrl2080/ctrl2080gr.h`); its params carry a user
/// pointer too, so it has its own function, [`gr_get_info`].
pub const NV2080_CTRL_CMD_GR_GET_INFO: u32 = 0x2080_1201;

/// `NVOS00_PARAMETERS` (`nvos.h`): RM_FREE.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos00Parameters {
    pub h_root: NvHandle,
    pub h_object_parent: NvHandle,
    pub h_object_old: NvHandle,
    pub status: u32,
}
const _: () = assert!(size_of::<Nvos00Parameters>() == 16);

/// `NVOS21_PARAMETERS` (`nvos.h`): RM_ALLOC.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos21Parameters {
    pub h_root: NvHandle,
    pub h_object_parent: NvHandle,
    pub h_object_new: NvHandle,
    pub h_class: u32,
    /// `pAllocParms` (NvP64).
    pub p_alloc_parms: u64,
    pub params_size: u32,
    pub status: u32,
}
const _: () = assert!(size_of::<Nvos21Parameters>() == 32);

/// `NVOS64_PARAMETERS` (`nvos.h`): RM_ALLOC with requested rights. Kept for its
/// number and layout; [`rm_alloc`] sends NVOS21, which requests default rights.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos64Parameters {
    pub h_root: NvHandle,
    pub h_object_parent: NvHandle,
    pub h_object_new: NvHandle,
    pub h_class: u32,
    /// `pAllocParms` (NvP64).
    pub p_alloc_parms: u64,
    /// `pRightsRequested` (NvP64 to an `RS_ACCESS_MASK`, or NULL).
    pub p_rights_requested: u64,
    pub params_size: u32,
    pub flags: u32,
    pub status: u32,
    /// C's tail padding to 8-byte alignment.
    pub pad0: u32,
}
const _: () = assert!(size_of::<Nvos64Parameters>() == 48);

/// `NVOS54_PARAMETERS` (`nvos.h`): RM_CONTROL.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos54Parameters {
    pub h_client: NvHandle,
    pub h_object: NvHandle,
    pub cmd: u32,
    pub flags: u32,
    /// `params` (NvP64).
    pub params: u64,
    pub params_size: u32,
    pub status: u32,
}
const _: () = assert!(size_of::<Nvos54Parameters>() == 32);

/// `NVOS02_PARAMETERS` (`nvos.h`): RM_ALLOC_MEMORY.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos02Parameters {
    pub h_root: NvHandle,
    pub h_object_parent: NvHandle,
    pub h_object_new: NvHandle,
    pub h_class: u32,
    pub flags: u32,
    /// C's padding before the 8-aligned `pMemory`.
    pub pad0: u32,
    /// `pMemory` (NvP64): for NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, the user VA to pin.
    pub p_memory: u64,
    pub limit: u64,
    pub status: u32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<Nvos02Parameters>() == 48);

/// `nv_ioctl_nvos02_parameters_with_fd` (`nv-unix-nvos-params-wrappers.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvIoctlNvos02ParametersWithFd {
    pub params: Nvos02Parameters,
    pub fd: i32,
    /// C's tail padding.
    pub pad0: u32,
}
const _: () = assert!(size_of::<NvIoctlNvos02ParametersWithFd>() == 56);

/// `NVOS33_PARAMETERS` (`nvos.h`): RM_MAP_MEMORY (a CPU mapping).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos33Parameters {
    pub h_client: NvHandle,
    pub h_device: NvHandle,
    pub h_memory: NvHandle,
    /// C's padding before the 8-aligned `offset`.
    pub pad0: u32,
    pub offset: u64,
    pub length: u64,
    /// `pLinearAddress` (NvP64, out): the RM's cookie for the later mmap(2).
    pub p_linear_address: u64,
    pub status: u32,
    pub flags: u32,
}
const _: () = assert!(size_of::<Nvos33Parameters>() == 48);

/// `nv_ioctl_nvos33_parameters_with_fd` (`nv-unix-nvos-params-wrappers.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvIoctlNvos33ParametersWithFd {
    pub params: Nvos33Parameters,
    /// The `/dev/nvidiaN` file that receives the mmap context.
    pub fd: i32,
    /// C's tail padding.
    pub pad0: u32,
}
const _: () = assert!(size_of::<NvIoctlNvos33ParametersWithFd>() == 56);

/// `NVOS46_PARAMETERS` (`nvos.h`) up to release 575 (read at 570.211.01 `498793d5`
/// and 575.64.05): RM_MAP_MEMORY_DMA without `flags2` and `kindOverride`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos46ParametersR570 {
    pub h_client: NvHandle,
    pub h_device: NvHandle,
    pub h_dma: NvHandle,
    pub h_memory: NvHandle,
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
    /// C's padding before the 8-aligned `dmaOffset`.
    pub pad0: u32,
    pub dma_offset: u64,
    pub status: u32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<Nvos46ParametersR570>() == 56);

/// `NVOS46_PARAMETERS` (`nvos.h`) from release 580 (read at 580.65.06, 580.142 and
/// 590.48.01): `flags2` at 36 and `kindOverride` at 40 are new, `dmaOffset` moves to 48.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos46ParametersR580 {
    pub h_client: NvHandle,
    pub h_device: NvHandle,
    pub h_dma: NvHandle,
    pub h_memory: NvHandle,
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
    pub flags2: u32,
    pub kind_override: u32,
    /// C's padding before the 8-aligned `dmaOffset`.
    pub pad0: u32,
    pub dma_offset: u64,
    pub status: u32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<Nvos46ParametersR580>() == 64);

/// `NVOS47_PARAMETERS` (`nvos.h`): RM_UNMAP_MEMORY_DMA. The same in 570.211.01,
/// 580.142 and 590.48.01.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvos47Parameters {
    pub h_client: NvHandle,
    pub h_device: NvHandle,
    pub h_dma: NvHandle,
    pub h_memory: NvHandle,
    pub flags: u32,
    /// C's padding before the 8-aligned `dmaOffset`.
    pub pad0: u32,
    pub dma_offset: u64,
    /// 0 unmaps the whole mapping.
    pub size: u64,
    pub status: u32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<Nvos47Parameters>() == 48);

/// `nv_pci_info_t` (`nv-ioctl.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvPciInfo {
    pub domain: u32,
    pub bus: u8,
    pub slot: u8,
    pub function: u8,
    /// C's padding before the 2-aligned `vendor_id`.
    pub pad0: u8,
    pub vendor_id: u16,
    pub device_id: u16,
}
const _: () = assert!(size_of::<NvPciInfo>() == 12);

/// `nv_ioctl_card_info_t` (`nv-ioctl.h`): one GPU in CARD_INFO's answer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvIoctlCardInfo {
    /// `valid` (NvBool): 1 for an entry the kernel filled.
    pub valid: u8,
    /// C's padding before `pci_info`.
    pub pad0: [u8; 3],
    pub pci_info: NvPciInfo,
    pub gpu_id: u32,
    pub interrupt_line: u16,
    /// C's padding before the 8-aligned `reg_address`.
    pub pad1: [u8; 2],
    pub reg_address: u64,
    pub reg_size: u64,
    pub fb_address: u64,
    pub fb_size: u64,
    pub minor_number: u32,
    pub dev_name: [u8; 10],
    /// C's tail padding.
    pub pad2: [u8; 2],
}
const _: () = assert!(size_of::<NvIoctlCardInfo>() == 72);

/// `NV_RM_API_VERSION_STRING_LENGTH` (`nv-ioctl.h`).
pub const NV_RM_API_VERSION_STRING_LENGTH: usize = 64;
/// `NV_RM_API_VERSION_CMD_STRICT`: the whole string must match.
pub const NV_RM_API_VERSION_CMD_STRICT: u32 = 0;
/// `NV_RM_API_VERSION_CMD_RELAXED` (`'1'`): up to the first '.'.
pub const NV_RM_API_VERSION_CMD_RELAXED: u32 = b'1' as u32;
/// `NV_RM_API_VERSION_CMD_QUERY` (`'2'`): the kernel copies its version back.
pub const NV_RM_API_VERSION_CMD_QUERY: u32 = b'2' as u32;
/// `NV_RM_API_VERSION_REPLY_RECOGNIZED`.
pub const NV_RM_API_VERSION_REPLY_RECOGNIZED: u32 = 1;

/// `nv_ioctl_rm_api_version_t` (`nv-ioctl.h`): CHECK_VERSION_STR.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvIoctlRmApiVersion {
    pub cmd: u32,
    pub reply: u32,
    /// `versionString` (char[64]).
    pub version_string: [u8; NV_RM_API_VERSION_STRING_LENGTH],
}
const _: () = assert!(size_of::<NvIoctlRmApiVersion>() == 72);

/// `nv_ioctl_register_fd_t` (`nv-ioctl.h`): REGISTER_FD.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvIoctlRegisterFd {
    pub ctl_fd: i32,
}
const _: () = assert!(size_of::<NvIoctlRegisterFd>() == 4);

/// `nv_ioctl_alloc_os_event_t` = `nv_ioctl_free_os_event_t` (`nv-ioctl.h`): ALLOC_OS_EVENT
/// and FREE_OS_EVENT. `fd` is only a key the RM matches against `NV0005`'s `data`
/// (docs/hardware/nvidia-rm.md, "Non-stall interrupts and OS events").
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvIoctlOsEvent {
    pub h_client: NvHandle,
    /// `hDevice`: unused by the RM.
    pub h_device: NvHandle,
    pub fd: u32,
    /// The RM's status (the ioctl itself returns 0).
    pub status: u32,
}
const _: () = assert!(size_of::<NvIoctlOsEvent>() == 16);

/// `Ok` for `NV_OK`, else the typed status.
pub fn check_status(escape: &'static str, raw: u32) -> Result<(), RmError> {
    match NvStatus::from_raw(raw) {
        None => Ok(()),
        Some(status) => Err(RmError::Status { escape, status }),
    }
}

/// How an escape failed.
#[derive(Debug, thiserror::Error)]
pub enum RmError {
    /// The kernel refused the call itself: `EINVAL` for a wrong envelope size or an fd
    /// of the wrong kind (nvidiactl vs nvidiaN), `EFAULT`, …
    #[error("the {escape} ioctl failed")]
    Ioctl {
        escape: &'static str,
        #[source]
        source: io::Error,
    },
    /// The escape ran and the RM answered with a status other than `NV_OK`.
    #[error("the RM answered {escape} with {status}")]
    Status {
        escape: &'static str,
        status: NvStatus,
    },
}

impl RmError {
    /// The RM's status, when the RM answered.
    pub fn status(&self) -> Option<NvStatus> {
        match self {
            Self::Status { status, .. } => Some(*status),
            Self::Ioctl { .. } => None,
        }
    }
}

/// Issues escape `cmd` with `arg` as its whole argument.
///
/// The one `ioctl(2)` of this file. It refuses (`EINVAL`) an `arg` whose size differs
/// from the size encoded in `cmd`, which is how many bytes the kernel copies in and
/// back out (`nv.c`), so the kernel never touches memory outside `arg`.
fn escape<P: IntoBytes + FromBytes + Immutable + ?Sized>(
    fd: BorrowedFd<'_>,
    name: &'static str,
    cmd: u32,
    arg: &mut P,
) -> Result<(), RmError> {
    let bytes = arg.as_mut_bytes();
    if bytes.len() != ioc_size(cmd) {
        return Err(RmError::Ioctl {
            escape: name,
            source: io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    // The RM sees an ordinary user: without CAP_SYS_ADMIN in effect, the channels it
    // makes run at USER privilege although rigd is root (`sys::caps` says why).
    let _user = super::caps::without_admin().map_err(|source| RmError::Ioctl {
        escape: name,
        source,
    })?;
    // SAFETY: `fd` is borrowed, so open for the call; `bytes` is exclusively borrowed,
    // alive for the call and exactly `_IOC_SIZE(cmd)` long (checked above), which is
    // all nv.c copies in and out; any bit pattern is a valid `P` (FromBytes), so what
    // the kernel writes back is sound; the return value is checked.
    let ret = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::c_ulong::from(cmd),
            bytes.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    if ret < 0 {
        return Err(RmError::Ioctl {
            escape: name,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The handles of an object to allocate (NVOS21's first four fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocObject {
    /// `hRoot`: the client; 0 when allocating a root client.
    pub h_root: NvHandle,
    /// `hObjectParent`: 0 for a root client.
    pub h_object_parent: NvHandle,
    /// `hObjectNew`: 0 lets the RM pick the handle.
    pub h_object_new: NvHandle,
    /// `hClass`.
    pub h_class: u32,
}

/// NV_ESC_RM_ALLOC on `/dev/nvidiactl`: allocates an object and returns its handle.
///
/// The RM copies in, and back out, as many bytes as *its* parameter struct for
/// `h_class` has, whatever `paramsSize` says (`alloc_free.c`,
/// `serverAllocApiCopyIn`/`CopyOut`). So the call hands the RM a private copy of
/// `params` at the start of a fresh anonymous mapping followed by a `PROT_NONE` guard
/// page: a short `params` is read as zeros past its end and a too-long answer is
/// written into the copy, not past `params`; only `params.len()` bytes come back.
/// `None` passes NULL (the class's defaults, or a root client).
///
/// # Errors
/// [`RmError::Ioctl`] when the kernel refused the call or the scratch mapping failed;
/// [`RmError::Status`] with the RM's answer.
pub fn rm_alloc<P: IntoBytes + FromBytes + Immutable + ?Sized>(
    ctl: BorrowedFd<'_>,
    obj: AllocObject,
    params: Option<&mut P>,
) -> Result<NvHandle, RmError> {
    const NAME: &str = "NV_ESC_RM_ALLOC";
    let scratch = match &params {
        Some(p) => Some(
            Scratch::with(p.as_bytes()).map_err(|source| RmError::Ioctl {
                escape: NAME,
                source,
            })?,
        ),
        None => None,
    };
    let (ptr, len) = scratch
        .as_ref()
        .map_or((0, 0), |s| (s.addr(), s.bytes().len()));
    let mut a = Nvos21Parameters {
        h_root: obj.h_root,
        h_object_parent: obj.h_object_parent,
        h_object_new: obj.h_object_new,
        h_class: obj.h_class,
        p_alloc_parms: ptr,
        params_size: u32::try_from(len).unwrap_or(u32::MAX),
        status: 0,
    };
    escape(ctl, NAME, NV_ESC_RM_ALLOC_NVOS21_CMD, &mut a)?;
    if let (Some(p), Some(s)) = (params, &scratch) {
        p.as_mut_bytes().copy_from_slice(s.bytes());
    }
    check_status(NAME, a.status)?;
    Ok(a.h_object_new)
}

/// NV_ESC_RM_FREE on `/dev/nvidiactl`: frees `h_object_old` and everything under it
/// (a root client frees with `h_root == h_object_parent == h_object_old`).
///
/// # Errors
/// As [`rm_alloc`].
pub fn rm_free(
    ctl: BorrowedFd<'_>,
    h_root: NvHandle,
    h_object_parent: NvHandle,
    h_object_old: NvHandle,
) -> Result<(), RmError> {
    let mut p = Nvos00Parameters {
        h_root,
        h_object_parent,
        h_object_old,
        status: 0,
    };
    escape(ctl, "NV_ESC_RM_FREE", NV_ESC_RM_FREE_CMD, &mut p)?;
    check_status("NV_ESC_RM_FREE", p.status)
}

/// NV_ESC_RM_CONTROL on `/dev/nvidiactl`: runs control `cmd` on `h_object`.
///
/// The RM copies exactly `paramsSize` bytes and refuses any other size than its own
/// with `NV_ERR_INVALID_PARAM_STRUCT`, so `params` must be the release's struct for
/// `cmd` (`nvrm::layout`). This is for controls whose parameters hold no user
/// pointer for the RM to write through; GET_CLASSLIST and GR_GET_INFO hold one and
/// are refused here, see [`gpu_get_classlist`] and [`gr_get_info`].
///
/// # Errors
/// As [`rm_alloc`]; `EINVAL` for GET_CLASSLIST and GR_GET_INFO.
pub fn rm_control<P: IntoBytes + FromBytes + Immutable + ?Sized>(
    ctl: BorrowedFd<'_>,
    h_client: NvHandle,
    h_object: NvHandle,
    cmd: u32,
    params: &mut P,
) -> Result<(), RmError> {
    const NAME: &str = "NV_ESC_RM_CONTROL";
    if cmd == NV0080_CTRL_CMD_GPU_GET_CLASSLIST || cmd == NV2080_CTRL_CMD_GR_GET_INFO {
        return Err(RmError::Ioctl {
            escape: NAME,
            source: io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    control_raw(ctl, h_client, h_object, cmd, params.as_mut_bytes())
}

fn control_raw(
    ctl: BorrowedFd<'_>,
    h_client: NvHandle,
    h_object: NvHandle,
    cmd: u32,
    params: &mut [u8],
) -> Result<(), RmError> {
    const NAME: &str = "NV_ESC_RM_CONTROL";
    let mut c = Nvos54Parameters {
        h_client,
        h_object,
        cmd,
        flags: 0,
        params: params.as_mut_ptr() as u64,
        params_size: u32::try_from(params.len()).unwrap_or(u32::MAX),
        status: 0,
    };
    escape(ctl, NAME, NV_ESC_RM_CONTROL_CMD, &mut c)?;
    check_status(NAME, c.status)
}

/// `NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS` (`ctrl/ctrl0080/ctrl0080gpu.h`; the same in
/// 570, 575, 580 and 590).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv0080CtrlGpuGetClasslistParams {
    pub num_classes: u32,
    /// C's padding before the 8-aligned `classList`.
    pub pad0: u32,
    /// `classList` (NvP64 to `NvU32[numClasses]`, or NULL to ask for the count).
    pub class_list: u64,
}
const _: () = assert!(size_of::<Nv0080CtrlGpuGetClasslistParams>() == 16);

/// NV0080_CTRL_CMD_GPU_GET_CLASSLIST on device `h_device`: the classes it supports.
/// Asks for the count, then for the list into a buffer this function owns.
///
/// # Errors
/// As [`rm_control`].
pub fn gpu_get_classlist(
    ctl: BorrowedFd<'_>,
    h_client: NvHandle,
    h_device: NvHandle,
) -> Result<Vec<u32>, RmError> {
    let cmd = NV0080_CTRL_CMD_GPU_GET_CLASSLIST;
    let mut p = Nv0080CtrlGpuGetClasslistParams::default();
    control_raw(ctl, h_client, h_device, cmd, p.as_mut_bytes())?;
    let mut list = vec![0u32; p.num_classes as usize];
    // The RM writes numClasses u32s at classList (a count it takes from us, not from
    // itself), so the list below is exactly as long as what it may write.
    p.class_list = list.as_mut_ptr() as u64;
    control_raw(ctl, h_client, h_device, cmd, p.as_mut_bytes())?;
    list.truncate(p.num_classes as usize);
    Ok(list)
}

/// `NV2080_CTRL_GR_INFO` (`ctrl/ctrl0080/ctrl0080gr.h`, `NVXXXX_CTRL_XXX_INFO`): one
/// value of the graphics engine, asked for by index.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlGrInfo {
    pub index: u32,
    pub data: u32,
}
const _: () = assert!(size_of::<Nv2080CtrlGrInfo>() == 8);

/// `NV2080_CTRL_GR_GET_INFO_PARAMS` (`ctrl/ctrl2080/ctrl2080gr.h`; the same in 570,
/// 575, 580 and 590).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlGrGetInfoParams {
    pub gr_info_list_size: u32,
    /// C's padding before the 8-aligned `grInfoList`.
    pub pad0: u32,
    /// `grInfoList` (NvP64 to `NV2080_CTRL_GR_INFO[grInfoListSize]`).
    pub gr_info_list: u64,
    /// `grRouteInfo.flags`: 0, TYPE_NONE (no MIG).
    pub route_flags: u32,
    pub pad1: u32,
    /// `grRouteInfo.route`.
    pub route: u64,
}
const _: () = assert!(size_of::<Nv2080CtrlGrGetInfoParams>() == 32);

/// NV2080_CTRL_CMD_GR_GET_INFO on subdevice `h_subdevice`: the graphics engine's value
/// at each of `indices` (`NV2080_CTRL_GR_INFO_INDEX_*`), in their order.
///
/// # Errors
/// As [`rm_control`].
pub fn gr_get_info(
    ctl: BorrowedFd<'_>,
    h_client: NvHandle,
    h_subdevice: NvHandle,
    indices: &[u32],
) -> Result<Vec<u32>, RmError> {
    let mut list: Vec<Nv2080CtrlGrInfo> = indices
        .iter()
        .map(|&index| Nv2080CtrlGrInfo { index, data: 0 })
        .collect();
    // The RM writes grInfoListSize entries at grInfoList (a count it takes from us),
    // so the list, alive and exclusively ours until the call returns, is exactly as
    // long as what it may write.
    let mut p = Nv2080CtrlGrGetInfoParams {
        gr_info_list_size: u32::try_from(list.len()).unwrap_or(u32::MAX),
        gr_info_list: list.as_mut_ptr() as u64,
        ..Default::default()
    };
    control_raw(
        ctl,
        h_client,
        h_subdevice,
        NV2080_CTRL_CMD_GR_GET_INFO,
        p.as_mut_bytes(),
    )?;
    Ok(list.iter().map(|i| i.data).collect())
}

/// What [`rm_map_memory`] maps (NVOS33's fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapMemory {
    pub h_client: NvHandle,
    pub h_device: NvHandle,
    pub h_memory: NvHandle,
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
}

/// NV_ESC_RM_MAP_MEMORY on `/dev/nvidiactl`: prepares a CPU mapping of `h_memory`
/// and stores its context in `target` (a `/dev/nvidiaN` file that holds none yet),
/// which is then mmap(2)ed at offset 0. Returns the RM's `pLinearAddress` cookie.
///
/// # Errors
/// As [`rm_alloc`]; `NV_ERR_STATE_IN_USE` when `target` already holds a context.
pub fn rm_map_memory(
    ctl: BorrowedFd<'_>,
    map: MapMemory,
    target: BorrowedFd<'_>,
) -> Result<u64, RmError> {
    const NAME: &str = "NV_ESC_RM_MAP_MEMORY";
    let mut p = NvIoctlNvos33ParametersWithFd {
        params: Nvos33Parameters {
            h_client: map.h_client,
            h_device: map.h_device,
            h_memory: map.h_memory,
            pad0: 0,
            offset: map.offset,
            length: map.length,
            p_linear_address: 0,
            status: 0,
            flags: map.flags,
        },
        fd: target.as_raw_fd(),
        pad0: 0,
    };
    escape(ctl, NAME, NV_ESC_RM_MAP_MEMORY_CMD, &mut p)?;
    check_status(NAME, p.params.status)?;
    Ok(p.params.p_linear_address)
}

/// NV_ESC_RM_ALLOC_MEMORY on a `/dev/nvidiaN` file registered to the client's ctl
/// file (`NV_ACTUAL_DEVICE_ONLY`): allocates a memory object; for
/// NV01_MEMORY_SYSTEM_OS_DESCRIPTOR it pins the caller's pages at `p_memory` for the
/// GPU. Returns the new handle. `fd` is where the RM puts an mmap context for
/// NV01_MEMORY_SYSTEM allocations that ask to be mapped.
///
/// # Safety
/// For an OS descriptor, `p_memory..=p_memory + limit` must stay mapped in this
/// process, and no `&`/`&mut` may point into it, until the object is freed: the GPU
/// may read and write it until then.
///
/// # Errors
/// As [`rm_alloc`].
pub unsafe fn rm_alloc_memory(
    dev: BorrowedFd<'_>,
    params: Nvos02Parameters,
    fd: i32,
) -> Result<NvHandle, RmError> {
    const NAME: &str = "NV_ESC_RM_ALLOC_MEMORY";
    let mut p = NvIoctlNvos02ParametersWithFd {
        params,
        fd,
        pad0: 0,
    };
    escape(dev, NAME, NV_ESC_RM_ALLOC_MEMORY_CMD, &mut p)?;
    check_status(NAME, p.params.status)?;
    Ok(p.params.h_object_new)
}

/// NV_ESC_RM_ALLOC_MEMORY of an NV01_MEMORY_SYSTEM_OS_DESCRIPTOR over all of `mem`,
/// on a `/dev/nvidiaN` file registered to the client's ctl file: the RM pins `mem`'s
/// pages for the GPU and returns `params.h_object_new` (the caller picks handles for
/// these; `p_memory` and `limit` are set here from `mem`).
///
/// # Errors
/// As [`rm_alloc`].
pub fn rm_alloc_os_descriptor(
    dev: BorrowedFd<'_>,
    mut params: Nvos02Parameters,
    mem: &rig_sys::mman::Mapping,
) -> Result<NvHandle, RmError> {
    params.p_memory = mem.addr() as u64;
    params.limit = mem.len() as u64 - 1;
    // SAFETY: `mem` is a shared mapping of a sealed memfd, and `rig_sys::mman::Mapping`
    // never hands out a `&`/`&mut` into its range, so the GPU writing it breaks no
    // Rust aliasing rule. The RM pins the pages it describes (`os_lock_user_pages`:
    // pin_user_pages with FOLL_LONGTERM) for the object's life, so even after `mem` is
    // unmapped the pages the GPU may still reach stay the memfd's, never memory that
    // this process reuses for anything else.
    // JUSTIFICATION: `rm_alloc_memory` stays `unsafe` for other classes and for raw
    // addresses; a whole `Mapping` is the case whose contract is met by its type.
    unsafe { rm_alloc_memory(dev, params, -1) }
}

/// NV_ESC_RM_UNMAP_MEMORY_DMA on `/dev/nvidiactl`: removes a mapping that
/// [`rm_map_memory_dma`] made at `dma_offset` in `h_dma`.
///
/// # Errors
/// As [`rm_alloc`].
pub fn rm_unmap_memory_dma(
    ctl: BorrowedFd<'_>,
    params: &mut Nvos47Parameters,
) -> Result<(), RmError> {
    const NAME: &str = "NV_ESC_RM_UNMAP_MEMORY_DMA";
    escape(ctl, NAME, NV_ESC_RM_UNMAP_MEMORY_DMA_CMD, params)?;
    check_status(NAME, params.status)
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Nvos46ParametersR570 {}
    impl Sealed for super::Nvos46ParametersR580 {}
}

/// An NVOS46 layout: [`Nvos46ParametersR570`] or [`Nvos46ParametersR580`].
pub trait MapMemoryDmaParams:
    IntoBytes + FromBytes + Immutable + KnownLayout + sealed::Sealed
{
    /// NV_ESC_RM_MAP_MEMORY_DMA for this layout's size.
    const CMD: u32;
    /// `status`.
    fn status(&self) -> u32;
    /// `dmaOffset`.
    fn dma_offset(&self) -> u64;
}

impl MapMemoryDmaParams for Nvos46ParametersR570 {
    const CMD: u32 = nv_iowr(NV_ESC_RM_MAP_MEMORY_DMA, size_of::<Self>());
    fn status(&self) -> u32 {
        self.status
    }
    fn dma_offset(&self) -> u64 {
        self.dma_offset
    }
}

impl MapMemoryDmaParams for Nvos46ParametersR580 {
    const CMD: u32 = nv_iowr(NV_ESC_RM_MAP_MEMORY_DMA, size_of::<Self>());
    fn status(&self) -> u32 {
        self.status
    }
    fn dma_offset(&self) -> u64 {
        self.dma_offset
    }
}

/// NV_ESC_RM_MAP_MEMORY_DMA on `/dev/nvidiactl`: maps `hMemory` into the GPU VA
/// range of `hDma`. Returns `dmaOffset`, the GPU VA. The layout is the release's
/// (`nvrm::layout::Release::map_memory_dma`).
///
/// # Errors
/// As [`rm_alloc`].
pub fn rm_map_memory_dma<P: MapMemoryDmaParams>(
    ctl: BorrowedFd<'_>,
    params: &mut P,
) -> Result<u64, RmError> {
    const NAME: &str = "NV_ESC_RM_MAP_MEMORY_DMA";
    escape(ctl, NAME, P::CMD, params)?;
    check_status(NAME, params.status())?;
    Ok(params.dma_offset())
}

/// NV_ESC_CARD_INFO on `/dev/nvidiactl`: the GPUs the kernel driver holds (entries with
/// `valid` set).
///
/// # Errors
/// [`RmError::Ioctl`]: CARD_INFO has no RM status.
pub fn card_info(ctl: BorrowedFd<'_>) -> Result<Vec<NvIoctlCardInfo>, RmError> {
    let mut cards = [NvIoctlCardInfo::new_zeroed(); CARD_INFO_ENTRIES];
    escape(ctl, "NV_ESC_CARD_INFO", NV_ESC_CARD_INFO_CMD, &mut cards)?;
    Ok(cards.into_iter().filter(|c| c.valid != 0).collect())
}

/// NV_ESC_REGISTER_FD on a `/dev/nvidiaN` file: ties it to the client's ctl file, as
/// device-file escapes (RM_ALLOC_MEMORY) need. A file is registered at most once.
///
/// # Errors
/// [`RmError::Ioctl`] (`EINVAL` when already registered): REGISTER_FD's RM status
/// becomes the ioctl's errno.
pub fn register_fd(dev: BorrowedFd<'_>, ctl: BorrowedFd<'_>) -> Result<(), RmError> {
    let mut p = NvIoctlRegisterFd {
        ctl_fd: ctl.as_raw_fd(),
    };
    escape(dev, "NV_ESC_REGISTER_FD", NV_ESC_REGISTER_FD_CMD, &mut p)
}

/// NV_ESC_ALLOC_OS_EVENT on `file`: the RM will post `h_client`'s events whose `data`
/// is `key` to this file, which poll(2) then reports readable (POLLIN | POLLPRI). The
/// file need hold no client; `key` is unique per client.
///
/// # Errors
/// [`RmError::Ioctl`], [`RmError::Status`] (NV_ERR_INSUFFICIENT_RESOURCES for a key
/// the client already registered).
pub fn alloc_os_event(file: BorrowedFd<'_>, h_client: NvHandle, key: u32) -> Result<(), RmError> {
    os_event(
        file,
        h_client,
        key,
        "NV_ESC_ALLOC_OS_EVENT",
        NV_ESC_ALLOC_OS_EVENT_CMD,
    )
}

/// NV_ESC_FREE_OS_EVENT on `file`: undoes [`alloc_os_event`] (closing the file does too).
///
/// # Errors
/// [`RmError::Ioctl`], [`RmError::Status`].
pub fn free_os_event(file: BorrowedFd<'_>, h_client: NvHandle, key: u32) -> Result<(), RmError> {
    os_event(
        file,
        h_client,
        key,
        "NV_ESC_FREE_OS_EVENT",
        NV_ESC_FREE_OS_EVENT_CMD,
    )
}

fn os_event(
    file: BorrowedFd<'_>,
    h_client: NvHandle,
    key: u32,
    name: &'static str,
    cmd: u32,
) -> Result<(), RmError> {
    let mut p = NvIoctlOsEvent {
        h_client,
        h_device: 0,
        fd: key,
        status: 0,
    };
    escape(file, name, cmd, &mut p)?;
    check_status(name, p.status)
}

/// NV_ESC_CHECK_VERSION_STR on `/dev/nvidiactl`. With
/// [`NV_RM_API_VERSION_CMD_QUERY`] the answer's `version_string` is the kernel
/// module's version; otherwise `version` is compared as `cmd` says.
///
/// # Errors
/// [`RmError::Ioctl`]: `EINVAL` for a mismatch or a `version` of 64 bytes or more.
pub fn check_version_str(
    ctl: BorrowedFd<'_>,
    cmd: u32,
    version: &str,
) -> Result<NvIoctlRmApiVersion, RmError> {
    let mut p = NvIoctlRmApiVersion {
        cmd,
        reply: 0,
        version_string: [0; NV_RM_API_VERSION_STRING_LENGTH],
    };
    let v = version.as_bytes();
    let dst = p
        .version_string
        .get_mut(..v.len())
        .filter(|_| v.len() < NV_RM_API_VERSION_STRING_LENGTH)
        .ok_or(RmError::Ioctl {
            escape: "NV_ESC_CHECK_VERSION_STR",
            source: io::Error::from_raw_os_error(libc::EINVAL),
        })?;
    dst.copy_from_slice(v);
    escape(
        ctl,
        "NV_ESC_CHECK_VERSION_STR",
        NV_ESC_CHECK_VERSION_STR_CMD,
        &mut p,
    )?;
    Ok(p)
}

#[cfg(test)]
mod tests;
