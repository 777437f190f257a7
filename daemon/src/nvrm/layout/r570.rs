//! Release 570's structs where they differ from 580's (`r580` holds the rest).
//!
//! Read in NVIDIA/open-gpu-kernel-modules at 570.211.01 (`498793d5`, head of branch
//! 570) and 570.86.16; `NV_VASPACE_ALLOCATION_PARAMETERS` also at 575.64.05, which has
//! this 48-byte layout too. Headers are under `src/common/sdk/nvidia/inc/`. NVOS46, the
//! other 570 difference, is an escape envelope and lives in `sys::nvrm`
//! (`Nvos46ParametersR570`).

use std::mem::size_of;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `NV_VASPACE_ALLOCATION_PARAMETERS` (`nvos.h`) up to 575: no `pasid`. Sending it to
/// a 580 RM would be over-read by 8 bytes, since RM_ALLOC copies the RM's own size.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvVaspaceAllocationParameters {
    pub index: u32,
    pub flags: u32,
    pub va_size: u64,
    pub va_start_internal: u64,
    pub va_limit_internal: u64,
    pub big_page_size: u32,
    /// C's padding before the 8-aligned `vaBase`.
    pub pad0: u32,
    pub va_base: u64,
}
const _: () = assert!(size_of::<NvVaspaceAllocationParameters>() == 48);

/// `NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS` = `NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS`
/// (`ctrl/ctrla06f/ctrla06fgpfifo.h`) in 570: no `bSkipEnable`. A 575 or later RM
/// refuses these 2 bytes with NV_ERR_INVALID_PARAM_STRUCT.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nva06cCtrlGpfifoScheduleParams {
    /// `bEnable` (NvBool).
    pub b_enable: u8,
    /// `bSkipSubmit` (NvBool).
    pub b_skip_submit: u8,
}
const _: () = assert!(size_of::<Nva06cCtrlGpfifoScheduleParams>() == 2);
