//! `rig.v1.Queues`: the gRPC listing of lent queues (`rigctl queues`). Lending itself
//! travels on the DMA side socket (`service::dma::queue`). Root sees every queue, any
//! other uid its own.

use std::{sync::Arc, time::UNIX_EPOCH};

use rig_proto::v1::{self as pb, queues_server::QueuesServer};
use tonic::{Request, Response, Status};

use super::{peer_cred, request_span};
use crate::{queue::State, rig::Rig};

/// The gRPC handlers.
#[derive(Debug, Clone)]
pub struct Api {
    rig: Arc<Rig>,
}

/// The service to add to the router.
pub fn service(rig: Arc<Rig>) -> QueuesServer<Api> {
    QueuesServer::new(Api { rig })
}

#[tonic::async_trait]
impl pb::queues_server::Queues for Api {
    async fn status(
        &self,
        req: Request<pb::QueueStatusRequest>,
    ) -> Result<Response<pb::QueueStatusReply>, Status> {
        let span = request_span("Queues.Status", &req);
        let _entered = span.enter();
        let uid = peer_cred(&req)
            .map(|p| p.uid)
            .ok_or_else(super::no_peer_credentials)?;
        let queues = self
            .rig
            .queue_status()
            .into_iter()
            .filter(|v| uid == 0 || v.status.owner.uid == uid)
            .map(|v| {
                let q = v.status;
                let (sq_tail, cq_head) = v.shadow.unwrap_or_default();
                pb::QueueInfo {
                    device: q.bdf.to_string(),
                    qid: q.qid.into(),
                    session: q.owner.session.0,
                    uid: q.owner.uid,
                    pid: q.owner.pid,
                    depth: q.depth,
                    entries: q.entries,
                    sq_address: q.rings.sq,
                    cq_address: q.rings.cq,
                    sq_doorbell: q.doorbells.sq_tail,
                    page_isolated: q.page_isolated,
                    stuck: q.state == State::Stuck,
                    since_unix_s: q
                        .since
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                    sq_tail,
                    cq_head,
                    interrupts: q.vector.is_some(),
                }
            })
            .collect();
        Ok(Response::new(pb::QueueStatusReply { queues }))
    }
}
