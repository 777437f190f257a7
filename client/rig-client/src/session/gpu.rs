//! What a session on an RM-served GPU learns of its GPU when it claims
//! (`SessionClaimed.gpu`, proto/rig/v1/gpumem.proto): the layout of its own GPU address
//! space (the range its GPU memory is lent in, the compute windows rigd maps nothing
//! in), what its uid may still hold there, and the graphics engine's geometry. A
//! runtime programs its windows and sizes local memory from it; `gpumem` lends in its
//! pages.

use std::ops::Range;

use rig_model::{addr::GpuVa, nv::ComputeGeometry};
use rig_proto::v1 as pb;
use serde::{Deserialize, Serialize};

/// The session's GPU, as rigd described it at the claim.
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
    pub(super) fn from_wire(g: pb::SessionGpu) -> Self {
        Self {
            page_bytes: g.page_bytes,
            gpu_memory: GpuVa(g.gpu_memory_base)..GpuVa(g.gpu_memory_end),
            gpu_memory_quota_bytes: g.gpu_memory_quota_bytes,
            shared_window: GpuVa(g.shared_window),
            shared_window_bytes: g.shared_window_bytes,
            local_window: GpuVa(g.local_window),
            local_window_bytes: g.local_window_bytes,
            geometry: g.geometry.map(|c| ComputeGeometry {
                sm_version: c.sm_version,
                gpcs: c.gpcs,
                max_tpcs_per_gpc: c.max_tpcs_per_gpc,
                sms_per_tpc: c.sms_per_tpc,
                tpcs: c.tpcs,
                max_warps_per_sm: c.max_warps_per_sm,
            }),
            va_end: GpuVa(g.va_end),
        }
    }
}
