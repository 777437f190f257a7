//! GPU memory on the wire: the side socket's alloc and free requests (a CPU view's
//! reply carries the `/dev/nvidiaN` file that holds it), what a claim's reply says of
//! the session's GPU, and each session's and GPU's share of `Dma.Status`. The books are
//! `gpumem`'s; the side socket's framing is `dma::side`'s; the codes of the errors are
//! `status`'s.

use std::{os::fd::OwnedFd, sync::Arc};

use rig_model::addr::layout;
use rig_proto::v1::{self as pb, session_reply::Body as Reply};

use super::status::{self, error_line};
use crate::{
    dma::SessionId,
    error::Classify,
    gpumem::{GpuMemId, GpuMemRequest, GpuMemTotals},
    rig::{Rig, RigError, SessionGpu},
};

fn failure(e: &RigError) -> (pb::SessionReply, Vec<OwnedFd>) {
    let body = Reply::Error(pb::SessionError {
        code: status::dma_code(e.class().reason).into(),
        message: error_line(e),
    });
    (pb::SessionReply { body: Some(body) }, Vec::new())
}

/// Lends GPU memory (an allocation and a map, and a BAR1 mapping for a CPU view: on a
/// blocking thread).
pub async fn alloc(
    rig: &Arc<Rig>,
    session: SessionId,
    req: pb::GpuMemAlloc,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let ask = GpuMemRequest {
        bytes: req.bytes,
        cpu_view: req.cpu_view,
    };
    let rig = Arc::clone(rig);
    let lent = super::watchdog::off_runtime(
        "side.gpu_mem_alloc",
        super::watchdog::SIDE_LIMIT,
        move || rig.alloc_gpu_memory(session, ask),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match lent {
        Ok(m) => {
            let body = Reply::GpuMemAllocated(pb::GpuMemAllocated {
                id: m.id.0,
                gpu_va: m.gpu_va.get(),
                bytes: m.bytes,
                cpu_view: m.cpu_view.is_some(),
            });
            (
                pb::SessionReply { body: Some(body) },
                m.cpu_view.into_iter().collect(),
            )
        }
        Err(e) => failure(&e),
    }
}

/// Takes GPU memory back (an unmap and a free: on a blocking thread).
pub async fn free(
    rig: &Arc<Rig>,
    session: SessionId,
    req: pb::GpuMemFree,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let id = GpuMemId(req.id);
    let freed = super::watchdog::off_runtime(
        "side.gpu_mem_free",
        super::watchdog::SIDE_LIMIT,
        move || rig.free_gpu_memory(session, id),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match freed {
        Ok(()) => (
            pb::SessionReply {
                body: Some(Reply::GpuMemFreed(pb::GpuMemFreed { id: req.id })),
            },
            Vec::new(),
        ),
        Err(e) => failure(&e),
    }
}

/// What a claim's reply says of the session's GPU: the layout of its address space,
/// its quota and the GPU's geometry.
pub fn session_gpu(g: SessionGpu) -> pb::SessionGpu {
    pb::SessionGpu {
        page_bytes: layout::GPU_PAGE,
        gpu_memory_base: layout::GPU_MEMORY_BASE.get(),
        gpu_memory_end: layout::VA_END.get(),
        gpu_memory_quota_bytes: g.gpu_memory_left,
        shared_window: layout::SHARED_WINDOW.get(),
        shared_window_bytes: layout::SHARED_WINDOW_BYTES,
        local_window: layout::LOCAL_WINDOW.get(),
        local_window_bytes: layout::LOCAL_WINDOW_BYTES,
        geometry: g.geometry.map(|c| pb::GpuComputeGeometry {
            sm_version: c.sm_version,
            gpcs: c.gpcs,
            max_tpcs_per_gpc: c.max_tpcs_per_gpc,
            sms_per_tpc: c.sms_per_tpc,
            tpcs: c.tpcs,
            max_warps_per_sm: c.max_warps_per_sm,
        }),
        va_end: layout::VA_END.get(),
    }
}

/// One GPU's line of `Dma.Status`.
pub fn totals(t: GpuMemTotals) -> rig_model::dma::GpuMemoryStatus {
    rig_model::dma::GpuMemoryStatus {
        gpu: t.gpu,
        lent_bytes: t.lent_bytes,
        kept_bytes: t.kept_bytes,
        per_uid_bytes: t.quota.per_uid_bytes,
        per_gpu_bytes: t.quota.per_gpu_bytes,
    }
}
