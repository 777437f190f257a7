//! GPU memory lent to DMA sessions on served GPUs (the books are `gpumem`'s, the GPU
//! and the session's address space `channels::Served`'s): who may have a CPU view, the
//! ledger's note ([`Kind::GpuMemory`], taken back after the channels and before the
//! address space), the report `rigctl dma` prints, and what a session is told of its
//! GPU when it claims.

use rig_model::nv::ComputeGeometry;

use super::{Kind, Rig, RigError};
use crate::{
    dma,
    gpumem::{GpuMemError, GpuMemId, GpuMemRequest, GpuMemTotals, GpuMemUse, LentGpuMem},
};

/// What a session on a served GPU is told when it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionGpu {
    /// The graphics engine's geometry, when the RM gave it.
    pub geometry: Option<ComputeGeometry>,
    /// The GPU memory its uid may still hold on the GPU.
    pub gpu_memory_left: u64,
}

impl Rig {
    /// Lends GPU memory to `session` on its GPU, in its own address space. A CPU view
    /// only for root and the members of `[channels] gpu_rings_group`, as rings in GPU
    /// memory (docs/channels.md): its mapping could outlive rigd.
    ///
    /// # Errors
    /// [`RigError::Channel`] (`NotServed`), [`RigError::GpuMemory`].
    pub fn alloc_gpu_memory(
        &self,
        session: dma::SessionId,
        req: GpuMemRequest,
    ) -> Result<LentGpuMem, RigError> {
        let host = self.served_host(session)?;
        if req.cpu_view {
            let (_, peer) = self.dma.session_peer(session)?;
            let policy = self.policy();
            if !policy.may_use_gpu_rings(peer) {
                return Err(GpuMemError::CpuViewRefused {
                    uid: peer.uid,
                    group: policy.gpu_rings_group().map(ToOwned::to_owned),
                }
                .into());
            }
        }
        // Noted before the RM calls: a session's end then takes back whatever they made.
        self.ledger.note(session, Kind::GpuMemory);
        Ok(host.alloc_gpu_memory(session, req)?)
    }

    /// Takes one of `session`'s GPU memory allocations back.
    ///
    /// # Errors
    /// [`RigError::Channel`] (`NotServed`), [`RigError::GpuMemory`] (`UnknownId`).
    pub fn free_gpu_memory(&self, session: dma::SessionId, id: GpuMemId) -> Result<(), RigError> {
        Ok(self.served_host(session)?.free_gpu_memory(session, id)?)
    }

    /// Unmaps and frees `session`'s GPU memory; returns how many allocations. Its
    /// channels are stopped before (`end_channels`), its address space goes after,
    /// with its last lease (`end_session`).
    pub(super) fn end_gpu_memory(&self, session: dma::SessionId) -> usize {
        match self.host_of(session) {
            Ok(Some(h)) => h.end_gpu_memory(session),
            _ => 0,
        }
    }

    /// Each session's GPU memory on every served GPU (only `uid`'s when given), and
    /// each GPU's totals.
    pub fn gpu_memory_status(&self, uid: Option<u32>) -> (Vec<GpuMemUse>, Vec<GpuMemTotals>) {
        let mut uses = Vec::new();
        let mut totals = Vec::new();
        for h in self.hosts() {
            let (u, t) = h.gpu_memory_status(uid);
            uses.extend(u);
            totals.push(t);
        }
        uses.sort_by_key(|u| u.session);
        totals.sort_by(|a, b| a.gpu.cmp(&b.gpu));
        (uses, totals)
    }

    /// What `session` is told of its GPU when it claims; `None` off a served GPU.
    pub fn session_gpu(&self, session: dma::SessionId) -> Option<SessionGpu> {
        let host = self.host_of(session).ok()??;
        let (_, peer) = self.dma.session_peer(session).ok()?;
        Some(SessionGpu {
            geometry: host.geometry(),
            gpu_memory_left: host.gpu_memory_left(peer.uid),
        })
    }
}
