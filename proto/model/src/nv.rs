//! The NVIDIA channel vocabulary that rigd and its clients share: the engine a lent
//! channel drives ([`Engine`]), where its rings live ([`Rings`]), and
//! what the RM writes into its error notifier ([`ChannelFault`]), whose `info32` is one
//! of the `ROBUST_CHANNEL_*` codes of `src/common/sdk/nvidia/inc/nverror.h`
//! (open-gpu-kernel-modules 580), the same numbers the kernel log calls Xids
//! ([`robust_channel_reason`]).
//!
//! Flow: a client asks for an engine and rings (`rig-client`'s `channel`) →
//! `rig-proto` (`convert::nv`, once each way) → rigd's `channels`, whose `nvrm`
//! allocates the engine's class and reads the notifier; `rigctl channels` prints them.
//! One module because each was spelled in rigd's `nvrm`/`channels`, again in
//! rig-client's `channel` and a third time on the wire. Not here: an engine's class id
//! (`rig_nv::Generation::class`), the RM's objects and calls (rigd's `nvrm`), methods
//! and pushbuffers (rig-nv).
//!
//! Beside them, the compute geometry rigd reads once per GPU ([`ComputeGeometry`]) and
//! what a session on a served GPU is told of it when it claims ([`SessionGpu`]: the
//! layout of its GPU address space, its GPU-memory quota, the geometry), and the words
//! of a page shared between sessions as an event ([`shared_event`]).

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::addr::{GpuVa, layout};

/// The engine a lent channel drives (its class is the GPU generation's:
/// `rig_nv::Generation::class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// The copy engine: copies and fills.
    Copy,
    /// The compute engine: kernel launches.
    Compute,
}

/// Where a lent channel's ring, USERD and pushbuffer live (docs/channels.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rings {
    /// Host memory: ring and USERD in a sealed memfd rigd pins, the pushbuffer in the
    /// client's own leases; the least host time per submission.
    #[default]
    Host,
    /// GPU memory the client writes through BAR1 (write-combined), in one window rigd
    /// allocates: the shortest round trip. rigd lends it to root and the members of
    /// its `[channels] gpu_rings_group` only.
    Gpu,
}

/// What the RM wrote into a channel's error notifier (`NvNotification`, `nvos.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChannelFault {
    /// `timeStamp`, ns.
    pub time_ns: u64,
    /// `info32`: a ROBUST_CHANNEL_* code (31: MMU fault; 32: PBDMA error).
    pub info32: u32,
    pub info16: u16,
    pub status: u16,
}

/// The GSP's code for a context switch that timed out (Xid 109): a block that ran on
/// beside another context's work past the RM's switch timeout, ended by the RM
/// (docs/hardware/nvidia-channels.md, "Compute preemption").
pub const CTX_SWITCH_TIMEOUT: u32 = 109;

impl ChannelFault {
    /// Whether the RM ended the channel's work because its context could not be
    /// switched out in time ([`CTX_SWITCH_TIMEOUT`]).
    pub const fn is_switch_timeout(&self) -> bool {
        self.info32 == CTX_SWITCH_TIMEOUT
    }

    /// The code's name and meaning (`nverror.h`).
    pub fn reason(&self) -> &'static str {
        robust_channel_reason(self.info32)
    }
}

/// The graphics engine's shape, as `NV2080_CTRL_CMD_GR_GET_INFO` gives it
/// (`ctrl/ctrl2080/ctrl2080gr.h`): what a runtime sizes local memory by
/// (docs/hardware/nvidia-compute.md, "Once per channel").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ComputeGeometry {
    /// `SM_VERSION`: major in 15:8, minor in 7:0 (GH100: 0x900, sm_90).
    pub sm_version: u32,
    /// `LITTER_NUM_GPCS`: the chip's GPCs.
    pub gpcs: u32,
    /// `LITTER_NUM_TPC_PER_GPC`: the most TPCs a GPC has.
    pub max_tpcs_per_gpc: u32,
    /// `LITTER_NUM_SM_PER_TPC`.
    pub sms_per_tpc: u32,
    /// `SHADER_PIPE_SUB_COUNT`: the TPCs enabled on this part.
    pub tpcs: u32,
    /// `MAX_WARPS_PER_SM`.
    pub max_warps_per_sm: u32,
}

impl ComputeGeometry {
    /// The SMs enabled on this part: enabled TPCs × SMs per TPC.
    pub const fn sms(&self) -> u32 {
        self.tpcs.saturating_mul(self.sms_per_tpc)
    }

    /// The most TPCs the chip can have (GPCs × TPCs per GPC): what local memory is
    /// sized for, so that any TPC finds its slice.
    pub const fn max_tpcs(&self) -> u32 {
        self.gpcs.saturating_mul(self.max_tpcs_per_gpc)
    }
}

/// What a session on an RM-served GPU learns of its GPU when it claims: the layout of
/// its own GPU address space (the range its GPU memory is lent in, the compute windows
/// nothing is mapped in), what its uid may still hold there, and the graphics engine's
/// geometry. A runtime programs its windows and sizes local memory from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionGpu {
    /// GPU memory is lent in pages of this size (2 MiB), at VAs aligned to it.
    pub page_bytes: u64,
    /// Where the session's GPU memory lies in its address space.
    pub gpu_memory: Range<GpuVa>,
    /// What the session's uid could still hold on the GPU at the claim.
    pub gpu_memory_quota_bytes: u64,
    /// The compute shared-memory window (4 GiB), never mapped.
    pub shared_window: GpuVa,
    pub shared_window_bytes: u64,
    /// The compute local-memory window (16 MiB), never mapped.
    pub local_window: GpuVa,
    pub local_window_bytes: u64,
    /// The graphics engine's geometry; `None` when the RM would not tell rigd.
    pub geometry: Option<ComputeGeometry>,
    /// Nothing the session reaches lies at or above it (2^40).
    pub va_end: GpuVa,
}

impl SessionGpu {
    /// The session's GPU as rigd lays out every session's space ([`layout`]), with
    /// what its uid may still hold and the GPU's geometry.
    pub const fn in_layout(gpu_memory_quota_bytes: u64, geometry: Option<ComputeGeometry>) -> Self {
        Self {
            page_bytes: layout::GPU_PAGE,
            gpu_memory: layout::GPU_MEMORY_BASE..layout::VA_END,
            gpu_memory_quota_bytes,
            shared_window: layout::SHARED_WINDOW,
            shared_window_bytes: layout::SHARED_WINDOW_BYTES,
            local_window: layout::LOCAL_WINDOW,
            local_window_bytes: layout::LOCAL_WINDOW_BYTES,
            geometry,
            va_end: layout::VA_END,
        }
    }
}

/// The code's name and what it means, for the codes a lent channel can end with.
pub fn robust_channel_reason(info32: u32) -> &'static str {
    match info32 {
        8 => "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT (the channel stopped making progress)",
        13 => "ROBUST_CHANNEL_GR_EXCEPTION (the compute engine raised an exception)",
        14 => "ROBUST_CHANNEL_FAKE_ERROR (an error injected on purpose)",
        31 => {
            "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (an MMU fault: an address not mapped in the channel's GPU address space)"
        }
        32 => {
            "ROBUST_CHANNEL_PBDMA_ERROR (the pushbuffer or ring held something the channel cannot run)"
        }
        39..=41 => "ROBUST_CHANNEL_CEn_ERROR (the copy engine raised an error)",
        43 => "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR (the channel was reset)",
        44 => "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW (a fault while switching contexts)",
        45 => {
            "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL (the channel was removed, e.g. when another channel of its group faulted)"
        }
        46 => "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR (the GPU timed out)",
        48 => "ROBUST_CHANNEL_GPU_ECC_DBE (an uncorrectable ECC error)",
        79 => "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        94 => "ROBUST_CHANNEL_CONTAINED_ERROR (a contained memory error)",
        95 => "ROBUST_CHANNEL_UNCONTAINED_ERROR (an uncontained memory error)",
        // Not in nverror.h: the GSP's own code, the kernel log's words for its Xid.
        CTX_SWITCH_TIMEOUT => {
            "CTX SWITCH TIMEOUT (Xid 109: the engine could not switch the channel's context out in time; a block that runs for seconds beside another session's work is ended so)"
        }
        _ => "a ROBUST_CHANNEL code rig does not name (see nverror.h)",
    }
}

/// The page rigd shares between sessions of one uid as an event (proto/rig/v1/
/// event.proto, docs/compute.md "Events shared between sessions"): byte offsets of
/// its little-endian u64 words, and what `state` holds. rigd writes `reached`,
/// `state` and the poisoned `value` when the exporter ends; the exporter writes
/// `value` (its GPU) and `target` (its CPU); importers only read.
pub mod shared_event {
    /// The page's length: one 4 KiB page.
    pub const BYTES: u64 = 4096;
    /// The value the exporter's channels release (64 bits), and after it the GPU's
    /// timestamp of the release (a host semaphore release with its time: 16 bytes).
    pub const VALUE: u64 = 0;
    /// The release's GPU timestamp, in nanoseconds.
    pub const TIME: u64 = 8;
    /// The last value the exporter recorded: what an importer's wait is for.
    pub const TARGET: u64 = 16;
    /// [`LIVE`] while the exporter has the event; [`GONE`] once it ended or closed it.
    pub const STATE: u64 = 24;
    /// The value its work had released when the exporter ended.
    pub const REACHED: u64 = 32;
    /// `state` while the exporter lives.
    pub const LIVE: u64 = 0;
    /// `state` once the exporter ended: `reached` says how far its work got.
    pub const GONE: u64 = 1;
    /// How far past `max(value, target)` rigd sets `value` at the exporter's end, so
    /// every 64-bit circular acquire of a value near it passes: 2^62.
    pub const POISON_AHEAD: u64 = 1 << 62;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_geometry_counts_enabled_sms_and_the_chips_tpcs() {
        let h200 = ComputeGeometry {
            sm_version: 0x900,
            gpcs: 8,
            max_tpcs_per_gpc: 9,
            sms_per_tpc: 2,
            tpcs: 66,
            max_warps_per_sm: 64,
        };
        assert_eq!(h200.sms(), 132);
        assert_eq!(h200.max_tpcs(), 72);
        assert_eq!(ComputeGeometry::default().sms(), 0);
    }

    #[test]
    fn an_mmu_fault_is_named_and_unknown_codes_point_at_the_header() {
        assert!(robust_channel_reason(31).starts_with("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT"));
        assert!(robust_channel_reason(40).contains("copy engine"));
        assert!(robust_channel_reason(12345).contains("nverror.h"));
    }

    #[test]
    fn a_fault_names_its_reason() {
        let f = ChannelFault {
            time_ns: 1,
            info32: 31,
            info16: 0,
            status: 0,
        };
        assert!(f.reason().contains("MMU"));
    }
}
