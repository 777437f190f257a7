//! gRPC handlers: who is asking (peer credentials), proto ↔ internal, errors → `Status`.
//!
//! Flow: tonic → a handler here → `rig::Rig` (blocking sysfs work on the blocking pool)
//! → `convert` to proto. Proto types stop here. `run` takes a bound listener, so tests
//! start a real server on a temp socket and systemd can hand one over.
//!
//! State: an `Arc<Rig>`, shared by all requests. Every request runs in a span that
//! carries the peer's uid, gid and pid (SO_PEERCRED, read at accept time).

mod convert;
pub mod socket;
mod status;

use std::{future::Future, sync::Arc};

use rig_proto::v1::{
    self as pb,
    rig_server::{Rig as RigApi, RigServer},
};
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status, transport::server::UdsConnectInfo};
use tracing::Instrument;

use crate::rig::Rig;

/// Who sent a request, from the socket's peer credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
}

impl Peer {
    fn of<T>(req: &Request<T>) -> Option<Self> {
        let cred = req.extensions().get::<UdsConnectInfo>()?.peer_cred?;
        Some(Self {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: cred.pid(),
        })
    }
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("Failed to build the gRPC reflection service")]
    Reflection(#[source] tonic_reflection::server::Error),
    #[error("The gRPC server failed")]
    Serve(#[source] tonic::transport::Error),
}

/// Serves the API on `listener` until `shutdown` completes.
///
/// # Errors
/// [`ServiceError`] when the server cannot start or fails while serving.
pub async fn run(
    rig: Arc<Rig>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(ServiceError::Reflection)?;
    tonic::transport::Server::builder()
        .add_service(RigServer::new(Service { rig }))
        .add_service(reflection)
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await
        .map_err(ServiceError::Serve)
}

struct Service {
    rig: Arc<Rig>,
}

impl Service {
    /// Runs blocking work for one request on the blocking pool, inside its span.
    async fn blocking<T, R>(
        &self,
        method: &'static str,
        req: &Request<T>,
        work: impl FnOnce(&Rig) -> Result<R, Status> + Send + 'static,
    ) -> Result<R, Status>
    where
        R: Send + 'static,
    {
        let span = request_span(method, req);
        let rig = Arc::clone(&self.rig);
        let inner = span.clone();
        let joined = tokio::task::spawn_blocking(move || inner.in_scope(|| work(&rig)))
            .instrument(span.clone())
            .await;
        let result = joined.map_err(|e| Status::internal(format!("request task failed: {e}")))?;
        if let Err(status) = &result {
            // A client can cause errors at will: debug, not warn.
            span.in_scope(|| tracing::debug!(code = ?status.code(), message = status.message(), "request failed"));
        }
        result
    }
}

fn request_span<T>(method: &'static str, req: &Request<T>) -> tracing::Span {
    let peer = Peer::of(req);
    tracing::debug_span!(
        "request",
        method,
        uid = peer.map(|p| p.uid),
        gid = peer.map(|p| p.gid),
        pid = peer.and_then(|p| p.pid),
    )
}

#[tonic::async_trait]
impl RigApi for Service {
    async fn version(
        &self,
        req: Request<pb::VersionRequest>,
    ) -> Result<Response<pb::VersionReply>, Status> {
        let _span = request_span("Version", &req).entered();
        Ok(Response::new(pb::VersionReply {
            daemon_version: env!("CARGO_PKG_VERSION").to_owned(),
            api_version: rig_proto::API_VERSION,
            sysfs_root: self.rig.sysfs().path().display().to_string(),
        }))
    }

    async fn list_devices(
        &self,
        req: Request<pb::ListDevicesRequest>,
    ) -> Result<Response<pb::ListDevicesReply>, Status> {
        let gpus_only = req.get_ref().gpus_only;
        let reply = self
            .blocking("ListDevices", &req, move |rig| {
                let listing = rig.list(gpus_only).map_err(|e| status::from_rig(&e))?;
                Ok(pb::ListDevicesReply {
                    devices: listing.devices.iter().map(convert::device).collect(),
                    problems: listing.problems,
                })
            })
            .await?;
        Ok(Response::new(reply))
    }

    async fn get_device(
        &self,
        req: Request<pb::GetDeviceRequest>,
    ) -> Result<Response<pb::Device>, Status> {
        let bdf = req.get_ref().bdf.clone();
        let reply = self
            .blocking("GetDevice", &req, move |rig| {
                let dev = rig.device(&bdf).map_err(|e| status::from_rig(&e))?;
                Ok(convert::device(&dev))
            })
            .await?;
        Ok(Response::new(reply))
    }
}
