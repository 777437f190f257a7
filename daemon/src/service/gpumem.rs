//! GPU memory on the wire: the side socket's alloc and free requests (a CPU view's
//! reply carries the `/dev/nvidiaN` file that holds it), what a claim's reply says of
//! the session's GPU, and each session's and GPU's share of `Dma.Status`. The books are
//! `gpumem`'s; the side socket's framing is `dma::side`'s; the codes of the errors are
//! `status`'s.

use std::{os::fd::OwnedFd, sync::Arc};

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

/// Lends GPU memory (a spare page's map, or an allocation and a map, and a BAR1
/// mapping for a CPU view: RM calls, in place on this worker, `watchdog::in_place`).
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
    let lent = super::watchdog::in_place(
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

/// Takes GPU memory back: off the books here, with no RM call (the unmap and the free
/// are the lender's thread's, after this reply: `gpumem`).
pub fn free(
    rig: &Rig,
    session: SessionId,
    req: &pb::GpuMemFree,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    match rig.free_gpu_memory(session, GpuMemId(req.id)) {
        Ok(()) => (
            pb::SessionReply {
                body: Some(Reply::GpuMemFreed(pb::GpuMemFreed { id: req.id })),
            },
            Vec::new(),
        ),
        Err(e) => failure(&e),
    }
}

/// What a claim's reply says of the session's GPU: the layout of its address space
/// (every session's, `rig_model::addr::layout`), its quota and the GPU's geometry.
pub fn session_gpu(g: SessionGpu) -> pb::SessionGpu {
    pb::SessionGpu::from(&rig_model::nv::SessionGpu::in_layout(
        g.gpu_memory_left,
        g.geometry,
    ))
}

/// One GPU's line of `Dma.Status`.
pub fn totals(t: GpuMemTotals) -> rig_model::dma::GpuMemoryStatus {
    rig_model::dma::GpuMemoryStatus {
        gpu: t.gpu,
        lent_bytes: t.lent_bytes,
        kept_bytes: t.kept_bytes,
        spare_bytes: t.spare_bytes,
        per_uid_bytes: t.quota.per_uid_bytes,
        per_gpu_bytes: t.quota.per_gpu_bytes,
    }
}
