//! `rig.v1.Topo`: the host's peer topology (`rigctl topo`), for any client. The work
//! (sysfs and a few RM calls per GPU, `rig::topo`) runs on a blocking thread.

use std::sync::Arc;

use rig_proto::v1::{self as pb, topo_server::TopoServer};
use tonic::{Request, Response, Status};

use super::{internal, request_span, status};
use crate::rig::Rig;

/// The gRPC handlers.
#[derive(Debug, Clone)]
pub struct Api {
    rig: Arc<Rig>,
}

/// The service to add to the router.
pub fn service(rig: Arc<Rig>) -> TopoServer<Api> {
    TopoServer::new(Api { rig })
}

#[tonic::async_trait]
impl pb::topo_server::Topo for Api {
    async fn get(
        &self,
        req: Request<pb::TopologyRequest>,
    ) -> Result<Response<pb::TopologyReply>, Status> {
        let span = request_span("Topo.Get", &req);
        let rig = Arc::clone(&self.rig);
        let found = tokio::task::spawn_blocking(move || span.in_scope(|| rig.topology()))
            .await
            .map_err(|e| internal(format!("request task failed: {e}")))?
            .map_err(|e| status::from_error(&e))?;
        // What could not be read becomes its lines here, at the edge.
        let topology = found.into_topology(|e| status::error_line(e));
        Ok(Response::new(pb::TopologyReply::from(&topology)))
    }
}
