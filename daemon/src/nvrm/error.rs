//! `NvrmError`: how a step of the RM path failed, and `CallError`, what one call of
//! the [`Rm`](super::Rm) trait answered.
//!
//! Most steps are one RM call; they share [`NvrmError::Call`], whose [`Step`]
//! names the step (and lets tests name the step they expect to fail), rather than
//! thirty variants of one shape. Failures that are not a call's have their own
//! variants.

use std::{fmt, io, path::PathBuf};

use crate::sys::{
    nvrm::{NvHandle, RmError},
    nvstatus::NvStatus,
};

use super::layout::LayoutError;

/// How a step of the RM path failed.
#[derive(Debug, thiserror::Error)]
pub enum NvrmError {
    #[error("failed to open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to allocate an RM root client")]
    AllocRoot(#[source] RmError),
    #[error("failed to read the RM's build version")]
    BuildVersion(#[source] RmError),
    #[error("failed to list the RM's GPUs")]
    CardInfo(#[source] RmError),
    #[error("failed to free RM root client {h_client:#x}")]
    FreeRoot {
        h_client: NvHandle,
        #[source]
        source: RmError,
    },
    #[error("the RM's driver version selects no layouts")]
    Layout(#[source] LayoutError),
    /// One RM call of the channel path failed.
    #[error("failed to {step}")]
    Call {
        step: Step,
        #[source]
        source: CallError,
    },
    /// GET_NVLINK_STATUS's params differ by release, and rigd has only 580's
    /// (`layout::topo`).
    #[error("rigd has no NVLink status layout for driver release {release}")]
    NoNvlinkLayout { release: super::layout::Release },
    #[error("the RM drives no GPU {}", bdf.as_deref().unwrap_or("at all"))]
    NoGpu { bdf: Option<String> },
    #[error("the GPU lacks the Hopper classes rig needs: {}", missing.join(", "))]
    MissingClasses { missing: Vec<String> },
    #[error("failed to make a sealed memfd of {len} bytes for GPU memory")]
    Memfd {
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error("failed to map a memfd of {len} bytes into rigd")]
    MapHost {
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error(
        "the RM counts rigd's client as privileged (status flags {flags:#x}): its channels would run privileged, so none are lent"
    )]
    Privileged { flags: u8 },
    #[error("no {len:#x} bytes of GPU VA are free in rigd's window")]
    VaExhausted { len: u64 },
    #[error("a memory of {len} bytes for a channel: it needs 1 byte to 256 GiB")]
    HostMemSize { len: u64 },
    #[error("a ring of {entries} entries: it needs a power of two from 2 to 2^31")]
    RingSize { entries: u64 },
    #[error(
        "the GPU still had entries to fetch {waited_ms} ms after channel {h_channel:#x} was \
         descheduled (GP_GET {get}, GP_PUT {put})"
    )]
    Drain {
        h_channel: NvHandle,
        get: u32,
        put: u32,
        waited_ms: u64,
    },
    #[error("failed to read the USERD of channel {h_channel:#x}")]
    Userd {
        h_channel: NvHandle,
        #[source]
        source: io::Error,
    },
}

impl NvrmError {
    /// The step, for a failed call.
    pub fn step(&self) -> Option<Step> {
        match self {
            Self::Call { step, .. } => Some(*step),
            _ => None,
        }
    }

    /// The RM's status, when it answered.
    pub fn status(&self) -> Option<NvStatus> {
        match self {
            Self::Call { source, .. } => source.status(),
            _ => None,
        }
    }

    /// Whether the RM answered that the GPU needs a reset (or is gone).
    pub fn gpu_lost(&self) -> bool {
        self.status().is_some_and(NvStatus::means_gpu_lost)
    }
}

/// What one call of the [`Rm`](super::Rm) trait answered.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Rm(#[from] RmError),
    #[error("failed to open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to map {what}")]
    Map {
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

impl CallError {
    /// The RM's status, when it answered.
    pub fn status(&self) -> Option<NvStatus> {
        match self {
            Self::Rm(e) => e.status(),
            Self::Open { .. } | Self::Map { .. } => None,
        }
    }
}

/// A step of the RM path, in the order `Gpu`, `AddressSpace`, `HostMem`, `ChannelGroup` and `Channel`
/// make them, then the teardown steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Cards,
    OpenDevice,
    IdInfo,
    AllocDevice,
    AllocSubdevice,
    ClassList,
    AllocUsermode,
    MapUsermode,
    GidInfo,
    AllocVaSpace,
    AllocVirtual,
    AllocOsDescriptor,
    AllocVidmem,
    MapWindow,
    MapDma,
    AllocGroup,
    AllocContextShare,
    AllocChannel,
    AllocEngine,
    PreemptionMode,
    Timeslice,
    WorkSubmitToken,
    Schedule,
    Doorbell,
    Unschedule,
    PrivilegedStatus,
    GrInfo,
    PerfBoost,
    RecoveryAction,
    CopyEngineCaps,
    NvlinkStatus,
    NvlinkCaps,
    P2pCaps,
    OpenEvents,
    AllocEvent,
    EventNotification,
    UnmapDma,
    Free,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cards => "list the RM's GPUs (NV_ESC_CARD_INFO)",
            Self::OpenDevice => "open and register the GPU's /dev/nvidiaN",
            Self::IdInfo => "read the GPU's device instance (GPU_GET_ID_INFO_V2)",
            Self::AllocDevice => "allocate the device (NV01_DEVICE_0)",
            Self::AllocSubdevice => "allocate the subdevice (NV20_SUBDEVICE_0)",
            Self::ClassList => "list the device's classes (GPU_GET_CLASSLIST)",
            Self::AllocUsermode => "allocate the usermode page (HOPPER_USERMODE_A)",
            Self::MapUsermode => "map the usermode page through a fresh /dev/nvidiaN",
            Self::GidInfo => "read the GPU's UUID (GPU_GET_GID_INFO)",
            Self::AllocVaSpace => "allocate the VA space (FERMI_VASPACE_A)",
            Self::AllocVirtual => "allocate the DMA object (NV01_MEMORY_VIRTUAL)",
            Self::AllocOsDescriptor => "register host memory (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)",
            Self::PrivilegedStatus => "read the client's privilege (SYSTEM_GET_PRIVILEGED_STATUS)",
            Self::GrInfo => "read the graphics engine's geometry (GR_GET_INFO)",
            Self::PerfBoost => "set the GPU's clock boost (PERF_BOOST)",
            Self::RecoveryAction => "read the GPU's recovery action (GPU_GET_RECOVERY_ACTION)",
            Self::CopyEngineCaps => "read the copy engines' caps (CE_GET_ALL_CAPS)",
            Self::AllocVidmem => "allocate GPU memory (NV01_MEMORY_LOCAL_USER)",
            Self::MapWindow => "map GPU memory for the CPU through BAR1 (NV_ESC_RM_MAP_MEMORY)",
            Self::MapDma => "map memory for the GPU (NV_ESC_RM_MAP_MEMORY_DMA)",
            Self::AllocGroup => "allocate the channel group (KEPLER_CHANNEL_GROUP_A)",
            Self::AllocContextShare => "allocate the subcontext (FERMI_CONTEXT_SHARE_A)",
            Self::AllocChannel => "allocate the channel (HOPPER_CHANNEL_GPFIFO_A)",
            Self::AllocEngine => "allocate the channel's engine object",
            Self::PreemptionMode => {
                "set the group's compute preemption (GR_SET_CTXSW_PREEMPTION_MODE)"
            }
            Self::Timeslice => "set the group's timeslice (SET_TIMESLICE)",
            Self::WorkSubmitToken => "read the channel's work submit token",
            Self::Schedule => "schedule the channel group (GPFIFO_SCHEDULE)",
            Self::Doorbell => "ring the doorbell",
            Self::Unschedule => "deschedule the channel group (GPFIFO_SCHEDULE off)",
            Self::NvlinkStatus => "read the GPU's NVLink status (NVLINK_GET_NVLINK_STATUS)",
            Self::NvlinkCaps => "read the GPU's NVLink caps (NVLINK_GET_NVLINK_CAPS)",
            Self::P2pCaps => "read the pair's P2P capabilities (SYSTEM_GET_P2P_CAPS_V2)",
            Self::OpenEvents => "open an event file and register it (NV_ESC_ALLOC_OS_EVENT)",
            Self::AllocEvent => "allocate the non-stall interrupt's event (NV01_EVENT_OS_EVENT)",
            Self::EventNotification => {
                "ask for the event on every interrupt (EVENT_SET_NOTIFICATION)"
            }
            Self::UnmapDma => "unmap host memory for the RM (NV_ESC_RM_UNMAP_MEMORY_DMA)",
            Self::Free => "free an RM object (NV_ESC_RM_FREE)",
        })
    }
}

/// Wraps a call's error as the failure of `step`.
pub(crate) fn at(step: Step) -> impl FnOnce(CallError) -> NvrmError {
    move |source| NvrmError::Call { step, source }
}
