//! Release 580's class and control parameter structs, with the class ids and control
//! numbers the channel sequence uses.
//!
//! Transcribed from NVIDIA/open-gpu-kernel-modules at tag 580.142 (`1a5075f8`); the
//! structs that differ between releases were also read at 580.65.06, and all of them
//! at 570.211.01 (`498793d5`) and 590.48.01 (`2ccbad25`): every struct here is the same
//! in those, except the two that `r570` redefines. Headers are under
//! `src/common/sdk/nvidia/inc/`. Field names are the header's in snake_case; where
//! the header's spelling does not convert plainly, the doc names it. `NvHandle` is
//! `u32`, `NvP64` is `u64`, `NvBool` is `u8`, and C's implicit padding is spelled out
//! as `pad*` fields, since zerocopy refuses implicit padding.

use std::mem::size_of;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub use crate::sys::nvrm::Nv0080CtrlGpuGetClasslistParams;
use crate::sys::nvrm::NvHandle;

// Classes (`class/*.h`, `nvos.h`).
/// `NV01_ROOT_NON_PRIV` (`class/cl0001.h`).
pub const NV01_ROOT_NON_PRIV: u32 = 0x0000_0001;
/// `NV01_ROOT_CLIENT` (`nvos.h`).
pub const NV01_ROOT_CLIENT: u32 = 0x0000_0041;
/// `NV01_MEMORY_SYSTEM` (`class/cl003e.h`).
pub const NV01_MEMORY_SYSTEM: u32 = 0x0000_003E;
/// `NV01_MEMORY_LOCAL_USER` (`class/cl0040.h`).
pub const NV01_MEMORY_LOCAL_USER: u32 = 0x0000_0040;
/// `NV01_MEMORY_VIRTUAL` (`class/cl0070.h`).
pub const NV01_MEMORY_VIRTUAL: u32 = 0x0000_0070;
/// `NV01_MEMORY_SYSTEM_OS_DESCRIPTOR` (`class/cl0071.h`).
pub const NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: u32 = 0x0000_0071;
/// `NV01_DEVICE_0` (`class/cl0080.h`).
pub const NV01_DEVICE_0: u32 = 0x0000_0080;
/// `NV20_SUBDEVICE_0` (`class/cl2080.h`).
pub const NV20_SUBDEVICE_0: u32 = 0x0000_2080;
/// `GT200_DEBUGGER` (`class/cl83de.h`).
pub const GT200_DEBUGGER: u32 = 0x0000_83DE;
/// `FERMI_CONTEXT_SHARE_A` (`class/cl9067.h`).
pub const FERMI_CONTEXT_SHARE_A: u32 = 0x0000_9067;
/// `FERMI_VASPACE_A` (`class/cl90f1.h`).
pub const FERMI_VASPACE_A: u32 = 0x0000_90F1;
/// `KEPLER_CHANNEL_GROUP_A` (`class/cla06c.h`).
pub const KEPLER_CHANNEL_GROUP_A: u32 = 0x0000_A06C;

// Controls.
/// `NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2` (`ctrl/ctrl0000/ctrl0000system.h`).
pub const NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: u32 = 0x13E;
/// `NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2` (`ctrl/ctrl0000/ctrl0000gpu.h`).
pub const NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: u32 = 0x205;
/// `NV0000_CTRL_CMD_SYSTEM_GET_PRIVILEGED_STATUS` (`ctrl/ctrl0000/ctrl0000system.h`):
/// one byte of flags, PRIV_USER (0x1: the caller has CAP_SYS_ADMIN), KERNEL_HANDLE
/// (0x2), PRIV_HANDLE (0x4: `rmclientIsAdmin`, what makes a channel privileged).
pub const NV0000_CTRL_CMD_SYSTEM_GET_PRIVILEGED_STATUS: u32 = 0x135;
/// `NV0000_CTRL_SYSTEM_GET_PRIVILEGED_STATUS_PRIV_HANDLE_FLAG`.
pub const NV0000_CTRL_SYSTEM_GET_PRIVILEGED_STATUS_PRIV_HANDLE_FLAG: u8 = 0x4;
/// `NV0000_CTRL_SYSTEM_GET_PRIVILEGED_STATUS_PRIV_USER_FLAG`.
pub const NV0000_CTRL_SYSTEM_GET_PRIVILEGED_STATUS_PRIV_USER_FLAG: u8 = 0x1;
/// `NV0080_CTRL_CMD_GPU_GET_CLASSLIST` (`ctrl/ctrl0080/ctrl0080gpu.h`); issued only by
/// `sys::nvrm::gpu_get_classlist`, since its params carry a pointer.
pub const NV0080_CTRL_CMD_GPU_GET_CLASSLIST: u32 =
    crate::sys::nvrm::NV0080_CTRL_CMD_GPU_GET_CLASSLIST;
/// `NV2080_CTRL_CMD_GR_GET_INFO` (`ctrl/ctrl2080/ctrl2080gr.h`); issued only by
/// `sys::nvrm::gr_get_info`, since its params carry a pointer.
pub const NV2080_CTRL_CMD_GR_GET_INFO: u32 = crate::sys::nvrm::NV2080_CTRL_CMD_GR_GET_INFO;
/// `NV2080_CTRL_CMD_PERF_BOOST` (`ctrl/ctrl2080/ctrl2080perf.h`): raise the GPU's clocks
/// for a while, as CUDA does (docs/hardware/nvidia-compute.md, "Clocks").
pub const NV2080_CTRL_CMD_PERF_BOOST: u32 = 0x2080_200A;
/// `NV2080_CTRL_PERF_BOOST_FLAGS_CMD_CLEAR` (1:0 = 0): end this client's boost.
pub const NV2080_CTRL_PERF_BOOST_FLAGS_CMD_CLEAR: u32 = 0x0;
/// `NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX` (1:0 = 2).
pub const NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX: u32 = 0x2;
/// `NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES` (4:4 = 1): a boost on CUDA's behalf.
pub const NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES: u32 = 0x10;
/// `NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH` (6:6 = 1).
pub const NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH: u32 = 0x40;
/// `NV2080_CTRL_PERF_BOOST_DURATION_INFINITE`: until cleared (or the client goes).
pub const NV2080_CTRL_PERF_BOOST_DURATION_INFINITE: u32 = 0xFFFF_FFFF;
/// `NV2080_CTRL_CMD_GPU_GET_RECOVERY_ACTION` (`ctrl/ctrl2080/ctrl2080gpu.h`): what the
/// GPU needs before it works again; params one `NV2080_CTRL_GPU_RECOVERY_ACTION` (a
/// 4-byte enum). NON_PRIVILEGED and API_LOCK_READONLY in the RM's control table
/// (`g_subdevice_nvoc.c`, flags 0x108), answered by the kernel module from
/// `pGpu->currentRecoveryAction` without a GSP RPC (docs/hardware/nvidia-rm.md, "When the
/// GPU needs a reset").
pub const NV2080_CTRL_CMD_GPU_GET_RECOVERY_ACTION: u32 = 0x2080_01B2;
/// `NV2080_CTRL_GPU_RECOVERY_ACTION_NONE`: the GPU works.
pub const NV2080_CTRL_GPU_RECOVERY_ACTION_NONE: u32 = 0;
/// `NV2080_CTRL_GPU_RECOVERY_ACTION_GPU_RESET`.
pub const NV2080_CTRL_GPU_RECOVERY_ACTION_GPU_RESET: u32 = 1;
/// `NV2080_CTRL_GPU_RECOVERY_ACTION_NODE_REBOOT`.
pub const NV2080_CTRL_GPU_RECOVERY_ACTION_NODE_REBOOT: u32 = 2;
/// `NV2080_CTRL_GPU_RECOVERY_ACTION_DRAIN_P2P`.
pub const NV2080_CTRL_GPU_RECOVERY_ACTION_DRAIN_P2P: u32 = 3;
/// `NV2080_CTRL_GPU_RECOVERY_ACTION_DRAIN_AND_RESET`.
pub const NV2080_CTRL_GPU_RECOVERY_ACTION_DRAIN_AND_RESET: u32 = 4;
/// `NV2080_CTRL_CMD_GPU_GET_GID_INFO` (`ctrl/ctrl2080/ctrl2080gpu.h`).
pub const NV2080_CTRL_CMD_GPU_GET_GID_INFO: u32 = 0x2080_014A;
/// `NV2080_CTRL_CMD_CE_GET_ALL_CAPS` (`ctrl/ctrl2080/ctrl2080ce.h`): every copy engine's
/// caps, [`Nv2080CtrlCeGetAllCapsParams`]. Flags 0x10108 in the RM's control table
/// (`g_subdevice_nvoc.c` of 580.142): not privileged.
pub const NV2080_CTRL_CMD_CE_GET_ALL_CAPS: u32 = 0x2080_2A0A;
/// `NV2080_CTRL_MAX_CES`: the caps table's rows, one per copy engine (COPY0 + n).
pub const NV2080_CTRL_MAX_CES: usize = 64;
/// `NV2080_CTRL_CE_CAPS_TBL_SIZE`: bytes of caps per copy engine.
pub const NV2080_CTRL_CE_CAPS_TBL_SIZE: usize = 2;
// Caps bits (`NV2080_CTRL_CE_CAPS_CE_*`, "byte_index:bit_mask"), in byte 0.
/// `CE_GRCE` (0:0x01): the engine is synchronous with graphics (its work runs in the
/// graphics engine's runlist, one after the other with kernels).
pub const NV2080_CTRL_CE_CAPS_CE_GRCE: u8 = 0x01;
/// `CE_SHARED` (0:0x02): shares physical copy engines with another.
pub const NV2080_CTRL_CE_CAPS_CE_SHARED: u8 = 0x02;
/// `CE_SYSMEM` (0:0x20): may be used for system-memory transfers.
pub const NV2080_CTRL_CE_CAPS_CE_SYSMEM: u8 = 0x20;
/// `NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN` (`ctrl/ctrlc36f.h`).
pub const NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: u32 = 0xC36F_0108;
/// `NVA06C_CTRL_CMD_SET_TIMESLICE` (`ctrl/ctrla06c.h`), on a channel group: its
/// timeslice, `NVA06C_CTRL_TIMESLICE_PARAMS` (timesliceUs, a u64), rounded down by the
/// RM to what the hardware takes. NON_PRIVILEGED (flags 0x10008,
/// `g_kernel_channel_group_api_nvoc.c` of 580.95.05); the RM's default is 1024 µs
/// (`kfifoChannelGroupGetDefaultTimeslice_GV100`).
pub const NVA06C_CTRL_CMD_SET_TIMESLICE: u32 = 0xA06C_0103;

/// `NVA06C_CTRL_CMD_GPFIFO_SCHEDULE` (`ctrl/ctrla06c.h`).
pub const NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: u32 = 0xA06C_0101;

// `NV2080_CTRL_GR_INFO_INDEX_*` (`ctrl/ctrl0080/ctrl0080gr.h`, the same numbers as
// `NV0080_CTRL_GR_INFO_INDEX_*`): what GR_GET_INFO is asked for.
/// `SM_VERSION`: one of `NV2080_CTRL_GR_INFO_SM_VERSION_*` (GH100: 0x900).
pub const NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: u32 = 0x0C;
/// `MAX_WARPS_PER_SM`.
pub const NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: u32 = 0x0D;
/// `SHADER_PIPE_SUB_COUNT`: the TPCs that are enabled, as UVM reads them
/// (docs/hardware/nvidia-compute.md, "Once per channel"; `SHADER_PIPE_COUNT`, 0x07, is
/// not: it said 8 on the H200).
pub const NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT: u32 = 0x09;
/// `LITTER_NUM_GPCS`: the chip's GPCs.
pub const NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: u32 = 0x14;
/// `LITTER_NUM_TPC_PER_GPC`: the most TPCs one GPC has.
pub const NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: u32 = 0x17;
/// `LITTER_NUM_SM_PER_TPC`.
pub const NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: u32 = 0x20;

/// `NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE` (`ctrl/ctrl2080/ctrl2080gr.h`), on the
/// subdevice, `hChannel` a channel or a channel group: how the graphics engine may take
/// work of that context off the GPU (docs/hardware/nvidia-channels.md, "Compute
/// preemption"). NON_PRIVILEGED in the RM's control table (flags 0x10348).
pub const NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE: u32 = 0x2080_1210;
/// `NV2080_CTRL_GR_SET_CTXSW_PREEMPTION_MODE_FLAGS_CILP_SET` (0:0): the compute mode is
/// given.
pub const NV2080_CTRL_GR_SET_CTXSW_PREEMPTION_MODE_FLAGS_CILP_SET: u32 = 0x1;
/// `NV2080_CTRL_SET_CTXSW_PREEMPTION_MODE_COMPUTE_WFI`: wait until the work is idle.
pub const NV2080_CTRL_SET_CTXSW_PREEMPTION_MODE_COMPUTE_WFI: u32 = 0;
/// `NV2080_CTRL_SET_CTXSW_PREEMPTION_MODE_COMPUTE_CILP`: preempt at the instruction
/// level.
pub const NV2080_CTRL_SET_CTXSW_PREEMPTION_MODE_COMPUTE_CILP: u32 = 2;

/// `NV2080_CTRL_CMD_GR_GET_CTXSW_MODES` (`ctrl/ctrl2080/ctrl2080gr.h`), on the subdevice:
/// a channel's context switch modes, the compute preemption among them.
pub const NV2080_CTRL_CMD_GR_GET_CTXSW_MODES: u32 = 0x2080_1235;

/// `NV2080_CTRL_GR_GET_CTXSW_MODES_PARAMS`: hChannel, then zcullMode, pmMode, smpcMode,
/// cilpPreemptMode, gfxpPreemptMode (out), 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlGrGetCtxswModesParams {
    pub h_channel: u32,
    pub zcull_mode: u32,
    pub pm_mode: u32,
    pub smpc_mode: u32,
    pub cilp_preempt_mode: u32,
    pub gfxp_preempt_mode: u32,
}
const _: () = assert!(size_of::<Nv2080CtrlGrGetCtxswModesParams>() == 24);

/// `NV2080_CTRL_GR_SET_CTXSW_PREEMPTION_MODE_PARAMS` (`ctrl2080gr.h`): flags, hChannel,
/// gfxpPreemptMode, cilpPreemptMode, then `NV2080_CTRL_GR_ROUTE_INFO` (flags, and a
/// route aligned to 8), 32 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlGrSetCtxswPreemptionModeParams {
    pub flags: u32,
    pub h_channel: u32,
    pub gfxp_preempt_mode: u32,
    pub cilp_preempt_mode: u32,
    pub route_flags: u32,
    pub route_pad: u32,
    pub route: u64,
}
const _: () = assert!(size_of::<Nv2080CtrlGrSetCtxswPreemptionModeParams>() == 32);

/// `NV2080_CTRL_CMD_GR_GET_CTXSW_STATS` (`ctrl/ctrl2080/ctrl2080gr.h`), on the
/// subdevice, `hChannel` the group: how often the context was saved and restored, and
/// saved by which preemption. NON_PRIVILEGED, routed to the GSP (flags 0x48).
pub const NV2080_CTRL_CMD_GR_GET_CTXSW_STATS: u32 = 0x2080_1215;

/// `NV2080_CTRL_GR_GET_CTXSW_STATS_PARAMS`: hChannel, flags, then the counts saveCnt,
/// restoreCnt, wfiSaveCnt, ctaSaveCnt, cilpSaveCnt, gfxpSaveCnt (out), 32 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlGrGetCtxswStatsParams {
    pub h_channel: u32,
    pub flags: u32,
    pub save_cnt: u32,
    pub restore_cnt: u32,
    pub wfi_save_cnt: u32,
    pub cta_save_cnt: u32,
    pub cilp_save_cnt: u32,
    pub gfxp_save_cnt: u32,
}
const _: () = assert!(size_of::<Nv2080CtrlGrGetCtxswStatsParams>() == 32);

/// `NV2080_CTRL_PERF_BOOST_PARAMS` (`ctrl/ctrl2080/ctrl2080perf.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlPerfBoostParams {
    pub flags: u32,
    /// Seconds, or `NV2080_CTRL_PERF_BOOST_DURATION_INFINITE`.
    pub duration: u32,
}
const _: () = assert!(size_of::<Nv2080CtrlPerfBoostParams>() == 8);

// Field values.
/// `NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES` (`nvos.h`).
pub const NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES: u32 = 0;
/// `NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED` (`nvos.h`, `BIT(3)`).
pub const NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED: u32 = 1 << 3;
/// `NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING` (`nvos.h`, `BIT(6)`).
pub const NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING: u32 = 1 << 6;
/// `NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC` (`nvos.h`, field 1:0).
pub const NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC: u32 = 1;
/// `NV2080_ENGINE_TYPE_GRAPHICS` (`class/cl2080_notification.h`).
pub const NV2080_ENGINE_TYPE_GRAPHICS: u32 = 1;
/// `NV2080_ENGINE_TYPE_COPY0` (`class/cl2080_notification.h`).
pub const NV2080_ENGINE_TYPE_COPY0: u32 = 9;
/// `NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY` (`ctrl/ctrl2080/ctrl2080gpu.h`).
pub const NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY: u32 = 2;
/// `NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE`.
pub const NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE: usize = 256;
/// `NV_MAX_SUBDEVICES` (`nvlimits.h`).
pub const NV_MAX_SUBDEVICES: usize = 8;
/// `NV2080_GPU_MAX_GID_LENGTH` (`ctrl/ctrl2080/ctrl2080gpu.h`).
pub const NV2080_GPU_MAX_GID_LENGTH: usize = 0x100;

/// `NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS` (`ctrl/ctrl0000/ctrl0000system.h`):
/// four NUL-terminated strings in fixed buffers.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv0000CtrlSystemGetBuildVersionV2Params {
    pub driver_version_buffer: [u8; NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE],
    pub version_buffer: [u8; NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE],
    pub driver_branch: [u8; NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE],
    pub title_buffer: [u8; NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE],
    pub changelist_number: u32,
    pub official_changelist_number: u32,
}
const _: () = assert!(size_of::<Nv0000CtrlSystemGetBuildVersionV2Params>() == 1032);

/// `NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS` (`ctrl/ctrl0000/ctrl0000gpu.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv0000CtrlGpuGetIdInfoV2Params {
    pub gpu_id: u32,
    pub gpu_flags: u32,
    pub device_instance: u32,
    pub sub_device_instance: u32,
    pub sli_status: u32,
    pub board_id: u32,
    pub gpu_instance: u32,
    pub numa_id: i32,
}
const _: () = assert!(size_of::<Nv0000CtrlGpuGetIdInfoV2Params>() == 32);

/// `NV0080_ALLOC_PARAMETERS` (`class/cl0080.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv0080AllocParameters {
    pub device_id: u32,
    pub h_client_share: NvHandle,
    pub h_target_client: NvHandle,
    pub h_target_device: NvHandle,
    pub flags: u32,
    /// C's padding before the 8-aligned `vaSpaceSize`.
    pub pad0: u32,
    pub va_space_size: u64,
    pub va_start_internal: u64,
    pub va_limit_internal: u64,
    pub va_mode: u32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<Nv0080AllocParameters>() == 56);

/// `NV2080_ALLOC_PARAMETERS` (`class/cl2080.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080AllocParameters {
    pub sub_device_id: u32,
}
const _: () = assert!(size_of::<Nv2080AllocParameters>() == 4);

/// `NV_VASPACE_ALLOCATION_PARAMETERS` (`nvos.h`) from 580: `pasid` at 48 is new
/// (570 and 575: `r570`).
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
    pub pasid: u32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<NvVaspaceAllocationParameters>() == 56);

/// `NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS` (`nvos.h`): KEPLER_CHANNEL_GROUP_A.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvChannelGroupAllocationParameters {
    pub h_object_error: NvHandle,
    pub h_object_ecc_error: NvHandle,
    /// `hVASpace`.
    pub h_va_space: NvHandle,
    pub engine_type: u32,
    /// `bIsCallingContextVgpuPlugin` (NvBool).
    pub b_is_calling_context_vgpu_plugin: u8,
    /// C's tail padding.
    pub pad0: [u8; 3],
}
const _: () = assert!(size_of::<NvChannelGroupAllocationParameters>() == 20);

/// `NV_CTXSHARE_ALLOCATION_PARAMETERS` (`nvos.h`): FERMI_CONTEXT_SHARE_A.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvCtxshareAllocationParameters {
    /// `hVASpace`.
    pub h_va_space: NvHandle,
    pub flags: u32,
    /// `subctxId`.
    pub subctx_id: u32,
}
const _: () = assert!(size_of::<NvCtxshareAllocationParameters>() == 12);

/// `NV_MEMORY_DESC_PARAMS` (`alloc/alloc_channel.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvMemoryDescParams {
    pub base: u64,
    pub size: u64,
    pub address_space: u32,
    pub cache_attrib: u32,
}
const _: () = assert!(size_of::<NvMemoryDescParams>() == 24);

/// `NV_CHANNEL_ALLOC_PARAMS` (`alloc/alloc_channel.h`), a.k.a.
/// `NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS`: HOPPER_CHANNEL_GPFIFO_A. 368 bytes from 570
/// to 590; 610 inserts 8 bytes before `instanceMem` (not read here: no 610 layouts).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvChannelAllocParams {
    pub h_object_error: NvHandle,
    pub h_object_buffer: NvHandle,
    pub gp_fifo_offset: u64,
    pub gp_fifo_entries: u32,
    pub flags: u32,
    pub h_context_share: NvHandle,
    /// `hVASpace`.
    pub h_va_space: NvHandle,
    pub h_userd_memory: [NvHandle; NV_MAX_SUBDEVICES],
    pub userd_offset: [u64; NV_MAX_SUBDEVICES],
    pub engine_type: u32,
    pub cid: u32,
    pub sub_device_id: u32,
    pub h_object_ecc_error: NvHandle,
    pub instance_mem: NvMemoryDescParams,
    pub userd_mem: NvMemoryDescParams,
    pub ramfc_mem: NvMemoryDescParams,
    pub mthdbuf_mem: NvMemoryDescParams,
    pub h_phys_channel_group: NvHandle,
    pub internal_flags: u32,
    pub error_notifier_mem: NvMemoryDescParams,
    pub ecc_error_notifier_mem: NvMemoryDescParams,
    /// `ProcessID`.
    pub process_id: u32,
    /// `SubProcessID`.
    pub sub_process_id: u32,
    pub encrypt_iv: [u32; 3],
    pub decrypt_iv: [u32; 3],
    pub hmac_nonce: [u32; 8],
    /// `tpcConfigID`.
    pub tpc_config_id: u32,
    /// C's tail padding to 8-byte alignment.
    pub pad0: u32,
}
const _: () = assert!(size_of::<NvChannelAllocParams>() == 368);

/// `NV_MEMORY_ALLOCATION_PARAMS` (`nvos.h`): NV01_MEMORY_LOCAL_USER and the other
/// heap classes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvMemoryAllocationParams {
    pub owner: u32,
    /// `type`.
    pub type_: u32,
    pub flags: u32,
    pub width: u32,
    pub height: u32,
    pub pitch: i32,
    pub attr: u32,
    pub attr2: u32,
    pub format: u32,
    /// `comprCovg`.
    pub compr_covg: u32,
    /// `zcullCovg`.
    pub zcull_covg: u32,
    /// C's padding before the 8-aligned `rangeLo`.
    pub pad0: u32,
    pub range_lo: u64,
    pub range_hi: u64,
    pub size: u64,
    pub alignment: u64,
    pub offset: u64,
    pub limit: u64,
    /// `address` (NvP64, out).
    pub address: u64,
    pub ctag_offset: u32,
    /// `hVASpace`.
    pub h_va_space: NvHandle,
    /// `internalflags`.
    pub internal_flags: u32,
    pub tag: u32,
    pub numa_node: i32,
    /// C's tail padding.
    pub pad1: u32,
}
const _: () = assert!(size_of::<NvMemoryAllocationParams>() == 128);

/// `NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS` (`class/cl0070.h`): NV01_MEMORY_VIRTUAL.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvMemoryVirtualAllocationParams {
    pub offset: u64,
    pub limit: u64,
    /// `hVASpace`.
    pub h_va_space: NvHandle,
    /// C's tail padding.
    pub pad0: u32,
}
const _: () = assert!(size_of::<NvMemoryVirtualAllocationParams>() == 24);

/// `NV_HOPPER_USERMODE_A_PARAMS` (`nvos.h`): HOPPER_USERMODE_A. NULL params mean
/// both false: the BAR0 non-privileged page.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NvHopperUsermodeAParams {
    /// `bBar1Mapping` (NvBool).
    pub b_bar1_mapping: u8,
    /// `bPriv` (NvBool).
    pub b_priv: u8,
}
const _: () = assert!(size_of::<NvHopperUsermodeAParams>() == 2);

/// `NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS` (`ctrl/ctrlc36f.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nvc36fCtrlCmdGpfifoGetWorkSubmitTokenParams {
    pub work_submit_token: u32,
}
const _: () = assert!(size_of::<Nvc36fCtrlCmdGpfifoGetWorkSubmitTokenParams>() == 4);

/// `NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS` (`ctrl/ctrla06c.h`), a typedef of
/// `NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS` (`ctrl/ctrla06f/ctrla06fgpfifo.h`), from 575:
/// `bSkipEnable` is new (570: `r570`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nva06cCtrlGpfifoScheduleParams {
    /// `bEnable` (NvBool).
    pub b_enable: u8,
    /// `bSkipSubmit` (NvBool).
    pub b_skip_submit: u8,
    /// `bSkipEnable` (NvBool).
    pub b_skip_enable: u8,
}
const _: () = assert!(size_of::<Nva06cCtrlGpfifoScheduleParams>() == 3);

/// `NV2080_CTRL_GPU_GET_GID_INFO_PARAMS` (`ctrl/ctrl2080/ctrl2080gpu.h`). With
/// `FORMAT_BINARY` and `TYPE_SHA1` flags, `data` holds the 16-byte GPU UUID.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlGpuGetGidInfoParams {
    pub index: u32,
    pub flags: u32,
    pub length: u32,
    pub data: [u8; NV2080_GPU_MAX_GID_LENGTH],
}
const _: () = assert!(size_of::<Nv2080CtrlGpuGetGidInfoParams>() == 268);

/// `NV01_EVENT_OS_EVENT` (`nvos.h`): an event the RM posts to a file registered with
/// NV_ESC_ALLOC_OS_EVENT.
pub const NV01_EVENT_OS_EVENT: u32 = 0x0000_0079;
/// `NV2080_NOTIFIERS_FIFO_EVENT_MTHD` (`class/cl2080_notification.h`): the host's
/// non-stall interrupt, which on Hopper the RM also fires for every host-driven engine's
/// (docs/hardware/nvidia-rm.md, "Non-stall interrupts and OS events").
pub const NV2080_NOTIFIERS_FIFO_EVENT_MTHD: u32 = 35;
/// `NV01_EVENT_NONSTALL_INTR` (`nvos.h`), a flag of NV0005's `notifyIndex`.
pub const NV01_EVENT_NONSTALL_INTR: u32 = 0x0800_0000;
/// `NV01_EVENT_WITHOUT_EVENT_DATA` (`nvos.h`): the RM queues nothing per event, it only
/// marks the file readable.
pub const NV01_EVENT_WITHOUT_EVENT_DATA: u32 = 0x1000_0000;

/// `NV0005_ALLOC_PARAMETERS` (`class/cl0005.h`): an event object's.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv0005AllocParameters {
    /// 0: the allocating client.
    pub h_parent_client: NvHandle,
    /// The object whose events these are (the RM sets it to the RM_ALLOC's parent).
    pub h_src_resource: NvHandle,
    pub h_class: u32,
    /// Index 15:0, flags 31:24 (`NV01_EVENT_*`).
    pub notify_index: u32,
    /// `data` (NvP64): for NV01_EVENT_OS_EVENT, the key given to ALLOC_OS_EVENT.
    pub data: u64,
}
const _: () = assert!(size_of::<Nv0005AllocParameters>() == 24);

/// `NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION` (`ctrl/ctrl2080/ctrl2080event.h`).
pub const NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION: u32 = 0x2080_0301;
/// `NV2080_CTRL_EVENT_SET_NOTIFICATION_ACTION_REPEAT`.
pub const NV2080_CTRL_EVENT_SET_NOTIFICATION_ACTION_REPEAT: u32 = 2;

/// `NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS` (`ctrl/ctrl2080/ctrl2080event.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlEventSetNotificationParams {
    pub event: u32,
    pub action: u32,
    /// `bNotifyState` (NvBool), then C's padding.
    pub notify_state: u8,
    pub pad0: [u8; 3],
    pub info32: u32,
    pub info16: u16,
    /// C's tail padding.
    pub pad1: u16,
}
const _: () = assert!(size_of::<Nv2080CtrlEventSetNotificationParams>() == 20);

/// `NV2080_CTRL_CE_GET_ALL_CAPS_PARAMS` (`ctrl/ctrl2080/ctrl2080ce.h`): row n is COPYn's
/// caps, meaningful where bit n of `present` is set.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlCeGetAllCapsParams {
    pub caps_tbl: [[u8; NV2080_CTRL_CE_CAPS_TBL_SIZE]; NV2080_CTRL_MAX_CES],
    /// `NV_DECLARE_ALIGNED(NvU64 present, 8)`: at 128, no padding before it.
    pub present: u64,
}
const _: () = assert!(size_of::<Nv2080CtrlCeGetAllCapsParams>() == 136);

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
    }

    #[test]
    fn channel_alloc_params_encode_each_field_at_the_header_offset() {
        let mut p = NvChannelAllocParams {
            h_object_error: 0xE000_0001,
            h_object_buffer: 0xB000_0002,
            gp_fifo_offset: 0x0000_7FFF_0010_0000,
            gp_fifo_entries: 0x1_0000,
            h_context_share: 0xC000_0003,
            h_va_space: 0xA000_0004,
            engine_type: 0x9,
            hmac_nonce: [0x5A5A_5A5A; 8],
            ..Default::default()
        };
        p.h_userd_memory[0] = 0xD000_0005;
        p.h_userd_memory[7] = 0xD000_0006;
        p.userd_offset[0] = 0x8_0000;
        p.userd_offset[7] = 0x18_0000;
        let b = p.as_bytes();
        // Offsets from alloc_channel.h: two handles, an 8-aligned u64, four u32s, eight
        // handles (32..64), eight u64s (64..128), four u32s, six 24-byte descriptors
        // with two u32s between the fourth and fifth, two u32s, 3+3+8+1 u32s, tail pad.
        assert_eq!(u32_at(b, 0), 0xE000_0001, "hObjectError");
        assert_eq!(u32_at(b, 4), 0xB000_0002, "hObjectBuffer");
        assert_eq!(u64_at(b, 8), 0x0000_7FFF_0010_0000, "gpFifoOffset");
        assert_eq!(u32_at(b, 16), 0x1_0000, "gpFifoEntries");
        assert_eq!(u32_at(b, 24), 0xC000_0003, "hContextShare");
        assert_eq!(u32_at(b, 28), 0xA000_0004, "hVASpace");
        assert_eq!(u32_at(b, 32), 0xD000_0005, "hUserdMemory[0]");
        assert_eq!(u32_at(b, 60), 0xD000_0006, "hUserdMemory[7]");
        assert_eq!(u64_at(b, 64), 0x8_0000, "userdOffset[0]");
        assert_eq!(u64_at(b, 120), 0x18_0000, "userdOffset[7]");
        assert_eq!(u32_at(b, 128), 0x9, "engineType");
        assert_eq!(u32_at(b, 328), 0x5A5A_5A5A, "hmacNonce[0]");
        assert_eq!(u32_at(b, 356), 0x5A5A_5A5A, "hmacNonce[7]");
        assert_eq!(u32_at(b, 360), 0, "tpcConfigID");
    }

    #[test]
    fn channel_alloc_params_put_the_descriptors_where_the_header_does() {
        let p = NvChannelAllocParams {
            instance_mem: NvMemoryDescParams {
                base: 1,
                ..Default::default()
            },
            h_phys_channel_group: 0x1234,
            error_notifier_mem: NvMemoryDescParams {
                base: 2,
                ..Default::default()
            },
            process_id: 0x4321,
            ..Default::default()
        };
        let b = p.as_bytes();
        assert_eq!(u64_at(b, 144), 1, "instanceMem.base");
        assert_eq!(u32_at(b, 240), 0x1234, "hPhysChannelGroup");
        assert_eq!(u64_at(b, 248), 2, "errorNotifierMem.base");
        assert_eq!(u32_at(b, 296), 0x4321, "ProcessID");
    }

    #[test]
    fn vaspace_params_put_va_base_at_40_and_pasid_at_48() {
        let p = NvVaspaceAllocationParameters {
            flags: NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING
                | NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED,
            va_size: 0x1_FFFF_FB00_0000,
            big_page_size: 0x1_0000,
            va_base: 0x1000,
            pasid: 7,
            ..Default::default()
        };
        let b = p.as_bytes();
        assert_eq!(u32_at(b, 4), 0x48);
        assert_eq!(u64_at(b, 8), 0x1_FFFF_FB00_0000);
        assert_eq!(u32_at(b, 32), 0x1_0000);
        assert_eq!(u64_at(b, 40), 0x1000);
        assert_eq!(u32_at(b, 48), 7);
    }

    #[test]
    fn device_and_memory_params_put_their_u64s_after_the_padding() {
        let d = Nv0080AllocParameters {
            flags: 0x11,
            va_space_size: 0x22,
            va_mode: 0x33,
            ..Default::default()
        };
        let b = d.as_bytes();
        assert_eq!(u32_at(b, 16), 0x11);
        assert_eq!(u64_at(b, 24), 0x22);
        assert_eq!(u32_at(b, 48), 0x33);
        let m = NvMemoryAllocationParams {
            zcull_covg: 0x44,
            range_lo: 0x55,
            address: 0x66,
            numa_node: -1,
            ..Default::default()
        };
        let b = m.as_bytes();
        assert_eq!(u32_at(b, 40), 0x44);
        assert_eq!(u64_at(b, 48), 0x55);
        assert_eq!(u64_at(b, 96), 0x66);
        assert_eq!(u32_at(b, 120), u32::MAX);
    }
}
