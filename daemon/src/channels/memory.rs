//! A served GPU's GPU memory (`gpumem`), lent in each session's own address space:
//! `Served` finds the session's space and owner and hands the bookkeeping to its
//! [`Lender`](crate::gpumem::Lender). The order of a session's end is the ledger's:
//! its channels stop (`ChannelHost::end`), then its GPU memory goes
//! ([`GpuMemoryHost::end_gpu_memory`]), then its leases and, with them, its space.

use std::sync::Arc;

use rig_model::nv::ComputeGeometry;

use super::{Served, lock_client};
use crate::{
    dma::SessionId,
    gpumem::{
        GpuMemError, GpuMemId, GpuMemRequest, GpuMemTotals, GpuMemUse, GpuMemoryHost, LentGpuMem,
        Quota,
    },
    nvrm::Rm,
};

impl<R: Rm + 'static> GpuMemoryHost for Served<R> {
    fn alloc_gpu_memory(
        &self,
        session: SessionId,
        req: GpuMemRequest,
    ) -> Result<LentGpuMem, GpuMemError> {
        let shared = self.client(session).ok_or_else(|| GpuMemError::NoSpace {
            session,
            gpu: self.name.clone(),
        })?;
        let (peer, space) = {
            let c = lock_client(&shared);
            (c.peer, Arc::clone(&c.space))
        };
        self.memory.alloc(session, peer, &space, req)
    }

    fn free_gpu_memory(&self, session: SessionId, id: GpuMemId) -> Result<(), GpuMemError> {
        self.memory.free(session, id)
    }

    fn end_gpu_memory(&self, session: SessionId) -> usize {
        self.memory.end(session)
    }

    fn gpu_memory_status(&self, uid: Option<u32>) -> (Vec<GpuMemUse>, GpuMemTotals) {
        self.memory.status(uid)
    }

    fn gpu_memory_left(&self, uid: u32) -> u64 {
        self.memory.left_for(uid)
    }

    fn set_gpu_memory_quota(&self, quota: Quota) {
        self.memory.set_quota(quota);
    }

    fn geometry(&self) -> Option<ComputeGeometry> {
        self.gpu.geometry()
    }
}
