//! gRPC handlers: who is asking (peer credentials), proto ↔ internal, errors → `Status`.
//!
//! Flow: tonic → a handler here → `rig::Rig` (blocking sysfs work on the blocking pool)
//! → `convert` to proto. Proto types stop here. `run` takes a bound listener, so tests
//! start a real server on a temp socket and systemd can hand one over.
//!
//! Who may call what is decided before any handler, by `gate` (a layer on the whole
//! server, asking `policy`); a privileged call's handler finishes the audit line the
//! gate opened (`audit::Pending`) with its device and outcome.
//!
//! State: an `Arc<Rig>`, shared by all requests. Every request runs in a span that
//! carries the peer's uid, gid and pid (SO_PEERCRED, read at accept time with its
//! SO_PEERGROUPS: `peer`).

mod channels;
mod convert;
pub mod dma;
mod events;
pub mod gate;
mod gpumem;
pub mod metrics;
pub mod peer;
mod queue;
pub mod socket;
pub mod status;
mod take;
mod topo;
pub mod watchdog;

use std::{future::Future, sync::Arc};

use rig_proto::v1::{
    self as pb,
    rig_server::{Rig as RigApi, RigServer},
};
use rig_sys::scm::PeerCred;
use tokio::net::UnixListener;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::{
    error::Reason,
    rig::{RequestError, Rig, RigError},
};
use watchdog::Health;

/// Who sent a request: its connection's peer credentials, read at accept time
/// (`peer`). `None` without them (tokio reads `SO_PEERCRED` on Linux, which always has
/// the pid).
fn peer_cred<T>(req: &Request<T>) -> Option<PeerCred> {
    peer::Peer::of(req.extensions())?.cred
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("Failed to build the gRPC reflection service")]
    Reflection(#[source] tonic_reflection::server::Error),
    #[error("The gRPC server failed")]
    Serve(#[source] tonic::transport::Error),
    #[error("Failed to start the DMA pools")]
    DmaPools(#[source] crate::dma::DmaError),
    #[error("Failed to set up the DMA side socket {path}")]
    SideSocket {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
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
    serve(rig, listener, shutdown, &Health::new()).await
}

/// As [`run`], registering each request's blocking work with `health` (which
/// systemd's watchdog reads: `watchdog`).
///
/// # Errors
/// [`ServiceError`] when the server cannot start or fails while serving.
pub async fn serve(
    rig: Arc<Rig>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
    health: &Health,
) -> Result<(), ServiceError> {
    serve_with(rig, listener, shutdown, health, true).await
}

/// As [`run`] without the gate (no role check, audit line or RPC metric): the
/// "before" of client/rig-client/benches/gate.rs, which measures what the gate costs.
/// Never in the shipped rigd (feature `fakes`).
///
/// # Errors
/// As [`run`].
#[cfg(feature = "fakes")]
#[doc(hidden)]
pub async fn run_ungated(
    rig: Arc<Rig>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    serve_with(rig, listener, shutdown, &Health::new(), false).await
}

async fn serve_with(
    rig: Arc<Rig>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
    health: &Health,
    gated: bool,
) -> Result<(), ServiceError> {
    // Reflection in both versions: grpcurl and grpcio-reflection ask v1 first, older
    // tools (and grpcio-reflection's v1alpha module, still the documented one) ask only
    // v1alpha.
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(ServiceError::Reflection)?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(ServiceError::Reflection)?;
    // DMA: host pools, the side socket beside `listener`, and the `rig.v1.Dma` service.
    let dma = dma::Dma::start(&rig, &listener, health)?;
    // tonic's graceful shutdown waits for every connection to close, and an idle client
    // may never close its own: after the signal, in-flight requests get GRACE, then the
    // server stops regardless.
    let (stopping_tx, mut stopping) = tokio::sync::watch::channel(false);
    let signal = async move {
        shutdown.await;
        let _ = stopping_tx.send(true);
    };
    let serve = tonic::transport::Server::builder()
        .layer(tower::util::option_layer(
            gated.then(|| gate::GateLayer::new(Arc::clone(&rig))),
        ))
        .add_service(queue::service(Arc::clone(&rig)))
        .add_service(topo::service(Arc::clone(&rig)))
        .add_service(RigServer::new(Service {
            rig,
            health: health.clone(),
        }))
        .add_service(dma.service())
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(peer::Incoming::new(listener), dma.until(signal));
    tokio::select! {
        served = serve => served.map_err(ServiceError::Serve),
        () = async {
            let _ = stopping.wait_for(|s| *s).await;
            tokio::time::sleep(GRACE).await;
        } => {
            tracing::warn!("connections still open {} s after the stop signal; stopping anyway", GRACE.as_secs());
            Ok(())
        }
    }
}

/// How long a stopping rigd waits for open connections.
// TIMEOUT: requests are short (a take-over step is bounded by its unbind timeout, 10 s
// by default, and is not cancelled by this); 5 s lets replies in flight finish.
const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

struct Service {
    rig: Arc<Rig>,
    health: Health,
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
        let working = self.health.begin(method, watchdog::READ_LIMIT);
        let joined = tokio::task::spawn_blocking(move || {
            let _working = working;
            inner.in_scope(|| work(&rig))
        })
        .instrument(span.clone())
        .await;
        let result = joined.map_err(|e| internal(format!("request task failed: {e}")))?;
        if let Err(status) = &result {
            // A client can cause errors at will: debug, not warn.
            span.in_scope(|| tracing::debug!(code = ?status.code(), message = status.message(), "request failed"));
        }
        result
    }
}

/// The refusal of a request whose connection has no peer credentials (SO_PEERCRED).
fn no_peer_credentials() -> Status {
    status::plain(
        Reason::NoPeerCredentials,
        "no peer credentials (uid and pid from SO_PEERCRED) on this connection",
    )
}

/// A failure of rigd itself (a request's task panicked).
fn internal(message: String) -> Status {
    status::plain(Reason::Internal, message)
}

/// Completes once `rx` holds `true` (or its sender is gone).
async fn until_true(rx: &mut tokio::sync::watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: drop it here, not in a `select!`.
    let _ = rx.wait_for(|v| *v).await;
}

impl Service {
    /// As `blocking`, for a privileged request (the gate checked its role): the work's
    /// outcome and `device` finish the audit line the gate opened.
    async fn admin<T, R>(
        &self,
        method: &'static str,
        req: &Request<T>,
        device: &str,
        work: impl FnOnce(&Rig) -> Result<R, RigError> + Send + 'static,
    ) -> Result<R, Status>
    where
        R: Send + 'static,
    {
        gate::audit_device(req, device);
        let audit = gate::pending(req);
        self.blocking(method, req, move |rig| {
            let result = work(rig).map_err(|e| status::from_error(&e));
            if let Some(a) = audit {
                a.finish(audit_outcome(result.as_ref().err()));
            }
            result
        })
        .await
    }
}

/// An audit outcome from a request's result.
fn audit_outcome(err: Option<&Status>) -> crate::audit::Outcome {
    match err {
        None => crate::audit::Outcome::Ok,
        Some(s) => {
            let reason = tonic_types::StatusExt::get_details_error_info(s)
                .map(|i| i.reason)
                .unwrap_or_default();
            let message = s.message().to_owned();
            if s.code() == tonic::Code::PermissionDenied {
                crate::audit::Outcome::Denied { reason, message }
            } else {
                crate::audit::Outcome::Failed { reason, message }
            }
        }
    }
}

fn request_span<T>(method: &'static str, req: &Request<T>) -> tracing::Span {
    let peer = peer_cred(req);
    tracing::debug_span!(
        "request",
        method,
        uid = peer.map(|p| p.uid),
        gid = peer.map(|p| p.gid),
        pid = peer.map(|p| p.pid),
    )
}

#[tonic::async_trait]
impl RigApi for Service {
    type DetachStream = take::ProgressStream;
    type AttachStream = take::ProgressStream;
    type ResetStream = take::ProgressStream;
    type ResizeStream = take::ProgressStream;

    async fn detach(
        &self,
        req: Request<pb::DetachRequest>,
    ) -> Result<Response<Self::DetachStream>, Status> {
        let r = req.get_ref().clone();
        gate::audit_device(&req, &r.bdf);
        let limit = self
            .health
            .take_limit(std::time::Duration::from_secs(r.timeout_s.into()));
        take::stream(
            &self.rig,
            (&self.health, limit),
            "Detach",
            &req,
            move |rig, progress| {
                let opts = take::detach_options(&r)?;
                let v = rig.detach(&r.bdf, opts, progress)?;
                let mut warnings = v.overrode.clone();
                warnings.extend(v.no_pool.as_ref().map(|e| {
                    format!(
                        "no DMA pool for {}: {}",
                        v.bdf,
                        status::error_line(e.as_ref())
                    )
                }));
                warnings.extend(v.resize.as_ref().and_then(|r| r.small_bar.clone()));
                Ok(pb::Outcome {
                    resize: v.resize.as_ref().map(pb::ResizeOutcome::from),
                    summary: format!(
                        "{} held in {} mode (was {})",
                        v.bdf,
                        v.mode.map(|m| m.to_string()).unwrap_or_default(),
                        v.original_driver.as_deref().unwrap_or("driverless")
                    ),
                    warnings,
                    device: Some(take::held(&v)),
                    ..pb::Outcome::default()
                })
            },
        )
    }

    async fn attach(
        &self,
        req: Request<pb::AttachRequest>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let bdf = req.get_ref().bdf.clone();
        gate::audit_device(&req, &bdf);
        take::stream(
            &self.rig,
            (
                &self.health,
                self.health.take_limit(std::time::Duration::ZERO),
            ),
            "Attach",
            &req,
            move |rig, progress| {
                let r = rig.attach(&bdf, progress)?;
                Ok(pb::Outcome {
                    summary: format!(
                        "{bdf} is back with {}",
                        r.driver.as_deref().unwrap_or("no driver (it had none)")
                    ),
                    warnings: r.warnings.iter().map(|w| status::error_line(w)).collect(),
                    reset_method: r.reset.unwrap_or_default(),
                    driver: r.driver.unwrap_or_default(),
                    ..pb::Outcome::default()
                })
            },
        )
    }

    async fn reset(
        &self,
        req: Request<pb::ResetRequest>,
    ) -> Result<Response<Self::ResetStream>, Status> {
        let r = req.get_ref().clone();
        gate::audit_device(&req, &r.bdf);
        take::stream(
            &self.rig,
            (
                &self.health,
                self.health.take_limit(std::time::Duration::ZERO),
            ),
            "Reset",
            &req,
            move |rig, progress| {
                let method = take::reset_method(&r)?;
                let rep = rig.reset(&r.bdf, method, progress)?;
                Ok(pb::Outcome {
                summary: format!("{} reset by {} in {:.3} s", r.bdf, rep.method, rep.seconds),
                warnings: rep
                    .restored
                    .iter()
                    .map(|o| {
                        format!(
                            "config offset {o:#04x} did not survive the reset; rig wrote it back"
                        )
                    })
                    .collect(),
                reset_method: rep.method,
                reset_seconds: rep.seconds,
                ..pb::Outcome::default()
            })
            },
        )
    }

    async fn resize(
        &self,
        req: Request<pb::ResizeRequest>,
    ) -> Result<Response<Self::ResizeStream>, Status> {
        let r = req.get_ref().clone();
        gate::audit_device(&req, &r.bdf);
        take::stream(
            &self.rig,
            (
                &self.health,
                self.health.take_limit(std::time::Duration::ZERO),
            ),
            "Resize",
            &req,
            move |rig, progress| {
                let size = take::resize_size(&r)?;
                let bar = u8::try_from(r.bar)
                    .map_err(|_| RigError::from(RequestError::NoSuchBar { bar: r.bar }))?;
                let (rep, v) = rig.resize(&r.bdf, bar, size, progress)?;
                Ok(pb::Outcome {
                    summary: format!(
                        "{} BAR{}: {} → {}",
                        r.bdf,
                        rep.bar,
                        crate::take::resize::human(rep.before),
                        crate::take::resize::human(rep.after)
                    ),
                    warnings: rep.small_bar.clone().into_iter().collect(),
                    device: Some(take::held(&v)),
                    resize: Some(pb::ResizeOutcome::from(&rep)),
                    ..pb::Outcome::default()
                })
            },
        )
    }

    async fn status(
        &self,
        req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        let (views, recovered, stuck, outlived, served) = self
            .blocking("Status", &req, |rig| {
                let (views, recovered) = rig.status();
                Ok((
                    views,
                    recovered,
                    rig.stuck_unbinds(),
                    rig.outlived(),
                    rig.served_gpus(),
                ))
            })
            .await?;
        Ok(Response::new(pb::StatusReply {
            devices: views.iter().map(take::held).collect(),
            // A device left waiting at the start says where it is now.
            recovered: recovered
                .iter()
                .map(|r| match r {
                    crate::take::Recovered::Waiting { bdf, .. } => outlived.get(bdf).map_or_else(
                        || status::recovered_line(r),
                        |o| status::outlived_line(*bdf, o),
                    ),
                    _ => status::recovered_line(r),
                })
                .collect(),
            stuck_unbinds: stuck
                .into_iter()
                .map(|s| pb::StuckUnbind {
                    bdf: s.bdf.to_string(),
                    driver: s.driver,
                    seconds: s.since.elapsed().as_secs(),
                })
                .collect(),
            served: served
                .into_iter()
                .map(|(bdf, g)| status::served_gpu(bdf, &g))
                .collect(),
        }))
    }

    async fn read_bar(
        &self,
        req: Request<pb::ReadBarRequest>,
    ) -> Result<Response<pb::ReadBarReply>, Status> {
        let r = req.get_ref().clone();
        let values = self
            .admin("ReadBar", &req, &r.bdf.clone(), move |rig| {
                let width = take::width(r.width_bits)?;
                rig.read_bar(&r.bdf, r.bar, r.offset, width, r.count.max(1))
            })
            .await?;
        Ok(Response::new(pb::ReadBarReply { values }))
    }

    async fn write_bar(
        &self,
        req: Request<pb::WriteBarRequest>,
    ) -> Result<Response<pb::WriteBarReply>, Status> {
        let r = req.get_ref().clone();
        self.admin("WriteBar", &req, &r.bdf.clone(), move |rig| {
            let width = take::width(r.width_bits)?;
            rig.write_bar(&r.bdf, r.bar, r.offset, width, r.value)
        })
        .await?;
        Ok(Response::new(pb::WriteBarReply {}))
    }

    async fn set_bus_master(
        &self,
        req: Request<pb::SetBusMasterRequest>,
    ) -> Result<Response<pb::SetBusMasterReply>, Status> {
        let r = req.get_ref().clone();
        let was_on = self
            .admin("SetBusMaster", &req, &r.bdf.clone(), move |rig| {
                rig.set_bus_master(&r.bdf, r.on)
            })
            .await?;
        Ok(Response::new(pb::SetBusMasterReply { was_on }))
    }

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
                let listing = rig.list(gpus_only).map_err(|e| status::from_error(&e))?;
                Ok(pb::ListDevicesReply {
                    devices: listing.devices.iter().map(convert::device).collect(),
                    problems: listing
                        .problems
                        .iter()
                        .map(|e| status::error_line(e))
                        .collect(),
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
                let dev = rig.device(&bdf).map_err(|e| status::from_error(&e))?;
                Ok(convert::device(&dev))
            })
            .await?;
        Ok(Response::new(reply))
    }
}
