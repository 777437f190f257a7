//! The gate every gRPC call passes before any handler: the role check (`policy`), the
//! audit line of a privileged call (`audit`), and the call's count and latency
//! (`metrics`). A tower layer on the whole server, so no RPC can forget it: a path the
//! policy's table does not list needs the admin role.
//!
//! A refused call never reaches its service: the gate answers PERMISSION_DENIED
//! itself (reason `NOT_ADMIN` or `NOT_CLIENT`, docs/errors.md) and writes the refusal's
//! audit line. An allowed privileged call carries an [`audit::Pending`] in its
//! extensions for the handler to finish with the device and the outcome.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use tonic::body::Body;

use super::{metrics, status};
use crate::{
    audit::{self, Actor},
    policy::{self, Role},
    rig::Rig,
};

/// The layer to put on the server.
#[derive(Debug, Clone)]
pub struct GateLayer {
    rig: Arc<Rig>,
}

impl GateLayer {
    pub fn new(rig: Arc<Rig>) -> Self {
        Self { rig }
    }
}

impl<S> tower::Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            rig: Arc::clone(&self.rig),
        }
    }
}

/// The gate around the server's routes.
#[derive(Debug, Clone)]
pub struct Gate<S> {
    inner: S,
    rig: Arc<Rig>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> tower::Service<http::Request<Body>> for Gate<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let start = Instant::now();
        let path = req.uri().path().to_owned();
        let method = policy::method_name(&path);
        let need = policy::rpc_need(&path);
        let peer = super::peer::Peer::of(req.extensions());
        let cred = peer.and_then(|p| p.cred);
        let groups = peer.and_then(|p| p.groups.clone());
        let Some(cred) = cred else {
            let s = super::no_peer_credentials();
            return refuse(&method, start, s);
        };
        let policy = self.rig.policy();
        match policy.require_with(need.gate(), cred, groups.as_deref(), &method) {
            Err(refusal) => {
                let s = status::refused(&refusal);
                let actor = Actor {
                    cred,
                    role: refusal.has.map(Role::as_str),
                };
                self.rig
                    .audit()
                    .denied(&method, actor, reason_of(refusal.role), s.message());
                refuse(&method, start, s)
            }
            Ok(role) => {
                if need.privileged() {
                    let actor = Actor {
                        cred,
                        role: Some(role.as_str()),
                    };
                    req.extensions_mut()
                        .insert(self.rig.audit().begin(&method, actor));
                }
                // The clone is the one poll_ready readied (tower's idiom: swap it in).
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                Box::pin(async move {
                    let res = inner.call(req).await?;
                    let code = res
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .unwrap_or(0);
                    metrics::global().rpc(&method, code_name(code), start.elapsed());
                    Ok(res)
                })
            }
        }
    }
}

fn reason_of(role: Role) -> &'static str {
    match role {
        Role::Admin => "NOT_ADMIN",
        Role::Client => "NOT_CLIENT",
    }
}

fn refuse<E: Send + 'static>(
    method: &str,
    start: Instant,
    s: tonic::Status,
) -> BoxFuture<http::Response<Body>, E> {
    metrics::global().rpc(method, code_name(s.code() as i32), start.elapsed());
    let res = s.into_http::<Body>();
    Box::pin(async move { Ok(res) })
}

/// The canonical name of a gRPC status code (grpc/doc/statuscodes.md).
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// The audit line the gate opened for a privileged call (none for others).
pub fn pending<T>(req: &tonic::Request<T>) -> Option<audit::Pending> {
    req.extensions().get::<audit::Pending>().cloned()
}

/// Names the device in the audit line of a privileged call (normalised when it is a
/// PCI address; as sent otherwise).
pub fn audit_device<T>(req: &tonic::Request<T>, device: &str) {
    if let Some(p) = req.extensions().get::<audit::Pending>() {
        match device.parse::<crate::pci::Bdf>() {
            Ok(b) => p.device(b),
            Err(_) => p.device(device),
        }
    }
}
